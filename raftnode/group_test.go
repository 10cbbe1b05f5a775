package raftnode

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestCounterGroupWorkedExample is the substrate's worked example: three
// real members over HTTP, grown from a single voter, replicating, mirroring
// membership, forwarding from followers and running leader tasks.
func TestCounterGroupWorkedExample(t *testing.T) {
	c := newCluster(t, 1, nil)
	n1 := c.start("n1", true)
	if l := c.leader(10 * time.Second); l != n1 {
		t.Fatalf("leader is %s, want the bootstrap voter", l.name)
	}
	if r := propose(t, n1, 5); r.Value != 5 {
		t.Fatalf("first add answered %+v", r)
	}

	// Grow to three: n2 through the leader's admin API, n3 through a
	// follower's (forwarded to the leader).
	c.start("n2", false)
	c.start("n3", false)
	t.Log("growing")
	c.grow("n1", "n2")
	t.Log("n2 promoted")
	c.grow("n2", "n3")
	t.Log("n3 promoted")
	want := []uint64{NodeIDFromName("n1"), NodeIDFromName("n2"), NodeIDFromName("n3")}
	slices.Sort(want)
	for _, n := range []string{"n1", "n2", "n3"} {
		m := c.get(n)
		eventually(t, 10*time.Second, n+" to mirror three voters", func() bool {
			var voters []uint64
			m.g.State().Read(func(s *counterState, _ uint64) { voters = s.Voters })
			return slices.Equal(voters, want) && slices.Equal(m.g.Membership().Voters(), want)
		})
		mb, ok := m.g.Membership().Member(NodeIDFromName("n3"))
		if !ok || mb.Name != "n3" || mb.URL != "http://"+c.get("n3").addr+"/raft" {
			t.Fatalf("%s: membership lost n3's identity: %+v", n, mb)
		}
	}
	var doc MembershipJSON
	if err := c.admin("n3").Do(context.Background(), http.MethodGet, "/members", nil, &doc); err != nil || len(doc.Members) != 3 {
		t.Fatalf("GET /members from n3: %v %+v", err, doc)
	}

	// Forwarding: a follower's proposal returns the leader's answer and the
	// follower has applied it by the time it returns.
	l := c.leader(10 * time.Second)
	var f *member
	for _, n := range []string{"n1", "n2", "n3"} {
		if c.get(n) != l {
			f = c.get(n)
			break
		}
	}
	r := propose(t, f, 10)
	if r.Value != 15 {
		t.Fatalf("forwarded add answered %+v, want value 15", r)
	}
	if v, applied := value(f); v != 15 || applied < r.Index {
		t.Fatalf("follower %s after forwarded write: value %d applied %d (entry %d)", f.name, v, applied, r.Index)
	}
	c.waitValue(15, "n1", "n2", "n3")
	// A linearizable read on a follower: after the barrier it sees every
	// write acknowledged before the call, here one made on the leader. The
	// delay makes followers learn each commit well after the leader answers.
	c.net.SetDelay(40*time.Millisecond, 40*time.Millisecond)
	for _, n := range []string{"n1", "n2", "n3"} {
		m := c.get(n)
		r := propose(t, l, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := m.g.ReadBarrier(ctx); err != nil {
			t.Fatalf("read barrier on %s: %v", n, err)
		}
		cancel()
		if v, _ := value(m); v != r.Value {
			t.Fatalf("%s after a read barrier holds %d, the leader acknowledged %d", n, v, r.Value)
		}
	}
	c.net.SetDelay(0, 0)
	lv := f.g.LeaderView()
	if lv.Leader != l.g.ID() || lv.LeaderURL != "http://"+l.addr+"/raft" || lv.IsSelf || time.Since(lv.HeardAt) > time.Second {
		t.Fatalf("follower's leader view %+v, leader %s", lv, l.name)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if c.get(n).g.IsIsolated() {
			t.Fatalf("%s isolated in a healthy group", n)
		}
	}

	// Leader tasks: only the leader runs one; after a leader change the old
	// generation has stopped before the new leader's starts on the same node.
	t.Log("leader tasks")
	rec := newTaskRecorder()
	for _, n := range []string{"n1", "n2", "n3"} {
		stop := c.get(n).g.WatchLeader(rec.factory(n))
		defer stop()
	}
	eventually(t, 5*time.Second, "the leader's task to start", func() bool { return rec.running(l.name) == 1 })
	to := f
	l.g.TransferLeadership(context.Background(), to.g.ID())
	eventually(t, 10*time.Second, "leadership to move", func() bool { return to.g.IsLeader() })
	eventually(t, 5*time.Second, "tasks to follow the leader", func() bool {
		return rec.running(l.name) == 0 && rec.running(to.name) == 1
	})
	// And back: the old leader runs generation 2 only after generation 1 ended.
	to.g.TransferLeadership(context.Background(), l.g.ID())
	eventually(t, 10*time.Second, "leadership to return", func() bool { return l.g.IsLeader() && rec.running(l.name) == 1 })
	rec.checkNoOverlap(t)
	t.Log("tasks checked")
	if r := propose(t, c.get("n3"), 1); r.Value != 19 {
		t.Fatalf("after leader changes: %+v", r)
	}
	// Fire-and-forget proposals, from a follower (forwarded) and the leader.
	l = c.leader(10 * time.Second)
	for _, m := range []*member{l, c.get("n1"), c.get("n2"), c.get("n3")} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := m.g.Propose(ctx, counterCmd{Add: 100, Op: "fire-" + m.name})
		cancel()
		if err != nil {
			t.Fatalf("Propose on %s: %v", m.name, err)
		}
	}
	// l is also one of n1..n3, so its second proposal is a duplicate op.
	c.waitValue(319, "n1", "n2", "n3")
}

// taskRecorder logs leader-task starts and stops per node.
type taskRecorder struct {
	mu     sync.Mutex
	events []taskEvent
	live   map[string]int
}

type taskEvent struct {
	node  string
	gen   uint64
	start bool
}

func newTaskRecorder() *taskRecorder { return &taskRecorder{live: map[string]int{}} }

func (r *taskRecorder) factory(node string) LeaderTaskFactory {
	return func(gen uint64) []LeaderTask {
		return []LeaderTask{func(ctx context.Context) {
			r.mu.Lock()
			r.events = append(r.events, taskEvent{node, gen, true})
			r.live[node]++
			r.mu.Unlock()
			<-ctx.Done()
			time.Sleep(20 * time.Millisecond) // a task that takes a moment to wind down
			r.mu.Lock()
			r.events = append(r.events, taskEvent{node, gen, false})
			r.live[node]--
			r.mu.Unlock()
		}}
	}
}

func (r *taskRecorder) running(node string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live[node]
}

// checkNoOverlap asserts that on every node each generation stopped before
// the next one started.
func (r *taskRecorder) checkNoOverlap(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	live := map[string]int{}
	for _, e := range r.events {
		if e.start {
			live[e.node]++
			if live[e.node] > 1 {
				t.Fatalf("node %s started generation %d while another ran: %+v", e.node, e.gen, r.events)
			}
		} else {
			live[e.node]--
		}
	}
}
