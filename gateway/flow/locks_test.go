package flow

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestLocks(t *testing.T) {
	budget := func(d time.Duration) context.Context {
		end := time.Now().Add(d)
		return context.WithValue(context.Background(), BudgetKey, &end)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"the request's budget ends the wait", budget(30 * time.Millisecond), ErrBudget},
		{"the context ends the wait", cancelled, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLocks()
			held, ok := l.TryLock("a")
			if !ok {
				t.Fatal("TryLock of a free lock failed")
			}
			if _, ok := l.TryLock("a"); ok {
				t.Fatal("TryLock of a held lock succeeded")
			}
			if _, err := l.Lock(tc.ctx, "a"); !errors.Is(err, tc.want) {
				t.Fatalf("Lock of a held lock: %v, want %v", err, tc.want)
			}
			other, err := l.Lock(tc.ctx, "b")
			if err != nil {
				t.Fatalf("another flow's lock waited for a: %v", err)
			}
			l.Unlock("b", other)
			l.Unlock("a", held)
			if n := l.count(); n != 0 {
				t.Fatalf("%d locks left after every holder and waiter went", n)
			}
		})
	}
}

// TestLocksSerializeOneFlow: holders of one flow's lock never overlap,
// and nothing is left once they are done.
func TestLocksSerializeOneFlow(t *testing.T) {
	l := NewLocks()
	var inside [4]int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			f := g % len(inside)
			id := "f" + strconv.Itoa(f)
			for range 200 {
				h, err := l.Lock(context.Background(), id)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				inside[f]++
				if inside[f] != 1 {
					t.Errorf("%d holders of %s at once", inside[f], id)
				}
				mu.Unlock()
				mu.Lock()
				inside[f]--
				mu.Unlock()
				l.Unlock(id, h)
			}
		})
	}
	wg.Wait()
	if n := l.count(); n != 0 {
		t.Fatalf("%d locks left", n)
	}
}

func TestLocksAllocateNothingUncontended(t *testing.T) {
	l := NewLocks()
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		h, _ := l.Lock(ctx, "flow")
		l.Unlock("flow", h)
	}); n != 0 {
		t.Fatalf("%v allocations per lock and unlock", n)
	}
}

// count is how many locks exist.
func (l *Locks) count() int {
	n := 0
	for i := range l.shards {
		l.shards[i].mu.Lock()
		n += len(l.shards[i].m)
		l.shards[i].mu.Unlock()
	}
	return n
}
