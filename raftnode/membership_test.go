package raftnode

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRemoveLeaderStepsDown removes the leader through a follower's admin
// API: it steps down (StepDownOnRemoval), the other two carry on, and the
// removed id is never admitted again.
func TestRemoveLeaderStepsDown(t *testing.T) {
	t.Parallel()
	c := threeNodes(t, 21, nil)
	l := c.leader(10 * time.Second)
	propose(t, l, 3)
	var via string
	var rest []string
	for _, n := range []string{"n1", "n2", "n3"} {
		if n != l.name {
			rest = append(rest, n)
			via = n
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var doc MembershipJSON
	for {
		err := c.admin(via).Do(ctx, http.MethodPost, "/remove", map[string]string{"id": FormatNodeID(l.g.ID())}, &doc)
		if err == nil || strings.Contains(err.Error(), "is not a member") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("remove the leader: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	eventually(t, 10*time.Second, "the removed leader to step down", func() bool { return !l.g.IsLeader() })
	eventually(t, 5*time.Second, "the removed node to see itself isolated", l.g.IsIsolated)
	nl := c.leader(10 * time.Second)
	if nl == l {
		t.Fatal("the removed node leads again")
	}
	for _, n := range rest {
		m := c.get(n).g.Membership()
		if len(m.Voters()) != 2 || !m.WasRemoved(l.g.ID()) {
			t.Fatalf("%s membership after removal: %+v", n, m)
		}
	}
	propose(t, c.get(rest[0]), 4)
	c.waitValue(7, rest...)
	// Ids are never reused.
	_, err := nl.g.AddLearner(ctx, l.name, "http://"+l.addr+"/raft")
	if !errors.Is(err, ErrMembershipChange) {
		t.Fatalf("re-adding a removed id: %v", err)
	}
	// Refusals are deterministic validation errors, not timeouts.
	if _, err := nl.g.Promote(ctx, NodeIDFromName("nobody")); !errors.Is(err, ErrMembershipChange) {
		t.Fatalf("promoting a non-member: %v", err)
	}
}
