package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/cluster/faultproxy"
	"github.com/riftgate/riftgate/raftnode"
)

var flowsSecret = []byte("0123456789abcdef-flows-secret")

// memApp is the smallest raftnode application: a group whose only state
// is its membership, which is all the flow runtime needs of it.
type memApp struct{}

type memState struct {
	MIdx uint64 `cbor:"1,keyasint"`
}

type memCmd struct {
	N int `cbor:"1,keyasint"`
}

var memCodec = raftnode.SnapshotCodec[memState]{Magic: [4]byte{'T', 'M', 'E', 'M'}, Version: 1}

func (memApp) InitialState() memState                             { return memState{} }
func (memApp) Apply(*memState, memCmd, uint64) int                { return 0 }
func (memApp) ApplyMembership(s *memState, m raftnode.Membership) { s.MIdx = m.Index }
func (memApp) NoopResponse() int                                  { return 0 }
func (memApp) EncodeSnapshot(s *memState) ([]byte, error)         { return memCodec.Encode(s) }
func (memApp) DecodeSnapshot(b []byte) (memState, error)          { return memCodec.Decode(b) }

type memGroup = raftnode.Group[memState, memCmd, int]

// groupMembership is Membership over a raftnode group: what the group half
// of this package provides in production.
type groupMembership struct{ g *memGroup }

func (m groupMembership) Self() uint64                 { return m.g.ID() }
func (m groupMembership) Current() raftnode.Membership { return m.g.Membership() }
func (m groupMembership) IsIsolated() bool             { return m.g.IsIsolated() }

// tcluster runs members in this process: each a raftnode group and a flow
// runtime behind one HTTP listener, reached by the others only through
// its fault proxy.
type tcluster struct {
	t     testing.TB
	net   *faultproxy.Net
	base  string
	tweak func(*FlowsConfig)
	// direct: members reach each other without the fault proxy
	// (benchmarks).
	direct bool

	mu    sync.Mutex
	nodes map[string]*tnode
}

type tnode struct {
	name, dir   string
	addr, front string // the real listener, and the proxy the others use
	srv         *http.Server
	g           *memGroup
	f           *Flows
}

func newTCluster(t testing.TB, tweak func(*FlowsConfig)) *tcluster {
	c := &tcluster{t: t, net: faultproxy.New(1), base: t.TempDir(), tweak: tweak, nodes: map[string]*tnode{}}
	t.Cleanup(func() {
		c.net.Heal()
		for _, n := range c.names() {
			c.stop(n)
		}
		c.net.Close()
	})
	return c
}

func testLogger(t testing.TB, name string) *slog.Logger {
	if os.Getenv("CLUSTER_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("n", name)
	}
	return slog.New(slog.DiscardHandler)
}

func (c *tcluster) names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for n := range c.nodes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (c *tcluster) get(name string) *tnode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[name]
}

// start boots name, or reboots it on its old port, data and proxy.
func (c *tcluster) start(name string, bootstrap bool) *tnode {
	c.t.Helper()
	n := c.get(name)
	addr := "127.0.0.1:0"
	if n != nil {
		addr = n.addr
	} else {
		n = &tnode{name: name, dir: filepath.Join(c.base, name)}
	}
	var ln net.Listener
	var err error
	for range 100 {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("listen %s: %v", addr, err)
	}
	n.addr = ln.Addr().String()
	if c.direct {
		n.front = n.addr
	} else if n.front == "" {
		if n.front, err = c.net.Front(name, "127.0.0.1", n.addr); err != nil {
			c.t.Fatal(err)
		}
	}
	log := testLogger(c.t, name)
	g, err := raftnode.Bootstrap(context.Background(), raftnode.Config{
		NodeName: name, GroupID: "flows-test", DataDir: n.dir, AdvertiseURL: "http://" + n.front + "/raft",
		Secret: flowsSecret, Bootstrap: bootstrap, TickInterval: 20 * time.Millisecond, ElectionTick: 20,
		LeaderTaskGrace: 200 * time.Millisecond, Logger: log,
	}, memApp{}, nil)
	if err != nil {
		ln.Close()
		c.t.Fatalf("bootstrap %s: %v", name, err)
	}
	cfg := FlowsConfig{
		Membership: groupMembership{g}, Secret: flowsSecret, ShardPath: filepath.Join(n.dir, "flow.db"),
		AntiEntropy: 300 * time.Millisecond, Logger: log,
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	f, err := NewFlows(cfg)
	if err != nil {
		ln.Close()
		_ = g.Close(context.Background())
		c.t.Fatalf("flows %s: %v", name, err)
	}
	r := g.Routers()
	mux := http.NewServeMux()
	mux.Handle("/raft/", http.StripPrefix("/raft", r.Raft))
	mux.Handle("/cluster/", http.StripPrefix("/cluster", r.Cluster))
	mux.Handle("/flows/", f.Handler())
	n.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	n.g, n.f = g, f
	go func() { _ = n.srv.Serve(ln) }()
	c.mu.Lock()
	c.nodes[name] = n
	c.mu.Unlock()
	return n
}

// stop closes name gracefully, keeping its data for a restart.
func (c *tcluster) stop(name string) {
	n := c.get(name)
	if n == nil || n.g == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = n.srv.Close()
	if err := n.f.Close(ctx); err != nil {
		c.t.Errorf("close flows %s: %v", name, err)
	}
	if err := n.g.Close(ctx); err != nil && !errors.Is(err, raftnode.ErrClosed) {
		c.t.Errorf("close group %s: %v", name, err)
	}
	n.g, n.f = nil, nil
}

func (c *tcluster) running() []*tnode {
	var out []*tnode
	for _, name := range c.names() {
		if n := c.get(name); n.g != nil {
			out = append(out, n)
		}
	}
	return out
}

func (c *tcluster) leader() *tnode {
	c.t.Helper()
	var l *tnode
	waitFor(c.t, 15*time.Second, "a leader", func() bool {
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

// grow adds name as a learner through the leader and promotes it.
func (c *tcluster) grow(name string) {
	c.t.Helper()
	n := c.get(name)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.leader().g.AddLearner(ctx, name, "http://"+n.front+"/raft")
		cancel()
		if err == nil || strings.Contains(err.Error(), "already") {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("add learner %s: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.leader().g.Promote(ctx, raftnode.NodeIDFromName(name))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("promote %s: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// remove takes name out of the membership for good.
func (c *tcluster) remove(name string) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.leader().g.Remove(ctx, raftnode.NodeIDFromName(name))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("remove %s: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settled waits until every running member sees the same membership with
// want voters and has adopted its flows at it.
func (c *tcluster) settled(want int) uint64 {
	c.t.Helper()
	var idx uint64
	waitFor(c.t, 20*time.Second, fmt.Sprintf("%d voters, adopted everywhere", want), func() bool {
		idx = 0
		for _, n := range c.running() {
			v := n.f.currentView()
			if len(v.voters) != want || n.f.adopted.Load() != v.idx || (idx != 0 && v.idx != idx) || n.g.IsIsolated() {
				return false
			}
			idx = v.idx
		}
		return true
	})
	return idx
}

// threeNodes starts n1 (bootstrap), grows n2 and n3, and waits for all
// three to have adopted.
func threeNodes(t testing.TB, tweak func(*FlowsConfig)) *tcluster {
	return grown(newTCluster(t, tweak))
}

func grown(c *tcluster) *tcluster {
	c.start("n1", true)
	c.leader()
	for _, n := range []string{"n2", "n3"} {
		c.start(n, false)
		c.grow(n)
	}
	c.settled(3)
	return c
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
