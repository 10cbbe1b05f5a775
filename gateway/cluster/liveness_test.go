package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/cluster/faultproxy"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/raftnode"
)

// memberStatus is n's view of member name in GET /cluster.
func memberStatus(t *testing.T, n *tnode, name string) MemberStatus {
	t.Helper()
	for _, m := range n.node.Status().Members {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("%s does not list %s", n.name, name)
	return MemberStatus{}
}

// A peer that goes silent (its link holds every byte, resets nothing) is
// found out by the heartbeat: the session to it is reset within
// silentAfter, GET /cluster calls it unreachable and says why, and flow
// operations to it answer unavailable within their budget, naming the
// cause. Once the link heals, the heartbeat's session serves again at once.
func TestSilentPeerIsFoundOutAndServedAgain(t *testing.T) {
	c := threeNodes(t, nil)
	n1 := c.get("n1")
	theirs := flowsOwnedBy(n1.f.currentView(), "n3", 3)
	for _, id := range theirs {
		put(t, n1, id, "k", "before")
	}
	eventually(t, "n1 to reach n3", func() bool { return memberStatus(t, n1, "n3").Reachable })
	if ms := memberStatus(t, n1, "n3"); ms.LastExchangeMs == nil || *ms.LastExchangeMs > int64(reachableFor/time.Millisecond) {
		t.Fatalf("n3 reachable, but its last exchange %v", ms.LastExchangeMs)
	}
	silent := n1.f.silentSessions.Load()

	c.net.Set("n1", "n3", faultproxy.Link{Cut: true})
	c.net.Set("n3", "n1", faultproxy.Link{Cut: true})
	cut := time.Now()
	eventually(t, "n1 to call n3 unreachable", func() bool { return !memberStatus(t, n1, "n3").Reachable })
	if d := time.Since(cut); d > reachableFor+time.Second {
		t.Errorf("n3 was called unreachable %v after the cut", d)
	}
	eventually(t, "the heartbeat to reset the silent session", func() bool { return n1.f.silentSessions.Load() > silent })
	eventually(t, "GET /cluster to say why n3 is unreachable", func() bool { return memberStatus(t, n1, "n3").LastError != "" })
	if ms := memberStatus(t, n1, "n3"); ms.LastExchangeMs == nil || *ms.LastExchangeMs < int64(reachableFor/time.Millisecond) || ms.Reachable {
		t.Errorf("n3 while cut off: %+v", ms)
	}
	// Each operation answers within its budget, and says why.
	for _, id := range theirs {
		start := time.Now()
		_, err := getKey(n1, id, "k")
		if !errors.Is(err, flow.ErrUnavailable) {
			t.Fatalf("%s, owned by the cut-off n3: %v", id, err)
		}
		var ue *flow.UnavailableError
		if !errors.As(err, &ue) || (ue.Cause != flow.CauseUnreachable && ue.Cause != flow.CauseDeadline) {
			t.Errorf("%s: the error names no cause: %v", id, err)
		}
		if d := time.Since(start); d > n1.f.deadline+500*time.Millisecond {
			t.Errorf("%s answered after %v, past its %v budget", id, d, n1.f.deadline)
		}
	}
	time.Sleep(2 * time.Second) // long enough for every backoff to grow

	c.net.Heal()
	healed := time.Now()
	for _, id := range theirs {
		eventually(t, id+" to answer again", func() bool {
			got, err := getKey(n1, id, "k")
			return err == nil && got == "before"
		})
	}
	if d := time.Since(healed); d > redialMax+2*time.Second {
		t.Errorf("n3's flows answered again %v after the heal", d)
	}
	eventually(t, "n1 to call n3 reachable again", func() bool { return memberStatus(t, n1, "n3").Reachable })
	if ms := memberStatus(t, n1, "n3"); ms.LastError != "" {
		t.Errorf("n3 reachable but still showing an error: %+v", ms)
	}
}

// A request that reaches its owner after its deadline (here: held 3 s on
// the way, past the 2 s budget) is refused, not applied: its caller has
// answered its client 503 long before.
func TestLateRequestIsNotApplied(t *testing.T) {
	c := threeNodes(t, nil)
	n1, n3 := c.get("n1"), c.get("n3")
	id := flowsOwnedBy(n1.f.currentView(), "n3", 1)[0]
	put(t, n1, id, "k", "before")
	expired := n3.f.expired.Load()

	c.net.Set("n1", "n3", faultproxy.Link{Delay: 3 * time.Second})
	start := time.Now()
	_, err := n1.f.Put(context.Background(), id, "k", []byte("late"), syncPolicy)
	if !errors.Is(err, flow.ErrUnavailable) || time.Since(start) > n1.f.deadline+500*time.Millisecond {
		t.Fatalf("a put through a 3 s link: %v after %v", err, time.Since(start))
	}
	eventually(t, "n3 to refuse the late request", func() bool { return n3.f.expired.Load() > expired })
	c.net.Heal()
	if got, err := getKey(n3, id, "k"); err != nil || got != "before" {
		t.Fatalf("after the late put: %q %v (it was applied)", got, err)
	}
}

// A request's flow budget bounds every operation it makes: once spent, the
// next is refused at once, with the cause.
func TestFlowBudgetIsShared(t *testing.T) {
	c := threeNodes(t, nil)
	n1 := c.get("n1")
	id := flowsOwnedBy(n1.f.currentView(), "n3", 1)[0]
	put(t, n1, id, "k", "v")
	end := time.Now().Add(-time.Millisecond)
	ctx := context.WithValue(context.Background(), flow.BudgetKey, &end)
	_, err := n1.f.Get(ctx, id, "k", nil)
	var ue *flow.UnavailableError
	if !errors.As(err, &ue) || ue.Cause != flow.CauseDeadline || !strings.Contains(flow.Describe(err), "(deadline)") {
		t.Fatalf("a get with its budget spent: %v", err)
	}
	if got, ok := flow.Budget(ctx); !ok || !got.Equal(end) {
		t.Fatalf("Budget: %v %v", got, ok)
	}
}

// The peer connections' user timeout is set: a connection whose data goes
// unacknowledged is ended by the kernel, not left to TCP's back-off.
func TestPeerConnectionsAreTuned(t *testing.T) {
	c := threeNodes(t, nil)
	n1 := c.get("n1")
	var cl *caller
	eventually(t, "n1 to have a session to n2", func() bool {
		n1.f.peerMu.RLock()
		p := n1.f.peers[raftnode.NodeIDFromName("n2")]
		n1.f.peerMu.RUnlock()
		if p == nil {
			return false
		}
		cl = p.slot[slotOps].cur.Load()
		return cl != nil && cl.alive()
	})
	if got := userTimeout(t, cl.s.nc); got != raftnode.PeerUserTimeout {
		t.Fatalf("TCP_USER_TIMEOUT %v, want %v", got, raftnode.PeerUserTimeout)
	}
}
