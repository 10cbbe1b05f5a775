package imposter

import (
	"encoding/json"
	"strings"
	"testing"
)

// Responses added to a running stub join its cycle where it is, and show
// in the imposter's JSON after the stub's own; the same whether Extend
// parses them or is handed what a recording's stub parsed them into.
func TestExtendAddsToTheCycle(t *testing.T) {
	for _, preParsed := range []bool{false, true} {
		t.Run(map[bool]string{false: "raw", true: "parsed"}[preParsed], func(t *testing.T) { testExtend(t, preParsed) })
	}
}

func testExtend(t *testing.T, preParsed bool) {
	spec, err := ParseSpec([]byte(`{"protocol":"http","port":1,"stubs":[{"responses":[{"is":{"body":"0"}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	spec.Stubs[0].ID = 7
	imp, err := New(spec, Options{Compiler: testCompiler}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := imp.Stubs()[0]
	if st.cycleKey() != "" {
		t.Fatalf("one response needs no cycle key: %q", st.cycleKey())
	}
	if b := st.next().static.Body; string(b) != "0" {
		t.Fatalf("first: %s", b)
	}
	raws := []json.RawMessage{[]byte(`{"is":{"body":"1"}}`), []byte(`{"is":{"body":"2"},"repeat":2}`)}
	var parsed []any
	if preParsed {
		rec, err := ParseStubFor([]byte(`{"predicates":[],"responses":[{"is":{"body":"1"}},{"is":{"body":"2"},"repeat":2}]}`), "http")
		if err != nil {
			t.Fatal(err)
		}
		if raws, parsed = rec.ResponseParts(); string(raws[1]) != `{"is":{"body":"2"},"repeat":2}` {
			t.Fatalf("ResponseParts: %s", raws[1])
		}
	}
	x, err := imp.Extend(st, raws, parsed, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := st.next().static.Body; string(b) != "0" {
		t.Fatalf("before Commit the stub is as it was: %s", b)
	}
	x.Commit()
	var got []string
	for range 5 {
		got = append(got, string(st.next().static.Body))
	}
	// Positions 2..6 of the cycle 0, 1, 2, 2.
	if strings.Join(got, "") != "2201"+"2" {
		t.Fatalf("cycle after the extension: %v", got)
	}
	if st.cycleKey() != "c1:7" {
		t.Fatalf("cycle key %q", st.cycleKey())
	}
	out := string(imp.JSON(View{Replayable: true}))
	if !strings.Contains(out, `"stubs":[{"responses":[{"is":{"body":"0"}},{"is":{"body":"1"}},{"is":{"body":"2"},"repeat":2}]}]`) {
		t.Fatalf("JSON:\n%s", out)
	}
	if _, err := imp.Extend(st, []json.RawMessage{[]byte(`{"is":{},"repeat":-1}`)}, nil, nil); err == nil {
		t.Fatalf("a response that does not compile is refused")
	}
}
