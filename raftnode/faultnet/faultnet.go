// Package faultnet injects network faults between raftnode members: it is
// an http.RoundTripper that drops, delays and partitions requests by
// destination, driven by a fixed seed. Each node sends through its own
// client, so a partition cuts both directions.
//
// The seed fixes the random stream, not the interleaving: concurrent
// senders draw from it in whatever order the scheduler picks.
package faultnet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// ErrInjected is returned for every request the network drops or cuts.
var ErrInjected = errors.New("faultnet: injected fault")

// Network is the shared fault model of one test cluster.
type Network struct {
	mu         sync.Mutex
	rng        *rand.Rand
	hosts      map[string]string // host:port -> node name
	cut        map[[2]string]bool
	drop       float64
	minD, maxD time.Duration
	transports []*http.Transport
	stats      Stats
}

// Stats counts what the network did.
type Stats struct {
	Sent, Dropped, Cut, Delayed int
}

// New returns a healthy network whose random choices come from seed.
func New(seed uint64) *Network {
	return &Network{
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		hosts: map[string]string{},
		cut:   map[[2]string]bool{},
	}
}

// Register names the node listening on hostport.
func (n *Network) Register(name, hostport string) {
	n.mu.Lock()
	n.hosts[hostport] = name
	n.mu.Unlock()
}

// Partition cuts every link between a node of a and a node of b, both ways.
func (n *Network) Partition(a, b []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, x := range a {
		for _, y := range b {
			n.cut[[2]string{x, y}] = true
			n.cut[[2]string{y, x}] = true
		}
	}
}

// Heal removes every partition.
func (n *Network) Heal() {
	n.mu.Lock()
	n.cut = map[[2]string]bool{}
	n.mu.Unlock()
}

// SetDrop makes each request fail with probability p.
func (n *Network) SetDrop(p float64) {
	n.mu.Lock()
	n.drop = p
	n.mu.Unlock()
}

// SetDelay delays each request by a uniform duration in [lo, hi].
func (n *Network) SetDelay(lo, hi time.Duration) {
	n.mu.Lock()
	n.minD, n.maxD = lo, hi
	n.mu.Unlock()
}

// Stats returns the counters so far.
func (n *Network) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Client returns the HTTP client node from sends through.
func (n *Network) Client(from string) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second}
	n.mu.Lock()
	n.transports = append(n.transports, tr)
	n.mu.Unlock()
	return &http.Client{Transport: &roundTripper{n: n, from: from, next: tr}, Timeout: 10 * time.Second}
}

// Close drops the idle connections of every client it handed out.
func (n *Network) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, tr := range n.transports {
		tr.CloseIdleConnections()
	}
}

type roundTripper struct {
	n    *Network
	from string
	next http.RoundTripper
}

// decide draws the fate of one request under the lock.
func (n *Network) decide(from, host string) (time.Duration, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stats.Sent++
	to := n.hosts[host]
	if n.cut[[2]string{from, to}] {
		n.stats.Cut++
		return 0, fmt.Errorf("%w: %s -/- %s partitioned", ErrInjected, from, to)
	}
	if n.drop > 0 && n.rng.Float64() < n.drop {
		n.stats.Dropped++
		return 0, fmt.Errorf("%w: %s -> %s dropped", ErrInjected, from, to)
	}
	if n.maxD <= 0 {
		return 0, nil
	}
	n.stats.Delayed++
	return n.minD + time.Duration(n.rng.Int64N(int64(n.maxD-n.minD)+1)), nil
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	d, err := rt.n.decide(rt.from, req.URL.Host)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, req.Context().Err()
		}
	}
	return rt.next.RoundTrip(req)
}
