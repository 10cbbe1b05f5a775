package kvapp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/riftgate/riftgate/raftnode"
	"github.com/riftgate/riftgate/raftnode/kv"
	"github.com/riftgate/riftgate/raftnode/kv/internal/linkv"
	"github.com/riftgate/riftgate/raftnode/kv/kvapp"
)

type group = raftnode.Group[kvapp.State, kvapp.Command, kvapp.Response]

// observer records every Evict each node applies and every snapshot it
// installs (effects, published after the state lock drops).
type observer struct {
	c    *cluster
	node string
}

type evictSeen struct {
	node   string
	tenant kvapp.Tenant
	cutoff uint64
	resp   kv.Response
}

func (o observer) OnApply(fx *raftnode.Effects, _ *kvapp.State, c kvapp.Command, r kvapp.Response, _ uint64) {
	ev, ok := c.Kv.(kv.Evict)
	if !ok {
		return
	}
	seen := evictSeen{node: o.node, tenant: c.Tenant, cutoff: ev.CutoffMs, resp: r.Kv}
	fx.Defer(func() {
		o.c.mu.Lock()
		o.c.evicts = append(o.c.evicts, seen)
		o.c.mu.Unlock()
	})
}

func (observer) OnMembership(*raftnode.Effects, *kvapp.State, raftnode.Membership) {}

func (o observer) OnRestore(fx *raftnode.Effects, _ *kvapp.State, index uint64) {
	fx.Defer(func() {
		o.c.mu.Lock()
		o.c.restores[o.node] = append(o.c.restores[o.node], index)
		o.c.mu.Unlock()
	})
}

var secret = []byte("kv-lease-group-test-secret")

type node struct {
	name string
	dir  string
	addr string
	g    *group // nil while stopped
	srv  *http.Server
}

type cluster struct {
	t        *testing.T
	nodes    []*node
	mu       sync.Mutex
	evicts   []evictSeen
	restores map[string][]uint64 // snapshot installs per node, by index
}

// startCluster boots n1 as a single voter, then admits n2 and n3 as
// learners and promotes them: three real members over HTTP on 127.0.0.1.
// Members snapshot every 100 entries and keep 20 behind, so a member that
// falls further behind catches up through a snapshot.
func startCluster(t *testing.T) *cluster {
	c := &cluster{t: t, restores: map[string][]uint64{}}
	dir := t.TempDir()
	for i, name := range []string{"n1", "n2", "n3"} {
		n := &node{name: name, dir: filepath.Join(dir, name), addr: "127.0.0.1:0"}
		c.nodes = append(c.nodes, n)
		c.boot(n, i == 0)
		t.Cleanup(func() { c.stop(n) })
		if i == 0 {
			eventually(t, 10*time.Second, "n1 to lead", n.g.IsLeader)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		if _, err := c.nodes[0].g.AddLearner(ctx, name, "http://"+n.addr+"/raft"); err != nil {
			t.Fatalf("add %s: %v", name, err)
		}
		cancel()
		c.promote(n)
	}
	for _, n := range c.nodes {
		eventually(t, 10*time.Second, n.name+" to see three voters", func() bool { return len(n.g.Membership().Voters()) == 3 })
	}
	return c
}

// promote makes learner n a voter. Each attempt is short: etcd raft drops
// a conf change proposed before it has seen the previous one applied, and
// the dropped proposal's waiter then only ends at its deadline.
func (c *cluster) promote(n *node) {
	c.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.nodes[0].g.Promote(ctx, n.g.ID())
		cancel()
		if err == nil || slices.Contains(c.nodes[0].g.Membership().Voters(), n.g.ID()) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("promote %s: %v", n.name, err)
		}
		time.Sleep(50 * time.Millisecond) // still catching up
	}
}

