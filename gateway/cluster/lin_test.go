package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/riftgate/riftgate/gateway/flow"
)

// Per-flow histories of Get, Put and CAS sent to every node while owners
// are partitioned away, restarted and removed are checked for
// linearizability with porcupine: each flow (one key here) is a register
// with a version, V, that every write advances by one. An operation that
// failed with "unavailable" has an unknown outcome: a write is recorded as
// never returning (porcupine may place it anywhere after its call, or
// never), a failed read is dropped.

type linIn struct {
	flow   string
	op     string // get, put, cas
	val    int
	expect uint64
}

type linOut struct {
	unknown bool
	ok      bool   // get: found; cas: swapped
	val     int    // get, cas mismatch: the current value
	v       uint64 // the current or new V
}

type linState struct {
	present bool
	val     int
	v       uint64
}

var linModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		for _, o := range h {
			by[o.Input.(linIn).flow] = append(by[o.Input.(linIn).flow], o)
		}
		var out [][]porcupine.Operation
		for _, p := range by {
			out = append(out, p)
		}
		return out
	},
	Init: func() any { return linState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(linState), input.(linIn), output.(linOut)
		switch in.op {
		case "get":
			if !s.present {
				return !out.ok, s
			}
			return out.ok && out.val == s.val && out.v == s.v, s
		case "put":
			s = linState{present: true, val: in.val, v: s.v + 1}
			return out.unknown || out.v == s.v, s
		default: // cas
			if s.v != in.expect || !s.present && in.expect != 0 {
				return out.unknown || !out.ok && out.v == s.v && (!s.present || out.val == s.val), s
			}
			s = linState{present: true, val: in.val, v: s.v + 1}
			return out.unknown || out.ok && out.v == s.v, s
		}
	},
	DescribeOperation: func(in, out any) string { return fmt.Sprintf("%+v -> %+v", in, out) },
}

// linClient records a history against a flow.Store chosen per operation.
type linClient struct {
	mu      sync.Mutex
	history []porcupine.Operation
	start   time.Time
	vals    atomic.Int64
}

func (c *linClient) run(ctx context.Context, id int, flows []string, store func(i int) flow.Store) {
	rng := rand.New(rand.NewPCG(uint64(id), 7))
	lastV := map[string]uint64{}
	for i := 0; ctx.Err() == nil; i++ {
		s := store(i + id)
		if s == nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		in := linIn{flow: flows[rng.IntN(len(flows))], op: []string{"get", "put", "cas"}[rng.IntN(3)], val: int(c.vals.Add(1))}
		in.expect = lastV[in.flow]
		call := time.Since(c.start).Nanoseconds()
		octx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var out linOut
		var err error
		switch in.op {
		case "get":
			var e flow.Entry
			e, err = s.Get(octx, in.flow, "k")
			if errors.Is(err, flow.ErrNotFound) {
				err = nil
			} else if err == nil {
				out.ok, out.v = true, e.Version.V
				out.val, _ = strconv.Atoi(string(e.Value))
			}
		case "put":
			var v flow.Version
			v, err = s.Put(octx, in.flow, "k", []byte(strconv.Itoa(in.val)), syncPolicy)
			out.ok, out.v = true, v.V
		case "cas":
			var e flow.Entry
			e, err = s.CAS(octx, in.flow, "k", in.expect, []byte(strconv.Itoa(in.val)), syncPolicy)
			if errors.Is(err, flow.ErrVersionMismatch) {
				err = nil
				out.v = e.Version.V
				out.val, _ = strconv.Atoi(string(e.Value))
			} else if err == nil {
				out.ok, out.v = true, e.Version.V
			}
		}
		cancel()
		ret := time.Since(c.start).Nanoseconds()
		time.Sleep(time.Millisecond) // a history porcupine checks in seconds
		if err != nil {
			if in.op == "get" || errors.Is(err, errRefused) {
				continue // a failed read, or a refused write, changed nothing
			}
			out, ret = linOut{unknown: true}, math.MaxInt64
		} else {
			lastV[in.flow] = out.v
		}
		c.mu.Lock()
		c.history = append(c.history, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
		c.mu.Unlock()
	}
}

// check fails t unless the history is linearizable, writing porcupine's
// view of it next to the test's output when it is not.
func (c *linClient) check(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	known := 0
	for _, o := range c.history {
		if o.Return != math.MaxInt64 {
			known++
		}
	}
	res, info := porcupine.CheckOperationsVerbose(linModel, c.history, 60*time.Second)
	t.Logf("%d operations, %d with a known outcome: %v", len(c.history), known, res)
	if res != porcupine.Ok {
		path := filepath.Join(os.TempDir(), "cluster-lin-"+strconv.FormatInt(time.Now().UnixNano(), 36)+".html")
		if f, err := os.Create(path); err == nil {
			_ = porcupine.Visualize(linModel, info, f)
			f.Close()
		}
		t.Fatalf("the history is %v (porcupine's view: %s)", res, path)
	}
	if known < 100 {
		t.Fatalf("only %d operations completed: the test proved little", known)
	}
}

// While four clients keep reading and writing through every node: the
// owner of some flows is partitioned away (it refuses; nobody else may
// serve them), another member restarts, and then the first owner's pushes
// to one successor are cut before it is killed and removed, so that the
// new owner must adopt what only the other replica holds.
func TestLinearizableThroughFaults(t *testing.T) {
	c := threeNodes(t, func(cfg *FlowsConfig) { cfg.Deadline = time.Second })
	l := c.leader()
	var others []string
	for _, n := range c.running() {
		if n != l {
			others = append(others, n.name)
		}
	}
	old, next := others[0], others[1]
	v := l.f.currentView()
	var flows []string
	for _, name := range []string{l.name, old, next} {
		flows = append(flows, flowsOwnedBy(v, name, 2)...)
	}
	flows = append(flows, flowsOwnedBy(v, old, 4)[2:]...)
	var mu sync.Mutex
	names := []string{l.name, old, next}
	serve := func(ns ...string) {
		mu.Lock()
		names = ns
		mu.Unlock()
	}
	store := func(i int) flow.Store {
		mu.Lock()
		defer mu.Unlock()
		n := c.get(names[i%len(names)])
		if n == nil || n.f == nil {
			return nil
		}
		return n.f
	}
	lc := &linClient{start: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for id := range 4 {
		wg.Go(func() { lc.run(ctx, id, flows, store) })
	}
	defer func() { cancel(); wg.Wait() }()

	time.Sleep(500 * time.Millisecond)
	t.Logf("partition %s away", old)
	c.net.Isolate(old)
	time.Sleep(1500 * time.Millisecond)
	c.net.Heal()
	c.settled(3)
	time.Sleep(300 * time.Millisecond)

	t.Logf("restart %s", next)
	serve(l.name, old)
	c.stop(next)
	time.Sleep(500 * time.Millisecond)
	c.start(next, false)
	c.settled(3)
	serve(l.name, old, next)
	time.Sleep(300 * time.Millisecond)

	t.Logf("cut %s from %s, stop it, remove it, grow n4", old, next)
	c.net.Partition([]string{old}, []string{next})
	time.Sleep(time.Second)
	serve(l.name, next)
	c.stop(old)
	c.net.Heal()
	c.remove(old)
	c.settled(2)
	time.Sleep(300 * time.Millisecond)
	c.grow("n4")
	c.settled(3)
	serve(l.name, next, "n4")
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()
	lc.check(t)
}
