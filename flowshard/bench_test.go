package flowshard

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkPut measures acknowledged puts per second per durability mode
// with 1, 16 and 256 flows written concurrently (one goroutine per flow, so
// Sync's group commit batches up to that many puts). Each flow is a small
// map, as a scenario's state is: 4 keys of 64-byte values, overwritten in
// turn. Numbers are only
// meaningful on an otherwise idle machine; see docs/flowshard.md.
func BenchmarkPut(b *testing.B) {
	for _, mode := range []struct {
		name string
		d    Durability
	}{{"memory", Memory}, {"async", Async}, {"sync", Sync}} {
		for _, flows := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("%s/flows=%d", mode.name, flows), func(b *testing.B) {
				s, err := Open(dbPath(b), Options{})
				if err != nil {
					b.Fatal(err)
				}
				val := make([]byte, 64)
				p := Policy{Durability: mode.d, Origin: 1}
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				start := time.Now()
				for g := range flows {
					id := fmt.Sprintf("i8080:%d", g)
					wg.Go(func() {
						for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
							if _, err := s.Put(bg, id, fmt.Sprint("k", i%4), val, p); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				st := s.Stats()
				if err := s.Close(bg); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "puts/s")
				if st.Batches > 0 {
					b.ReportMetric(float64(st.BatchedOps)/float64(st.Batches), "ops/batch")
				}
			})
		}
	}
}

// BenchmarkGet measures reads of a warm flow.
func BenchmarkGet(b *testing.B) {
	s, err := Open("", Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(bg)
	if _, err := s.Put(bg, "i8080:f", "k", make([]byte, 64), Policy{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Get(bg, "i8080:f", "k", nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkFsync is the disk's own pace, for reading BenchmarkPut's numbers:
// one 4 KiB write plus fsync per op, in the directory the stores use. A
// Sync commit costs two of these (bbolt syncs its pages, then its meta page).
func BenchmarkFsync(b *testing.B) {
	f, err := os.Create(dbPath(b))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, 4096)
	start := time.Now()
	for b.Loop() {
		if _, err := f.WriteAt(page, 0); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "fsyncs/s")
}
