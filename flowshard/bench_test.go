package flowshard

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkPut measures acknowledged puts per second per durability mode
// with 1, 16 and 256 flows written concurrently (one goroutine per flow, so
// Sync's group commit batches up to that many puts). Numbers are only
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
							if _, err := s.Put(bg, id, fmt.Sprint("k", i%64), val, p); err != nil {
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
			if _, err := s.Get(bg, "i8080:f", "k"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
