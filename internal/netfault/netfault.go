// Package netfault makes real network faults between processes on one
// Linux machine, for tests and benchmarks: each process runs in its own
// network namespace, with a veth into a bridge held by a hub namespace, on
// a private /24 that exists only inside these namespaces. A partition is a
// policy-routing blackhole rule in the receiving namespace (this kernel
// has no netem and no iptables; FACTS.md, "Real partitions here"): the
// peer's packets are dropped silently, with no RST and no closed
// connection, so TCP hangs and retransmits as it does on a real network.
//
// The caller reaches the processes from the hub (Net.DialContext: its
// sockets are made in the hub namespace), which no rule ever cuts.
//
// Every namespace's name starts with "rgt<pid>-", the pid of the process
// that made it: New removes the namespaces, and kills the processes left
// in them, of any such process that no longer runs (a run that crashed
// before its clean-up). It needs root and iproute2's `ip`; Available says
// why not.
//
// Nothing here imports riftgate: the cluster's test harness
// (gateway/cluster/clustertest) and the bench (loadtest) share it.
package netfault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// prefix starts the name of every namespace this package makes.
const prefix = "rgt"

// Available reports why network namespaces cannot be made here, or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root (this process runs as uid " + strconv.Itoa(os.Geteuid()) + ")")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("iproute2's ip is not installed: %w", err)
	}
	if _, err := os.Stat("/proc/thread-self/ns/net"); err != nil {
		return fmt.Errorf("no network namespaces in this kernel: %w", err)
	}
	return nil
}

// Net is one hub namespace with its bridge, and the nodes attached to it.
type Net struct {
	name   string // the hub namespace; a node's is name-<i>
	subnet string // "10.a.b."
	hubFD  int    // the hub namespace, open for Setns

	mu     sync.Mutex
	nodes  []*node
	rules  map[[2]int]bool // (from, to) node indexes whose packets to's namespace drops
	closed bool
}

type node struct {
	name string // the caller's name for it
	ns   string
	ip   string
	// ruled: the local table's rule has been moved after pref 100, so
	// that a blackhole rule applies to packets addressed to this node.
	ruled bool
}

var made atomic.Int64

// New makes a hub namespace holding a bridge, on a subnet of its own.
// It first removes what crashed runs left (see the package comment).
func New() (*Net, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	CleanStale()
	k := made.Add(1)
	pid := os.Getpid()
	n := &Net{
		name: prefix + strconv.Itoa(pid) + "-" + strconv.FormatInt(k, 10),
		// The addresses exist only inside this Net's namespaces, so no
		// two Nets can collide; distinct subnets keep logs readable.
		subnet: fmt.Sprintf("10.%d.%d.", 64+pid%128, k%256),
		hubFD:  -1,
		rules:  map[[2]int]bool{},
	}
	if err := n.setupHub(); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Net) setupHub() error {
	if err := ip("netns", "add", n.name); err != nil {
		return err
	}
	fd, err := OpenNS(n.name)
	if err != nil {
		return err
	}
	n.hubFD = fd
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "br0", "type", "bridge"},
		{"addr", "add", n.HubIP() + "/24", "dev", "br0"},
		{"link", "set", "br0", "up"},
	} {
		if err := ip(append([]string{"-n", n.name}, args...)...); err != nil {
			return err
		}
	}
	return nil
}

// Name is the hub namespace's name; each node's is Name()-<index>.
func (n *Net) Name() string { return n.name }

// HubIP is the hub's address on the bridge.
func (n *Net) HubIP() string { return n.subnet + "1" }

