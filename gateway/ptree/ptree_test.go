package ptree

import (
	"cmp"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// The persistent tree against a sorted slice: every version answers as the
// slice did when it was made, whatever was set after.
func TestPtreeMatchesASortedMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		keys := rapid.SliceOf(rapid.IntRange(0, 500)).Draw(t, "keys")
		tr := New[int, int](cmp.Compare[int])
		type version struct {
			tr    Map[int, int]
			model map[int]int
		}
		model := map[int]int{}
		var versions []version
		for i, k := range keys {
			tr = tr.Set(k, i)
			model[k] = i
			versions = append(versions, version{tr, cloneMap(model)})
		}
		for vi, v := range versions {
			want := sameEntries(t, vi, v.tr, v.model)
			from := rapid.IntRange(-1, 501).Draw(t, "from")
			var asc []int
			v.tr.Ascend(from, func(k, _ int) bool { asc = append(asc, k); return len(asc) < 3 })
			i, _ := slices.BinarySearch(want, from)
			if wantAsc := want[i:min(i+3, len(want))]; !slices.Equal(asc, wantAsc) {
				t.Fatalf("version %d: ascend from %d gave %v, want %v", vi, from, asc, wantAsc)
			}
			for _, k := range []int{from, rapid.IntRange(0, 500).Draw(t, "get")} {
				got, ok := v.tr.Get(k)
				if w, has := v.model[k]; ok != has || got != w {
					t.Fatalf("version %d: get %d = %d %v", vi, k, got, ok)
				}
			}
			if k, _, ok := v.tr.Last(); ok != (len(want) > 0) || ok && k != want[len(want)-1] {
				t.Fatalf("version %d: last %d", vi, k)
			}
		}
	})
}

// sameEntries fails t unless version vi, tr, holds model's entries, in
// order; it returns model's keys, sorted.
func sameEntries(t *rapid.T, vi int, tr Map[int, int], model map[int]int) []int {
	want := slices.Sorted(keysOf(model))
	var got []int
	tr.Each(func(k, val int) bool {
		if model[k] != val {
			t.Fatalf("version %d: %d holds %d, want %d", vi, k, val, model[k])
		}
		got = append(got, k)
		return true
	})
	if !slices.Equal(got, want) || tr.Len() != len(want) {
		t.Fatalf("version %d: keys %v, want %v", vi, got, want)
	}
	return want
}

func cloneMap(m map[int]int) map[int]int {
	out := make(map[int]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func keysOf(m map[int]int) func(func(int) bool) {
	return func(yield func(int) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Runs of SetIn, each with an Edit of its own, keeping only each run's
// last version: every kept version answers as the sorted map did when it
// was kept, however later runs changed nodes in place.
func TestEditsChangeOnlyTheirOwnRun(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tr := New[int, int](cmp.Compare[int])
		model := map[int]int{}
		type version struct {
			tr    Map[int, int]
			model map[int]int
		}
		var kept []version
		for range rapid.IntRange(1, 12).Draw(t, "runs") {
			e := &Edit{}
			if rapid.Bool().Draw(t, "plain") {
				e = nil // a run of plain Sets between edits
			}
			for i, k := range rapid.SliceOf(rapid.IntRange(0, 300)).Draw(t, "keys") {
				tr = tr.SetIn(e, k, i)
				model[k] = i
			}
			kept = append(kept, version{tr, cloneMap(model)})
		}
		for vi, v := range kept {
			sameEntries(t, vi, v.tr, v.model)
		}
	})
}

// A run of adjacent keys (a batch of proxyOnce recordings) copies each
// node once under an Edit, where plain Sets copy a path per key.
func TestEditCopiesANodeOnce(t *testing.T) {
	base := New[int, int](cmp.Compare[int])
	for k := range 100_000 {
		base = base.SetIn(nil, 2*k, k)
	}
	run := func(edit bool) float64 {
		return testing.AllocsPerRun(10, func() {
			tr, e := base, (*Edit)(nil)
			if edit {
				e = &Edit{}
			}
			for k := range 64 {
				tr = tr.SetIn(e, 100_001+2*k, k)
			}
		})
	}
	plain, edited := run(false), run(true)
	if edited*4 > plain {
		t.Errorf("64 adjacent Sets: %.0f allocations under an Edit, %.0f without: want a quarter at most", edited, plain)
	}
}

// A view is the value Get gives, as a list of one that appending to copies:
// the tree, and every version of it, stay as they were.
func TestViewSharesNothingWritable(t *testing.T) {
	tr := New[int, int](cmp.Compare[int])
	for i := range 100 {
		tr = tr.Set(i, i*10)
	}
	v := tr.View(42)
	if len(v) != 1 || cap(v) != 1 || v[0] != 420 {
		t.Fatalf("view of 42: %v (cap %d)", v, cap(v))
	}
	_ = append(v, -1)
	if got, _ := tr.Get(43); got != 430 {
		t.Fatalf("appending to a view changed the tree: 43 holds %d", got)
	}
	if tr.View(1000) != nil {
		t.Fatal("a missing key has a view")
	}
}
