package predicate

import (
	"encoding/json"
	"testing"
)

// FuzzCompile feeds arbitrary predicate JSON to the compiler: it must
// either refuse it or produce a predicate that matches without panicking,
// whose fast path agrees with the generic algorithm, and whose hints hold.
func FuzzCompile(f *testing.F) {
	for _, c := range table {
		f.Add(c.pred, c.req.body)
	}
	f.Add(`{"equals":"x"}`, "")
	f.Add(`{"exists":{"query":[]}}`, "")
	f.Add(`{"equals":{"query":{"a":{"b":"c"}}}}`, `{"b":"c"}`)
	f.Fuzz(func(t *testing.T, pred, body string) {
		p, err := Compile(json.RawMessage(pred), Options{})
		if err != nil {
			return
		}
		for _, r := range []req{
			{method: "POST", path: "/a", query: "a=1&a=2&b=", headers: [][2]string{{"X-A", "1"}}, body: body},
			{body: body, headers: form},
		} {
			got := p.Match(r.message())
			if l, ok := p.(*leaf); ok && l.fast != nil {
				slow := *l
				slow.fast = nil
				if want := slow.Match(r.message()); got != want {
					t.Fatalf("%s: fast %v, generic %v", pred, got, want)
				}
			}
			if keys := PathKeys(p); got && !pathKeysHold(keys, r.message().Path) {
				t.Fatalf("%s: path keys %+v exclude a match", pred, keys)
			}
		}
	})
}
