package plugins

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestNoLeaksOver100kCalls makes 100k calls from several goroutines while
// the module is swapped back and forth, then checks that the heap is flat,
// that every replaced version closed, and (in TestMain, with goleak) that no
// goroutine is left behind.
func TestNoLeaksOver100kCalls(t *testing.T) {
	const (
		total   = 100_000
		workers = 4
		swaps   = 10
	)
	h, _ := newTestHost(t, Limits{})
	a, b := loadWasm(t, "tiny_a"), loadWasm(t, "tiny_b")
	ctx := context.Background()
	lim := Limits{PoolSize: 2, RecycleAfter: 5000}
	if _, err := h.Register(ctx, "m", a, lim); err != nil {
		t.Fatal(err)
	}
	// The first round grows what a busy host keeps for good: the runtime's
	// free goroutines (wazero starts one per call to watch its context,
	// and a tight loop of calls makes them pile up before they run) and
	// the pools' buffers. The second round must leave the heap where the
	// first left it.
	var before uint64
	goroutines := runtime.NumGoroutine()
	for round := range 2 {
		if round == 1 {
			before = heapAfterGC()
		}
		round100k(t, h, a, b, lim, total, workers, swaps)
	}

	if n := h.open.Load(); n != 1 {
		t.Fatalf("%d versions open after the swaps, want 1", n)
	}
	st := statsOf(t, h, "m")
	if st.InstancesLive > int64(lim.PoolSize) || st.Calls < 2*total {
		t.Fatalf("stats %+v", st)
	}
	after := heapAfterGC()
	// Generous: the point is to catch per-call or per-swap growth, which
	// would be tens of MiB over 100k calls.
	if grew := int64(after) - int64(before); grew > 8<<20 {
		t.Fatalf("heap grew by %d bytes over %d more calls (%d -> %d)", grew, total, before, after)
	}
	// The deadline's watcher goroutines end shortly after each call.
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Fatalf("%d goroutines, %d before the calls", n, goroutines)
	}
	t.Logf("heap %d -> %d bytes; %+v", before, after, st)
}

// round100k makes total calls from workers goroutines while swapping the
// module between a and b swaps times.
func round100k(t *testing.T, h *Host, a, b []byte, lim Limits, total, workers, swaps int) {
	t.Helper()
	ctx := context.Background()
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			in := sampleInput(nil)
			for done.Add(1) <= int64(total) {
				out, err := h.Call(ctx, "m", "handle", in)
				if err != nil {
					errs <- err
					return
				}
				if s := out.Response.Status; s != 200 && s != 202 {
					t.Errorf("status %d", s)
					return
				}
			}
		})
	}
	for i := range swaps {
		for done.Load() < int64((i+1)*total/(swaps+1)) && len(errs) == 0 {
			time.Sleep(time.Millisecond)
		}
		wasm := b
		if i%2 == 1 {
			wasm = a
		}
		if _, err := h.Register(ctx, "m", wasm, lim); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
