package raftnode

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkProposeAndWait measures committed writes per second on a
// three-member group over loopback HTTP, from the leader and through a
// follower (forwarded), sequential and with 32 concurrent proposers.
func BenchmarkProposeAndWait(b *testing.B) {
	c := threeNodes(b, 99, func(cfg *Config) { cfg.TickInterval = 100 * time.Millisecond; cfg.ElectionTick = 10 })
	l := c.leader(10 * time.Second)
	var f *member
	for _, n := range []string{"n1", "n2", "n3"} {
		if c.get(n) != l {
			f = c.get(n)
		}
	}
	for _, tc := range []struct {
		name string
		m    *member
		par  int
	}{{"leader/seq", l, 1}, {"leader/par32", l, 32}, {"follower/seq", f, 1}, {"follower/par32", f, 32}} {
		b.Run(tc.name, func(b *testing.B) {
			var errs atomic.Int64
			b.SetParallelism(tc.par)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					if _, err := tc.m.g.ProposeAndWait(ctx, counterCmd{Add: 1}); err != nil {
						errs.Add(1)
					}
					cancel()
				}
			})
			if errs.Load() > 0 {
				b.Fatalf("%d proposals failed", errs.Load())
			}
		})
	}
}
