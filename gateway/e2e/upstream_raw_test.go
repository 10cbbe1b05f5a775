package e2e_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawUpstream is an HTTP server that sees requests byte for byte: what a
// proxy sends (header order, spelling, framing) is what /echo answers with.
// Its other paths answer the shapes a proxy must pass on unchanged.
type rawUpstream struct {
	ln    net.Listener
	URL   string
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]bool
}

func newRawUpstream(t *testing.T) *rawUpstream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln, URL: "http://" + ln.Addr().String(), conns: map[net.Conn]bool{}}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.conns[c] = true
			u.mu.Unlock()
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				u.serve(c)
				u.mu.Lock()
				delete(u.conns, c)
				u.mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		u.mu.Lock()
		for c := range u.conns {
			c.Close()
		}
		u.mu.Unlock()
		u.wg.Wait()
	})
	return u
}

func (u *rawUpstream) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 64<<10)
	for {
		head, err := peekHead(br)
		if err != nil {
			return
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, _ := io.ReadAll(req.Body)
		if _, err := c.Write(upstreamAnswer(req, head, body)); err != nil || req.Close {
			return
		}
	}
}

func peekHead(br *bufio.Reader) (string, error) {
	for {
		buf, _ := br.Peek(br.Buffered())
		if i := bytes.Index(buf, []byte("\r\n\r\n")); i >= 0 {
			return string(buf[:i]), nil
		}
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			return "", err
		}
	}
}

// upstreamAnswer is the raw answer for a path.
func upstreamAnswer(req *http.Request, head string, body []byte) []byte {
	resp := func(status string, headers []string, body []byte) []byte {
		var b bytes.Buffer
		b.WriteString("HTTP/1.1 " + status + "\r\n")
		for _, h := range headers {
			b.WriteString(h + "\r\n")
		}
		b.WriteString("\r\n")
		b.Write(body)
		return b.Bytes()
	}
	length := func(b []byte) string { return "Content-Length: " + strconv.Itoa(len(b)) }
	switch p := req.URL.Path; {
	case p == "/echo" || strings.HasPrefix(p, "/echo/"):
		lines := strings.Split(head, "\r\n")
		var headers [][2]string
		for _, l := range lines[1:] {
			k, v, _ := strings.Cut(l, ":")
			headers = append(headers, [2]string{k, strings.TrimSpace(v)})
		}
		out, _ := json.Marshal(map[string]any{"requestLine": lines[0], "headers": headers, "body": string(body)})
		return resp("200 OK", []string{"Content-Type: application/json", length(out)}, out)
	case p == "/slow":
		time.Sleep(20 * time.Millisecond) // so that a proxy's response time is never 0 ms
		b := []byte("slow text")
		return resp("200 OK", []string{"Content-Type: text/plain", length(b)}, b)
	case p == "/text":
		b := []byte("plain text")
		return resp("200 OK", []string{"Content-Type: text/plain", length(b)}, b)
	case p == "/no-content-type":
		b := []byte("hello")
		return resp("200 OK", []string{length(b)}, b)
	case p == "/json":
		b := []byte(`{"b": 1.50, "a": [true, null, "x<y&z"], "u": "\u00e9"}`)
		return resp("200 OK", []string{"Content-Type: application/json; charset=utf-8", length(b)}, b)
	case p == "/json-number":
		b := []byte("42")
		return resp("200 OK", []string{"Content-Type: application/json", length(b)}, b)
	case strings.HasPrefix(p, "/json-falsy/"):
		// 0, false, null or "": JSON that mb records as that value.
		b := []byte(strings.TrimPrefix(p, "/json-falsy/"))
		if string(b) == "empty-string" {
			b = []byte(`""`)
		}
		return resp("200 OK", []string{"Content-Type: application/json", length(b)}, b)
	case p == "/json-string":
		b := []byte(`"quoted"`)
		return resp("200 OK", []string{"Content-Type: application/json", length(b)}, b)
	case p == "/binary":
		b := []byte{0x89, 'P', 'N', 'G', 0, 1, 2, 0xff, 0xfe}
		return resp("200 OK", []string{"Content-Type: image/png", length(b)}, b)
	case p == "/gzip":
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		_, _ = w.Write([]byte("zipped"))
		_ = w.Close()
		return resp("200 OK", []string{"Content-Type: text/plain", "Content-Encoding: gzip", length(z.Bytes())}, z.Bytes())
	case p == "/chunked":
		return resp("200 OK", []string{"Content-Type: text/plain", "Transfer-Encoding: chunked"}, []byte("3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"))
	case p == "/headers":
		b := []byte("headers")
		return resp("200 OK", []string{"x-lower: 1", "Set-Cookie: a=1", "X-Dup: one", "Set-Cookie: b=2", "X-Dup: two",
			"Content-Type: text/plain", length(b)}, b)
	case strings.HasPrefix(p, "/status/"):
		code := strings.TrimPrefix(p, "/status/")
		b := []byte("status " + code)
		return resp(code+" "+http.StatusText(atoi(code)), []string{"Content-Type: text/plain", length(b)}, b)
	case strings.HasPrefix(p, "/path/"):
		b := []byte("answer for " + p)
		return resp("200 OK", []string{"Content-Type: text/plain", length(b)}, b)
	}
	b := []byte(fmt.Sprintf("no route %s", req.URL.Path))
	return resp("404 Not Found", []string{"Content-Type: text/plain", length(b)}, b)
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
