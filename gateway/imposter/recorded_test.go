package imposter

import (
	"fmt"
	"testing"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/internal/heaptest"
)

// recordedSpecs parses n stubs as proxyOnce records them: a deepEquals on
// the path, and the upstream's answer.
func recordedSpecs(t *testing.T, n int) []*StubSpec {
	t.Helper()
	specs := make([]*StubSpec, n)
	for i := range specs {
		ss, err := ParseStubFor([]byte(fmt.Sprintf(`{"predicates":[{"deepEquals":{"path":"/r/%d"}}],
			"responses":[{"is":{"statusCode":200,"headers":{"Content-Type":"text/plain"},"body":"answer %d","_mode":"text"}}]}`, i, i)), "http")
		if err != nil {
			t.Fatal(err)
		}
		ss.ID, ss.Key, ss.Recorded = uint64(i+1), config.Key{}, true
		specs[i] = ss
	}
	return specs
}

// A recorded stub is one object until a request reaches it: its predicates
// are compiled then, not kept from when it was made (the collector marks
// every object a recording holds at every cycle).
func TestRecordedStubHoldsFewObjects(t *testing.T) {
	if heaptest.Race {
		t.Skip("the race detector changes what is allocated")
	}
	const n = 20000
	imp := stubsImposter(t, 0)
	specs := recordedSpecs(t, n)
	per, bytes, err := heaptest.Held(n, func(i int) (any, error) { return imp.CompileStub(specs[i], nil) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f objects held per recorded stub, %.0f bytes", per, bytes)
	if want := 3.0; per > want {
		t.Errorf("a recorded stub holds %.1f objects, want at most %v", per, want)
	}
}

// A recorded stub whose predicates wait to be compiled matches as one
// compiled at once does, and answers its recording.
func TestRecordedStubMatchesWhenFirstAsked(t *testing.T) {
	imp := stubsImposter(t, 0)
	st, err := imp.CompileStub(recordedSpecs(t, 8)[7], nil)
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
