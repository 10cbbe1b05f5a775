// Package clustertest runs clusters of real riftgate processes for
// black-box tests. Node i listens on its own loopback address, 127.0.0.i,
// with the same admin and peer ports as the others, and is started with
// the start command's --cluster-* flags, as a user would: n1 bootstraps,
// the others join through n1. Nodes are killed (SIGKILL), stopped and
// restarted with the same flags; every process dies with the test.
//
// With Options.Faults, each node's peer traffic reaches it through a fault
// proxy (faultproxy: TCP, so Raft's requests and the flow runtime's
// sessions alike) that drops, delays and cuts each directed link. A cut
// link there ends in a reset once it heals, and a dropped chunk resets
// its connection: the faults of a proxy that closes connections.
//
// With Options.Netns, each node runs in a network namespace of its own
// (internal/netfault: a veth into a bridge in a hub namespace, on a
// private /24), started under `ip netns exec`, and the faults are a real
// network's: Partition, Isolate and Block drop packets silently by
// policy-routing blackhole rules (no RST, no closed connection: TCP hangs
// and retransmits), Pause and Resume stop and continue a process with
// SIGSTOP and SIGCONT. The test reaches the nodes from the hub, which is
// never cut: through Node.Do and Node.Status, or the clients of Client.
// The namespaces are removed when the test ends, pass or fail.
//
// Everything here is bounded in time: a wait that is not met fails the
// test.
package clustertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/cluster"
	"github.com/riftgate/riftgate/gateway/cluster/faultproxy"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
	"github.com/riftgate/riftgate/internal/netfault"
)

// Link is what one directed link of Faults does (faultproxy.Link).
type Link = faultproxy.Link

// Unknown is the sender of peer traffic that names none.
const Unknown = faultproxy.Unknown

// Options shape a cluster.
type Options struct {
	// Nodes is how many to start (default 3; at most 250).
	Nodes int
	// Args are added to every node's start command (e.g. --allowInjection).
	Args []string
	// Faults puts a fault proxy in front of every node's peer listener.
	Faults bool
	// Hosts are the nodes' loopback addresses, in order (default Host(i)):
	// a package whose tests run while the cluster tests do picks others.
	Hosts []string
	// Names are the nodes' --cluster-node-name, in order (default n1, n2,
	// ...).
	Names []string
	// Binaries are the riftgate binaries of the nodes, in order ("" or
	// none: gatewaytest.Binary's): a cluster of mixed builds, as in a
	// rolling upgrade.
	Binaries []string
	// Netns runs each node in a network namespace of its own (see the
	// package comment); Hosts is then ignored: the nodes' addresses are
	// the namespaces'. It needs root and iproute2: without them the test
	// fails, saying so. Not with Faults.
	Netns bool
}

// Cluster is a running test cluster.
type Cluster struct {
	Nodes []*Node
	// Faults is the fault network between the nodes (nil without
	// Options.Faults).
	Faults *faultproxy.Net
	// Net is the nodes' namespaces (nil without Options.Netns).
	Net *netfault.Net

	t         testing.TB
	opts      Options
	secret    string // the secret file
	adminPort int
	peerPort  int
	proxyPort int

	mu     sync.Mutex
	paused map[*Node]bool // stopped by Pause
}

// Node is one member process.
type Node struct {
	*gatewaytest.Instance
	Name    string // n1, n2, ...
	Host    string // 127.0.0.<i>
	PeerURL string // where the others reach it (its fault proxy with Faults)
	// Args is the node's whole command line after `riftgate start`'s
	// --port, --host, --nologfile and --pidfile.
	Args []string
}

// Timeouts of the waits.
const (
	formTimeout = 60 * time.Second
	waitTimeout = 30 * time.Second
)

// Start runs a cluster and returns once every node is a voter (or, past
// cluster.MaxVoters, a member) and they agree on a leader.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	c := &Cluster{t: t, opts: opts}
	if opts.Netns {
		if opts.Faults {
			t.Fatal("clustertest: Options.Netns and Options.Faults are two ways to make faults: choose one")
		}
		if err := netfault.Available(); err != nil {
			t.Fatalf("clustertest: Options.Netns runs each node in a network namespace, and %v: run the test as root with iproute2 installed (CI does)", err)
		}
		var err error
		if c.Net, err = netfault.New(); err != nil {
			t.Fatalf("clustertest: %v", err)
		}
		// Registered before any node starts, so it runs after every
		// node's own clean-up has killed it.
		t.Cleanup(func() {
			if err := c.Net.Close(); err != nil {
				t.Errorf("clustertest: removing the namespaces: %v", err)
			}
		})
		t.Logf("clustertest: nodes in network namespaces %s-<i>, hub %s (%s)", c.Net.Name(), c.Net.Name(), c.Net.HubIP())
	}
	dir := t.TempDir()
	c.secret = filepath.Join(dir, "secret")
	if err := os.WriteFile(c.secret, []byte("clustertest-secret-"+strconv.FormatInt(time.Now().UnixNano(), 36)), 0o600); err != nil {
		t.Fatal(err)
	}
	c.adminPort, c.peerPort = gatewaytest.FreePort(t), gatewaytest.FreePort(t)
	if opts.Faults {
		c.proxyPort = gatewaytest.FreePort(t)
		c.Faults = faultproxy.New(uint64(time.Now().UnixNano()))
		t.Cleanup(c.Faults.Close)
	}
	for i := range opts.Nodes {
		c.Add()
		if i == 0 {
			c.WaitVoters(1)
		}
	}
	c.WaitVoters(min(opts.Nodes, cluster.MaxVoters))
	return c
}