// Add makes a namespace for a node named name, with a veth into the
// bridge, and returns its address (10.a.b.<10+i> for the i-th node, from
// 1). Names are the caller's: each must be new.
func (n *Net) Add(name string) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return "", errors.New("netfault: closed")
	}
	for _, d := range n.nodes {
		if d.name == name {
			return "", fmt.Errorf("netfault: node %q exists", name)
		}
	}
	i := len(n.nodes) + 1
	if i > 240 {
		return "", errors.New("netfault: at most 240 nodes")
	}
	d := &node{name: name, ns: n.name + "-" + strconv.Itoa(i), ip: n.subnet + strconv.Itoa(10+i)}
	if err := ip("netns", "add", d.ns); err != nil {
		return "", err
	}
	n.nodes = append(n.nodes, d) // removed by Close from here on
	veth := "v" + strconv.Itoa(i)
	for _, args := range [][]string{
		{"link", "add", "name", veth, "netns", n.name, "type", "veth", "peer", "name", "eth0", "netns", d.ns},
		{"-n", n.name, "link", "set", veth, "master", "br0"},
		{"-n", n.name, "link", "set", veth, "up"},
		{"-n", d.ns, "link", "set", "lo", "up"},
		{"-n", d.ns, "addr", "add", d.ip + "/24", "dev", "eth0"},
		{"-n", d.ns, "link", "set", "eth0", "up"},
	} {
		if err := ip(args...); err != nil {
			return "", err
		}
	}
	if err := n.waitLink(d); err != nil {
		return "", err
	}
	return d.ip, nil
}

// waitLink waits (bounded) until d reaches the hub through the bridge: a
// connection to a port where nothing listens is refused (an RST came
// back), rather than lost while the new port and its neighbours settle.
func (n *Net) waitLink(d *node) error {
	fd, err := OpenNS(d.ns)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var last error
		err := InNamespace(fd, func() error {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(n.HubIP(), "9"), 200*time.Millisecond)
			if err == nil {
				c.Close()
			}
			last = err
			return nil
		})
		switch {
		case err != nil:
			return err
		case last == nil || errors.Is(last, syscall.ECONNREFUSED):
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("netfault: %s does not reach the hub: %w", d.name, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// NS is the namespace of the node named name.
func (n *Net) NS(name string) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	i, err := n.index(name)
	if err != nil {
		return "", err
	}
	return n.nodes[i].ns, nil
}

// Wrap is the command that runs a program in the node's namespace:
// `ip netns exec <ns>`, which execs the program (the process a caller
// signals is the program itself).
func (n *Net) Wrap(name string) ([]string, error) {
	ns, err := n.NS(name)
	if err != nil {
		return nil, err
	}
	return []string{"ip", "netns", "exec", ns}, nil
}

func (n *Net) index(name string) (int, error) {
	for i, d := range n.nodes {
		if d.name == name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("netfault: no node %q", name)
}

// Block makes to's namespace drop every packet from from, silently;
// from still receives what to sends (one direction of a partition).
func (n *Net) Block(from, to string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.block(from, to)
}

func (n *Net) block(from, to string) error {
	f, err := n.index(from)
	if err != nil {
		return err
	}
	t, err := n.index(to)
	if err != nil {
		return err
	}
	if n.rules[[2]int{f, t}] {
		return nil
	}
	d := n.nodes[t]
	if !d.ruled {
		// The local table's rule (pref 0) would deliver the packet before
		// any rule of ours: move it after them, once.
		if err := ip("-n", d.ns, "rule", "add", "pref", "32000", "lookup", "local"); err != nil {
			return err
		}
		if err := ip("-n", d.ns, "rule", "del", "pref", "0"); err != nil {
			return err
		}
		d.ruled = true
	}
	if err := ip("-n", d.ns, "rule", "add", "from", n.nodes[f].ip, "pref", "100", "blackhole"); err != nil {
		return err
	}
	n.rules[[2]int{f, t}] = true
	return nil
}

// Unblock lets to's namespace receive from's packets again.
func (n *Net) Unblock(from, to string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	f, err := n.index(from)
	if err != nil {
		return err
	}
	t, err := n.index(to)
	if err != nil {
		return err
	}
	return n.unblock(f, t)
}

func (n *Net) unblock(f, t int) error {
	if !n.rules[[2]int{f, t}] {
		return nil
	}
	if err := ip("-n", n.nodes[t].ns, "rule", "del", "from", n.nodes[f].ip, "pref", "100", "blackhole"); err != nil {
		return err
	}
	delete(n.rules, [2]int{f, t})
	return nil
}

// Partition cuts name from each of peers, both ways, as a real partition
// does.
func (n *Net) Partition(name string, peers ...string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range peers {
		if p == name {
			continue
		}
		if err := n.block(name, p); err != nil {
			return err
		}
		if err := n.block(p, name); err != nil {
			return err
		}
	}
	return nil
}

// Isolate cuts name from every other node, both ways. The hub still
// reaches it.
func (n *Net) Isolate(name string) error {
	n.mu.Lock()
	var peers []string
	for _, d := range n.nodes {
		peers = append(peers, d.name)
	}
	n.mu.Unlock()
	return n.Partition(name, peers...)
}

// Heal removes every rule: every node reaches every other again.
func (n *Net) Heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for k := range n.rules {
		errs = append(errs, n.unblock(k[0], k[1]))
	}
	return errors.Join(errs...)
}

// Cut reports the directed links (from, to) that drop packets now.
func (n *Net) Cut() [][2]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out [][2]string
	for k := range n.rules {
		out = append(out, [2]string{n.nodes[k[0]].name, n.nodes[k[1]].name})
	}
	slices.SortFunc(out, func(a, b [2]string) int {
		return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1])
	})
	return out
}

