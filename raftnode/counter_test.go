package raftnode

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
	"sync/atomic"
	"testing"
	"time"

	"github.com/riftgate/riftgate/raftnode/faultnet"
)

// counter is the worked example's application: a replicated sum, plus the
// voter list mirrored from membership (as ownership would use it).
type counterState struct {
	Value  int64    `cbor:"1,keyasint"`
	Voters []uint64 `cbor:"2,keyasint"`
	MIdx   uint64   `cbor:"3,keyasint"`
	Last   uint64   `cbor:"4,keyasint"` // index of the last Add
	// Ops makes a retried command apply once: tests retry proposals whose
	// outcome is unknown after a leader change.
	Ops map[string]bool `cbor:"5,keyasint"`
}

type counterCmd struct {
	Add int64  `cbor:"1,keyasint"`
	Pad []byte `cbor:"2,keyasint,omitempty"` // bulk, for sizing tests
	Op  string `cbor:"3,keyasint,omitempty"` // unique id; a repeat is a no-op
}

type counterResp struct {
	Value int64  `cbor:"1,keyasint"`
	Index uint64 `cbor:"2,keyasint"`
}

type counterApp struct{}

var counterCodec = SnapshotCodec[counterState]{Magic: [4]byte{'C', 'N', 'T', 'R'}, Version: 1}

func (counterApp) InitialState() counterState { return counterState{Ops: map[string]bool{}} }
func (counterApp) Apply(s *counterState, c counterCmd, index uint64) counterResp {
	if c.Op != "" {
		if s.Ops[c.Op] {
			return counterResp{Value: s.Value, Index: index}
		}
		s.Ops[c.Op] = true
	}
	s.Value += c.Add
	s.Last = index
	return counterResp{Value: s.Value, Index: index}
}
func (counterApp) ApplyMembership(s *counterState, m Membership) {
	s.Voters, s.MIdx = m.Voters(), m.Index
}
func (counterApp) NoopResponse() counterResp                      { return counterResp{} }
func (counterApp) EncodeSnapshot(s *counterState) ([]byte, error) { return counterCodec.Encode(s) }
func (counterApp) DecodeSnapshot(b []byte) (counterState, error) {
	s, err := counterCodec.Decode(b)
	if s.Ops == nil {
		s.Ops = map[string]bool{}
	}
	return s, err
}

type counterGroup = Group[counterState, counterCmd, counterResp]

var testSecret = []byte("0123456789abcdef-test-secret")

// cluster runs real members on 127.0.0.1 over HTTP, each through the fault
// network's client.
type cluster struct {
	t     testing.TB
	net   *faultnet.Network
	base  string
	tweak func(*Config)
	mu    sync.Mutex
	nodes map[string]*member
}

type member struct {
	name string
	dir  string
	addr string
	srv  *http.Server
	g    *counterGroup
}

func newCluster(t testing.TB, seed uint64, tweak func(*Config)) *cluster {
	c := &cluster{t: t, net: faultnet.New(seed), base: t.TempDir(), tweak: tweak, nodes: map[string]*member{}}
	t.Cleanup(func() {
		for _, name := range c.names() {
			c.stop(name)
		}
		c.net.Close()
	})
	return c
}

