package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/flowshard"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/raftnode"
	"github.com/riftgate/riftgate/ring"
)

var syncPolicy = flow.Policy{Durability: flow.Sync}

// flowsOwnedBy returns n flow ids that name owns at v, and whose two
// successors are the other members listed first.
func flowsOwnedBy(v *view, name string, n int) []string {
	id := raftnode.NodeIDFromName(name)
	var out []string
	for i := 0; len(out) < n; i++ {
		f := "i7:" + strconv.Itoa(i)
		if v.ring.Owner(ring.ClassFlow, f) == id {
			out = append(out, f)
		}
	}
	return out
}

func put(t *testing.T, n *tnode, id, key, val string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := n.f.Put(ctx, id, key, []byte(val), syncPolicy); err != nil {
		t.Fatalf("%s: Put %s/%s: %v", n.name, id, key, err)
	}
}

func getKey(n *tnode, id, key string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e, err := n.f.Get(ctx, id, key, nil)
	return string(e.Value), err
}

// An owner cut off from the others refuses its flows (it is isolated), the
// others cannot reach it and answer unavailable too, never a guess; other
// flows go on being served; once healed, its flows answer again.
func TestPartitionedOwnerRefuses(t *testing.T) {
	c := threeNodes(t, nil)
	n1, n3 := c.get("n1"), c.get("n3")
	v := n1.f.currentView()
	theirs := flowsOwnedBy(v, "n3", 5)
	ours := flowsOwnedBy(v, "n1", 5)
	for _, id := range append(append([]string{}, theirs...), ours...) {
		put(t, n1, id, "k", "before")
	}
	c.net.Isolate("n3")
	eventually(t, "n3 to see itself isolated", n3.node.IsIsolated)
	for i, id := range theirs {
		if _, err := getKey(n3, id, "k"); !errors.Is(err, flow.ErrUnavailable) {
			t.Fatalf("the isolated owner answered %s: %v", id, err)
		}
		if _, err := n3.f.Put(context.Background(), id, "k", []byte("lost"), syncPolicy); !errors.Is(err, flow.ErrUnavailable) {
			t.Fatalf("the isolated owner took a write of %s: %v", id, err)
		}
		if i < 2 { // each waits out the deadline: the owner does not answer
			if _, err := getKey(n1, id, "k"); !errors.Is(err, flow.ErrUnavailable) {
				t.Fatalf("n1 answered %s, owned by the unreachable n3: %v", id, err)
			}
		}
	}
	for _, id := range ours {
		put(t, c.get("n2"), id, "k", "during")
	}
	c.net.Heal()
	c.settled(3)
	for _, id := range theirs {
		eventually(t, id+" to answer again", func() bool {
			got, err := getKey(n1, id, "k")
			return err == nil && got == "before"
		})
	}
	for _, id := range ours {
		if got, err := getKey(n3, id, "k"); err != nil || got != "during" {
			t.Fatalf("%s after heal: %q %v", id, got, err)
		}
	}
}

// Removing a dead owner loses none of its acknowledged sync writes: each is
// on at least one successor, and the new owner adopts the highest version
// of each key from every replica it can reach. Here the owner's pushes to
// the flows' next owner are cut while it writes, so that only the leader
// holds them: without adoption the next owner would serve stale values.
func TestRemovedOwnerLosesNoSyncWrite(t *testing.T) {
	c := threeNodes(t, nil)
	l := c.leader()
	var others []*tnode
	for _, n := range c.running() {
		if n != l {
			others = append(others, n)
		}
	}
	old, next := others[0], others[1]
	v := l.f.currentView()
	after, _ := ring.New(v.idx+1, []uint64{l.node.Self(), next.node.Self()})
	var moving []string
	for _, id := range flowsOwnedBy(v, old.name, 200) {
		if after.Owner(ring.ClassFlow, id) == next.node.Self() && len(moving) < 10 {
			moving = append(moving, id)
		}
	}
	if len(moving) < 5 {
		t.Fatalf("only %d flows move from %s to %s", len(moving), old.name, next.name)
	}
	for _, id := range moving {
		put(t, l, id, "k0", "first")
	}
	c.net.Partition([]string{old.name}, []string{next.name})
	for i, id := range moving {
		for k := range 3 {
			put(t, l, id, "k"+strconv.Itoa(k), fmt.Sprint(i, k))
		}
		if err := l.f.Delete(context.Background(), id, "k2", syncPolicy); err != nil {
			t.Fatal(err)
		}
	}
	if e, err := next.f.shard.Get(context.Background(), moving[0], "k1", nil); err == nil {
		t.Fatalf("%s got a push through the cut: %q", next.name, e.Value)
	}
	c.stop(old.name)
	c.net.Heal()
	c.remove(old.name)
	c.settled(2)
	for _, n := range c.running() {
		for i, id := range moving {
			for k := range 2 {
				if got, err := getKey(n, id, "k"+strconv.Itoa(k)); err != nil || got != fmt.Sprint(i, k) {
					t.Fatalf("%s: %s/k%d = %q, %v after the owner was removed", n.name, id, k, got, err)
				}
			}
			if _, err := getKey(n, id, "k2"); !errors.Is(err, flow.ErrNotFound) {
				t.Fatalf("%s: the deleted %s/k2 came back: %v", n.name, id, err)
			}
		}
	}
}

