// Package faultproxy is a fault injector between cluster members for tests:
// a TCP proxy in front of each member, which that member advertises
// instead of its own address, so that every peer connection to it passes
// through the proxy. It learns which member opened a connection from the
// first request on it (raftnode's signed X-Rift-From header, which Raft
// traffic and flow sessions both carry), and can then delay, drop and
// partition each link, both ways.
//
// A partition is a black hole, as on a real network: connections stay
// open, bytes stop moving (new connections are accepted and then hang),
// and whatever the members wait for times out; healed, bytes flow again.
// Connections from no member (an admin client) are never cut.
package faultproxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/textproto"
	"strconv"
	"sync"
	"time"

	"github.com/riftgate/riftgate/raftnode"
)

// Net is the fault model of one test cluster.
type Net struct {
	mu      sync.Mutex
	cond    *sync.Cond // signalled when the cut set changes or Net closes
	names   map[uint64]string
	targets map[string]string
	cut     map[[2]string]bool
	delay   [2]time.Duration
	drop    float64
	rng     *rand.Rand
	closed  bool
	lns     []net.Listener
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
	stats   Stats
}

// Stats counts what the proxies did.
type Stats struct {
	Accepted, Dropped, HeldChunks int
}

// New returns a healthy network whose random choices come from seed.
func New(seed uint64) *Net {
	n := &Net{
		names: map[uint64]string{}, cut: map[[2]string]bool{}, conns: map[net.Conn]struct{}{},
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	n.cond = sync.NewCond(&n.mu)
	return n
}

// Front starts a proxy for member name, whose real listener is target, on
// host (":0" picks a port) and returns the proxy's address.
func (n *Net) Front(name, host, target string) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	n.mu.Lock()
	n.names[raftnode.NodeIDFromName(name)] = name
	n.lns = append(n.lns, ln)
	n.mu.Unlock()
	n.wg.Add(1)
	go n.accept(ln, name, target)
	return ln.Addr().String(), nil
}

// Retarget makes the proxy of name forward new connections to target (a
// member restarted on another port).
func (n *Net) Retarget(name, target string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.targets == nil {
		n.targets = map[string]string{}
	}
	n.targets[name] = target
}

// Partition cuts every link between a member of a and a member of b.
func (n *Net) Partition(a, b []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, x := range a {
		for _, y := range b {
			n.cut[[2]string{x, y}] = true
			n.cut[[2]string{y, x}] = true
		}
	}
	n.cond.Broadcast()
}

// Isolate cuts every link of name to the others listed.
func (n *Net) Isolate(name string, others ...string) { n.Partition([]string{name}, others) }

// Heal removes every cut.
func (n *Net) Heal() {
	n.mu.Lock()
	n.cut = map[[2]string]bool{}
	n.cond.Broadcast()
	n.mu.Unlock()
}

// SetDelay delays every chunk of bytes by a uniform duration in [lo, hi].
func (n *Net) SetDelay(lo, hi time.Duration) {
	n.mu.Lock()
	n.delay = [2]time.Duration{lo, hi}
	n.mu.Unlock()
}

// SetDrop makes each new member connection fail at once with probability p.
func (n *Net) SetDrop(p float64) {
	n.mu.Lock()
	n.drop = p
	n.mu.Unlock()
}

// Stats returns the counters so far.
func (n *Net) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Close stops every proxy and closes every connection through them.
func (n *Net) Close() {
	n.mu.Lock()
	n.closed = true
	for _, ln := range n.lns {
		ln.Close()
	}
	for c := range n.conns {
		c.Close()
	}
	n.cond.Broadcast()
	n.mu.Unlock()
	n.wg.Wait()
}

func (n *Net) track(c net.Conn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		c.Close()
		return false
	}
	n.conns[c] = struct{}{}
	return true
}

func (n *Net) untrack(c net.Conn) {
	n.mu.Lock()
	delete(n.conns, c)
	n.mu.Unlock()
	c.Close()
}

func (n *Net) accept(ln net.Listener, name, target string) {
	defer n.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !n.track(c) {
			continue
		}
		n.wg.Add(1)
		go n.serve(c, name, target)
	}
}

// maxHead bounds what is read to find the sender.
const maxHead = 64 << 10

// serve proxies one connection to name from whoever opened it.
func (n *Net) serve(c net.Conn, name, target string) {
	defer n.wg.Done()
	defer n.untrack(c)
	br := bufio.NewReaderSize(c, maxHead)
	from := n.sender(br)
	n.mu.Lock()
	n.stats.Accepted++
	drop := from != "" && n.drop > 0 && n.rng.Float64() < n.drop
	if drop {
		n.stats.Dropped++
	}
	if t, ok := n.targets[name]; ok {
		target = t
	}
	n.mu.Unlock()
	if drop {
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	if !n.track(up) {
		return
	}
	defer n.untrack(up)
	done := make(chan struct{}, 2)
	go func() { n.pipe(up, br, from, name); done <- struct{}{} }()
	go func() { n.pipe(c, up, name, from); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
}

// sender peeks at the first request's headers for X-Rift-From, without
// consuming them: they are forwarded as they came.
func (n *Net) sender(br *bufio.Reader) string {
	for want := 1; want <= maxHead; {
		if _, err := br.Peek(want); err != nil {
			return ""
		}
		b, _ := br.Peek(br.Buffered())
		want = len(b) + 1
		if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
			tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(b[:i+4])))
			if _, err := tp.ReadLine(); err != nil {
				return ""
			}
			h, _ := tp.ReadMIMEHeader()
			id, perr := strconv.ParseUint(h.Get("X-Rift-From"), 16, 64)
			if perr != nil {
				return ""
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			return n.names[id]
		}
	}
	return ""
}

// pipe copies src to dst, the link from → to: held while it is cut,
// delayed as configured.
func (n *Net) pipe(dst net.Conn, src io.Reader, from, to string) {
	buf := make([]byte, 32<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			if !n.wait(from, to) {
				return
			}
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if cw, ok := dst.(interface{ CloseWrite() error }); ok {
					_ = cw.CloseWrite()
				}
			}
			return
		}
	}
}

// wait holds a chunk on from → to while the link is cut, then delays it.
// It reports false when the network closed.
func (n *Net) wait(from, to string) bool {
	n.mu.Lock()
	held := false
	for !n.closed && from != "" && to != "" && n.cut[[2]string{from, to}] {
		if !held {
			held = true
			n.stats.HeldChunks++
		}
		n.cond.Wait()
	}
	closed, lo, hi := n.closed, n.delay[0], n.delay[1]
	d := lo
	if hi > lo {
		d += time.Duration(n.rng.Int64N(int64(hi - lo)))
	}
	n.mu.Unlock()
	if closed {
		return false
	}
	if d > 0 {
		time.Sleep(d)
	}
	return true
}
