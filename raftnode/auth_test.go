package raftnode

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

func TestReplayGuard(t *testing.T) {
	now := time.UnixMilli(1767225600000)
	w := authWindow.Milliseconds()
	st := func(ms int64, nonce string) stamp { return stamp{ms: ms, nonce: nonce} }
	var g replayGuard
	for _, tc := range []struct {
		name string
		st   stamp
		at   time.Time
		want error
	}{
		{"fresh", st(now.UnixMilli(), "a"), now, nil},
		{"the same nonce again", st(now.UnixMilli(), "a"), now, errReplay},
		{"the same nonce, another time", st(now.UnixMilli()+5, "a"), now, errReplay},
		{"at the window's far edge", st(now.UnixMilli()-w, "b"), now, nil},
		{"just past it", st(now.UnixMilli()-w-1, "c"), now, errClock},
		{"from the future, within the window", st(now.UnixMilli()+w, "d"), now, nil},
		{"too far in the future", st(now.UnixMilli()+w+1, "e"), now, errClock},
		{"a replay once the window passed", st(now.UnixMilli(), "a"), now.Add(authWindow + time.Millisecond), errClock},
	} {
		if err := g.admit(tc.st, tc.at); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// Nonces are forgotten once their window has passed, so the guard's
	// memory is bounded by the request rate.
	if err := g.admit(st(now.UnixMilli()+3*w, "f"), now.Add(3*authWindow)); err != nil {
		t.Fatal(err)
	}
	if len(g.seen) != 1 {
		t.Errorf("%d nonces remembered after the window, want 1", len(g.seen))
	}
}

// TestSignedRequestsAreAcceptedOnce sends authentic requests a member must
// still refuse: a copy of one it accepted, one stamped outside the window,
// and one signed as auth v1 signed, with no stamp.
func TestSignedRequestsAreAcceptedOnce(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, nil)
	n1 := c.start("n1", true)
	c.leader(10 * time.Second)
	base := "http://" + n1.addr + "/raft"
	frame, err := encodeFrame([]*pb.Message{{Type: pb.MsgHeartbeat.Enum(), To: new(n1.g.ID()), From: new(uint64(77))}})
	if err != nil {
		t.Fatal(err)
	}
	send := func(st *stamp, tag string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+pathMessage, bytes.NewReader(frame))
		req.Header.Set(hdrGroup, "counter")
		req.Header.Set(hdrFrom, strconv.FormatUint(77, 16))
		if st != nil {
			st.set(req.Header)
			tag = authTag(testSecret, "counter", pathMessage, 77, "", *st, frame)
		}
		req.Header.Set(hdrAuth, tag)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(msg)
	}
	now := time.Now()
	once := newStamp(now)
	stale := newStamp(now.Add(-2 * authWindow))
	ahead := newStamp(now.Add(2 * authWindow))
	v1 := "d34143c234217ca17163b9c169e0ab0533eda8e176eb8fe3e8d2d77131b63463" // any v1 tag: it has no stamp
	for _, tc := range []struct {
		name     string
		st       *stamp
		tag      string
		want     int
		contains string
	}{
		{"first time", &once, "", http.StatusOK, ""},
		{"replayed", &once, "", http.StatusUnauthorized, "replayed"},
		{"stamped two windows ago", &stale, "", http.StatusUnauthorized, "clock"},
		{"stamped two windows ahead", &ahead, "", http.StatusUnauthorized, "clock"},
		{"auth v1, no stamp", nil, v1, http.StatusUnauthorized, "auth v2"},
	} {
		code, msg := send(tc.st, tc.tag)
		if code != tc.want || !strings.Contains(msg, tc.contains) {
			t.Errorf("%s: %d %q, want %d containing %q", tc.name, code, msg, tc.want, tc.contains)
		}
	}

	// The admin API: the same signed call twice.
	admin := &AdminClient{BaseURL: "http://" + n1.addr + "/cluster", Group: "counter", Secret: testSecret}
	if err := admin.Do(context.Background(), http.MethodGet, "/members", nil, nil); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, admin.BaseURL+"/members", nil)
	st := newStamp(time.Now())
	st.set(req.Header)
	req.Header.Set(hdrAuth, adminAuthTag(testSecret, "counter", http.MethodGet, "/members", st, nil))
	for i, want := range []int{http.StatusOK, http.StatusUnauthorized} {
		resp, err := http.DefaultClient.Do(req.Clone(context.Background()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("admin call, copy %d: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestResponsesAreBoundToTheirRequest answers a call with a response that
// is authentic but was signed for another request, as a replayed answer
// would be: the caller must refuse it.
func TestResponsesAreBoundToTheirRequest(t *testing.T) {
	body := []byte("applied")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other := newStamp(time.Now())
		w.Header().Set(hdrAuth, authTag(testSecret, "g", pathPropose+"#response", 2, "", stamp{nonce: other.nonce}, body))
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	tr := &transport{auth: NewPeerAuth("g", testSecret), self: 1, client: srv.Client(),
		resolve: func(uint64) string { return srv.URL }}
	_, err := tr.call(context.Background(), 2, pathPropose, []byte("cmd"), 1<<10)
	if err == nil || !strings.Contains(err.Error(), "not authenticated") {
		t.Fatalf("a response signed for another request: %v", err)
	}
}

// TestAdminClientRefusesUnsignedAnswers: an answer to an admin call must be
// signed for that call, or the client does not act on it.
func TestAdminClientRefusesUnsignedAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st, _ := readStamp(r.Header)
		body := []byte(`{"members":[]}`)
		if r.URL.Path == "/signed/members" {
			w.Header().Set(hdrAuth, adminAuthTag(testSecret, "g", http.MethodGet, "/members#response", stamp{nonce: st.nonce}, body))
		}
		if r.URL.Path == "/other/members" { // signed, but for another call
			w.Header().Set(hdrAuth, adminAuthTag(testSecret, "g", http.MethodGet, "/members#response", newStamp(time.Now()), body))
		}
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		base string
		ok   bool
	}{{"/signed", true}, {"/unsigned", false}, {"/other", false}} {
		c := &AdminClient{BaseURL: srv.URL + tc.base, Group: "g", Secret: testSecret, HTTP: srv.Client()}
		var out map[string]any
		err := c.Do(context.Background(), http.MethodGet, "/members", nil, &out)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.base, err)
		}
	}
}

