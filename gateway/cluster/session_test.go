package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/raftnode"
	"pgregory.net/rapid"
)

// The frame tag is HMAC-SHA256, written out to allocate nothing: it must be
// the real thing.
func TestFrameMACIsHMAC(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.SliceOfN(rapid.Byte(), 1, 100).Draw(t, "key")
		parts := rapid.SliceOf(rapid.SliceOf(rapid.Byte())).Draw(t, "parts")
		m := hmac.New(sha256.New, key)
		for _, p := range parts {
			m.Write(p)
		}
		if got, want := newFrameMAC(key, dirCall).tag(parts...), m.Sum(nil); !hmac.Equal(got, want) {
			t.Fatalf("tag %x, HMAC %x", got, want)
		}
	})
}

// A frame's tag is pinned: computed apart from this code, with Python's
// hmac, over direction 1, position 1, version 1, id 7 and "body".
func TestFrameTagGolden(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	var out [tagBytes]byte
	newFrameMAC(key, dirCall).next([]byte{wireVersion, 0, 0, 0, 7}, []byte("body"), out[:])
	if got := hex.EncodeToString(out[:]); got != "23fbdca68ff53507960a161894982628" {
		t.Fatalf("tag %s", got)
	}
}

func TestFrameMACAllocatesNothing(t *testing.T) {
	m := newFrameMAC(make([]byte, 32), dirCall)
	var out [tagBytes]byte
	header, body := []byte{1, 0, 0, 0, 1}, make([]byte, 100)
	if n := testing.AllocsPerRun(100, func() { m.next(header, body, out[:]) }); n != 0 {
		t.Fatalf("%.0f allocations a tag", n)
	}
}

// sessionPair opens a session from a client with clientSecret to a server
// with serverSecret, through a real listener.
func sessionPair(t *testing.T, clientSecret, serverSecret []byte) (*session, *session, error) {
	t.Helper()
	accepted := make(chan *session, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, _, err := acceptSession(w, r, raftnode.NewPeerAuth(authGroup, serverSecret), 2)
		if err == nil {
			accepted <- s
		}
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	d := &net.Dialer{}
	c, err := dialSession(ctx, d.DialContext, raftnode.NewPeerAuth(authGroup, clientSecret), 1, "http://client", 2, srv.URL+sessionPath)
	if err != nil {
		return nil, nil, err
	}
	s := <-accepted
	t.Cleanup(func() { c.kill(errSessionClosed); s.kill(errSessionClosed) })
	return c, s, nil
}

func TestSession(t *testing.T) {
	c, s, err := sessionPair(t, flowsSecret, flowsSecret)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		body := strings.Repeat("x", i*1000)
		if err := c.send(uint32(i), []byte(body)); err != nil {
			t.Fatal(err)
		}
		id, got, err := s.read()
		if err != nil || id != uint32(i) || string(got) != body {
			t.Fatalf("frame %d: id %d, %d bytes, %v", i, id, len(got), err)
		}
	}
	// An answer frame replayed as a request, or a frame altered on the
	// way, fails its tag: the stream is only ever read in order.
	if err := s.send(9, []byte("answer")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.read(); err != nil {
		t.Fatal(err)
	}
	raw := []byte{0, 0, 0, 1 + 4 + 2 + tagBytes, wireVersion, 0, 0, 0, 9, 'h', 'i'}
	raw = append(raw, make([]byte, tagBytes)...)
	if _, err := c.nc.Write(raw); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.read(); err == nil || !strings.Contains(err.Error(), "not authenticated") {
		t.Fatalf("a forged frame was read: %v", err)
	}
}

func TestSessionNeedsTheSecret(t *testing.T) {
	if _, _, err := sessionPair(t, []byte("another-secret-of-16+"), flowsSecret); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a session with the wrong secret: %v", err)
	}
	// A server with the wrong secret cannot sign the 101: the client
	// refuses the session.
	if _, _, err := sessionPair(t, flowsSecret, []byte("another-secret-of-16+")); err == nil {
		t.Fatal("a session opened with an impostor")
	}
}

// BenchmarkFrameMAC tags a frame the size of a remote lookup's.
func BenchmarkFrameMAC(b *testing.B) {
	m := newFrameMAC(make([]byte, 32), dirCall)
	var out [tagBytes]byte
	header, body := []byte{1, 0, 0, 0, 1}, make([]byte, 60)
	for b.Loop() {
		m.next(header, body, out[:])
	}
}
