package flowshard

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Concurrent clients hit a few flows of a real on-disk store with every
// operation and durability, and porcupine checks the history, partitioned
// by flow (the counter is per flow), against the sequential specification.

const linKeys = 2

type linIn struct {
	flow   string
	op     string // put, get, cas, del
	key    int
	val    int
	expect uint64
}

type linOut struct {
	ok  bool   // found (get, del) or swapped (cas)
	val int    // get: the value; cas mismatch: the current value
	v   uint64 // put/cas: the stamped V; get/cas mismatch: the current V
}

// linState is one flow: comparable, so porcupine's == works.
type linState struct {
	counter uint64
	present [linKeys]bool
	val     [linKeys]int
	v       [linKeys]uint64
}

var linModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		for _, o := range h {
			f := o.Input.(linIn).flow
			by[f] = append(by[f], o)
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
		k := in.key
		switch in.op {
		case "put":
			s.counter++
			s.present[k], s.val[k], s.v[k] = true, in.val, s.counter
			return out.v == s.counter, s
		case "get":
			if !s.present[k] {
				return !out.ok, s
			}
			return out.ok && out.val == s.val[k] && out.v == s.v[k], s
		case "cas":
			if s.v[k] != in.expect || !s.present[k] && in.expect != 0 {
				return !out.ok && out.v == s.v[k] && (!s.present[k] || out.val == s.val[k]), s
			}
			s.counter++
			s.present[k], s.val[k], s.v[k] = true, in.val, s.counter
			return out.ok && out.v == s.counter, s
		default: // del
			if !s.present[k] {
				return !out.ok, s
			}
			s.counter++
			s.present[k], s.val[k], s.v[k] = false, 0, 0
			return out.ok, s
		}
	},
	DescribeOperation: func(in, out any) string { return fmt.Sprintf("%+v -> %+v", in, out) },
}

func TestLinearizable(t *testing.T) {
	s := open(t, dbPath(t), Options{})
	const clients, opsEach, flows = 8, 300, 3
	start := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			var lastV uint64
			for i := range opsEach {
				in := linIn{
					flow: "i1:" + strconv.Itoa(rng.IntN(flows)),
					op:   []string{"put", "get", "cas", "del"}[rng.IntN(4)],
					key:  rng.IntN(linKeys),
					val:  c*opsEach + i + 1,
				}
				// Mostly a version seen recently, sometimes absent (0).
				if rng.IntN(3) > 0 {
					in.expect = lastV
				}
				p := Policy{Durability: Durability(rng.IntN(3))}
				key := strconv.Itoa(in.key)
				call := time.Since(start).Nanoseconds()
				var out linOut
				var err error
				switch in.op {
				case "put":
					var v Version
					v, err = s.Put(bg, in.flow, key, []byte(strconv.Itoa(in.val)), p)
					out.v = v.V
				case "get":
					var e Entry
					e, err = s.Get(bg, in.flow, key, nil)
					out.ok, out.v = err == nil, e.Version.V
					out.val, _ = strconv.Atoi(string(e.Value))
					if errors.Is(err, ErrNotFound) {
						err = nil
					}
				case "cas":
					var e Entry
					e, err = s.CAS(bg, in.flow, key, in.expect, []byte(strconv.Itoa(in.val)), p)
					out.ok, out.v = err == nil, e.Version.V
					if !out.ok {
						out.val, _ = strconv.Atoi(string(e.Value))
					}
					if errors.Is(err, ErrVersionMismatch) {
						err = nil
					}
				case "del":
					_, err = s.Delete(bg, in.flow, key, p)
					out.ok = err == nil
					if errors.Is(err, ErrNotFound) {
						err = nil
					}
				}
				ret := time.Since(start).Nanoseconds()
				if err != nil {
					t.Error(err)
					return
				}
				lastV = max(out.v, lastV*uint64(rng.IntN(2)))
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res, info := porcupine.CheckOperationsVerbose(linModel, history, 30*time.Second)
	if res != porcupine.Ok {
		path := t.TempDir() + "/history.html"
		if err := porcupine.VisualizePath(linModel, info, path); err == nil {
			t.Logf("history: %s", path)
		}
		t.Fatalf("history of %d operations is %s", len(history), res)
	}
}
