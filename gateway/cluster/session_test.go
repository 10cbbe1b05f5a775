package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
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

// A frame's tag is pinned for both protocols: computed apart from this
// code, over direction 1, position 1, version 1, id 7 and "body", with
// Python's hmac (riftgate-flows/1) and Node's aes-256-gcm
// (riftgate-flows/2), the key the bytes 0 to 31.
func TestFrameTagGolden(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	for proto, want := range map[string]string{
		sessionProtocolV1: "23fbdca68ff53507960a161894982628",
		sessionProtocol:   "1954b555bca4ac00598d6d52910a29bc",
	} {
		var out [tagBytes]byte
		newFrameTag(proto, key, dirCall).next(append([]byte{wireVersion, 0, 0, 0, 7}, "body"...), out[:])
		if got := hex.EncodeToString(out[:]); got != want {
			t.Errorf("%s: tag %s, want %s", proto, got, want)
		}
	}
}

// A tag depends on the direction and the position: no frame's tag is
// another's, in either direction of a session.
func TestFrameTagsNeverRepeat(t *testing.T) {
	for _, proto := range []string{sessionProtocol, sessionProtocolV1} {
		key, frame := make([]byte, 32), []byte{wireVersion, 0, 0, 0, 1, 'x'}
		seen := map[[tagBytes]byte]bool{}
		for _, dir := range []byte{dirCall, dirAnswer} {
			m := newFrameTag(proto, key, dir)
			for range 100 {
				var out [tagBytes]byte
				m.next(frame, out[:])
				if seen[out] {
					t.Fatalf("%s: tag %x repeated", proto, out)
				}
				seen[out] = true
			}
		}
	}
}

func TestFrameTagAllocatesNothing(t *testing.T) {
	for _, proto := range []string{sessionProtocol, sessionProtocolV1} {
		m := newFrameTag(proto, make([]byte, 32), dirCall)
		var out [tagBytes]byte
		frame := make([]byte, 105)
		if n := testing.AllocsPerRun(100, func() { m.next(frame, out[:]) }); n != 0 {
			t.Fatalf("%s: %.0f allocations a tag", proto, n)
		}
	}
}

// sessionPair opens a session from a client with clientSecret to a server
// with serverSecret, through a real listener.
func sessionPair(t *testing.T, clientSecret, serverSecret []byte) (*session, *session, error) {
	return sessionPairOf(t, clientSecret, serverSecret, false, false)
}

// sessionPairOf is sessionPair with either end of a build before
// riftgate-flows/2: an old server refuses it as those builds do, and an old
// client asks for riftgate-flows/1 only.
func sessionPairOf(t *testing.T, clientSecret, serverSecret []byte, oldServer, oldClient bool) (*session, *session, error) {
	t.Helper()
	accepted := make(chan *session, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if oldServer && r.Header.Get("Upgrade") != sessionProtocolV1 {
			http.Error(w, "want POST with Upgrade: "+sessionProtocolV1, http.StatusBadRequest)
			return
		}
		s, _, err := acceptSession(w, r, raftnode.NewPeerAuth(authGroup, serverSecret), 2)
		if err == nil {
			accepted <- s
		}
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	d := &net.Dialer{}
	auth := raftnode.NewPeerAuth(authGroup, clientSecret)
	var c *session
	var err error
	if oldClient {
		c, err = dialSessionAs(ctx, d.DialContext, auth, sessionProtocolV1, 1, "http://client", 2, srv.URL+sessionPath)
	} else {
		c, err = dialSession(ctx, d.DialContext, auth, 1, "http://client", 2, srv.URL+sessionPath)
	}
	if err != nil {
		return nil, nil, err
	}
	s := <-accepted
	t.Cleanup(func() { c.kill(errSessionClosed); s.kill(errSessionClosed) })
	return c, s, nil
}

// A member of this build and one of a build before riftgate-flows/2 open
// sessions either way (on riftgate-flows/1, HMAC-tagged), so that a rolling
// upgrade keeps the members talking; two of this build use GMAC.
func TestSessionWithAnOlderBuild(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		oldServer, oldClient bool
		want                 string
	}{
		{"both new", false, false, sessionProtocol},
		{"old answerer", true, false, sessionProtocolV1},
		{"old caller", false, true, sessionProtocolV1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s, err := sessionPairOf(t, flowsSecret, flowsSecret, tc.oldServer, tc.oldClient)
			if err != nil {
				t.Fatal(err)
			}
			want := reflect.TypeOf(newFrameTag(tc.want, make([]byte, 32), dirCall))
			if got := reflect.TypeOf(c.out); got != want || reflect.TypeOf(s.in) != want {
				t.Fatalf("tagged with %v and %v, want %v", got, reflect.TypeOf(s.in), want)
			}
			for i := range 3 {
				if err := c.send(uint32(i+1), []byte("ping")); err != nil {
					t.Fatal(err)
				}
				if id, got, err := s.read(); err != nil || id != uint32(i+1) || string(got) != "ping" {
					t.Fatalf("frame %d: %d %q %v", i, id, got, err)
				}
				if err := s.send(uint32(i+1), []byte("pong")); err != nil {
					t.Fatal(err)
				}
				if _, got, err := c.read(); err != nil || string(got) != "pong" {
					t.Fatalf("answer %d: %q %v", i, got, err)
				}
			}
		})
	}
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

// BenchmarkFrameTag tags a frame the size of a remote lookup's.
func BenchmarkFrameTag(b *testing.B) {
	for _, proto := range []string{sessionProtocol, sessionProtocolV1} {
		b.Run(proto, func(b *testing.B) {
			m := newFrameTag(proto, make([]byte, 32), dirCall)
			var out [tagBytes]byte
			frame := make([]byte, 65)
			for b.Loop() {
				m.next(frame, out[:])
			}
		})
	}
}
