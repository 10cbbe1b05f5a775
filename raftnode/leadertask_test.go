package raftnode

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type warnCounter struct{ n atomic.Int32 }

func (w *warnCounter) Warn(string, ...any) { w.n.Add(1) }

// TestLeaderWatchWaitsOutStragglers flaps leadership faster than a task
// stops: the next generation must not start until the straggler returned.
func TestLeaderWatchWaitsOutStragglers(t *testing.T) {
	var leading atomic.Bool
	changed := make(chan struct{}, 1)
	set := func(v bool) {
		leading.Store(v)
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	var mu sync.Mutex
	var live, maxLive, gens int
	var started []uint64
	factory := func(gen uint64) []LeaderTask {
		mu.Lock()
		gens++
		started = append(started, gen)
		mu.Unlock()
		body := func(ignoreCancel time.Duration) LeaderTask {
			return func(ctx context.Context) {
				mu.Lock()
				live++
				maxLive = max(maxLive, live)
				mu.Unlock()
				<-ctx.Done()
				time.Sleep(ignoreCancel)
				mu.Lock()
				live--
				mu.Unlock()
			}
		}
		// One well-behaved task and one that overruns the grace period.
		return []LeaderTask{body(0), body(150 * time.Millisecond)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	warn := &warnCounter{}
	done := make(chan struct{})
	go func() {
		runLeaderWatch(ctx, leading.Load, changed, factory, 30*time.Millisecond, warn)
		close(done)
	}()
	for range 4 {
		set(true)
		time.Sleep(20 * time.Millisecond)
		set(false)
		time.Sleep(5 * time.Millisecond)
	}
	set(true)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		ok := live == 2
		mu.Unlock()
		if ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if maxLive > 2 {
		t.Fatalf("%d tasks ran at once: two generations overlapped", maxLive)
	}
	if live != 0 {
		t.Fatalf("%d tasks still running after the watcher returned", live)
	}
	if gens < 2 || warn.n.Load() == 0 {
		t.Fatalf("generations %v, straggler warnings %d", started, warn.n.Load())
	}
	for i, g := range started {
		if g != uint64(i+1) {
			t.Fatalf("generations %v not consecutive", started)
		}
	}
}
