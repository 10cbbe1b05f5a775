// Package faultproxy is a fault injector between cluster members for tests:
// a TCP proxy in front of each member's peer listener, which the member
// advertises instead of its own address, so that every peer connection to
// it passes through the proxy: Raft's messages, forwarded writes, and the
// flow runtime's sessions alike. It learns which member opened a
// connection from the first request on it (raftnode's signed X-Rift-From
// header, which all of them carry; a connection without one comes from
// Unknown), and every chunk of bytes then goes through the directed link
// it travels on, member to member, each way.
//
// A cut link is a black hole, as on a partitioned network: a chunk on it is
// held until its connection ends (the sender gave up) or the link heals,
// when the connection is reset. A drop resets the connection; a delay holds
// each chunk that long. Being TCP, the proxy does not care what the
// protocol is: an upgraded session is cut, dropped and delayed exactly as
// an HTTP request is.
package faultproxy

import (
	"bufio"
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"net/textproto"
	"strconv"
	"sync"
	"time"

	"github.com/riftgate/riftgate/raftnode"
)

// Unknown is the sender of a connection whose first request names none.
const Unknown = "?"

// Link is what one directed link does to each chunk of bytes on it.
type Link struct {
	Cut    bool          // held until the connection ends or the link heals: a partition
	Drop   float64       // probability that the chunk resets its connection instead
	Delay  time.Duration // added before the chunk goes on
	Jitter time.Duration // plus a uniform random part of this
}

// Stats counts what the proxies did, per chunk.
type Stats struct {
	Accepted, Forwarded, Dropped, Cut, Delayed int
}

// Net is the fault model of one test cluster.
type Net struct {
	mu      sync.Mutex
	rng     *rand.Rand
	names   map[uint64]string // node id -> name
	nodes   []string
	targets map[string]string
	links   map[[2]string]Link
	all     Link
	healed  chan struct{} // closed and replaced by Heal
	closed  bool
	lns     []net.Listener
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
	stats   Stats
}

// New returns a healthy network whose random choices come from seed.
func New(seed uint64) *Net {
	return &Net{
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		names: map[uint64]string{}, targets: map[string]string{}, links: map[[2]string]Link{},
		healed: make(chan struct{}), conns: map[net.Conn]struct{}{},
	}
}

// Front starts a proxy for member name, whose real listener is target, on
// a free port of host, and returns the proxy's address.
func (n *Net) Front(name, host, target string) (string, error) {
	return n.FrontAt(name, net.JoinHostPort(host, "0"), target)
}

// FrontAt is Front on the address addr.
func (n *Net) FrontAt(name, addr, target string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	n.mu.Lock()
	n.names[raftnode.NodeIDFromName(name)] = name
	n.nodes = append(n.nodes, name)
	n.targets[name] = target
	n.lns = append(n.lns, ln)
	n.mu.Unlock()
	n.wg.Add(1)
	go n.accept(ln, name)
	return ln.Addr().String(), nil
}

// Retarget makes the proxy of name forward new connections to target (a
// member restarted on another port).
func (n *Net) Retarget(name, target string) {
	n.mu.Lock()
	n.targets[name] = target
	n.mu.Unlock()
}

// Set makes the link from one member to another behave as l.
func (n *Net) Set(from, to string, l Link) {
	n.mu.Lock()
	n.links[[2]string{from, to}] = l
	n.mu.Unlock()
}

// SetAll makes every link without a Link of its own behave as l.
func (n *Net) SetAll(l Link) {
	n.mu.Lock()
	n.all = l
	n.mu.Unlock()
}

// Partition cuts every link between a member of a and a member of b, both
// ways.
func (n *Net) Partition(a, b []string) {
	for _, x := range a {
		for _, y := range b {
			n.Set(x, y, Link{Cut: true})
			n.Set(y, x, Link{Cut: true})
		}
	}
}

// Isolate cuts every link to and from name, Unknown senders included.
func (n *Net) Isolate(name string) {
	n.mu.Lock()
	others := append([]string{Unknown}, n.nodes...)
	n.mu.Unlock()
	for _, o := range others {
		if o != name {
			n.Set(o, name, Link{Cut: true})
			n.Set(name, o, Link{Cut: true})
		}
	}
}

// Heal makes every link healthy again; connections with bytes held on a
// cut link are reset.
func (n *Net) Heal() {
	n.mu.Lock()
	n.links, n.all = map[[2]string]Link{}, Link{}
	close(n.healed)
	n.healed = make(chan struct{})
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

func (n *Net) accept(ln net.Listener, name string) {
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
		go n.serve(c, name)
	}
}

// maxHead bounds what is read to find the sender.
const maxHead = 64 << 10

// serve proxies one connection to name from whoever opened it.
func (n *Net) serve(c net.Conn, name string) {
	defer n.wg.Done()
	defer n.untrack(c)
	br := bufio.NewReaderSize(c, maxHead)
	from := n.sender(br)
	n.mu.Lock()
	n.stats.Accepted++
	target := n.targets[name]
	n.mu.Unlock()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	if !n.track(up) {
		return
	}
	defer n.untrack(up)
	done := make(chan struct{})
	var once sync.Once
	end := func() {
		once.Do(func() {
			close(done)
			for _, x := range []net.Conn{c, up} {
				if tc, ok := x.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // a reset, not an orderly close
				}
				x.Close()
			}
		})
	}
	var wg sync.WaitGroup
	wg.Go(func() { n.pipe(up, br, from, name, done, end) })
	n.pipe(c, up, name, from, done, end)
	wg.Wait()
}

// sender peeks at the first request's headers for X-Rift-From, without
// consuming them: they are forwarded as they came.
func (n *Net) sender(br *bufio.Reader) string {
	for want := 1; want <= maxHead; {
		if _, err := br.Peek(want); err != nil {
			return Unknown
		}
		b, _ := br.Peek(br.Buffered())
		want = len(b) + 1
		if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
			tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(b[:i+4])))
			if _, err := tp.ReadLine(); err != nil {
				return Unknown
			}
			h, _ := tp.ReadMIMEHeader()
			id, err := strconv.ParseUint(h.Get("X-Rift-From"), 16, 64)
			n.mu.Lock()
			defer n.mu.Unlock()
			if name, ok := n.names[id]; ok && err == nil {
				return name
			}
			return Unknown
		}
	}
	return Unknown
}

// pipe copies src to dst on the link from → to until either end is done.
func (n *Net) pipe(dst net.Conn, src io.Reader, from, to string, done <-chan struct{}, end func()) {
	defer end()
	buf := make([]byte, 32<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			cut, drop, delay, healed := n.decide(from, to)
			switch {
			case cut:
				select {
				case <-healed:
				case <-done:
				}
				return
			case drop:
				return
			case delay > 0:
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-done:
					t.Stop()
					return
				}
			}
			if _, err := dst.Write(buf[:k]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// decide draws what happens to one chunk on from → to.
func (n *Net) decide(from, to string) (cut, drop bool, delay time.Duration, healed <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l, ok := n.links[[2]string{from, to}]
	if !ok {
		l = n.all
	}
	switch {
	case l.Cut:
		n.stats.Cut++
		return true, false, 0, n.healed
	case l.Drop > 0 && n.rng.Float64() < l.Drop:
		n.stats.Dropped++
		return false, true, 0, n.healed
	}
	delay = l.Delay
	if l.Jitter > 0 {
		delay += time.Duration(n.rng.Int64N(int64(l.Jitter)))
	}
	if delay > 0 {
		n.stats.Delayed++
	}
	n.stats.Forwarded++
	return false, false, delay, n.healed
}