// PeerAuth is the transport's scheme, exported for other peer protocols: a
// signed request verifies once, a changed one never, and answers verify
// only for their request.
func TestPeerAuth(t *testing.T) {
	a := NewPeerAuth("g", testSecret)
	h := http.Header{}
	nonce := a.Sign(h, "/p", 7, "http://n7", []byte("body"))
	if _, err := a.Verify(h, "/p", []byte("other"), time.Now()); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("changed body: %v", err)
	}
	if _, err := NewPeerAuth("h", testSecret).Verify(h, "/p", []byte("body"), time.Now()); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("other group: %v", err)
	}
	p, err := a.Verify(h, "/p", []byte("body"), time.Now())
	if err != nil || p.ID != 7 || p.URL != "http://n7" || p.Nonce != nonce {
		t.Fatalf("Verify = %+v, %v", p, err)
	}
	if _, err := a.Verify(h, "/p", []byte("body"), time.Now()); !errors.Is(err, errReplay) {
		t.Fatalf("second Verify: %v", err)
	}
	ans := http.Header{}
	a.SignAnswer(ans, "/p", 9, nonce, []byte("ok"))
	// Another request's nonce: the first digit changed (a random nonce
	// starts with "00" once in 256 runs, so overwriting it with "00" was
	// not always a change).
	other := "1" + nonce[1:]
	if nonce[0] == '1' {
		other = "2" + nonce[1:]
	}
	if !a.VerifyAnswer(ans, "/p", 9, nonce, []byte("ok")) || a.VerifyAnswer(ans, "/p", 9, other, []byte("ok")) || a.VerifyAnswer(ans, "/p", 8, nonce, []byte("ok")) {
		t.Fatal("answers must verify for their request and sender only")
	}
	if k1, k2 := a.SessionKey("s", []byte("a"), []byte("bc")), a.SessionKey("s", []byte("ab"), []byte("c")); bytes.Equal(k1, k2) {
		t.Fatal("session key parts are not length-prefixed")
	}
}