func (c *cluster) names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for n := range c.nodes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("RAFTNODE_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// start boots (or reboots, on the same port and data dir) member name.
func (c *cluster) start(name string, bootstrap bool) *member {
	c.t.Helper()
	c.mu.Lock()
	m := c.nodes[name]
	c.mu.Unlock()
	addr := "127.0.0.1:0"
	if m != nil {
		addr = m.addr
	} else {
		m = &member{name: name, dir: filepath.Join(c.base, name)}
	}
	var ln net.Listener
	var err error
	for range 50 { // a reused port may linger briefly
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("listen %s: %v", addr, err)
	}
	m.addr = ln.Addr().String()
	c.net.Register(name, m.addr)
	cfg := Config{
		NodeName: name, GroupID: "counter", DataDir: m.dir,
		AdvertiseURL: "http://" + m.addr + "/raft", Secret: testSecret, Bootstrap: bootstrap,
		TickInterval: 20 * time.Millisecond, ElectionTick: 20,
		LeaderTaskGrace: 300 * time.Millisecond,
		HTTPClient:      c.net.Client(name), Logger: testLogger(c.t).With("n", name),
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	g, err := Bootstrap(context.Background(), cfg, counterApp{}, nil)
	if err != nil {
		ln.Close()
		c.t.Fatalf("bootstrap %s: %v", name, err)
	}
	r := g.Routers()
	mux := http.NewServeMux()
	mux.Handle("/raft/", http.StripPrefix("/raft", r.Raft))
	mux.Handle("/cluster/", http.StripPrefix("/cluster", r.Cluster))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	m.g = g
	go func() { _ = m.srv.Serve(ln) }()
	c.mu.Lock()
	c.nodes[name] = m
	c.mu.Unlock()
	return m
}

// stop closes member name in-process, keeping its data dir for a restart.
func (c *cluster) stop(name string) {
	c.mu.Lock()
	m := c.nodes[name]
	c.mu.Unlock()
	if m == nil || m.g == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = m.srv.Close()
	if err := m.g.Close(ctx); err != nil {
		c.t.Errorf("close %s: %v", name, err)
	}
	m.g = nil
}

func (c *cluster) get(name string) *member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[name]
}

func (c *cluster) admin(name string) *AdminClient {
	return &AdminClient{BaseURL: "http://" + c.get(name).addr + "/cluster", Group: "counter", Secret: testSecret}
}

// leader waits until exactly one running member leads and returns it.
func (c *cluster) leader(timeout time.Duration) *member {
	c.t.Helper()
	var found *member
	eventually(c.t, timeout, "a single leader", func() bool {
		found = nil
		for _, n := range c.names() {
			m := c.get(n)
			if m.g != nil && m.g.IsLeader() {
				if found != nil {
					return false
				}
				found = m
			}
		}
		return found != nil
	})
	return found
}

func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var opSeq atomic.Uint64

// propose retries through leader changes until the command has applied.
// The command carries a unique op id, so a retry after an unknown outcome
// applies it once.
func propose(t testing.TB, m *member, add int64) counterResp {
	t.Helper()
	op := fmt.Sprintf("op-%d", opSeq.Add(1))
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := m.g.ProposeAndWait(ctx, counterCmd{Add: add, Op: op})
		cancel()
		if err == nil {
			return r
		}
		if errors.Is(err, ErrCommandTooLarge) || time.Now().After(deadline) {
			t.Fatalf("propose on %s: %v", m.name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func value(m *member) (v int64, applied uint64) {
	m.g.State().Read(func(s *counterState, a uint64) { v, applied = s.Value, a })
	return
}

func (c *cluster) waitValue(want int64, names ...string) {
	c.t.Helper()
	for _, n := range names {
		m := c.get(n)
		eventually(c.t, 15*time.Second, fmt.Sprintf("%s to reach %d", n, want), func() bool {
			v, _ := value(m)
			return v == want
		})
	}
}

// grow admits name as a learner through the admin HTTP API of via, then
// promotes it, and waits for every member to mirror the new membership.
func (c *cluster) grow(via, name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	m := c.get(name)
	var doc MembershipJSON
	for {
		err := c.admin(via).Do(ctx, http.MethodPost, "/learners", map[string]string{"name": name, "url": "http://" + m.addr + "/raft"}, &doc)
		if err == nil || strings.Contains(err.Error(), "already a learner") {
			break
		}
		if ctx.Err() != nil {
			c.t.Fatalf("add learner %s: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond) // no leader known yet
	}
	id := FormatNodeID(NodeIDFromName(name))
	for {
		err := c.admin(via).Do(ctx, http.MethodPost, "/promote", map[string]string{"id": id}, &doc)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			c.t.Fatalf("promote %s: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond) // the learner is still catching up
	}
}
