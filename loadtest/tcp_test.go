package loadtest

import (
	"context"
	"net"
	"testing"
)

// TestTCPExchangeAgainstRawServer runs a bounded tcp load on the raw tcp
// server and checks every exchange was answered as expected, and that a
// wrong expectation counts as errors.
func TestTCPExchangeAgainstRawServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeTCPHello(ctx, ln) }()
	defer func() { cancel(); <-done }()
	target := "tcp://" + ln.Addr().String()
	for _, c := range []struct {
		expect string
		errors bool
	}{{"PONG", false}, {"NOPE", true}} {
		res, err := Run(ctx, Options{Targets: []string{target}, Connections: 4, Requests: 200,
			Scenario: get("/"), TCP: &TCPExchange{Send: []byte("PING"), Expect: []byte(c.expect)}})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Errors > 0; got != c.errors || res.Requests == 0 {
			t.Fatalf("expect %q: %d requests, %d errors", c.expect, res.Requests, res.Errors)
		}
	}
	if err := probeTCP(target, &TCPExchange{Send: []byte("PING"), Expect: tcpHelloAnswer}); err != nil {
		t.Fatal(err)
	}
}
