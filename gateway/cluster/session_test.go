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
	"slices"
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

// A frame's tag is pinned for every protocol: computed apart from this
// code, over direction 1, position 1, version 1, id 7 and "body", with
// Python's hmac (riftgate-flows/1) and Node's aes-256-gcm
// (riftgate-flows/2 and /3, which tag alike), the key the bytes 0 to 31.
func TestFrameTagGolden(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	for proto, want := range map[string]string{
		sessionProtocolV1: "23fbdca68ff53507960a161894982628",
		sessionProtocolV2: "1954b555bca4ac00598d6d52910a29bc",
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
	return sessionPairOf(t, clientSecret, serverSecret, "", "")
}

// sessionPairOf is sessionPair with either end of an older build: a server
// speaking only up to oldServer refuses newer protocols as those builds
// do (naming the one it speaks), and a client of oldClient asks for it
// only. "" is this build.
func sessionPairOf(t *testing.T, clientSecret, serverSecret []byte, oldServer, oldClient string) (*session, *session, error) {
	t.Helper()
	accepted := make(chan *session, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if oldServer != "" && slices.Index(sessionProtocols, r.Header.Get("Upgrade")) < slices.Index(sessionProtocols, oldServer) {
			http.Error(w, "want POST with Upgrade: "+oldServer, http.StatusBadRequest)
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
	if oldClient != "" {
		c, err = dialSessionAs(ctx, d.DialContext, auth, oldClient, 1, "http://client", 2, srv.URL+sessionPath)
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

// A member of this build and one of an older build open sessions either
// way, on the older build's protocol, so that a rolling upgrade keeps the
// members talking; two of this build speak riftgate-flows/3, whose frames
// carry a clock.
func TestSessionWithAnOlderBuild(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		oldServer, oldClient string
		want                 string
	}{
		{"both new", "", "", sessionProtocol},
		{"answerer of /2", sessionProtocolV2, "", sessionProtocolV2},
		{"answerer of /1", sessionProtocolV1, "", sessionProtocolV1},
		{"caller of /2", "", sessionProtocolV2, sessionProtocolV2},
		{"caller of /1", "", sessionProtocolV1, sessionProtocolV1},
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
			if c.ver != frameVersion(tc.want) || s.ver != c.ver {
				t.Fatalf("frames of version %d and %d, want %d", c.ver, s.ver, frameVersion(tc.want))
			}
			// Frames of version 2 carry their clock; older ones carry none.
			wantClock := func(sent int64) int64 {
				if c.ver == frameClock {
					return sent
				}
				return 0
			}
			for i := range 3 {
				if err := c.send(uint32(i+1), 12345, []byte("ping")); err != nil {
					t.Fatal(err)
				}
				if fr, err := s.read(); err != nil || fr.id != uint32(i+1) || string(fr.body) != "ping" || fr.clock != wantClock(12345) {
					t.Fatalf("frame %d: %+v %v", i, fr, err)
				}
				if err := s.send(uint32(i+1), 777, []byte("pong")); err != nil {
					t.Fatal(err)
				}
				if fr, err := c.read(); err != nil || string(fr.body) != "pong" || fr.clock != wantClock(777) {
					t.Fatalf("answer %d: %+v %v", i, fr, err)
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
	// The 101 told the caller the answerer's clock: on one machine, an
	// offset within the handshake's round trip.
	if r := c.clock; r.at == 0 || r.err <= 0 || abs(r.off) > r.err+int64(time.Millisecond) {
		t.Fatalf("clock reading from the handshake: %+v", r)
	}
	for i := range 3 {
		body := strings.Repeat("x", i*1000)
		if err := c.send(uint32(i), int64(i), []byte(body)); err != nil {
			t.Fatal(err)
		}
		fr, err := s.read()
		if err != nil || fr.id != uint32(i) || string(fr.body) != body || fr.clock != int64(i) {
			t.Fatalf("frame %d: id %d, %d bytes, clock %d, %v", i, fr.id, len(fr.body), fr.clock, err)
		}
	}
	// An answer frame replayed as a request, or a frame altered on the
	// way, fails its tag: the stream is only ever read in order.
	if err := s.send(9, 0, []byte("answer")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.read(); err != nil {
		t.Fatal(err)
	}
	raw := []byte{0, 0, 0, 1 + 4 + 8 + 2 + tagBytes, frameClock, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 'h', 'i'}
	raw = append(raw, make([]byte, tagBytes)...)
	if _, err := c.nc.Write(raw); err != nil {
		t.Fatal(err)
	}
	if _, err := s.read(); err == nil || !strings.Contains(err.Error(), "not authenticated") {
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

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// A clock reading is good to half the round trip it came from, and ages:
// a fresher reading with a wider round trip can still be the better one.
func TestClockReading(t *testing.T) {
	r := readingOf(1000, 3000, 5000) // sent at 1000, back at 3000, the peer said 5000
	if r.off != 3000 || r.err != 1000 || r.at != 3000 {
		t.Fatalf("%+v", r)
	}
	// The peer's clock read 5000 somewhere between 1000 and 3000 here: any
	// offset in [2000, 4000] is consistent with it.
	if r.off-r.err != 2000 || r.off+r.err != 4000 {
		t.Fatalf("%+v does not bound the offset", r)
	}
	if got := r.errAt(3000 + 10*clockDrift); got != 1010 {
		t.Fatalf("error after 10 ns of age per drift unit: %d", got)
	}
}
