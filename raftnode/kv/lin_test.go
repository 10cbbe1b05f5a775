package kv_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/riftgate/riftgate/raftnode/kv"
	"github.com/riftgate/riftgate/raftnode/kv/internal/linkv"
)

// chanLog is a serialising log: one goroutine owns the fragment and applies
// proposals, received over a channel, at consecutive indices.
type chanLog struct{ in chan proposal }

type proposal struct {
	wire  []byte
	reply chan []byte
}

func startLog(t *testing.T) *chanLog {
	f, err := kv.NewFragment(kv.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	l := &chanLog{in: make(chan proposal)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var index uint64
		for p := range l.in {
			index++
			cmd, err := kv.DecodeCommand(p.wire)
			if err != nil {
				panic(err)
			}
			out, err := kv.EncodeResponse(f.Apply(cmd, index))
			if err != nil {
				panic(err)
			}
			p.reply <- out
		}
	}()
	t.Cleanup(func() { close(l.in); <-done })
	return l
}

func (l *chanLog) Propose(ctx context.Context, cmd kv.Command) (kv.Response, error) {
	b, err := kv.EncodeCommand(cmd)
	if err != nil {
		return nil, err
	}
	p := proposal{wire: b, reply: make(chan []byte, 1)}
	select {
	case l.in <- p:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return kv.DecodeResponse(<-p.reply)
}

func TestCASAndLeaseHistoriesAreLinearizable(t *testing.T) {
	for seed := range uint64(3) {
		l := startLog(t) // the model starts from an empty fragment
		h := linkv.Run(context.Background(), l, linkv.Config{
			Clients: 8, OpsPerClient: 250, Keys: []string{"lease/a", "lease/b", "cas"},
			Seed: seed, OpTimeout: 10 * time.Second,
		})
		if len(h) != 8*250 {
			t.Fatalf("history has %d operations", len(h))
		}
		if res := porcupine.CheckOperationsTimeout(linkv.Model(), h, 30*time.Second); res != porcupine.Ok {
			t.Fatalf("seed %d: history is %v", seed, res)
		}
	}
}

// The checker must be able to fail: histories no linearizable fragment
// could produce are rejected.
func TestLinearizabilityCheckerRejectsImpossibleHistories(t *testing.T) {
	acquire := kv.Put{Key: "k", Value: []byte("a"), Expect: kv.Absent(), TTLMs: 100, NowMs: 10}
	read := kv.Delete{Key: "k", Expect: kv.Version(0), NowMs: 20}
	op := func(c kv.Command, r kv.Response, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: linkv.Input{Key: "k", Cmd: c}, Output: linkv.Output{Resp: r}, Call: call, Return: ret}
	}
	held := &kv.Record{Value: []byte("a"), Version: 5, ExpiresAtMs: 110}
	for name, h := range map[string][]porcupine.Operation{
		"stale read after an acknowledged write": {
			op(acquire, kv.Written{Version: 5}, 0, 1), op(read, kv.Conflict{}, 2, 3)},
		"two holders of one lease": {
			op(acquire, kv.Written{Version: 5}, 0, 1), op(acquire, kv.Written{Version: 6}, 2, 3)},
		"version not from the log order": {
			op(acquire, kv.Written{Version: 5}, 0, 1),
			op(kv.Put{Key: "k", Value: []byte("b"), Expect: kv.Version(5), TTLMs: 5, NowMs: 20}, kv.Written{Version: 4}, 2, 3)},
		"lapsed lease read as live": {
			op(acquire, kv.Written{Version: 5}, 0, 1),
			op(kv.Delete{Key: "k", Expect: kv.Version(0), NowMs: 110}, kv.Conflict{Current: held}, 2, 3)},
	} {
		if porcupine.CheckOperations(linkv.Model(), h) {
			t.Errorf("%s: accepted", name)
		}
	}
	lost := porcupine.Operation{Input: linkv.Input{Key: "k", Cmd: acquire}, Output: linkv.Output{Unknown: true}, Call: 0, Return: math.MaxInt64}
	for name, h := range map[string][]porcupine.Operation{
		"read of an acknowledged write": {op(acquire, kv.Written{Version: 5}, 0, 1), op(read, kv.Conflict{Current: held}, 2, 3)},
		"lost reply, write applied":     {lost, op(read, kv.Conflict{Current: held}, 2, 3)},
		"lost reply, write not applied": {lost, op(read, kv.Conflict{}, 2, 3)},
	} {
		if !porcupine.CheckOperations(linkv.Model(), h) {
			t.Errorf("%s: a legal history is rejected", name)
		}
	}
}
