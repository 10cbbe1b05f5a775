package cluster

import (
	"context"
	"fmt"
	"testing"

	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/raftnode"
	"github.com/riftgate/riftgate/ring"
)

func TestFlowCountGolden(t *testing.T) {
	c := FlowCount{MembershipIndex: 7, Owned: 300, Replicas: 2, Other: 0, Isolated: true}
	checkHex(t, "flow count", encode(t, c), "a501070219012c0302040005f5")
	var back FlowCount
	if err := raftnode.UnmarshalCBOR(encode(t, c), &back); err != nil || back != c {
		t.Fatalf("round trip: %+v %v", back, err)
	}
}

// GET /cluster/flows' counts: every member counts what it holds on its own
// ring, the owners' counts add up to the flows and match the ring, every
// flow has its two replicas, and a member that is gone is reported as not
// answering, not as owning nothing.
func TestOwnershipCountsEachMembersFlows(t *testing.T) {
	c := threeNodes(t, nil)
	c.grow("n4")
	c.settled(4)
	for _, n := range c.running() {
		n.node.CountFlows(n.f.Count)
	}
	n1 := c.get("n1")
	const flows = 40
	ctx := context.Background()
	for i := range flows {
		if _, err := n1.f.Put(ctx, fmt.Sprintf("i1:f%d", i), "k", []byte("v"), flow.Policy{Durability: flow.Sync}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int64{}
	v := n1.f.currentView()
	for i := range flows {
		owner := v.ring.Owner(ring.ClassFlow, fmt.Sprintf("i1:f%d", i))
		for _, n := range c.running() {
			if n.node.Self() == owner {
				want[n.name]++
			}
		}
	}
	var own Ownership
	eventually(t, "every flow owned once and replicated twice", func() bool {
		own = n1.node.Ownership(ctx)
		var owned, replicas int64
		for _, m := range own.Members {
			if !m.Answered || m.Owned != want[m.Name] || m.Isolated || m.MembershipIndex != v.idx {
				return false
			}
			owned, replicas = owned+m.Owned, replicas+m.Replicas
		}
		return len(own.Members) == 4 && owned == flows && replicas == 2*flows
	})

	c.stop("n4")
	own = n1.node.Ownership(ctx)
	for _, m := range own.Members {
		if m.Answered == (m.Name == "n4") || (m.Name == "n4") != (m.Error != "") {
			t.Errorf("with n4 stopped: %+v", m)
		}
	}
}