// Host is node i's loopback address (from 1): 127.0.0.11 for n1, and on,
// addresses no other package's tests use, so that a port a node freed and
// another test took cannot receive the cluster's messages (make cluster
// keeps 127.0.0.1-3).
func Host(i int) string { return "127.0.0." + strconv.Itoa(10+i) }

// host is node i's address (from 1), Options.Hosts' when given.
func (c *Cluster) host(i int) string {
	if i <= len(c.opts.Hosts) {
		return c.opts.Hosts[i-1]
	}
	return Host(i)
}

// Add starts one more node, which joins through n1 (or bootstraps, when it
// is the first), and returns it once its admin API answers.
func (c *Cluster) Add() *Node {
	c.t.Helper()
	i := len(c.Nodes) + 1
	n := &Node{Name: "n" + strconv.Itoa(i), Host: c.host(i)}
	if i <= len(c.opts.Names) {
		n.Name = c.opts.Names[i-1]
	}
	var launch gatewaytest.Launch
	if c.Net != nil {
		var err error
		if n.Host, err = c.Net.Add(n.Name); err != nil {
			c.t.Fatalf("clustertest: %v", err)
		}
		if launch.Wrap, err = c.Net.Wrap(n.Name); err != nil {
			c.t.Fatalf("clustertest: %v", err)
		}
		launch.Dial = c.Net.DialContext
	}
	listen := net.JoinHostPort(n.Host, strconv.Itoa(c.peerPort))
	n.PeerURL = "http://" + listen
	if c.Faults != nil {
		proxy := net.JoinHostPort(n.Host, strconv.Itoa(c.proxyPort))
		if _, err := c.Faults.FrontAt(n.Name, proxy, listen); err != nil {
			c.t.Fatalf("clustertest: fault proxy for %s: %v", n.Name, err)
		}
		n.PeerURL = "http://" + proxy
	}
	dataDir := filepath.Join(c.t.TempDir(), "data") // a name may hold any character
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	// The command line; --cluster-advertise only when a fault
	// proxy stands in front of the listener.
	n.Args = []string{"--datadir", dataDir,
		"--cluster-node-name", n.Name, "--cluster-listen", listen, "--cluster-secret-file", c.secret}
	if c.Faults != nil {
		n.Args = append(n.Args, "--cluster-advertise", n.PeerURL)
	}
	if i == 1 {
		n.Args = append(n.Args, "--cluster-bootstrap")
	} else {
		n.Args = append(n.Args, "--cluster-join", c.Nodes[0].PeerURL)
	}
	n.Args = append(n.Args, c.opts.Args...)
	launch.Host, launch.Port = n.Host, c.adminPort
	if i <= len(c.opts.Binaries) {
		launch.Binary = c.opts.Binaries[i-1]
	}
	n.Instance = gatewaytest.StartWith(c.t, launch, n.Args...)
	c.Nodes = append(c.Nodes, n)
	return n
}

// Node returns the node named name.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	c.t.Fatalf("clustertest: no node %q", name)
	return nil
}

// pick returns the nodes named, or every node when none is.
func (c *Cluster) pick(names []string) []*Node {
	if len(names) == 0 {
		return c.Nodes
	}
	nodes := make([]*Node, 0, len(names))
	for _, name := range names {
		nodes = append(nodes, c.Node(name))
	}
	return nodes
}

