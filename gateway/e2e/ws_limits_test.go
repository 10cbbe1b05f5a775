package e2e_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// rawWS opens a connection and does the handshake by hand, returning the
// connection and its reader once the 101 is read: for tests that write
// frames no client library would.
func rawWS(t testing.TB, port int) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	br := bufio.NewReaderSize(c, 512)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		c.Close()
		t.Fatalf("handshake: %v %+v", err, resp)
	}
	_ = c.SetReadDeadline(time.Time{})
	return c, br
}

// readClose reads frames until a close frame and returns its code.
func readClose(t *testing.T, br *bufio.Reader) int {
	t.Helper()
	for {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			t.Fatalf("no close frame: %v", err)
		}
		n := int(h[1] & 0x7f)
		switch n {
		case 126:
			var e [2]byte
			_, _ = io.ReadFull(br, e[:])
			n = int(binary.BigEndian.Uint16(e[:]))
		case 127:
			var e [8]byte
			_, _ = io.ReadFull(br, e[:])
			n = int(binary.BigEndian.Uint64(e[:]))
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(br, p); err != nil {
			t.Fatalf("frame: %v", err)
		}
		if h[0]&0x0f == 0x8 {
			if len(p) < 2 {
				return 1005
			}
			return int(binary.BigEndian.Uint16(p))
		}
	}
}

// clientFrame is a masked frame with a zero mask (the payload as is).
func clientFrame(op byte, n uint64, payload []byte) []byte {
	b := []byte{0x80 | op}
	switch {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n < 1<<16:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, n)
	}
	return append(append(b, 0, 0, 0, 0), payload...)
}

// metricValue reads one series of GET /metrics (labels as written there, or
// "" for none).
func metricValue(t *testing.T, rg *gatewaytest.Instance, name, labels string) float64 {
	t.Helper()
	_, body := rg.Do("GET", "/metrics", nil)
	series := name
	if labels != "" {
		series += "{" + labels + "}"
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)`)
	m := re.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no %s{%s} in\n%s", name, labels, body)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// waitMetric waits until a metric has the value want.
func waitMetric(t *testing.T, rg *gatewaytest.Instance, name, labels string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := metricValue(t, rg, name, labels)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s{%s} is %v, want %v", name, labels, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Each limit closes with its own code, and counts in the metrics.
func TestWSLimits(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"ws","limits":{"maxMessageBytes":1024,"messagesPerSecond":50,"maxConnections":3},
		"stubs":[{"responses":[{"is":{"data":"ok"}}]}]}`)
	label := fmt.Sprintf(`imposter="[ws:%d] "`, port)

	t.Run("a message over maxMessageBytes is refused from its header: 1009", func(t *testing.T) {
		c, br := rawWS(t, port)
		defer c.Close()
		// A frame that claims a terabyte: nothing of it need follow.
		_, _ = c.Write(clientFrame(0x2, 1<<40, nil))
		if code := readClose(t, br); code != 1009 {
			t.Fatalf("close code %d", code)
		}
	})
	t.Run("fragments that add up past the limit: 1009", func(t *testing.T) {
		c, br := rawWS(t, port)
		defer c.Close()
		part := make([]byte, 600)
		first := clientFrame(0x1, 600, part)
		first[0] &^= 0x80 // not final
		_, _ = c.Write(append(first, clientFrame(0x0, 600, part)...))
		if code := readClose(t, br); code != 1009 {
			t.Fatalf("close code %d", code)
		}
	})
	t.Run("a flood over messagesPerSecond: 1008", func(t *testing.T) {
		c := wsDial(t, port, "/", nil)
		var err error
		for i := 0; i < 200 && err == nil; i++ {
			err = c.WriteMessage(websocket.TextMessage, []byte("x"))
		}
		var closeErr *websocket.CloseError
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			if _, _, err = c.ReadMessage(); err != nil {
				break
			}
		}
		if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != 1008 {
			t.Fatalf("flood closed with %v", err)
		} else {
			closeErr = ce
		}
		if !strings.Contains(closeErr.Text, "50 messages per second") {
			t.Fatalf("reason %q", closeErr.Text)
		}
	})
	t.Run("one connection over maxConnections: 1013", func(t *testing.T) {
		// The connections above are closed; the imposter counts them
		// closed once it has read their ends.
		waitMetric(t, rg, "riftgate_ws_connections", label, 0)
		var open []*websocket.Conn
		for range 3 {
			c := wsDial(t, port, "/", nil)
			if got := wsAsk(t, c, "x"); got != "ok" {
				t.Fatal(got)
			}
			open = append(open, c)
		}
		extra := wsDial(t, port, "/", nil)
		_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _, err := extra.ReadMessage()
		if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != 1013 {
			t.Fatalf("the fourth connection: %v", err)
		}
		open[0].Close()
		extra.Close()
		waitMetric(t, rg, "riftgate_ws_connections", label, 2)
		again := wsDial(t, port, "/", nil)
		if got := wsAsk(t, again, "x"); got != "ok" {
			t.Fatalf("after one closed, a new one is served: %q", got)
		}
	})
	for limit, want := range map[string]float64{"message_size": 2, "rate": 1, "connections": 1} {
		if got := metricValue(t, rg, "riftgate_ws_limit_closes_total", label+`,limit="`+limit+`"`); got != want {
			t.Errorf("limit %s closed %v connections, want %v", limit, got, want)
		}
	}
}

