package predicate

import (
	"encoding/json"
	"testing"

	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/internal/heaptest"
	"pgregory.net/rapid"
)

// genObject draws a JSON object whose keys and arrays vary from draw to
// draw, nested to depth, so that a document made of an earlier one's maps
// and array room would show a key or an element left behind.
func genObject(t *rapid.T, depth int, label string) map[string]any {
	o := map[string]any{}
	for _, k := range rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"a", "b", "c", "D", "e"}), 0, 4, rapid.ID[string]).Draw(t, label+"keys") {
		switch kind := rapid.IntRange(0, 2).Draw(t, label+k+"kind"); {
		case kind == 0 && depth > 0:
			o[k] = genObject(t, depth-1, label+k)
		case kind == 1:
			o[k] = rapid.SliceOfN(genWord, 0, 3).Draw(t, label+k+"elems")
		default:
			o[k] = genWord.Draw(t, label+k)
		}
	}
	return o
}

// A request's body document lends its maps to the next request's
// (jsonDoc.Release): what a predicate answers on a request must not
// depend on the requests matched on the same message.Request before it.
func TestPropReusedBodyDocument(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		exp, _ := json.Marshal(map[string]any{"body": genObject(t, 2, "exp")})
		op := rapid.SampledFrom([]string{"equals", "deepEquals", "contains", "exists"}).Draw(t, "op")
		src := `{"` + op + `":` + string(exp) + `}`
		if rapid.Bool().Draw(t, "generated") {
			src = genPred(t, 1)
		}
		p := mustCompile(t, src)
		var reqs []req
		for i := range rapid.IntRange(1, 4).Draw(t, "requests") {
			b, _ := json.Marshal(genObject(t, 2, "body"+itoa(i)))
			r := genReq(t)
			if rapid.Bool().Draw(t, "jsonbody") {
				r.body = string(b)
			}
			reqs = append(reqs, r)
		}
		m := &message.Request{}
		for _, r := range reqs {
			want := p.Match(r.message())
			fresh := r.message()
			m.Method, m.Path, m.Query, m.Headers, m.Body = fresh.Method, fresh.Path, fresh.Query, fresh.Headers, fresh.Body
			if got := p.Match(m); got != want {
				t.Fatalf("%s on %q: %v on a reused request, %v on a new one", src, r.body, got, want)
			}
			m.Reset()
		}
	})
}

// Once warm, matching a body of objects alone allocates nothing: the
// document's maps are the previous request's. Under -race, where pools
// drop documents at random, it must still allocate fewer than the three
// objects' six allocations.
func TestBodyDocumentReusesItsMaps(t *testing.T) {
	p, err := Compile(json.RawMessage(`{"equals":{"body":{"a":{"b":{"c":true}}}}}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := &message.Request{Method: "POST", Path: "/", Body: []byte(`{"a":{"b":{"c":true},"x":null}}`)}
	body := m.Body
	match := func() {
		m.Method, m.Path, m.Body = "POST", "/", body
		if !p.Match(m) {
			t.Fatal("does not match")
		}
		m.Reset()
	}
	match()
	n := testing.AllocsPerRun(200, match)
	if heaptest.Race && n >= 6 || !heaptest.Race && n != 0 {
		t.Fatalf("%v allocations a request", n)
	}
}
