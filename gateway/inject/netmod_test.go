package inject

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// echoUpper is a loopback server answering each line upper-cased.
func echoUpper(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = c.Write([]byte(strings.ToUpper(line)))
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().(*net.TCPAddr).Port
}

// mb's asynchronous tcp injection: net.connect, write, and the callback
// called from a data event, in the old and the new interface; the Buffer
// the socket gives reaches the response as JSON.stringify shows a Buffer.
func TestNetModuleAnswersFromASocket(t *testing.T) {
	e := newEngine(t, Options{})
	port := strconv.Itoa(echoUpper(t))
	for _, src := range []string{
		`(request, state, logger, callback) => { const net = require('net'), socket = net.connect({ host: '127.0.0.1', port: ` + port + ` }, () => { socket.write('hi\n'); }); socket.once('data', data => { callback({ data: data }); }); }`,
		`config => { const socket = require('net').createConnection(` + port + `, '127.0.0.1'); socket.on('connect', () => socket.end('hi\n')); socket.setEncoding('utf8'); socket.on('data', d => config.callback({ data: d })); }`,
	} {
		p, err := e.Response(src)
		if err != nil {
			t.Fatal(err)
		}
		out, err := p.RespondJSON(context.Background(), Env{Request: testRequest()})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := string(out); got != `{"data":{"type":"Buffer","data":[72,73,10]}}` && got != `{"data":"HI\n"}` {
			t.Errorf("%s answered %s", src, got)
		}
	}
}

// A refused connection is an error event with Node's code; a socket the
// script forgets is closed with its run.
func TestNetModuleErrorsAndCleanup(t *testing.T) {
	e := newEngine(t, Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // nothing listens there now
	p, err := e.Response(`config => { const s = require('net').connect(` + port + `, '127.0.0.1'); s.on('error', e => config.callback({ data: e.code })); }`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.RespondJSON(context.Background(), Env{Request: testRequest()})
	if err != nil || string(out) != `{"data":"ECONNREFUSED"}` {
		t.Fatalf("refused: %s %v", out, err)
	}

	// The server sees its connection closed once the run is over.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	closed := make(chan bool, 1)
	go func() {
		c, err := ln2.Accept()
		if err != nil {
			closed <- false
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = c.Read(make([]byte, 1))
		closed <- err != nil && !isTimeout(err)
	}()
	port2 := strconv.Itoa(ln2.Addr().(*net.TCPAddr).Port)
	p, err = e.Response(`config => { const s = require('net').connect(` + port2 + `, '127.0.0.1', () => config.callback({ data: 'left open' })); }`)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := p.RespondJSON(context.Background(), Env{Request: testRequest()}); err != nil || string(out) != `{"data":"left open"}` {
		t.Fatalf("%s %v", out, err)
	}
	if !<-closed {
		t.Fatal("the socket the script left open was not closed with its run")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
