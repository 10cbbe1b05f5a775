package intern

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"pgregory.net/rapid"
)

func TestCache(t *testing.T) {
	tests := []struct {
		name         string
		slots, max   int
		prefix, text string
		kept         bool // the second call returns the string the first made
	}{
		{"kept", 8, 64, "i4545:", "vu-1", true},
		{"no prefix", 8, 64, "", "n", true},
		{"too long", 8, 8, "i4545:", "vu-1234", false},
		{"empty", 8, 64, "i4545:", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.slots, tc.max)
			a, b := c.String(tc.prefix, tc.text), c.Bytes(tc.prefix, []byte(tc.text))
			if want := tc.prefix + tc.text; a != want || b != want {
				t.Fatalf("got %q and %q, want %q", a, b, want)
			}
			if same := len(a) > 0 && unsafePtr(a) == unsafePtr(b); same != tc.kept {
				t.Fatalf("kept %v, want %v", same, tc.kept)
			}
		})
	}
}

// TestNeverAliases: a string made from bytes stays what it was when the
// bytes change (they are guest memory, or a reused buffer).
func TestNeverAliases(t *testing.T) {
	for _, prefix := range []string{"", "p:"} {
		c := New(4, 64)
		b := []byte("abc")
		s := c.Bytes(prefix, b)
		copy(b, "xyz")
		if s != prefix+"abc" {
			t.Fatalf("prefix %q: %q changed with its bytes", prefix, s)
		}
		if got := c.Bytes(prefix, b); got != prefix+"xyz" {
			t.Fatalf("prefix %q: %q for xyz", prefix, got)
		}
	}
	var nilCache *Cache
	if s := nilCache.Bytes("", []byte("q")); s != "q" {
		t.Fatalf("nil cache: %q", s)
	}
}

// TestIsConcatenation: whatever was kept before, the answer is the
// concatenation, also with concurrent callers replacing slots.
func TestIsConcatenation(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := New(rapid.IntRange(1, 8).Draw(t, "slots"), rapid.IntRange(0, 12).Draw(t, "max"))
		texts := rapid.SliceOfN(rapid.StringMatching(`[a-c]{0,6}`), 1, 20).Draw(t, "texts")
		prefixes := []string{"", "i1:", "f:"}
		for i, s := range texts {
			p := prefixes[i%len(prefixes)]
			if got := c.Bytes(p, []byte(s)); got != p+s {
				t.Fatalf("Bytes(%q, %q) = %q", p, s, got)
			}
			if got := c.String(p, s); got != p+s {
				t.Fatalf("String(%q, %q) = %q", p, s, got)
			}
		}
	})
	c := New(2, 64)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				s := fmt.Sprint(i % 7)
				if got := c.String(fmt.Sprint(g), s); got != fmt.Sprint(g)+s {
					t.Errorf("got %q", got)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestKeptCostsNoAllocation(t *testing.T) {
	c := New(256, 128)
	id := []byte("rl-5f3a9c1e-vu-17")
	c.Bytes("i4545:", id)
	if n := testing.AllocsPerRun(100, func() { c.Bytes("i4545:", id) }); n != 0 {
		t.Fatalf("a kept string costs %v allocations", n)
	}
}

func BenchmarkCache(b *testing.B) {
	c := New(256, 128)
	id := []byte("rl-5f3a9c1e-vu-17")
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Bytes("i4545:", id)
	}
}

func unsafePtr(s string) *byte { return unsafe.StringData(s) }
