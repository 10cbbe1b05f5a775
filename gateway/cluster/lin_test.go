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

// Per-flow histories of Get, Put, CAS and Swap sent to every node while owners
// are partitioned away, restarted and removed are checked for
// linearizability with porcupine: each flow (one key here) is a register
// with a version, V, that every write advances by one. An operation that
// failed with "unavailable" has an unknown outcome: a write is recorded as
// never returning (porcupine may place it anywhere after its call, or
// never), a failed read is dropped.

// LinIn and LinOut are one operation of a history and its outcome, and
// LinModel their sequential specification: the process tests
// (flows_process_test.go) check their histories with it too.
type LinIn struct {
	Flow   string
	Op     string // get, put, cas, swap, inc
	Val    int
	Expect uint64
	Old    int // swap: the value expected (0: absent)
}

type LinOut struct {
	Unknown bool
	OK      bool   // get: found; cas, swap: written; inc: answered
	Val     int    // get, cas or swap mismatch: the current value (0: absent); inc: the new value
	V       uint64 // the current or new V
}

type linState struct {
	present bool
	val     int
	v       uint64
}

var LinModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		for _, o := range h {
			by[o.Input.(LinIn).Flow] = append(by[o.Input.(LinIn).Flow], o)
		}
		var out [][]porcupine.Operation
		for _, p := range by {
			out = append(out, p)
		}
		return out
	},
	Init: func() any { return linState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(linState), input.(LinIn), output.(LinOut)
		switch in.Op {
		case "get":
			if !s.present {
				return !out.OK, s
			}
			return out.OK && out.Val == s.val && out.V == s.v, s
		case "put":
			s = linState{present: true, val: in.Val, v: s.v + 1}
			return out.Unknown || out.V == s.v, s
		case "inc": // a counter's increment (an inject script's): it answers the new value
			s = linState{present: true, val: s.val + 1, v: s.v + 1}
			return out.Unknown || out.OK && out.Val == s.val, s
		case "swap":
			if in.Old == 0 && s.present || in.Old != 0 && (!s.present || s.val != in.Old) {
				return out.Unknown || !out.OK && out.V == s.v && out.Val == s.val, s
			}
			s = linState{present: true, val: in.Val, v: s.v + 1}
			return out.Unknown || out.OK && out.V == s.v, s
		default: // cas
			if s.v != in.Expect || !s.present && in.Expect != 0 {
				return out.Unknown || !out.OK && out.V == s.v && (!s.present || out.Val == s.val), s
			}
			s = linState{present: true, val: in.Val, v: s.v + 1}
			return out.Unknown || out.OK && out.V == s.v, s
		}
	},
	DescribeOperation: func(in, out any) string { return fmt.Sprintf("%+v -> %+v", in, out) },
}

// CheckLinearizable fails t unless history is linearizable, writing
// porcupine's view of it next to the test's output when it is not, or when
// fewer than minKnown operations have a known outcome.
func CheckLinearizable(t *testing.T, history []porcupine.Operation, minKnown int) {
	t.Helper()
	known := 0
	for _, o := range history {
		if o.Return != math.MaxInt64 {
			known++
		}
	}
	res, info := porcupine.CheckOperationsVerbose(LinModel, history, time.Minute)
	t.Logf("%d operations, %d with a known outcome: %v", len(history), known, res)
	if res != porcupine.Ok {
		path := filepath.Join(os.TempDir(), "cluster-lin-"+strconv.FormatInt(time.Now().UnixNano(), 36)+".html")
		if f, err := os.Create(path); err == nil {
			_ = porcupine.Visualize(LinModel, info, f)
			f.Close()
		}
		t.Fatalf("the history is %v (porcupine's view: %s)", res, path)
	}
	if known < minKnown {
		t.Fatalf("only %d operations completed: the test proved little", known)
	}
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
	lastV, lastVal := map[string]uint64{}, map[string]int{}
	for i := 0; ctx.Err() == nil; i++ {
		s := store(i + id)
		if s == nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		in := LinIn{Flow: flows[rng.IntN(len(flows))], Op: []string{"get", "put", "cas", "swap"}[rng.IntN(4)], Val: int(c.vals.Add(1))}
		in.Expect, in.Old = lastV[in.Flow], lastVal[in.Flow]
		call := time.Since(c.start).Nanoseconds()
		octx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var out LinOut
		var err error
		switch in.Op {
		case "get":
			var e flow.Entry
			e, err = s.Get(octx, in.Flow, "k", nil)
			if errors.Is(err, flow.ErrNotFound) {
				err = nil
			} else if err == nil {
				out.OK, out.V = true, e.Version.V
				out.Val, _ = strconv.Atoi(string(e.Value))
			}
		case "put":
			var v flow.Version
			v, err = s.Put(octx, in.Flow, "k", []byte(strconv.Itoa(in.Val)), syncPolicy)
			out.OK, out.V = true, v.V
		case "swap":
			old := flow.Entry{}
			if in.Old != 0 {
				old = flow.Entry{Value: []byte(strconv.Itoa(in.Old)), Version: flow.Version{V: 1}}
			}
			var e flow.Entry
			e, err = s.(flow.Speculator).Swap(octx, in.Flow, "k", old, []byte(strconv.Itoa(in.Val)), syncPolicy)
			if errors.Is(err, flow.ErrVersionMismatch) {
				err = nil
				out.V = e.Version.V
				if e.Version.V != 0 {
					out.Val, _ = strconv.Atoi(string(e.Value))
				}
			} else if err == nil {
				out.OK, out.V = true, e.Version.V
			}
		case "cas":
			var e flow.Entry
			e, err = s.CAS(octx, in.Flow, "k", in.Expect, []byte(strconv.Itoa(in.Val)), syncPolicy)
			if errors.Is(err, flow.ErrVersionMismatch) {
				err = nil
				out.V = e.Version.V
				out.Val, _ = strconv.Atoi(string(e.Value))
			} else if err == nil {
				out.OK, out.V = true, e.Version.V
			}
		}
		cancel()
		ret := time.Since(c.start).Nanoseconds()
		time.Sleep(time.Millisecond) // a history porcupine checks in seconds
		if err != nil {
			if in.Op == "get" || errors.Is(err, errRefused) {
				continue // a failed read, or a refused write, changed nothing
			}
			out, ret = LinOut{Unknown: true}, math.MaxInt64
		} else {
			lastV[in.Flow] = out.V
			switch {
			case in.Op == "put" || out.OK && in.Op != "get":
				lastVal[in.Flow] = in.Val
			case out.V != 0:
				lastVal[in.Flow] = out.Val
			}
		}
		c.mu.Lock()
		c.history = append(c.history, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
		c.mu.Unlock()
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
	lc.mu.Lock()
	defer lc.mu.Unlock()
	CheckLinearizable(t, lc.history, 100)
}