// boot starts (or restarts, on its old address and data) member n.
func (c *cluster) boot(n *node, bootstrap bool) {
	c.t.Helper()
	var ln net.Listener
	var err error
	for range 100 { // a just-closed port may linger briefly
		if ln, err = net.Listen("tcp", n.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("listen %s: %v", n.addr, err)
	}
	n.addr = ln.Addr().String()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("KVAPP_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	g, err := raftnode.Bootstrap(context.Background(), raftnode.Config{
		NodeName: n.name, GroupID: "kv-lease", DataDir: n.dir, AdvertiseURL: "http://" + n.addr + "/raft",
		Secret: secret, Bootstrap: bootstrap, TickInterval: 20 * time.Millisecond, ElectionTick: 15,
		MaxCommandBytes: kvapp.MaxCommandBytes(), LeaderTaskGrace: time.Second, Logger: log,
		SnapshotEntries: 100, CatchUpEntries: 20,
	}, kvapp.App{}, observer{c: c, node: n.name})
	if err != nil {
		ln.Close()
		c.t.Fatalf("bootstrap %s: %v", n.name, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/raft/", http.StripPrefix("/raft", g.Routers().Raft))
	n.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	n.g = g
	go func() { _ = n.srv.Serve(ln) }()
}

// stop closes member n, keeping its data directory.
func (c *cluster) stop(n *node) {
	if n.g == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = n.srv.Close()
	if err := n.g.Close(ctx); err != nil {
		c.t.Errorf("close %s: %v", n.name, err)
	}
	n.g = nil
}

// running lists the members that are up.
func (c *cluster) running() []*node {
	var out []*node
	for _, n := range c.nodes {
		if n.g != nil {
			out = append(out, n)
		}
	}
	return out
}

func (c *cluster) leader() *node {
	var l *node
	eventually(c.t, 10*time.Second, "a leader", func() bool {
		for _, n := range c.running() {
			if n.g.IsLeader() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

func (c *cluster) follower() *node {
	l := c.leader()
	for _, n := range c.running() {
		if n != l {
			return n
		}
	}
	panic("no follower")
}

// sameSnapshotEverywhere checks that the three replicas, having applied
// the same log, encode byte-identical snapshots.
func (c *cluster) sameSnapshotEverywhere() {
	c.t.Helper()
	eventually(c.t, 20*time.Second, "identical snapshots at one applied index", func() bool {
		var first []byte
		var at uint64
		for i, n := range c.nodes {
			var snap []byte
			var applied uint64
			var err error
			n.g.State().Read(func(s *kvapp.State, a uint64) { snap, err = kvapp.EncodeSnapshot(s); applied = a })
			if err != nil {
				c.t.Fatal(err)
			}
			if i == 0 {
				first, at = snap, applied
				continue
			}
			if applied != at {
				return false // still catching up: try again
			}
			if !bytes.Equal(snap, first) {
				c.t.Fatalf("%s's snapshot at %d differs from %s's", n.name, at, c.nodes[0].name)
			}
		}
		return true
	})
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// propose sends one lease-tenant command through n (a follower forwards to
// the leader) and returns the kv response.
func propose(t *testing.T, n *node, tn kvapp.Tenant, cmd kv.Command) kv.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := n.g.ProposeAndWait(ctx, kvapp.Command{Tenant: tn, Kv: cmd})
	if err != nil {
		t.Fatalf("propose %#v through %s: %v", cmd, n.name, err)
	}
	if r.Kind != kvapp.RespKv {
		t.Fatalf("response kind %d", r.Kind)
	}
	return r.Kv
}

// readAll reads key on every node from its own replicated copy, once each
// has applied index.
func (c *cluster) readAll(index uint64, tn kvapp.Tenant, key string, now uint64) []*kv.Record {
	var out []*kv.Record
	for _, n := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := n.g.WaitApplied(ctx, index); err != nil {
			c.t.Fatalf("%s waiting for %d: %v", n.name, index, err)
		}
		cancel()
		n.g.State().Read(func(s *kvapp.State, _ uint64) {
			if r, ok := s.Get(tn, key, now); ok {
				out = append(out, &r)
			} else {
				out = append(out, nil)
			}
		})
	}
	return out
}

// TestKvLeaseGroupWorkedExample: three nodes whose state machine embeds
// tenanted kv fragments. A lease is acquired, renewed, lapses and is taken
// over, all through proposals; every node answers reads from its own
// replicated copy; and the sweep, spawned from the leader-task watcher,
// drains an expired backlog through the log.
func TestKvLeaseGroupWorkedExample(t *testing.T) {
	c := startCluster(t)
	const lease = kvapp.TenantLease
	f := c.follower()

	// Acquire through a follower (forwarded to the leader).
	w, ok := propose(t, f, lease, kv.Put{Key: "scheduler", Value: []byte("holder-A"), Expect: kv.Absent(), TTLMs: 1000, NowMs: 10_000}).(kv.Written)
	if !ok {
		t.Fatal("acquire failed")
	}
	for i, r := range c.readAll(w.Version, lease, "scheduler", 10_500) {
		if r == nil || string(r.Value) != "holder-A" || r.Version != w.Version {
			t.Fatalf("%s reads %+v, want holder-A at %d", c.nodes[i].name, r, w.Version)
		}
	}

	// Renew: a new version (the fence moves), the expiry extends.
	renew := propose(t, c.leader(), lease, kv.Put{Key: "scheduler", Value: []byte("holder-A"), Expect: kv.Version(w.Version), TTLMs: 1000, NowMs: 10_800})
	rw, ok := renew.(kv.Written)
	if !ok || rw.Version <= w.Version {
		t.Fatalf("renewal answered %#v", renew)
	}

	// A rival is refused while the lease is live, and told who holds it.
	rival := propose(t, f, lease, kv.Put{Key: "scheduler", Value: []byte("holder-B"), Expect: kv.Absent(), TTLMs: 1000, NowMs: 11_000})
	if cf, ok := rival.(kv.Conflict); !ok || string(cf.Current.Value) != "holder-A" || cf.Current.Version != rw.Version {
		t.Fatalf("rival answered %#v", rival)
	}

	// Lapse: at 11_800 the lease expired (expires_at <= now). Every node
	// sees it as absent, B takes over with a larger fencing token, and A's
	// late renewal conflicts with B's record.
	for i, r := range c.readAll(rw.Version, lease, "scheduler", 11_800) {
		if r != nil {
			t.Fatalf("%s still sees the lapsed lease %+v", c.nodes[i].name, r)
		}
	}
	take, ok := propose(t, f, lease, kv.Put{Key: "scheduler", Value: []byte("holder-B"), Expect: kv.Absent(), TTLMs: 1000, NowMs: 11_800}).(kv.Written)
	if !ok || take.Version <= rw.Version {
		t.Fatal("takeover failed")
	}
	late := propose(t, f, lease, kv.Put{Key: "scheduler", Value: []byte("holder-A"), Expect: kv.Version(rw.Version), TTLMs: 1000, NowMs: 11_900})
	if cf, ok := late.(kv.Conflict); !ok || string(cf.Current.Value) != "holder-B" || cf.Current.Version != take.Version {
		t.Fatalf("late renewal answered %#v", late)
	}
	for i, r := range c.readAll(take.Version, lease, "scheduler", 12_000) {
		if r == nil || string(r.Value) != "holder-B" {
			t.Fatalf("%s reads %+v after takeover", c.nodes[i].name, r)
		}
	}

	// A backlog in the config tenant (100 evictions per command): 450
	// records expiring at 20_010, proposed concurrently through the running
	// nodes while one follower is down. The others snapshot and compact
	// their logs past it, so it must catch up through a snapshot install.
	down := c.follower()
	stoppedAt := down.g.Applied()
	c.stop(down)
	live := c.running()
	const backlog, tn = 450, kvapp.TenantConfig
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			n := live[w%len(live)]
			for i := w; i < backlog; i += 8 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				r, err := n.g.ProposeAndWait(ctx, kvapp.Command{Tenant: tn, Kv: kv.Put{
					Key: fmt.Sprintf("job/%04d", i), Value: []byte("x"), Expect: kv.Absent(), TTLMs: 10, NowMs: 20_000}})
				cancel()
				if _, ok := r.Kv.(kv.Written); err != nil || !ok {
					t.Errorf("backlog put %d through %s: %#v %v", i, n.name, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	last := c.leader().g.Applied()
	c.boot(down, false)
	for _, n := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := n.g.WaitApplied(ctx, last); err != nil {
			t.Fatalf("%s catching up to %d: %v", n.name, last, err)
		}
		cancel()
		var got int
		n.g.State().Read(func(s *kvapp.State, _ uint64) { got = s.Len(tn) })
		if got != backlog {
			t.Fatalf("%s holds %d backlog records, want %d", n.name, got, backlog)
		}
	}
	c.mu.Lock()
	installed := slices.ContainsFunc(c.restores[down.name], func(i uint64) bool { return i > stoppedAt })
	c.mu.Unlock()
	if !installed {
		t.Fatalf("%s caught up without a snapshot install (restores %v)", down.name, c.restores[down.name])
	}

	// The sweep runs only on the leader, from the watcher's factory. With
	// the clock before the expiry it proposes nothing at all.
	var clock atomic.Uint64
	clock.Store(12_000) // before the lease (12_800) and the backlog (20_010) expire
	for _, n := range c.nodes {
		stop := n.g.WatchLeader(func(uint64) []raftnode.LeaderTask {
			var tasks []raftnode.LeaderTask
			for _, run := range kvapp.Sweepers(n.g, n.g.State(), kv.SweeperConfig{Interval: 20 * time.Millisecond, NowMs: clock.Load}) {
				tasks = append(tasks, func(ctx context.Context) { _ = run(ctx) })
			}
			return tasks
		})
		defer stop()
	}
	applied := c.leader().g.Applied()
	time.Sleep(300 * time.Millisecond) // about 15 sweep intervals
	if got := c.leader().g.Applied(); got != applied {
		t.Fatalf("an idle sweep wrote: applied %d -> %d", applied, got)
	}

	// Past the expiry (and past the lease's, which goes too) the backlog
	// drains through the log, on every node.
	clock.Store(30_000)
	for _, n := range c.nodes {
		eventually(t, 20*time.Second, n.name+" to drain the backlog", func() bool {
			var left int
			n.g.State().Read(func(s *kvapp.State, _ uint64) { left = s.Len(tn) + s.Len(lease) })
			return left == 0
		})
	}
	c.sameSnapshotEverywhere()
	c.mu.Lock()
	defer c.mu.Unlock()
	var cutoffs []uint64
	rounds := 0
	for _, e := range c.evicts {
		if e.node == "n1" && e.tenant == tn {
			rounds++
			cutoffs = append(cutoffs, e.cutoff)
			if ev, ok := e.resp.(kv.Evicted); !ok || ev.Count > 100 {
				t.Fatalf("evict answered %#v", e.resp)
			}
		}
	}
	// 450 records at 100 per command: at least five rounds, re-proposed at
	// once with one cutoff (a second sweep may start only after the drain).
	if rounds < 5 || cutoffs[0] != 30_000 || slices.ContainsFunc(cutoffs[:5], func(x uint64) bool { return x != cutoffs[0] }) {
		t.Fatalf("%d rounds with cutoffs %v", rounds, cutoffs)
	}
}

// TestLeaseHistoriesThroughARealGroupAreLinearizable runs concurrent lease
// and CAS clients against a three-node group, each client proposing through
// its own node, and checks the history with porcupine, partitioned by key.
func TestLeaseHistoriesThroughARealGroupAreLinearizable(t *testing.T) {
	c := startCluster(t)
	// Bounded: clients stop issuing operations after a minute, and each
	// operation gives up (recorded as unknown) after five seconds.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Leadership moves twice while the clients run, so some proposals are
	// in flight across a leader change.
	rr := &roundRobin{c: c, errs: map[string]int{}}
	var transfers atomic.Int32
	moved := make(chan struct{})
	go func() {
		defer close(moved)
		for range 2 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(1500 * time.Millisecond):
			}
			for i, n := range c.nodes {
				if n.g.IsLeader() {
					to := c.nodes[(i+1)%len(c.nodes)]
					n.g.TransferLeadership(ctx, to.g.ID())
					transfers.Add(1)
					break
				}
			}
		}
	}()
	h := linkv.Run(ctx, rr, linkv.Config{
		Clients: 6, OpsPerClient: 80, Keys: []string{"lease/x", "lease/y"}, Seed: 42, OpTimeout: 5 * time.Second,
	})
	<-moved
	if transfers.Load() == 0 {
		t.Fatal("leadership never moved during the run")
	}
	unknown := 0
	for _, op := range h {
		if op.Output.(linkv.Output).Unknown {
			unknown++
		}
	}
	if res := porcupine.CheckOperationsTimeout(linkv.Model(), h, 60*time.Second); res != porcupine.Ok {
		t.Fatalf("history of %d operations (%d unknown: %v) is %v", len(h), unknown, rr.errs, res)
	}
	t.Logf("%d operations, %d with unknown outcome %v, linearizable", len(h), unknown, rr.errs)
}

// roundRobin proposes each command through the next node in turn, so every
// node forwards some and the leader serves some directly.
type roundRobin struct {
	c    *cluster
	n    atomic.Uint64
	mu   sync.Mutex
	errs map[string]int // unknown outcomes by error
}

func (r *roundRobin) Propose(ctx context.Context, cmd kv.Command) (kv.Response, error) {
	n := r.c.nodes[int(r.n.Add(1))%len(r.c.nodes)]
	var resp kvapp.Response
	var err error
	for {
		resp, err = n.g.ProposeAndWait(ctx, kvapp.Command{Tenant: kvapp.TenantLease, Kv: cmd})
		// These two mean the command reached no log: retrying within the
		// same operation keeps the history exact. Anything else is unknown.
		if !errors.Is(err, raftnode.ErrNoLeader) && !errors.Is(err, raftnode.ErrNotLeader) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err != nil {
		r.mu.Lock()
		r.errs[err.Error()]++
		r.mu.Unlock()
		return nil, err
	}
	if resp.Kind != kvapp.RespKv {
		return nil, errors.New("not a kv response")
	}
	return resp.Kv, nil
}
