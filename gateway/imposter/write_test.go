package imposter

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestStaticHeaderWritesWhatWriteResponseWrites holds the pre-rendered
// header to the bytes the per-request path writes, on a response that
// carried another answer before (a reused RequestCtx, as on keep-alive).
func TestStaticHeaderWritesWhatWriteResponseWrites(t *testing.T) {
	for _, is := range []string{
		`{}`,
		`{"statusCode":201,"headers":{"Connection":"keep-alive","Content-Type":"text/plain"},"body":"hello"}`,
		`{"headers":{"connection":"Close","x-lower":"kept as given","X-Multi":["a","b"]},"body":{"a":1}}`,
		`{"statusCode":302,"headers":{"Location":"/x","Set-Cookie":["a=1","b=2"],"Content-Length":"99","Transfer-Encoding":"chunked"}}`,
		`{"statusCode":404,"headers":{"Server":"mine","Date":"yesterday","Content-Encoding":"gzip"},"body":"x"}`,
	} {
		r, _, err := buildIs(json.RawMessage(is), nil)
		if err != nil {
			t.Fatal(err)
		}
		dynamic := written(t, func(ctx *fasthttp.RequestCtx) { writeResponse(ctx, r) })
		static := written(t, func(ctx *fasthttp.RequestCtx) { writeStatic(ctx, r, RenderHeader(r)) })
		if !bytes.Equal(dynamic, static) {
			t.Errorf("%s:\nper request:\n%s\npre-rendered:\n%s", is, dynamic, static)
		}
	}
}

// written is the response write leaves on a RequestCtx set up as the
// imposter's server sets one up, after an earlier, different answer.
func written(t *testing.T, write func(*fasthttp.RequestCtx)) []byte {
	t.Helper()
	var ctx fasthttp.RequestCtx
	for _, answer := range []func(*fasthttp.RequestCtx){
		func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.Set("X-Earlier", "gone")
			ctx.SetContentType("application/earlier")
			ctx.SetBodyString("earlier")
		},
		write,
	} {
		ctx.Response.Reset()
		ctx.Response.Header.SetNoDefaultContentType(true)
		ctx.Response.Header.DisableNormalizing()
		answer(&ctx)
	}
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	if err := ctx.Response.Write(w); err != nil {
		t.Fatal(err)
	}
	_ = w.Flush()
	// Date is the clock's, not the response's: two writes may straddle a second.
	var kept [][]byte
	for _, line := range bytes.Split(out.Bytes(), []byte("\r\n")) {
		if !bytes.HasPrefix(line, []byte("Date: ")) {
			kept = append(kept, line)
		}
	}
	return bytes.Join(kept, []byte("\r\n"))
}

// writeCounter counts a connection's writes.
type writeCounter struct {
	net.Conn
	writes *atomic.Int32
}

func (c writeCounter) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

type countingListener struct {
	net.Listener
	writes *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	return writeCounter{c, l.writes}, err
}

// A body whose length the stub does not name goes in chunks, as mb's
// (Node's) server sends it, and the connection sends each answer, header,
// chunk and last chunk, in one write; an empty body too, on a connection
// kept alive. A HEAD answer names no length, as Node's.
func TestChunkedAnswersAreOneWrite(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int32
	s := fasthttp.Server{NoDefaultServerHeader: true, NoDefaultContentType: true, MaxIdleWorkerDuration: time.Millisecond,
		Handler: func(ctx *fasthttp.RequestCtx) {
			body := string(ctx.Path()[1:])
			r, _, err := buildIs(json.RawMessage(`{"headers":{"Connection":"keep-alive"},"body":"`+body+`"}`), nil)
			if err != nil {
				t.Error(err)
				return
			}
			writeStatic(ctx, r, RenderHeader(r))
		}}
	go func() { _ = s.Serve(holdListener{countingListener{ln, &writes}}) }()
	defer func() { _ = s.Shutdown() }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for _, tt := range []struct{ method, path, want string }{
		{"GET", "/hello", "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
		{"GET", "/", "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"HEAD", "/hello", "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n\r\n"},
		{"GET", "/again", "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nagain\r\n0\r\n\r\n"},
	} {
		before := writes.Load()
		if _, err := fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\n\r\n", tt.method, tt.path); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var got []byte
		for { // the header, but its Date
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%s %s: %v after %q", tt.method, tt.path, err, got)
			}
			if !strings.HasPrefix(line, "Date: ") {
				got = append(got, line...)
			}
			if line == "\r\n" {
				break
			}
		}
		body := make([]byte, len(tt.want)-min(len(got), len(tt.want)))
		if _, err := io.ReadFull(br, body); err != nil {
			t.Fatalf("%s %s: %v after %q", tt.method, tt.path, err, got)
		}
		if got = append(got, body...); string(got) != tt.want {
			t.Fatalf("%s %s:\n got %q\nwant %q", tt.method, tt.path, got, tt.want)
		}
		if n := writes.Load() - before; n != 1 {
			t.Errorf("%s %s: %d writes, want 1", tt.method, tt.path, n)
		}
	}
}
