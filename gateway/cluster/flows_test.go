package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/flow/flowtest"
	"github.com/riftgate/riftgate/ring"
)

// The cluster's flow store passes the seam's contract, every method, from
// a node that owns about a third of the keys: the rest are owner RPCs.
func TestContract(t *testing.T) {
	c := threeNodes(t, nil)
	n := c.get("n2")
	flowtest.Run(t, n.f)
	// Every node answers for every flow, whoever owns it.
	ctx := context.Background()
	v := n.f.currentView()
	owners := map[uint64]bool{}
	for i := range 30 {
		id := "i9:" + string(rune('a'+i))
		owners[v.ring.Owner(ring.ClassFlow, id)] = true
		if _, err := n.f.Put(ctx, id, "k", []byte(id), flow.Policy{Durability: flow.Sync}); err != nil {
			t.Fatal(err)
		}
	}
	if len(owners) != 3 {
		t.Fatalf("30 flows owned by %d nodes", len(owners))
	}
	for _, other := range c.running() {
		for i := range 30 {
			id := "i9:" + string(rune('a'+i))
			if e, err := other.f.Get(ctx, id, "k"); err != nil || string(e.Value) != id {
				t.Fatalf("%s: Get %s = %q, %v", other.name, id, e.Value, err)
			}
		}
	}
	if _, err := n.f.Get(ctx, "i9:zz", "k"); !errors.Is(err, flow.ErrNotFound) {
		t.Fatalf("absent = %v", err)
	}
}
