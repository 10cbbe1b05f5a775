package raftnode

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPeerRoutesAreAuthenticatedAndDoNotCountAsHeard(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	n1 := c.start("n1", true)
	c.leader(10 * time.Second)
	n2 := c.start("n2", false)
	c.grow("n1", "n2")
	// grow returns once the leader has promoted n2; n2 learns n1's URL only
	// when it applies that membership, which may come a moment later.
	c.converged("n1", "n2")
	echo := func(_ context.Context, from uint64, body []byte) ([]byte, error) {
		if string(body) == "fail" {
			return nil, errors.New("refused")
		}
		return append([]byte(FormatNodeID(from)+":"), body...), nil
	}
	n1.g.HandlePeer("/app/echo", 16, echo)
	n2.g.HandlePeer("/app/echo", 16, echo)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := n2.g.CallPeer(ctx, n1.g.ID(), "/app/echo", []byte("hi"), 1<<10)
	if want := FormatNodeID(n2.g.ID()) + ":hi"; err != nil || string(got) != want {
		t.Fatalf("CallPeer = %q, %v; want %q", got, err, want)
	}
	if _, err := n2.g.CallPeer(ctx, n1.g.ID(), "/app/echo", []byte("fail"), 1<<10); err == nil || !strings.Contains(err.Error(), "refused") ||
		PeerStatus(err) != http.StatusInternalServerError {
		t.Errorf("a failing handler: err = %v (status %d)", err, PeerStatus(err))
	}
	// A route the member does not serve (an older build's) is told apart
	// by its status, so that a caller can ask an older route.
	if _, err := n2.g.CallPeer(ctx, n1.g.ID(), "/app/v9/echo", []byte("hi"), 1<<10); PeerStatus(err) != http.StatusNotFound {
		t.Errorf("a route the member does not serve: err = %v (status %d), want 404", err, PeerStatus(err))
	}
	if PeerStatus(nil) != 0 || PeerStatus(errors.New("dial failed")) != 0 {
		t.Error("PeerStatus of no answer is not 0")
	}
	if _, err := n2.g.CallPeer(ctx, n1.g.ID(), "/app/echo", bytes.Repeat([]byte("x"), 17), 1<<10); err == nil || !strings.Contains(err.Error(), "413") {
		t.Errorf("a body over the limit: err = %v", err)
	}
	if _, err := n2.g.CallPeer(ctx, n1.g.ID(), "/message", nil, 1<<10); err == nil {
		t.Error("CallPeer reached a substrate route")
	}

	// Unsigned, wrongly signed and replayed requests are refused.
	url := "http://" + n1.addr + "/raft/app/echo"
	send := func(sign func(h http.Header, body []byte), body []byte) int {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set(hdrGroup, "counter")
		req.Header.Set(hdrFrom, strconv.FormatUint(77, 16))
		sign(req.Header, body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	st := newStamp(time.Now())
	good := func(h http.Header, body []byte) {
		st.set(h)
		h.Set(hdrAuth, authTag(testSecret, "counter", "/app/echo", 77, "", st, body))
	}
	if code := send(func(http.Header, []byte) {}, []byte("x")); code != http.StatusUnauthorized {
		t.Errorf("unsigned: %d", code)
	}
	if code := send(func(h http.Header, body []byte) {
		st := newStamp(time.Now())
		st.set(h)
		h.Set(hdrAuth, authTag([]byte("another-secret-entirely"), "counter", "/app/echo", 77, "", st, body))
	}, []byte("x")); code != http.StatusUnauthorized {
		t.Errorf("wrong secret: %d", code)
	}
	if code := send(good, []byte("x")); code != http.StatusOK {
		t.Errorf("signed: %d", code)
	}
	if code := send(good, []byte("x")); code != http.StatusUnauthorized {
		t.Errorf("replayed: %d", code)
	}
	// Node 77 is no member, yet it was heard on an application route: that
	// must not count as hearing from it.
	if !n1.g.tr.lastHeard(77).IsZero() {
		t.Error("an application request counted as hearing from its sender")
	}
}

func TestHandlePeerRefusesSubstratePaths(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 4, nil)
	n1 := c.start("n1", true)
	defer func() {
		if recover() == nil {
			t.Error("HandlePeer(/message) did not panic")
		}
	}()
	n1.g.HandlePeer("/message", 1, nil)
}

// A read barrier asked before any leader is known (a node that has just
// started) waits for one, rather than for its deadline: raft drops the
// request it cannot place, and the barrier asks again.
func TestReadBarrierBeforeALeaderIsKnown(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, nil)
	n1 := c.start("n1", true)
	// Taken before the view is read: if no leader is known then, the
	// channel is the one the election must close. (A node that elected
	// itself before the test looked has nothing left to signal.)
	changed := n1.g.LeaderChanged()
	leaderless := n1.g.LeaderView().Leader == 0
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n1.g.ReadBarrier(ctx); err != nil {
		t.Fatalf("read barrier on a starting node: %v", err)
	}
	if !leaderless {
		t.Log("n1 led before the barrier was asked; only the barrier was tested")
		return
	}
	select {
	case <-changed:
	default:
		t.Fatal("LeaderChanged did not close when the node became leader")
	}
}
