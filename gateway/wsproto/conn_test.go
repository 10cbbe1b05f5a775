package wsproto

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer serves wsproto's server side on a listener: each message is
// sent back; it returns the URL and a stop function.
func echoServer(t *testing.T, maxMessage int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open[nc] = true
			mu.Unlock()
			wg.Go(func() {
				defer nc.Close()
				br := bufio.NewReader(nc)
				req, err := ReadRequest(br)
				if err != nil {
					return
				}
				key, err := CheckUpgrade(req.Method, req.Get, req.Values)
				if err != nil {
					_, _ = nc.Write(AppendRefusal(nil, err.(*HandshakeError).Status, nil, []byte(err.Error())))
					return
				}
				sub := ""
				if ps := req.Values("Sec-WebSocket-Protocol"); len(ps) > 0 {
					sub = ps[0]
				}
				if _, err := nc.Write(AppendAccept(nil, key, sub, []Header{{"X-Echo", "yes"}})); err != nil {
					return
				}
				c := NewConn(nc, br, true, maxMessage)
				for {
					op, p, err := c.ReadMessage()
					if err != nil {
						var pe *ProtocolError
						if errors.As(err, &pe) {
							_ = c.WriteClose(pe.Code, pe.Reason)
						}
						return
					}
					if err := c.WriteMessage(op, p); err != nil {
						return
					}
				}
			})
		}
	})
	return "ws://" + ln.Addr().String() + "/echo"
}

// A Go client library (gorilla) against wsproto's server: text, binary,
// a subprotocol, pings, the close handshake and an oversized message.
func TestGorillaClientAgainstServer(t *testing.T) {
	url := echoServer(t, 1024)
	d := websocket.Dialer{Subprotocols: []string{"chat"}}
	c, resp, err := d.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Subprotocol() != "chat" || resp.Header.Get("X-Echo") != "yes" {
		t.Fatalf("subprotocol %q, headers %v", c.Subprotocol(), resp.Header)
	}
	for _, m := range []struct {
		typ  int
		data string
	}{{websocket.TextMessage, "héllo"}, {websocket.BinaryMessage, "\x00\xff"}, {websocket.TextMessage, strings.Repeat("a", 1000)}} {
		if err := c.WriteMessage(m.typ, []byte(m.data)); err != nil {
			t.Fatal(err)
		}
		typ, p, err := c.ReadMessage()
		if err != nil || typ != m.typ || string(p) != m.data {
			t.Fatalf("echo %d %q %v", typ, truncate(string(p)), err)
		}
	}
	pong := make(chan string, 1)
	c.SetPongHandler(func(s string) error { pong <- s; return nil })
	if err := c.WriteControl(websocket.PingMessage, []byte("are you there"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	// A fragmented message, written through gorilla's NextWriter in pieces.
	w, _ := c.NextWriter(websocket.TextMessage)
	for _, part := range []string{"frag", "men", "ted"} {
		_, _ = w.Write([]byte(part))
	}
	w.Close()
	if _, p, err := c.ReadMessage(); err != nil || string(p) != "fragmented" {
		t.Fatalf("fragmented: %q %v", p, err)
	}
	select {
	case s := <-pong:
		if s != "are you there" {
			t.Fatalf("pong %q", s)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no pong")
	}
	if err := c.WriteMessage(websocket.BinaryMessage, make([]byte, 2000)); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.ReadMessage()
	if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
		t.Fatalf("oversized message: %v, want close 1009", err)
	}
}

// wsproto's client (the proxy's) against a gorilla server.
func TestDialAgainstGorillaServer(t *testing.T) {
	up := websocket.Upgrader{Subprotocols: []string{"v1"}}
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("refuse") != "" {
			http.Error(w, "nope", http.StatusForbidden)
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		wg.Add(1)
		defer wg.Done()
		defer c.Close()
		for {
			typ, p, err := c.ReadMessage()
			if err != nil {
				return
			}
			_ = c.WriteMessage(typ, append([]byte("echo:"), p...))
		}
	}))
	defer func() { srv.Close(); wg.Wait() }()
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	_, resp, err := Dial(ctx, url+"/?refuse=1", DialOptions{})
	if !errors.Is(err, ErrRefused) || resp == nil || resp.Status != 403 || !strings.Contains(string(resp.Body), "nope") {
		t.Fatalf("refusal: %v %+v", err, resp)
	}
	c, resp, err := Dial(ctx, url+"/x", DialOptions{Header: []Header{{"Sec-WebSocket-Protocol", "v1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Get("Sec-WebSocket-Protocol") != "v1" {
		t.Fatalf("subprotocol: %v", resp.Headers)
	}
	for _, m := range []struct {
		op   byte
		data string
	}{{OpText, "hi"}, {OpBinary, strings.Repeat("\x01", 70000)}} {
		if err := c.WriteMessage(m.op, []byte(m.data)); err != nil {
			t.Fatal(err)
		}
		op, p, err := c.ReadMessage()
		if err != nil || op != m.op || string(p) != "echo:"+m.data {
			t.Fatalf("%#x %q %v", op, truncate(string(p)), err)
		}
	}
	if err := c.CloseHandshake(CloseNormal, "done", 2*time.Second); err != nil {
		t.Fatal(err)
	}
}

// A peer that never reads: the write deadline ends the write instead of
// blocking it, however much is written.
func TestWriteTimeoutOnAPeerThatNeverReads(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	c := NewConn(a, nil, true, 0)
	defer c.Close()
	c.WriteTimeout = 50 * time.Millisecond
	start := time.Now()
	err := c.WriteMessage(OpBinary, make([]byte, 1<<20))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("write to a peer that never reads: %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("the write deadline did not end the write")
	}
}
