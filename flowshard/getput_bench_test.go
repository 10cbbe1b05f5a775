package flowshard

import "testing"

// BenchmarkGetPut is a plugin's typical pair on one warm flow in memory:
// read a key, write it back.
func BenchmarkGetPut(b *testing.B) {
	s, err := Open("", Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(bg)
	val := []byte("01234567")
	p := Policy{Durability: Memory, Origin: 1}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Get(bg, "i4545:4545", "bench", nil); err != nil && err != ErrNotFound {
			b.Fatal(err)
		}
		if _, err := s.Put(bg, "i4545:4545", "bench", val, p); err != nil {
			b.Fatal(err)
		}
	}
}
