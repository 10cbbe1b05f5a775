package predicate

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
)

// A recorded stub's predicate (what proxyOnce generates: deepEquals on the
// path) is held for as long as the recording, hundreds of thousands of
// them, and each object it holds is work for every collection: it keeps
// only what matching reads. Objects, unlike bytes, do not depend on the
// allocator's size classes.
func TestRecordedPredicateHoldsFewObjects(t *testing.T) {
	if raceOn {
		t.Skip("the race detector changes what is allocated")
	}
	const n = 20000
	raws := make([]json.RawMessage, n)
	for i := range raws {
		raws[i] = json.RawMessage(fmt.Sprintf(`{"deepEquals":{"path":"/r/%d/%d"}}`, i%64, i))
	}
	held := make([]Predicate, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i, raw := range raws {
		p, err := Compile(raw, Options{})
		if err != nil {
			t.Fatal(err)
		}
		held[i] = p
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapObjects-before.HeapObjects) / n
	t.Logf("%.1f objects held per predicate", per)
	if want := 7.0; per > want {
		t.Errorf("a recorded predicate holds %.1f objects, want at most %v", per, want)
	}
	runtime.KeepAlive(held)
	runtime.KeepAlive(raws)
}
