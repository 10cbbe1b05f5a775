package plugins

import (
	"context"
	"testing"
	"time"
)

// BenchmarkCall measures one Call of a guest that writes a fixed response,
// with and without the deadline (the stop flag), and of the good
// guest, which uses every import against an in-memory flow.
func BenchmarkCall(b *testing.B) {
	cases := []struct {
		name, file string
		lim        Limits
	}{
		{"tiny/deadline", "tiny_a", Limits{}},
		{"tiny/no-deadline", "tiny_a", Limits{Deadline: -1}},
		{"good/deadline", "good", Limits{}},
		{"good/no-deadline", "good", Limits{Deadline: -1}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			h, _ := newTestHost(b, Limits{})
			register(b, h, "m", c.file, c.lim)
			in := sampleInput(newMemFlow())
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.Call(ctx, "m", "handle", in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCallParallel measures calls from many goroutines on one module
// with the default pool.
func BenchmarkCallParallel(b *testing.B) {
	h, _ := newTestHost(b, Limits{})
	register(b, h, "m", "tiny_a", Limits{Deadline: time.Second})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		in := sampleInput(nil)
		for pb.Next() {
			if _, err := h.Call(ctx, "m", "handle", in); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkEncodeRequest(b *testing.B) {
	in := sampleInput(nil)
	var e encoder
	b.ReportAllocs()
	for b.Loop() {
		e.encodeRequest(in)
	}
}

// BenchmarkInstantiate measures making and closing one instance (what a
// recycle or a discarded instance costs) of a small WAT guest.
func BenchmarkInstantiate(b *testing.B) {
	h, _ := newTestHost(b, Limits{})
	register(b, h, "m", "good", Limits{})
	v := (*h.modules.Load())["m"]
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		inst, err := v.instantiate(ctx)
		if err != nil {
			b.Fatal(err)
		}
		inst.close()
	}
}
