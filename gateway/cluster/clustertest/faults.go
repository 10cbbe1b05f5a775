package clustertest

import (
	"errors"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/riftgate/riftgate/raftnode"
)

// Faults is the network between the nodes: an HTTP proxy in front of each
// node's peer listener, which the node advertises as its peer URL, so every
// request a member sends another (Raft, forwarded proposals, owner RPCs,
// replica pushes) crosses it. The proxy knows a request's sender by the
// X-Rift-From header every signed peer request carries (raftnode's
// authentication); a request without one comes from Unknown.
//
// Each directed link drops, delays or cuts requests as its Link says. A cut
// link is a black hole: the request is held until its sender gives up, as
// a partitioned network holds packets, and reset if the link heals first.
type Faults struct {
	t testing.TB

	mu      sync.Mutex
	rng     *rand.Rand
	names   map[string]string // X-Rift-From (hex node id) -> name
	nodes   []string
	links   map[[2]string]Link
	all     Link
	healed  chan struct{} // closed and replaced by Heal
	stats   Stats
	servers []*http.Server
	proxies []*httputil.ReverseProxy
}

// Unknown is the sender of a request that names none.
const Unknown = "?"

// Link is what one directed link does to each request on it.
type Link struct {
	Cut    bool          // held until the sender gives up: a partition
	Drop   float64       // probability the connection is reset instead
	Delay  time.Duration // added before the request goes on
	Jitter time.Duration // plus a uniform random part of this
}

// Stats counts what the proxies did.
type Stats struct {
	Forwarded, Dropped, Cut, Delayed int
}

func newFaults(t testing.TB) *Faults {
	f := &Faults{t: t, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1)),
		names: map[string]string{}, links: map[[2]string]Link{}, healed: make(chan struct{})}
	t.Cleanup(f.close)
	return f
}

// add starts the proxy for node name at addr, forwarding to target.
func (f *Faults) add(name, addr, target string) {
	f.t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		f.t.Fatalf("clustertest: fault proxy for %s: %v", name, err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: target})
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	srv := &http.Server{Handler: f.handler(name, rp), ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	f.mu.Lock()
	f.names[strconv.FormatUint(raftnode.NodeIDFromName(name), 16)] = name
	f.nodes = append(f.nodes, name)
	f.servers = append(f.servers, srv)
	f.proxies = append(f.proxies, rp)
	f.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

func (f *Faults) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.servers {
		_ = s.Close()
	}
	for _, p := range f.proxies {
		p.Transport.(*http.Transport).CloseIdleConnections()
	}
}

// Set makes the link from one node to another behave as l.
func (f *Faults) Set(from, to string, l Link) {
	f.mu.Lock()
	f.links[[2]string{from, to}] = l
	f.mu.Unlock()
}

// SetAll makes every link without a Link of its own behave as l.
func (f *Faults) SetAll(l Link) {
	f.mu.Lock()
	f.all = l
	f.mu.Unlock()
}

// Partition cuts every link between a node of a and a node of b, both ways.
func (f *Faults) Partition(a, b []string) {
	for _, x := range a {
		for _, y := range b {
			f.Set(x, y, Link{Cut: true})
			f.Set(y, x, Link{Cut: true})
		}
	}
}

// Isolate cuts every link to and from name, requests of Unknown senders
// included.
func (f *Faults) Isolate(name string) {
	f.mu.Lock()
	others := append([]string{Unknown}, f.nodes...)
	f.mu.Unlock()
	for _, o := range others {
		if o != name {
			f.Set(o, name, Link{Cut: true})
			f.Set(name, o, Link{Cut: true})
		}
	}
}

// Heal makes every link healthy again; requests held on cut links are
// reset.
func (f *Faults) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.links, f.all = map[[2]string]Link{}, Link{}
	close(f.healed)
	f.healed = make(chan struct{})
}

// Stats returns the counters so far.
func (f *Faults) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// decide draws what happens to one request from from to to.
func (f *Faults) decide(from, to string) (cut, drop bool, delay time.Duration, healed <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[[2]string{from, to}]
	if !ok {
		l = f.all
	}
	switch {
	case l.Cut:
		f.stats.Cut++
		return true, false, 0, f.healed
	case l.Drop > 0 && f.rng.Float64() < l.Drop:
		f.stats.Dropped++
		return false, true, 0, f.healed
	}
	delay = l.Delay
	if l.Jitter > 0 {
		delay += time.Duration(f.rng.Int64N(int64(l.Jitter)))
	}
	if delay > 0 {
		f.stats.Delayed++
	}
	f.stats.Forwarded++
	return false, false, delay, f.healed
}

func (f *Faults) handler(to string, next http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		from, ok := f.names[r.Header.Get("X-Rift-From")]
		f.mu.Unlock()
		if !ok {
			from = Unknown
		}
		cut, drop, delay, healed := f.decide(from, to)
		switch {
		case cut:
			select {
			case <-r.Context().Done():
			case <-healed:
			}
			reset(w)
			return
		case drop:
			reset(w)
			return
		case delay > 0:
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return
			}
		}
		next.ServeHTTP(w, r)
	}
}

// reset closes the request's connection without an answer.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(errors.New("clustertest: the fault proxy cannot take the connection over"))
	}
	if conn, _, err := hj.Hijack(); err == nil {
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, not an orderly close
		}
		_ = conn.Close()
	}
}
