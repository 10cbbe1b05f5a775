package predicate

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/riftgate/riftgate/internal/heaptest"
)

// A recorded stub's predicate (what proxyOnce generates: deepEquals on the
// path) is held for as long as the recording, hundreds of thousands of
// them, and each object it holds is work for every collection: it keeps
// only what matching reads. Objects, unlike bytes, do not depend on the
// allocator's size classes.
func TestRecordedPredicateHoldsFewObjects(t *testing.T) {
	if heaptest.Race {
		t.Skip("the race detector changes what is allocated")
	}
	const n = 20000
	raws := make([]json.RawMessage, n)
	for i := range raws {
		raws[i] = json.RawMessage(fmt.Sprintf(`{"deepEquals":{"path":"/r/%d/%d"}}`, i%64, i))
	}
	per, _, err := heaptest.Held(n, func(i int) (any, error) { return Compile(raws[i], Options{}) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f objects held per predicate", per)
	if want := 7.0; per > want {
		t.Errorf("a recorded predicate holds %.1f objects, want at most %v", per, want)
	}
}
