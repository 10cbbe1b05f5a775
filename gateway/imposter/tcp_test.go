package imposter

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/predicate"
)

// tcpImposter returns a started tcp imposter on a free loopback port.
func tcpImposter(tb testing.TB, def string) *Imposter {
	tb.Helper()
	spec, err := ParseSpec([]byte(def))
	if err != nil {
		tb.Fatal(err)
	}
	c := &Compiler{Predicates: func(raws []json.RawMessage, b Build) (Matcher, error) {
		return predicate.CompileAll(raws, predicate.Options{Protocol: "tcp", Binary: b.Imposter.Spec().Mode == "binary"})
	}}
	opts := Options{Compiler: c, DefaultHost: "127.0.0.1"}
	imp, err := New(spec, opts, nil)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := Listen(spec, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if err := imp.Serve(ln); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = imp.Stop(ctx)
	})
	return imp
}

// tcpClient returns a connection to imp.
func tcpClient(tb testing.TB, imp *Imposter) net.Conn {
	tb.Helper()
	c, err := net.Dial("tcp", imp.ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

const tcpStatic = `{"protocol":"tcp","stubs":[
	{"predicates":[{"equals":{"data":"other"}}],"responses":[{"is":{"data":"no"}}]},
	{"predicates":[{"startsWith":{"data":"PING"}}],"responses":[{"is":{"data":"PONG"}}]}]}`

// TestTCPStaticPathAllocatesNothing holds a static tcp stub's request path,
// from the bytes read to the answer written, to no allocation.
func TestTCPStaticPathAllocatesNothing(t *testing.T) {
	imp := tcpImposter(t, tcpStatic)
	// respond runs on a real loopback connection whose peer drains it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	go func() { _, _ = io.Copy(io.Discard, peer) }()
	s := imp.srv.(*tcpServer)
	text := make([]byte, 0, 64)
	var req = newTCPRequest()
	bctx := new(budget)
	payload := []byte("PING 1")
	allocs := testing.AllocsPerRun(1000, func() {
		text = s.dataText(text[:0], payload)
		fillTCP(req, text, out)
		if !s.respond(out, req, bctx) {
			t.Fatal("respond closed the connection")
		}
	})
	if allocs != 0 {
		t.Fatalf("static tcp path: %.1f allocations a request, want 0", allocs)
	}
}

func BenchmarkTCPStatic(b *testing.B) {
	imp := tcpImposter(b, tcpStatic)
	c := tcpClient(b, imp)
	buf := make([]byte, 16)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write([]byte("PING 1")); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf[:4]); err != nil {
			b.Fatal(err)
		}
	}
}
