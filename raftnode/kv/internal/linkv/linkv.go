// Package linkv checks histories of kv fragments for linearizability with
// porcupine: a sequential model of one key, and a concurrent lease and CAS
// workload that records a history against any kv.Proposer.
//
// The model has no eviction: the floor is a fragment-wide property, which
// would break partitioning by key, and eviction's invisibility is checked by
// a property test instead.
package linkv

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/riftgate/riftgate/raftnode/kv"
)

// Input is one proposed command on one key.
type Input struct {
	Key string
	Cmd kv.Command
}

// Output is the response, or Unknown when the proposal failed and the
// command may or may not have been applied.
type Output struct {
	Resp    kv.Response
	Unknown bool
}

// state is one key as the fragment holds it. Version 0 on a present record
// means a write whose reply was lost: any version is accepted and pins it.
type state struct {
	present    bool
	value      string
	version    uint64
	expiresAt  uint64
	maxVersion uint64
}

func (s state) live(now uint64) bool {
	return s.present && (s.expiresAt == 0 || s.expiresAt > now)
}

// matches reports whether a record reported by the fragment is s, pinning
// an unknown version.
func (s state) matches(r *kv.Record) (state, bool) {
	if string(r.Value) != s.value || r.ExpiresAtMs != s.expiresAt {
		return s, false
	}
	if s.version == 0 {
		s.version = r.Version
		return s, r.Version > 0
	}
	return s, r.Version == s.version
}

// Model is the sequential specification of one key under Put, Delete and
// TakeOnce, partitioned by key.
func Model() porcupine.Model {
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			var order []string
			for _, op := range h {
				k := op.Input.(Input).Key
				if _, ok := byKey[k]; !ok {
					order = append(order, k)
				}
				byKey[k] = append(byKey[k], op)
			}
			out := make([][]porcupine.Operation, 0, len(order))
			for _, k := range order {
				out = append(out, byKey[k])
			}
			return out
		},
		Init: func() any { return state{} },
		Step: func(st, in, out any) (bool, any) {
			return step(st.(state), in.(Input).Cmd, out.(Output))
		},
		DescribeOperation: func(in, out any) string {
			return fmt.Sprintf("%#v -> %#v", in.(Input).Cmd, out.(Output))
		},
		DescribeState: func(st any) string { return fmt.Sprintf("%+v", st.(state)) },
	}
}

func step(s state, cmd kv.Command, o Output) (bool, any) {
	var now uint64
	var exp kv.Expect
	switch c := cmd.(type) {
	case kv.Put:
		now, exp = c.NowMs, c.Expect
	case kv.Delete:
		now, exp = c.NowMs, c.Expect
	case kv.TakeOnce:
		now, exp = c.NowMs, c.Expect
	default:
		return false, s
	}
	live := s.live(now)
	// holds is the precondition; an unknown version may be any version.
	holds := false
	switch exp.Kind() {
	case kv.ExpectAbsent:
		holds = !live
	case kv.ExpectAny:
		holds = true
	case kv.ExpectVersion:
		holds = live && exp.Version() > 0 && (s.version == exp.Version() || s.version == 0)
	}
	if o.Unknown {
		return true, unknownEffect(s, cmd, holds, live, exp)
	}
	if c, ok := o.Resp.(kv.Conflict); ok {
		if holds && (s.version != 0 || exp.Kind() != kv.ExpectVersion) {
			return false, s
		}
		if c.Current == nil {
			return !live, s
		}
		if !live {
			return false, s
		}
		s2, ok := s.matches(c.Current)
		if ok && exp.Kind() == kv.ExpectVersion && s2.version == exp.Version() {
			return false, s // reported a conflict against a matching version
		}
		return ok, s2
	}
	if !holds {
		return false, s
	}
	if exp.Kind() == kv.ExpectVersion && s.version == 0 {
		s.version = exp.Version() // the precondition held: that was the lost write
	}
	switch c := cmd.(type) {
	case kv.Put:
		w, ok := o.Resp.(kv.Written)
		if !ok || w.Version <= s.maxVersion {
			return false, s
		}
		return true, state{present: true, value: string(c.Value), version: w.Version,
			expiresAt: c.NowMs + c.TTLMs, maxVersion: w.Version}
	case kv.Delete:
		d, ok := o.Resp.(kv.Deleted)
		if !ok || d.Removed != live {
			return false, s
		}
		if live {
			s.present = false
		}
		return true, s
	case kv.TakeOnce:
		tk, ok := o.Resp.(kv.Taken)
		if !ok || (tk.Record != nil) != live {
			return false, s
		}
		if !live {
			return true, s
		}
		s2, ok := s.matches(tk.Record)
		s2.present = false
		return ok, s2
	}
	return false, s
}

