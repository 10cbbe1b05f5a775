// Package heaptest measures, for tests, what code leaves on the heap: the
// objects a value holds for as long as it is kept, and whether the race
// detector (which changes what is allocated) is on.
package heaptest

import "runtime"

// Held calls build for i in [0, n), keeps what each returns, and returns
// the heap objects and bytes still live afterwards, per item. build's
// error stops it.
func Held(n int, build func(i int) (any, error)) (objects, bytes float64, err error) {
	held := make([]any, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		if held[i], err = build(i); err != nil {
			return 0, 0, err
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(held)
	return float64(after.HeapObjects-before.HeapObjects) / float64(n),
		float64(after.HeapAlloc-before.HeapAlloc) / float64(n), nil
}
