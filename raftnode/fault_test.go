package raftnode

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

func threeNodes(t testing.TB, seed uint64, tweak func(*Config)) *cluster {
	t.Helper()
	c := newCluster(t, seed, tweak)
	c.start("n1", true)
	c.leader(10 * time.Second)
	c.start("n2", false)
	c.start("n3", false)
	c.grow("n1", "n2")
	c.grow("n1", "n3")
	return c
}

// converged waits until every running member has applied the same index
// and holds byte-identical state.
func (c *cluster) converged(names ...string) {
	c.t.Helper()
	eventually(c.t, 20*time.Second, "replicas to converge", func() bool {
		var fp0 []byte
		var a0 uint64
		for i, n := range names {
			g := c.get(n).g
			fp, err := g.sm.Fingerprint()
			if err != nil {
				return false
			}
			a := g.Applied()
			if i == 0 {
				fp0, a0 = fp, a
			} else if a != a0 || !bytes.Equal(fp, fp0) {
				return false
			}
		}
		return true
	})
}

// TestFaultyNetworkConverges drops and delays messages (seeded) while
// proposals arrive at every member; acknowledged writes are never lost and
// the replicas end byte-identical.
func TestFaultyNetworkConverges(t *testing.T) {
	t.Parallel()
	c := threeNodes(t, 42, nil)
	c.net.SetDrop(0.1)
	c.net.SetDelay(0, 15*time.Millisecond)
	rng := rand.New(rand.NewPCG(42, 7))
	var acked, attempted int64
	names := []string{"n1", "n2", "n3"}
	for i := range 40 {
		m := c.get(names[rng.IntN(3)])
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		add := int64(i + 1)
		_, err := m.g.ProposeAndWait(ctx, counterCmd{Add: add})
		cancel()
		attempted += add
		if err == nil {
			acked += add
		}
	}
	c.net.SetDrop(0)
	c.net.SetDelay(0, 0)
	c.converged(names...)
	v, _ := value(c.get("n1"))
	if v < acked || v > attempted {
		t.Fatalf("value %d outside [acked %d, attempted %d]", v, acked, attempted)
	}
	if acked == 0 {
		t.Fatal("no proposal succeeded under 10% loss")
	}
	st := c.net.Stats()
	t.Logf("net: %+v; acked %d of %d", st, acked, attempted)
	if st.Dropped == 0 {
		t.Fatal("the fault network dropped nothing")
	}
}

// TestPartitionedLeaderIsIsolated cuts the leader off: it reports itself
// isolated and stops answering writes, the majority elects a new leader,
// and after healing the old leader rejoins as a follower.
func TestPartitionedLeaderIsIsolated(t *testing.T) {
	c := threeNodes(t, 5, nil)
	old := c.leader(10 * time.Second)
	var rest []string
	for _, n := range []string{"n1", "n2", "n3"} {
		if n != old.name {
			rest = append(rest, n)
		}
	}
	propose(t, old, 1)
	c.net.Partition([]string{old.name}, rest)
	eventually(t, 5*time.Second, "the cut-off leader to see itself isolated", old.g.IsIsolated)
	eventually(t, 10*time.Second, "the majority to elect a new leader", func() bool {
		return c.get(rest[0]).g.IsLeader() || c.get(rest[1]).g.IsLeader()
	})
	nl := c.get(rest[0])
	if !nl.g.IsLeader() {
		nl = c.get(rest[1])
	}
	eventually(t, 5*time.Second, "the new leader to see its quorum", func() bool { return !nl.g.IsIsolated() })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err := old.g.ProposeAndWait(ctx, counterCmd{Add: 100})
	cancel()
	if err == nil {
		t.Fatal("a write through the isolated old leader succeeded")
	}
	propose(t, nl, 10)
	c.net.Heal()
	eventually(t, 10*time.Second, "the old leader to rejoin", func() bool { return !old.g.IsIsolated() && !old.g.IsLeader() })
	c.converged("n1", "n2", "n3")
	if v, _ := value(old); v != 11 {
		t.Fatalf("old leader holds %d after healing, want 11 (its isolated write must not apply)", v)
	}
}

// TestRestartOnDataDir kills members (in-process close) and reopens them
// on their data directories: a follower, the leader, then everyone.
func TestRestartOnDataDir(t *testing.T) {
	t.Parallel()
	c := threeNodes(t, 9, func(cfg *Config) {
		cfg.SnapshotEntries = 15
		cfg.CatchUpEntries = 5
	})
	l := c.leader(10 * time.Second)
	for range 10 {
		propose(t, l, 1)
	}
	f := "n3"
	if l.name == f {
		f = "n2"
	}
	c.stop(f)
	for range 10 {
		propose(t, l, 1)
	}
	c.start(f, false)
	c.waitValue(20, "n1", "n2", "n3")

	c.stop(l.name)
	nl := c.leader(10 * time.Second)
	for range 5 {
		propose(t, nl, 1)
	}
	c.start(l.name, false)
	c.waitValue(25, "n1", "n2", "n3")

	for _, n := range []string{"n1", "n2", "n3"} {
		c.stop(n)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		c.start(n, false)
	}
	// State is back before any new write: restored from snapshot + log.
	c.waitValue(25, "n1", "n2", "n3")
	propose(t, c.leader(10*time.Second), 1)
	c.waitValue(26, "n1", "n2", "n3")
	for _, n := range []string{"n1", "n2", "n3"} {
		if got := len(c.get(n).g.Membership().Voters()); got != 3 {
			t.Fatalf("%s has %d voters after a full restart", n, got)
		}
	}
}