// unknownEffect is the state after cmd took effect with its reply lost.
// (Not taking effect is covered by linearizing it after everything else.)
func unknownEffect(s state, cmd kv.Command, holds, live bool, exp kv.Expect) state {
	if !holds {
		return s
	}
	switch c := cmd.(type) {
	case kv.Put:
		return state{present: true, value: string(c.Value), expiresAt: c.NowMs + c.TTLMs, maxVersion: s.maxVersion}
	case kv.Delete, kv.TakeOnce:
		if live && exp.Kind() != kv.ExpectAbsent {
			s.present = false
		}
	}
	return s
}

// Config shapes a workload.
type Config struct {
	Clients      int
	OpsPerClient int
	Keys         []string
	Seed         uint64
	OpTimeout    time.Duration // per proposal; a timed-out op is recorded as unknown
}

// Run drives cfg.Clients concurrent clients against p: lease acquire,
// renew, release, takeover, take-once and log-ordered reads (a Delete
// expecting version 0 never matches, so it answers with the current record
// and changes nothing). Clocks come from one shared logical clock that
// every operation advances a little, so leases lapse during the run.
func Run(ctx context.Context, p kv.Proposer, cfg Config) []porcupine.Operation {
	var (
		clock   atomic.Uint64
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
	)
	start := time.Now()
	stamp := func() int64 { return int64(time.Since(start)) }
	for id := range cfg.Clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(id)))
			known := map[string]uint64{}
			for n := range cfg.OpsPerClient {
				if ctx.Err() != nil {
					return
				}
				key := cfg.Keys[rng.IntN(len(cfg.Keys))]
				now := clock.Add(uint64(rng.IntN(3)))
				cmd := pick(rng, key, known[key], fmt.Sprintf("c%d-%d", id, n), now)
				opCtx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
				call := stamp()
				resp, err := p.Propose(opCtx, cmd)
				ret := stamp()
				cancel()
				out := Output{Resp: resp}
				if err != nil {
					out, ret = Output{Unknown: true}, math.MaxInt64
				}
				learn(known, key, resp)
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: id, Input: Input{Key: key, Cmd: cmd},
					Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return history
}

func pick(rng *rand.Rand, key string, known uint64, val string, now uint64) kv.Command {
	ttl := uint64(5 + rng.IntN(20))
	switch rng.IntN(10) {
	case 0, 1, 2: // acquire or take over
		return kv.Put{Key: key, Value: []byte(val), Expect: kv.Absent(), TTLMs: ttl, NowMs: now}
	case 3, 4: // renew
		return kv.Put{Key: key, Value: []byte(val), Expect: kv.Version(known), TTLMs: ttl, NowMs: now}
	case 5: // release
		return kv.Delete{Key: key, Expect: kv.Version(known), NowMs: now}
	case 6:
		return kv.Delete{Key: key, Expect: kv.Any(), NowMs: now}
	case 7:
		if rng.IntN(2) == 0 {
			return kv.TakeOnce{Key: key, Expect: kv.Any(), NowMs: now}
		}
		return kv.TakeOnce{Key: key, Expect: kv.Version(known), NowMs: now}
	}
	return kv.Delete{Key: key, Expect: kv.Version(0), NowMs: now} // read
}

func learn(known map[string]uint64, key string, r kv.Response) {
	switch r := r.(type) {
	case kv.Written:
		known[key] = r.Version
	case kv.Conflict:
		if r.Current != nil {
			known[key] = r.Current.Version
		}
	}
}
