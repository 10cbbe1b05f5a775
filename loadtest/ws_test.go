package loadtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// serveEcho starts the raw WebSocket echo server for the test.
func serveEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeWSEcho(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return "ws://" + ln.Addr().String()
}

// A bounded WebSocket load on the raw echo server, closed and open loop:
// every round trip answered, a wrong expectation counted as errors, the
// handshake made once per virtual user.
func TestWSExchangeAgainstEchoServer(t *testing.T) {
	target := serveEcho(t)
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		x      WSExchange
		rate   float64
		errors bool
	}{
		{"text", WSExchange{Path: "/e", Send: []byte("hello"), Expect: []byte("hello")}, 0, false},
		{"binary, 70 KB", WSExchange{Send: bytes.Repeat([]byte{0, 1, 2}, 70000/3), Binary: true}, 0, false},
		{"open loop", WSExchange{Send: []byte("tick"), Expect: []byte("tick")}, 2000, false},
		{"wrong answer", WSExchange{Send: []byte("hello"), Expect: []byte("other")}, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := Options{Targets: []string{target}, Connections: 4, Scenario: get("/"), WS: &c.x, Rate: c.rate}
			if c.rate > 0 {
				o.Duration = time.Second
			} else {
				o.Requests = 300
			}
			res, err := Run(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Errors > 0; got != c.errors || res.Requests == 0 {
				t.Fatalf("%d requests, %d errors (%v)", res.Requests, res.Errors, res.ErrorKinds)
			}
		})
	}
	if err := probeWS(target, &WSExchange{Send: []byte("x"), Expect: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := probeWS(target, &WSExchange{Send: []byte("x"), Expect: []byte("y")}); err == nil {
		t.Fatal("a wrong answer passed the probe")
	}
}

// riftload against a riftgate ws imposter, as a user runs it: a server
// that closes the connection counts as errors of kind closed, and pings
// from the server are answered, not taken for answers.
func TestWSLoadAgainstRiftgate(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"ws","stubs":[
		{"predicates":[{"equals":{"data":"ping"}}],"responses":[{"is":{"data":"pong"}}]},
		{"predicates":[{"equals":{"data":"bye"}}],"responses":[{"is":{"close":{"code":4000}}}]}]}`)
	target := fmt.Sprintf("ws://127.0.0.1:%d", port)
	res, err := Run(context.Background(), Options{Targets: []string{target}, Connections: 8, Requests: 2000, Scenario: get("/"),
		WS: &WSExchange{Path: "/feed", Send: []byte("ping"), Expect: []byte("pong")}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Requests != 2000 {
		t.Fatalf("%d requests, %d errors", res.Requests, res.Errors)
	}
	res, err = Run(context.Background(), Options{Targets: []string{target}, Connections: 2, Requests: 20, Scenario: get("/"),
		WS: &WSExchange{Send: []byte("bye")}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors == 0 || res.ErrorKinds["closed"] != res.Errors {
		t.Fatalf("closes: %d errors %v", res.Errors, res.ErrorKinds)
	}
}

// The command line: a ws:// URL selects WebSocket round trips.
func TestWSCommandLine(t *testing.T) {
	target := serveEcho(t)
	var out, errOut strings.Builder
	err := mainRun(context.Background(), []string{"-c", "2", "-n", "100", "-body", "hi", "-ws-expect", "hi", "-progress", "never",
		target + "/path"}, &out, &errOut)
	if err != nil || !strings.Contains(out.String(), "errors: 0") {
		t.Fatalf("%v\n%s\n%s", err, out.String(), errOut.String())
	}
	if err := mainRun(context.Background(), []string{"-n", "1", "-scenario", "x.json", target}, &out, &errOut); err == nil {
		t.Fatal("-scenario with a ws:// target was taken")
	}
}

// frameServer answers a WebSocket handshake, then every read with the
// frame "ok": an in-process server that allocates nothing per message, so
// that the client's allocations can be counted.
func frameServer(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			go func() {
				buf := make([]byte, 4096)
				n, _ := c.Read(buf) // the handshake (small: one read)
				if n == 0 {
					return
				}
				fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", wsAccept)
				ok := []byte{0x81, 2, 'o', 'k'}
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					if _, err := c.Write(ok); err != nil {
						return
					}
				}
			}()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return "ws://" + ln.Addr().String()
}

// The WebSocket loop (send the frame, read the answer, record) allocates
// nothing per message.
func TestWSLoopDoesNotAllocate(t *testing.T) {
	url := frameServer(t)
	w := loopWorkerOn(t, `{"steps":[{"path":"/"}]}`, Options{Targets: []string{url},
		WS: &WSExchange{Send: []byte("hello"), Expect: []byte("ok")}})
	testWorkerAllocs(t, w, 0)
}

// riftload over wss against a riftgate wss imposter (its built-in
// self-signed certificate): with -insecure every round trip is answered
// over TLS, one handshake per connection; without it the certificate is
// refused and every request fails as a tls error.
func TestWSSLoadAgainstRiftgate(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"wss","stubs":[{"predicates":[{"equals":{"data":"ping"}}],"responses":[{"is":{"data":"pong"}}]}]}`)
	target := fmt.Sprintf("wss://127.0.0.1:%d/feed", port)
	var out, errOut strings.Builder
	err := mainRun(context.Background(), []string{"-c", "4", "-n", "1000", "-body", "ping", "-ws-expect", "pong", "-insecure",
		"-progress", "never", target}, &out, &errOut)
	if err != nil || !strings.Contains(out.String(), "requests: 1000") || !strings.Contains(out.String(), "errors: 0") {
		t.Fatalf("-insecure: %v\n%s\n%s", err, out.String(), errOut.String())
	}

	res, err := Run(context.Background(), Options{Targets: []string{target}, Connections: 4, Requests: 400, Scenario: get("/"),
		TLS: &tls.Config{InsecureSkipVerify: true}, WS: &WSExchange{Path: "/feed", Send: []byte("ping"), Expect: []byte("pong")}}) //nolint:gosec // the imposter's self-signed pair
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Requests != 400 || res.TLS == nil || res.TLS.Handshakes != 4 {
		t.Fatalf("%d requests, %d errors %v, TLS %+v (want 4 handshakes: one per connection)", res.Requests, res.Errors, res.ErrorKinds, res.TLS)
	}

	res, err = Run(context.Background(), Options{Targets: []string{target}, Connections: 2, Requests: 10, Scenario: get("/"),
		WS: &WSExchange{Send: []byte("ping")}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != res.Requests || res.ErrorKinds["tls"] != res.Errors {
		t.Fatalf("a certificate riftload cannot verify: %d requests, %d errors %v", res.Requests, res.Errors, res.ErrorKinds)
	}
}