// With one successor of a flow down, sync writes to it still succeed: the
// other successor acknowledges.
func TestOneSuccessorDownDoesNotStall(t *testing.T) {
	c := threeNodes(t, nil)
	n1 := c.get("n1")
	ours := flowsOwnedBy(n1.f.currentView(), "n1", 10)
	c.stop("n3")
	start := time.Now()
	for _, id := range ours {
		put(t, n1, id, "k", "v")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("10 sync writes took %v with a successor down", d)
	}
	// n3 returns and catches up by anti-entropy and adoption.
	c.start("n3", false)
	c.settled(3)
	eventually(t, "n3's replicas to catch up", func() bool {
		for _, id := range ours {
			if e, err := c.get("n3").f.shard.Get(context.Background(), id, "k", nil); err != nil || string(e.Value) != "v" {
				return false
			}
		}
		return true
	})
}

// A restarted owner adopts from its replicas before it answers: what they
// hold that its own disk lost (async writes it acknowledged before dying)
// is not lost, and its counters do not go backwards.
func TestRestartedOwnerAdopts(t *testing.T) {
	c := threeNodes(t, nil)
	n1, n2 := c.get("n1"), c.get("n2")
	ours := flowsOwnedBy(n1.f.currentView(), "n1", 5)
	for _, id := range ours {
		put(t, n2, id, "k", "1")
	}
	// The sync writes are on one successor; both have them soon.
	eventually(t, "n2's replicas", func() bool {
		for _, id := range ours {
			if set, err := n2.f.shard.Records(context.Background(), id); err != nil || len(set.Records) != 1 {
				return false
			}
		}
		return true
	})
	c.stop("n1")
	// What n1's disk lost: the replicas hold a newer value.
	for _, id := range ours {
		set, err := n2.f.shard.Records(context.Background(), id)
		if err != nil || len(set.Records) != 1 {
			t.Fatalf("n2's replica of %s: %+v %v", id, set, err)
		}
		set.Records[0].Value = []byte("2")
		set.Records[0].Version.V++
		if _, err := n2.f.shard.Merge(context.Background(), set); err != nil {
			t.Fatal(err)
		}
	}
	c.start("n1", false)
	c.settled(3)
	for _, id := range ours {
		if got, err := getKey(n2, id, "k"); err != nil || got != "2" {
			t.Fatalf("%s after n1 restarted: %q %v", id, got, err)
		}
	}
}

// A flow two of whose three holders cannot be reached when its owner
// changes is held, not served from the copy that is left: here a sync write
// reaches the owner and its second successor only (the first is cut off
// from the owner), then the owner dies and is removed while the second
// successor is cut off. The new owner, the first successor, lacks the
// write; it answers unavailable for that flow, serves its others, and
// serves the write once the second successor is back.
func TestFlowWithTwoHoldersMissingIsHeld(t *testing.T) {
	c := threeNodes(t, nil)
	c.grow("n4")
	c.grow("n5")
	c.settled(5)
	l := c.leader()
	v := l.f.currentView()
	byID := map[uint64]*tnode{}
	for _, n := range c.running() {
		byID[n.node.Self()] = n
	}
	// A flow none of whose holders leads, so that the group keeps a
	// quorum and a leader through what follows.
	var flowID string
	var o, s1, s2 *tnode
	for i := 0; flowID == ""; i++ {
		id := "i7:" + strconv.Itoa(i)
		hs := append([]uint64{v.ring.Owner(ring.ClassFlow, id)}, v.ring.Successors(ring.ClassFlow, id, ring.ReplicaSuccessors)...)
		if !slices.Contains(hs, l.node.Self()) {
			flowID, o, s1, s2 = id, byID[hs[0]], byID[hs[1]], byID[hs[2]]
		}
	}
	var other string // a flow the new owner takes that o did not hold
	for i := 0; other == ""; i++ {
		id := "i8:" + strconv.Itoa(i)
		if v.ring.Owner(ring.ClassFlow, id) == s1.node.Self() && !slices.Contains(v.ring.Successors(ring.ClassFlow, id, 2), o.node.Self()) {
			other = id
		}
	}
	put(t, l, other, "k", "served")
	c.net.Partition([]string{o.name}, []string{s1.name})
	put(t, l, flowID, "k", "acknowledged")
	if _, err := s1.f.shard.Get(context.Background(), flowID, "k", nil); !errors.Is(err, flowshard.ErrNotFound) {
		t.Fatalf("%s holds the write through the cut: %v", s1.name, err)
	}
	c.stop(o.name)
	c.net.Heal()
	c.net.Isolate(s2.name)
	c.remove(o.name)
	eventually(t, s1.name+" to adopt at 4 voters", func() bool {
		nv := s1.f.currentView()
		return len(nv.voters) == 4 && s1.f.adopted.Load() == nv.idx
	})
	for range 5 {
		for _, n := range []*tnode{l, s1} {
			if got, err := getKey(n, flowID, "k"); !errors.Is(err, flow.ErrUnavailable) || !strings.Contains(err.Error(), flow.CauseAdopting) {
				t.Fatalf("%s answered %s with two of its holders missing: %q, %v", n.name, flowID, got, err)
			}
		}
		if got, err := getKey(l, other, "k"); err != nil || got != "served" {
			t.Fatalf("%s, settled, answered %q, %v", other, got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.net.Heal()
	eventually(t, flowID+" to serve its write once "+s2.name+" is back", func() bool {
		got, err := getKey(l, flowID, "k")
		return err == nil && got == "acknowledged"
	})
}
