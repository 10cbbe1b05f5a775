package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/cluster/faultproxy"
	"github.com/riftgate/riftgate/raftnode"
)

var flowsSecret = []byte("0123456789abcdef-flows-secret")

// tcluster runs members in this process: each the group half's Node (its
// peer listener, Raft group and configuration log, with the runner of
// group_test.go for a reconciler) and a flow runtime on its membership,
// mounted on the Node's peer listener as the start command mounts it,
// reached by the others only through its fault proxy.
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
	name, dir     string
	listen, front string // the real peer listener, and the proxy the others use
	node          *Node
	f             *Flows
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

func (c *tcluster) names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.nodes))
}

func (c *tcluster) get(name string) *tnode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[name]
}

// start boots name, or reboots it on its old address, data and proxy; a
// member that does not bootstrap joins through a running one, and the
// leader promotes it once it has caught up.
func (c *tcluster) start(name string, bootstrap bool) *tnode {
	c.t.Helper()
	n := c.get(name)
	if n == nil {
		n = &tnode{name: name, dir: filepath.Join(c.base, name), listen: freeAddr(c.t)}
		n.front = n.listen
		if !c.direct {
			var err error
			if n.front, err = c.net.Front(name, testHost, n.listen); err != nil {
				c.t.Fatal(err)
			}
		}
	}
	var join []string
	if !bootstrap {
		for _, o := range c.running() {
			join = append(join, "http://"+o.front)
		}
	}
	log := logger(c.t).With("n", name)
	opts := Options{Name: name, Listen: n.listen, Advertise: "http://" + n.front, Bootstrap: bootstrap, Join: join,
		Secret: flowsSecret, DataDir: n.dir, Logger: log, tune: fastRaft}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var node *Node
	var err error
	for range 50 { // a port just closed may linger
		if node, err = Start(ctx, opts); err == nil {
			break
		}
		if errors.Is(err, syscall.EADDRINUSE) && !c.direct {
			// Another socket took the port since it was picked (another
			// test process may pick the same one): the member listens on
			// another, which its proxy, the address the others know,
			// forwards to.
			n.listen = freeAddr(c.t)
			opts.Listen = n.listen
			c.net.Retarget(name, n.listen)
			continue
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	if _, err := node.ConfigLog(&runner{taken: map[int]bool{}}); err != nil {
		c.t.Fatal(err)
	}
	cfg := FlowsConfig{
		Membership: node, Config: node, Secret: flowsSecret, ShardPath: filepath.Join(n.dir, "flow.db"),
		AntiEntropy: 300 * time.Millisecond, Logger: log,
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	f, err := NewFlows(cfg)
	if err != nil {
		_ = node.Close(context.Background())
		c.t.Fatalf("flows %s: %v", name, err)
	}
	node.Handle("/flows/", f.Handler())
	node.SessionHealth(f.LastExchange) // as the start command does
	n.node, n.f = node, f
	c.mu.Lock()
	c.nodes[name] = n
	c.mu.Unlock()
	return n
}

// stop closes name gracefully, keeping its data for a restart.
func (c *tcluster) stop(name string) {
	n := c.get(name)
	if n == nil || n.node == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.f.Close(ctx); err != nil {
		c.t.Errorf("close flows %s: %v", name, err)
	}
	if err := n.node.Close(ctx); err != nil && !errors.Is(err, raftnode.ErrClosed) {
		c.t.Errorf("close node %s: %v", name, err)
	}
	n.node, n.f = nil, nil
}

func (c *tcluster) running() []*tnode {
	var out []*tnode
	for _, name := range c.names() {
		if n := c.get(name); n.node != nil {
			out = append(out, n)
		}
	}
	return out
}

func (c *tcluster) leader() *tnode {
	c.t.Helper()
	var l *tnode
	eventually(c.t, "a leader", func() bool {
		for _, n := range c.running() {
			if n.node.group.IsLeader() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

// grow starts name, which joins, and waits until it is a voter.
func (c *tcluster) grow(name string) {
	c.t.Helper()
	c.start(name, false)
	id := raftnode.NodeIDFromName(name)
	eventually(c.t, name+" to be a voter", func() bool {
		return slices.Contains(c.leader().node.Current().Voters(), id)
	})
}

// remove takes name out of the membership for good.
func (c *tcluster) remove(name string) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.leader().node.group.Remove(ctx, raftnode.NodeIDFromName(name))
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
	eventually(c.t, fmt.Sprintf("%d voters, adopted everywhere", want), func() bool {
		idx = 0
		for _, n := range c.running() {
			v := n.f.currentView()
			if len(v.voters) != want || n.f.adopted.Load() != v.idx || (idx != 0 && v.idx != idx) || n.node.IsIsolated() {
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
		c.grow(n)
	}
	c.settled(3)
	return c
}
