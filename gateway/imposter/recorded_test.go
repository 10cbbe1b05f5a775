package imposter

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/internal/heaptest"
)

// recordedSpec parses stub i as proxyOnce records it: a deepEquals on the
// path, and the upstream's answer.
func recordedSpec(i int) (*StubSpec, error) {
	ss, err := ParseStubFor([]byte(fmt.Sprintf(`{"predicates":[{"deepEquals":{"path":"/r/%d"}}],
			"responses":[{"is":{"statusCode":200,"headers":{"Content-Type":"text/plain"},"body":"answer %d","_mode":"text"}}]}`, i, i)), "http")
	if err != nil {
		return nil, err
	}
	ss.ID, ss.Key, ss.Recorded = uint64(i+1), config.Key{}, true
	return ss, nil
}

// A recorded stub is two objects until a request reaches it, its JSON
// aside: its predicates are compiled then, not kept from when it was made,
// and the objects its parse made are not kept at all (the collector marks
// every object a recording holds at every cycle).
func TestRecordedStubHoldsFewObjects(t *testing.T) {
	if heaptest.Race {
		t.Skip("the race detector changes what is allocated")
	}
	const n = 20000
	imp := stubsImposter(t, 0)
	// Each stub's JSON, as the configuration holds it, is kept apart.
	var jsons [][]byte
	per, bytes, err := heaptest.Held(n, func(i int) (any, error) {
		ss, err := recordedSpec(i)
		if err != nil {
			return nil, err
		}
		jsons = append(jsons, ss.json)
		return imp.CompileStub(ss, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(jsons)
	t.Logf("%.1f objects held per recorded stub, %.0f bytes", per, bytes)
	// The JSON, the stub, and its path key's text.
	if want := 3.1; per > want {
		t.Errorf("a recorded stub holds %.1f objects, want at most %v", per, want)
	}
	// Up to 512 bytes, Go 1.26's collector (Green Tea) scans an object
	// with the others of its span, not alone.
	if size := unsafe.Sizeof(recordedStub{}); size > 512 {
		t.Errorf("a recorded stub is %d bytes, want at most 512", size)
	}
}

// A recorded stub whose predicates wait to be compiled matches as one
// compiled at once does, and answers its recording.
func TestRecordedStubMatchesWhenFirstAsked(t *testing.T) {
	imp := stubsImposter(t, 0)
	ss, err := recordedSpec(7)
	if err != nil {
		t.Fatal(err)
	}
	st, err := imp.CompileStub(ss, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path string
		want bool
	}{{"/r/7", true}, {"/r/6", false}, {"/r/7/", false}, {"/r/7", true}} {
		if got := st.matches(&message.Request{Method: "GET", Path: tt.path}); got != tt.want {
			t.Errorf("%s: matched %v, want %v", tt.path, got, tt.want)
		}
	}
	if got := st.next().static; got == nil || string(got.Body) != "answer 7" {
		t.Fatalf("answered %+v", got)
	}
}