// Status is GET /cluster of n, or an error when it does not answer.
func (n *Node) Status() (cluster.Status, error) {
	var st cluster.Status
	hc := n.Client()
	hc.Timeout = 5 * time.Second
	resp, err := hc.Get(n.URL + "/cluster")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /cluster: %d", resp.StatusCode)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// Eventually polls cond until it holds, and fails the test after timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("clustertest: timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitVoters waits until every node of names (every node when none is
// given) answers GET /cluster with voters voters and the same leader.
func (c *Cluster) WaitVoters(voters int, names ...string) {
	c.t.Helper()
	nodes := c.pick(names)
	var last []string
	defer func() {
		if c.t.Failed() && len(last) > 0 {
			c.t.Logf("clustertest: last seen waiting for %d voters: %s", voters, strings.Join(last, "; "))
		}
	}()
	Eventually(c.t, formTimeout, fmt.Sprintf("%d voters and one leader on %d nodes", voters, len(nodes)), func() bool {
		last = last[:0]
		leader := ""
		for _, n := range nodes {
			st, err := n.Status()
			if err != nil || st.Leader == nil {
				last = append(last, fmt.Sprintf("%s: %v", n.Name, err))
				return false
			}
			got := 0
			for _, m := range st.Members {
				if m.Role == "voter" {
					got++
				}
			}
			if got != voters || (leader != "" && *st.Leader != leader) {
				last = append(last, fmt.Sprintf("%s: %d voters, leader %s", n.Name, got, *st.Leader))
				return false
			}
			// Flows answer once the node adopted them at this membership:
			// a test's first flow request must not meet "not yet adopted".
			if a := n.adoptedIndex(); a < st.MembershipIndex {
				last = append(last, fmt.Sprintf("%s: flows adopted at %d, membership at %d", n.Name, a, st.MembershipIndex))
				return false
			}
			leader = *st.Leader
		}
		return true
	})
}

// adoptedIndex is the membership index n's flows are adopted at (its
// riftgate_cluster_adopted_membership_index metric), 0 when unknown.
func (n *Node) adoptedIndex() uint64 {
	hc := n.Client()
	hc.Timeout = 5 * time.Second
	resp, err := hc.Get(n.URL + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0
	}
	const name = "riftgate_cluster_adopted_membership_index "
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			idx, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return idx
		}
	}
	return 0
}

// Leader returns the node that the given nodes (every node when none is
// given) agree leads, waiting for them to agree.
func (c *Cluster) Leader(names ...string) *Node {
	c.t.Helper()
	nodes := c.pick(names)
	var leader string
	Eventually(c.t, waitTimeout, "a leader the nodes agree on", func() bool {
		leader = ""
		for _, n := range nodes {
			st, err := n.Status()
			if err != nil || st.Leader == nil || (leader != "" && leader != *st.Leader) {
				return false
			}
			leader = *st.Leader
		}
		return true
	})
	return c.Node(leader)
}

// Client returns an HTTP client that reaches every node and its imposters
// (from the hub with Options.Netns), keeping up to conns idle connections
// per node, with the given time-out per request.
func (c *Cluster) Client(timeout time.Duration, conns int) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxIdleConns: 0, IdleConnTimeout: 30 * time.Second}
	if c.Net != nil {
		tr.DialContext = c.Net.DialContext
	}
	c.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Timeout: timeout, Transport: tr}
}

// netns fails the test unless the cluster runs with Options.Netns.
func (c *Cluster) netns(what string) *netfault.Net {
	c.t.Helper()
	if c.Net == nil {
		c.t.Fatalf("clustertest: %s needs Options.Netns", what)
	}
	return c.Net
}

// Partition cuts node from each of peers, both ways, silently: their
// packets to each other are dropped.
func (c *Cluster) Partition(node string, peers ...string) {
	c.t.Helper()
	if err := c.netns("Partition").Partition(node, peers...); err != nil {
		c.t.Fatalf("clustertest: %v", err)
	}
}

// Isolate cuts node from every other node, both ways. The test still
// reaches it.
func (c *Cluster) Isolate(node string) {
	c.t.Helper()
	if err := c.netns("Isolate").Isolate(node); err != nil {
		c.t.Fatalf("clustertest: %v", err)
	}
}

// Block makes to drop every packet from from, silently, and nothing
// else: one direction of a partition (from still receives what to sends;
// a connection either opens needs both directions, so both time out).
func (c *Cluster) Block(from, to string) {
	c.t.Helper()
	if err := c.netns("Block").Block(from, to); err != nil {
		c.t.Fatalf("clustertest: %v", err)
	}
}

// Heal lifts every partition.
func (c *Cluster) Heal() {
	c.t.Helper()
	if err := c.netns("Heal").Heal(); err != nil {
		c.t.Fatalf("clustertest: %v", err)
	}
}

// Pause stops node's process (SIGSTOP): it holds its connections and
// answers nothing, as a node stalled by its machine does.
func (c *Cluster) Pause(node string) {
	c.t.Helper()
	n := c.Node(node)
	if err := n.Signal(syscall.SIGSTOP); err != nil {
		c.t.Fatalf("clustertest: SIGSTOP %s: %v", node, err)
	}
	c.mu.Lock()
	was := c.paused[n]
	if c.paused == nil {
		c.paused = map[*Node]bool{}
	}
	c.paused[n] = true
	c.mu.Unlock()
	if !was {
		// Before the node's own clean-up kills it, let it go on, so
		// that nothing waits on a stopped process.
		c.t.Cleanup(func() { c.resume(n) })
	}
}

// Resume continues a node stopped by Pause (SIGCONT).
func (c *Cluster) Resume(node string) {
	c.t.Helper()
	if err := c.resume(c.Node(node)); err != nil {
		c.t.Fatalf("clustertest: SIGCONT %s: %v", node, err)
	}
}

func (c *Cluster) resume(n *Node) error {
	c.mu.Lock()
	was := c.paused[n]
	delete(c.paused, n)
	c.mu.Unlock()
	if !was {
		return nil
	}
	return n.Signal(syscall.SIGCONT)
}