// TestFollowerBehindNeedsSnapshot stops a follower while the leader
// compacts its log past the follower's position: it can only come back
// through a snapshot, which it installs and persists.
func TestFollowerBehindNeedsSnapshot(t *testing.T) {
	t.Parallel()
	c := threeNodes(t, 11, func(cfg *Config) {
		cfg.SnapshotEntries = 10
		cfg.CatchUpEntries = 3
	})
	l := c.leader(10 * time.Second)
	f := "n3"
	if l.name == f {
		f = "n2"
	}
	before := c.get(f).g.Applied()
	c.stop(f)
	for range 40 {
		propose(t, l, 1)
	}
	first, _ := l.g.store.FirstIndex()
	if first <= before+1 {
		t.Fatalf("leader log starts at %d; follower stopped at %d: no snapshot would be needed", first, before)
	}
	c.start(f, false)
	c.waitValue(40, f)
	snap, _ := c.get(f).g.store.Snapshot()
	if snap.GetMetadata().GetIndex() < first-1 {
		t.Fatalf("follower's stored snapshot at %d, expected one from the leader (log starts at %d)", snap.GetMetadata().GetIndex(), first)
	}
	c.converged("n1", "n2", "n3")
	// And it survives a restart from that snapshot.
	c.stop(f)
	c.start(f, false)
	c.waitValue(40, f)
}

// TestLeaderLossElection measures how long the group is without a leader
// after the leader dies, with the recommended timing (100 ms ticks,
// ElectionTick 10). The numbers go to docs/raft-elections.md.
func TestLeaderLossElection(t *testing.T) {
	c := threeNodes(t, 13, func(cfg *Config) {
		cfg.TickInterval = 100 * time.Millisecond
		cfg.ElectionTick = 10
	})
	var elect, write []time.Duration
	for trial := range 4 {
		l := c.leader(15 * time.Second)
		propose(t, l, 1)
		start := time.Now()
		c.stop(l.name)
		var nl *member
		eventually(t, 15*time.Second, "a new leader", func() bool {
			for _, n := range []string{"n1", "n2", "n3"} {
				if m := c.get(n); m.g != nil && m.g.IsLeader() {
					nl = m
					return true
				}
			}
			return false
		})
		elect = append(elect, time.Since(start))
		propose(t, nl, 1)
		write = append(write, time.Since(start))
		c.start(l.name, false)
		c.waitValue(int64(2*(trial+1)), "n1", "n2", "n3")
	}
	// A planned handover: TransferLeadership instead of dying.
	var transfer []time.Duration
	for range 3 {
		l := c.leader(15 * time.Second)
		to := c.get("n1")
		if to == l {
			to = c.get("n2")
		}
		start := time.Now()
		l.g.TransferLeadership(context.Background(), to.g.ID())
		eventually(t, 15*time.Second, "the transfer", to.g.IsLeader)
		transfer = append(transfer, time.Since(start))
	}
	t.Logf("leadership transfer -> new leader: %v", transfer)
	t.Logf("leader loss -> new leader: %v", elect)
	t.Logf("leader loss -> first committed write: %v", write)
	for _, d := range elect {
		// Election timeout is 1s, randomised up to 2s; PreVote adds a round.
		if d > 5*time.Second {
			t.Fatalf("election took %v", d)
		}
	}
}

// TestNewMemberAfterCompaction admits a member once the leader's log is
// compacted: the leader can only send it a snapshot, and that snapshot
// must name it, or raft refuses to restore it ("not in the ConfState").
func TestNewMemberAfterCompaction(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 12, func(cfg *Config) {
		cfg.SnapshotEntries = 10
		cfg.CatchUpEntries = 3
	})
	c.start("n1", true)
	l := c.leader(10 * time.Second)
	for range 30 {
		propose(t, l, 1)
	}
	if first, _ := l.g.store.FirstIndex(); first <= 2 {
		t.Fatalf("the leader's log starts at %d: not compacted", first)
	}
	c.start("n2", false)
	c.grow("n1", "n2")
	c.waitValue(30, "n2")
	propose(t, l, 1)
	c.waitValue(31, "n1", "n2")
}
