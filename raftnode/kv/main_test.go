package kv

import (
	"context"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// seqLog is an in-process serialising log: commands go through the wire codec
// and are applied in order at consecutive indices, as a Raft group would.
type seqLog struct {
	mu      sync.Mutex
	f       *Fragment
	next    uint64
	cutoffs []uint64 // every Evict cutoff proposed, in order
	fail    error    // when set, Propose fails without applying
}

func newLog(t testing.TB, p Policy) *seqLog {
	t.Helper()
	f, err := NewFragment(p)
	if err != nil {
		t.Fatal(err)
	}
	return &seqLog{f: f, next: 1}
}

func (l *seqLog) Propose(ctx context.Context, cmd Command) (Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := EncodeCommand(cmd)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return nil, l.fail
	}
	c, err := DecodeCommand(b)
	if err != nil {
		return nil, err
	}
	if ev, ok := c.(Evict); ok {
		l.cutoffs = append(l.cutoffs, ev.CutoffMs)
	}
	r := l.f.Apply(c, l.next)
	l.next++
	rb, err := EncodeResponse(r)
	if err != nil {
		return nil, err
	}
	return DecodeResponse(rb)
}

func (l *seqLog) AnyExpired(cutoffMs uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.AnyExpired(cutoffMs)
}

// fataler is what testing.TB and *rapid.T share.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

func mustFragment(t fataler, p Policy) *Fragment {
	t.Helper()
	f, err := NewFragment(p)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func put(key, val string, e Expect, ttl, now uint64) Put {
	return Put{Key: key, Value: []byte(val), Expect: e, TTLMs: ttl, NowMs: now}
}
