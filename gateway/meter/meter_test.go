package meter

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestFineBucketsHoldMountebanksBounds(t *testing.T) {
	if !slices.IsSorted(FineBuckets) {
		t.Fatalf("FineBuckets not ascending: %v", FineBuckets)
	}
	for _, b := range append(append([]time.Duration{}, MatchBuckets...), ResponseBuckets...) {
		if !slices.Contains(FineBuckets, b) {
			t.Errorf("mb bound %v is not a fine bound", b)
		}
	}
}

func TestObserveAndCumulative(t *testing.T) {
	h := NewHistogram(FineBuckets)
	for _, d := range []time.Duration{3 * time.Microsecond, 9 * time.Millisecond, 10 * time.Millisecond, 11 * time.Millisecond, time.Minute} {
		h.Observe(d)
	}
	s := h.Snapshot()
	got := s.Cumulative(MatchBuckets)
	want := []uint64{3, 4, 4, 4, 4, 4} // 10 ms is in the 10 ms bucket (le is inclusive)
	if !slices.Equal(got, want) || s.Count() != 5 {
		t.Fatalf("cumulative %v count %d, want %v and 5", got, s.Count(), want)
	}
	if s.Sum != 3*time.Microsecond+30*time.Millisecond+time.Minute {
		t.Fatalf("sum %v", s.Sum)
	}
}

// TestQuantileIsInItsBucket: the estimate lies within the bounds of the
// bucket that holds the true quantile, so it is never off by more than a
// bucket's width.
func TestQuantileIsInItsBucket(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ds := rapid.SliceOfN(rapid.Int64Range(1, int64(40*time.Second)), 1, 200).Draw(t, "durations")
		q := rapid.Float64Range(0.01, 1).Draw(t, "q")
		h := NewHistogram(FineBuckets)
		for _, d := range ds {
			h.Observe(time.Duration(d))
		}
		slices.Sort(ds)
		rank := int(q*float64(len(ds))+0.999999) - 1
		rank = max(0, min(rank, len(ds)-1))
		truth := time.Duration(ds[rank])
		i := bucket(FineBuckets, truth)
		lo, hi := time.Duration(0), FineBuckets[len(FineBuckets)-1]
		if i > 0 {
			lo = FineBuckets[i-1]
		}
		if i < len(FineBuckets) {
			hi = FineBuckets[i]
		}
		if got := h.Snapshot().Quantile(q); got < lo || got > hi {
			t.Fatalf("q%.3f of %d: %v, true %v is in (%v, %v]", q, len(ds), got, truth, lo, hi)
		}
	})
}

func TestSubIsTheDelta(t *testing.T) {
	h := NewHistogram(FineBuckets)
	h.Observe(time.Millisecond)
	before := h.Snapshot()
	h.Observe(2 * time.Second)
	d := h.Snapshot().Sub(before)
	if d.Count() != 1 || d.Sum != 2*time.Second || d.Quantile(1) <= time.Second {
		t.Fatalf("delta %+v", d)
	}
}

func BenchmarkObserve(b *testing.B) {
	m := NewImposter()
	for i := 0; b.Loop(); i++ {
		m.Observe(true, 2*time.Microsecond, time.Duration(i&1023)*time.Microsecond)
	}
}