// A client that never reads cannot make the imposter buffer: a schedule
// pushing 64 KiB messages fills the socket, the write times out, and the
// connection is closed; the process's memory stays where it was.
func TestWSClientThatNeverReads(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"ws","limits":{"writeTimeoutMs":300},"stubs":[
		{"predicates":[{"equals":{"type":"open"}}],"responses":[{"is":{"data":"` + strings.Repeat("x", 64<<10) + `","every":1}}]}]}`)
	label := fmt.Sprintf(`imposter="[ws:%d] "`, port)
	before := metricValue(t, rg, "mb_process_resident_memory_bytes", "")
	var conns []net.Conn
	for range 20 {
		c, _ := rawWS(t, port) // and never read
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	waitMetric(t, rg, "riftgate_ws_limit_closes_total", label+`,limit="write_timeout"`, 20)
	waitMetric(t, rg, "riftgate_ws_connections", label, 0)
	sent := metricValue(t, rg, "riftgate_ws_messages_sent_total", label)
	after := metricValue(t, rg, "mb_process_resident_memory_bytes", "")
	t.Logf("20 clients that never read: %v messages of 64 KiB sent before their sockets filled; RSS %.1f MiB -> %.1f MiB",
		sent, before/(1<<20), after/(1<<20))
	if after-before > 32<<20 {
		t.Fatalf("resident memory grew by %.0f MiB", (after-before)/(1<<20))
	}
}

// Many idle connections: each costs a goroutine and its buffers, and the
// imposter goes on answering. 10,000 as the issue asks, in a test of its
// own (-short runs 1,000).
func TestWSManyIdleConnections(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 1000
	}
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(fmt.Sprintf(`{"protocol":"ws","limits":{"maxConnections":%d},
		"stubs":[{"responses":[{"is":{"data":"still here"}}]}]}`, n+10))
	label := fmt.Sprintf(`imposter="[ws:%d] "`, port)
	before := metricValue(t, rg, "mb_process_resident_memory_bytes", "")
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	for range n {
		c, _ := rawWS(t, port)
		conns = append(conns, c)
	}
	opened := time.Since(start)
	c := wsDial(t, port, "/", nil)
	askStart := time.Now()
	if got := wsAsk(t, c, "anyone?"); got != "still here" {
		t.Fatal(got)
	}
	ask := time.Since(askStart)
	waitMetric(t, rg, "riftgate_ws_connections", label, float64(n+1))
	after := metricValue(t, rg, "mb_process_resident_memory_bytes", "")
	t.Logf("%d idle connections opened in %v; a message then answered in %v; RSS %.1f MiB -> %.1f MiB (%.1f KiB a connection)",
		n, opened.Round(time.Millisecond), ask.Round(time.Microsecond), before/(1<<20), after/(1<<20), (after-before)/float64(n)/1024)
	if ask > time.Second {
		t.Fatalf("a message took %v with %d idle connections", ask, n)
	}
}

// Frames no client library writes on purpose, sent by hand: a ping in the
// middle of a fragmented message is answered at once, and the message's
// fragments (text, then binary, whose data is base64) are joined into one
// request; a message that starts inside another is a protocol error
// (1002).
func TestWSControlFrameBetweenFragments(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"ws","stubs":[{"responses":[{"is":{"data":"${t}:${d}"},"behaviors":[
		{"copy":{"from":"data","into":"${d}","using":{"method":"regex","selector":".*"}}},
		{"copy":{"from":"type","into":"${t}","using":{"method":"regex","selector":".*"}}}]}]}]}`)
	frag := func(fin bool, op byte, payload string) []byte {
		f := clientFrame(op, uint64(len(payload)), []byte(payload))
		if !fin {
			f[0] &^= 0x80
		}
		return f
	}
	// readFrame reads one server frame: its opcode and payload.
	readFrame := func(br *bufio.Reader) (byte, string) {
		t.Helper()
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			t.Fatalf("read: %v", err)
		}
		p := make([]byte, h[1]&0x7f)
		if _, err := io.ReadFull(br, p); err != nil {
			t.Fatalf("read: %v", err)
		}
		return h[0] & 0x0f, string(p)
	}
	c, br := rawWS(t, port)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var out []byte
	out = append(out, frag(false, 0x1, "one ")...)
	out = append(out, frag(true, 0x9, "are you there")...)
	out = append(out, frag(false, 0x0, "message ")...)
	out = append(out, frag(true, 0x0, "in three")...)
	out = append(out, frag(false, 0x2, "\x00\x01")...)
	out = append(out, frag(true, 0xA, "unasked pong")...)
	out = append(out, frag(true, 0x0, "\xff")...)
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		op   byte
		data string
	}{{0xA, "are you there"}, {0x1, "text:one message in three"}, {0x1, "binary:AAH/"}} {
		if op, got := readFrame(br); op != want.op || got != want.data {
			t.Fatalf("frame %x %q, want %x %q", op, got, want.op, want.data)
		}
	}
	// A new data message inside a fragmented one.
	if _, err := c.Write(append(frag(false, 0x1, "a"), frag(true, 0x1, "b")...)); err != nil {
		t.Fatal(err)
	}
	if code := readClose(t, br); code != 1002 {
		t.Fatalf("a message inside a message closed with %d, want 1002", code)
	}
}
