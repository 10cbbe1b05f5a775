package kv

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

func TestSweepProposesNothingWhenNothingExpired(t *testing.T) {
	l := newLog(t, DefaultPolicy())
	ctx := context.Background()
	if _, err := l.Propose(ctx, put("k", "v", Absent(), 100, 0)); err != nil {
		t.Fatal(err)
	}
	before := l.next
	for _, cutoff := range []uint64{0, 50, 99} {
		st, err := Sweep(ctx, l, cutoff, 10)
		if err != nil || st.Rounds != 0 {
			t.Fatalf("cutoff %d: %+v %v", cutoff, st, err)
		}
	}
	if l.next != before {
		t.Fatalf("an idle sweep wrote %d entries", l.next-before)
	}
}

func TestSweepReproposesImmediatelyWithSameCutoff(t *testing.T) {
	p := DefaultPolicy()
	p.MaxEvictPerCommand = 7
	l := newLog(t, p)
	ctx := context.Background()
	for i := range 100 {
		if _, err := l.Propose(ctx, put(string(rune('a'+i)), "", Absent(), uint64(1+i), 0)); err != nil {
			t.Fatal(err)
		}
	}
	// Records expiring after the cutoff must survive: the cutoff does not
	// advance between rounds.
	st, err := Sweep(ctx, l, 80, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if st.Evicted != 80 || st.Rounds != 12 {
		t.Fatalf("stats %+v, want 80 evicted in ceil(80/7)=12 rounds", st)
	}
	if len(l.cutoffs) != 12 || slices.ContainsFunc(l.cutoffs, func(c uint64) bool { return c != 80 }) {
		t.Fatalf("cutoffs %v, want twelve rounds at 80", l.cutoffs)
	}
	if l.f.Len() != 20 || l.AnyExpired(80) {
		t.Fatalf("len %d after sweep, want 20 and none expired", l.f.Len())
	}
}

func TestSweepReturnsProposalErrors(t *testing.T) {
	l := newLog(t, DefaultPolicy())
	ctx := context.Background()
	l.Propose(ctx, put("k", "v", Absent(), 1, 0))
	l.fail = errors.New("not leader")
	if _, err := Sweep(ctx, l, 10, 5); !errors.Is(err, l.fail) {
		t.Fatalf("err %v, want the proposal error wrapped", err)
	}
	l.fail = nil
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Sweep(cctx, l, 10, 5); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v after cancel", err)
	}
}

func TestRunSweeperDrainsABacklogAtOnceAndStopsWithItsContext(t *testing.T) {
	p := DefaultPolicy()
	p.MaxEvictPerCommand = 10
	l := newLog(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	for i := range 500 {
		l.Propose(ctx, put(string(rune(0x100+i)), "", Absent(), 5, 0))
	}
	var now atomic.Uint64
	now.Store(1000)
	// An hour-long interval: the whole backlog (50 rounds) must drain in
	// the first sweep, which starts at once.
	done := make(chan error, 1)
	go func() {
		done <- RunSweeper(ctx, l, SweeperConfig{Interval: time.Hour, Limit: 50, NowMs: now.Load})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for l.AnyExpired(1000) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if l.f.Len() != 0 || len(l.cutoffs) != 50 {
		t.Fatalf("%d records left after %d rounds", l.f.Len(), len(l.cutoffs))
	}
	if err := RunSweeper(context.Background(), l, SweeperConfig{}); err == nil {
		t.Fatal("a zero config runs")
	}
}