// Close kills every process still in the namespaces and removes them
// (the veths and the bridge go with them). It is safe to call twice.
func (n *Net) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	var errs []error
	names := []string{}
	for _, d := range n.nodes {
		names = append(names, d.ns)
	}
	names = append(names, n.name)
	for _, ns := range names {
		errs = append(errs, removeNS(ns))
	}
	if n.hubFD >= 0 {
		_ = unix.Close(n.hubFD)
		n.hubFD = -1
	}
	return errors.Join(errs...)
}

// removeNS kills what runs in ns and deletes it.
func removeNS(ns string) error {
	killIn(ns)
	if _, err := os.Stat("/run/netns/" + ns); err != nil {
		return nil // never made, or gone
	}
	return ip("netns", "del", ns)
}

// killIn kills every process in namespace ns, and waits (bounded) for
// them to go, so that the namespace dies with its deletion.
func killIn(ns string) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		out, err := exec.Command("ip", "netns", "pids", ns).Output()
		if err != nil {
			return
		}
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CleanStale removes the namespaces of processes that no longer run,
// killing what was left in them: the remains of a run that crashed.
func CleanStale() {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		digits, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(digits)
		if !ok || err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue // its maker still runs
		}
		_ = removeNS(e.Name())
	}
}

// DialContext dials addr from the hub namespace: the socket is made there
// (on a thread of its own, switched into the hub and back), so it reaches
// every node whatever rules are in force. Use it as an http.Transport's
// DialContext.
func (n *Net) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return n.dialInHub(ctx, network, addr)
}

func (n *Net) dialInHub(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, errors.New("netfault: closed")
	}
	hub, err := unix.Dup(n.hubFD) // Close may close n.hubFD meanwhile
	n.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("netfault: the hub namespace: %w", err)
	}
	defer unix.Close(hub)
	var c net.Conn
	err = InNamespace(hub, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// InNamespace runs f on a thread of its own switched into the network
// namespace open as fd, and switches back: the sockets f makes belong to
// that namespace for their whole life. If the thread cannot switch back,
// it stays locked and the runtime ends it with the goroutine.
func InNamespace(fd int, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netfault: this thread's namespace: %w", err)
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netfault: enter a namespace: %w", err)
			return
		}
		ferr := f()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("netfault: leave a namespace: %w", err))
			return // still locked: the thread ends with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// OpenNS opens the namespace named ns (as `ip netns` names it) for
// InNamespace; the caller closes the descriptor.
func OpenNS(ns string) (int, error) {
	fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("netfault: open namespace %s: %w", ns, err)
	}
	return fd, nil
}

// ip runs iproute2's ip with args.
func ip(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("netfault: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
