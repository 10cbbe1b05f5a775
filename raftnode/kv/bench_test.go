package kv

import (
	"fmt"
	"testing"
)

func BenchmarkApplyPutRenewal(b *testing.B) {
	f := mustFragment(b, DefaultPolicy())
	val := make([]byte, 64)
	var idx uint64 = 1
	f.Apply(Put{Key: "lease", Value: val, Expect: Absent(), TTLMs: 1000}, idx)
	b.ReportAllocs()
	for b.Loop() {
		idx++
		f.Apply(Put{Key: "lease", Value: val, Expect: Version(idx - 1), TTLMs: 1000, NowMs: idx}, idx)
	}
}

func BenchmarkEvictBatchOf1000(b *testing.B) {
	p := DefaultPolicy()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		f := mustFragment(b, p)
		for i := range 1000 {
			f.Apply(Put{Key: fmt.Sprintf("k%06d", i), TTLMs: uint64(1 + i%50)}, uint64(i+1))
		}
		b.StartTimer()
		f.Apply(Evict{CutoffMs: 100, Limit: 1000}, 5000)
	}
}

func benchFragment(b *testing.B, n int) *Fragment {
	p := DefaultPolicy()
	p.MaxEntries = n
	f := mustFragment(b, p)
	for i := range n {
		f.Apply(Put{Key: fmt.Sprintf("key/%08d", i), Value: make([]byte, 32), TTLMs: uint64(1 + i%1000)}, uint64(i+1))
	}
	return f
}

func BenchmarkEncodeSnapshot100k(b *testing.B) {
	f := benchFragment(b, 100_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.EncodeSnapshot(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeSnapshot100k(b *testing.B) {
	snap, err := benchFragment(b, 100_000).EncodeSnapshot()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(snap)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeSnapshot(snap, DefaultPolicy()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCommandRoundTrip(b *testing.B) {
	c := Put{Key: "lease/scheduler", Value: make([]byte, 64), Expect: Version(123456), TTLMs: 5000, NowMs: 1 << 40}
	b.ReportAllocs()
	for b.Loop() {
		w, err := EncodeCommand(c)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := DecodeCommand(w); err != nil {
			b.Fatal(err)
		}
	}
}
