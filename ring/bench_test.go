package ring

import (
	"strconv"
	"testing"
)

func BenchmarkScore(b *testing.B) {
	id := NodeID("n1")
	for b.Loop() {
		Score(id, ClassFlow, "i8080:user-12345")
	}
}

func BenchmarkOwner(b *testing.B) {
	for _, n := range []int{3, 5} {
		r := mustNew(b, 1, names("n", n))
		b.Run(strconv.Itoa(n)+"-voters", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Owner(ClassFlow, "i8080:user-12345")
			}
		})
	}
}

func BenchmarkSuccessors(b *testing.B) {
	r := mustNew(b, 1, names("n", 5))
	b.ReportAllocs()
	for b.Loop() {
		r.Successors(ClassFlow, "i8080:user-12345", ReplicaSuccessors)
	}
}

func BenchmarkNew(b *testing.B) {
	voters := names("n", 5)
	b.ReportAllocs()
	for b.Loop() {
		mustNew(b, 1, voters)
	}
}
