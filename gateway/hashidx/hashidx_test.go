package hashidx

import (
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// Every version answers as a list of (hash, value) pairs did when it was
// made, whatever was added after it or to versions forked from it; the
// hashes are drawn from a few so that chains are long and slots shared.
func TestIndexMatchesAList(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type pair struct {
			h uint64
			v int
		}
		type version struct {
			x     Index[int]
			model []pair
		}
		versions := []version{{}}
		steps := rapid.IntRange(1, 3000).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			// Mostly the newest version, sometimes an older one (a fork).
			from := len(versions) - 1
			if rapid.IntRange(0, 20).Draw(t, "fork") == 0 {
				from = rapid.IntRange(0, from).Draw(t, "from")
			}
			p := pair{rapid.Uint64Range(0, 40).Draw(t, "h") * 0x9e3779b97f4a7c15, i}
			v := versions[from]
			versions = append(versions, version{v.x.Add(p.h, p.v), append(slices.Clip(v.model), p)})
		}
		for vi, v := range versions {
			if v.x.Len() != len(v.model) {
				t.Fatalf("version %d: len %d, want %d", vi, v.x.Len(), len(v.model))
			}
			for h := uint64(0); h <= 40; h++ {
				h *= 0x9e3779b97f4a7c15
				var got, want []int
				v.x.Each(h, func(val int) bool { got = append(got, val); return true })
				for i := len(v.model) - 1; i >= 0; i-- {
					if v.model[i].h == h {
						want = append(want, v.model[i].v)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("version %d, hash %x: %v, want %v (newest first)", vi, h, got, want)
				}
			}
		}
	})
}

func TestEachStops(t *testing.T) {
	var x Index[int]
	for i := range 10 {
		x = x.Add(7, i)
	}
	var got []int
	x.Each(7, func(v int) bool { got = append(got, v); return len(got) < 3 })
	if !slices.Equal(got, []int{9, 8, 7}) {
		t.Fatalf("got %v, want the three newest", got)
	}
	var empty Index[int]
	empty.Each(7, func(int) bool { t.Fatal("an empty index has no values"); return false })
}

// Readers of older versions run while the newest grows past several
// rehashes and chunks (run with -race): each sees exactly its own entries.
func TestReadersWhileAdding(t *testing.T) {
	const n = 20000
	versions := make(chan Index[uint64], 64)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for x := range versions {
				// Entry i is i under hash i%97: x holds 0..Len-1.
				for h := uint64(0); h < 97; h += 13 {
					var got []uint64
					x.Each(h, func(v uint64) bool { got = append(got, v); return true })
					want := []uint64{}
					for i := uint64(x.Len()); i > 0; i-- {
						if (i-1)%97 == h {
							want = append(want, i-1)
						}
					}
					if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
						t.Errorf("version of %d, hash %d: %v, want %v", x.Len(), h, got, want)
						return
					}
				}
			}
		}()
	}
	var x Index[uint64]
	for i := uint64(0); i < n; i++ {
		x = x.Add(i%97, i)
		if i%500 == 0 {
			versions <- x
		}
	}
	close(versions)
	wg.Wait()
}

// Adding to the newest version allocates nothing but the chunks and the
// tables, which double: O(1) amortized, and few objects.
func TestAddAllocatesLittle(t *testing.T) {
	allocs := testing.AllocsPerRun(1, func() {
		var x Index[[2]uint64]
		for i := uint64(0); i < 100_000; i++ {
			x = x.Add(i*0x9e3779b97f4a7c15, [2]uint64{i, i})
		}
	})
	// 98 chunks, each with a new directory (its slice and header); 14
	// tables of two arrays; a store. The race detector adds its own.
	if allocs > 4*98+3*14+1 {
		t.Fatalf("100,000 adds made %.0f allocations", allocs)
	}
}

func BenchmarkAdd(b *testing.B) {
	var x Index[[3]uint64]
	for i := range uint64(b.N) {
		x = x.Add(i*0x9e3779b97f4a7c15, [3]uint64{i})
	}
}

func BenchmarkEach(b *testing.B) {
	var x Index[[3]uint64]
	for i := range uint64(1 << 18) {
		x = x.Add(i*0x9e3779b97f4a7c15, [3]uint64{i})
	}
	b.ResetTimer()
	for i := range uint64(b.N) {
		x.Each((i&(1<<18-1))*0x9e3779b97f4a7c15, func([3]uint64) bool { return false })
	}
}
