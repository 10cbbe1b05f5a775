package predicate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/message"
)

// The bench's body cases: ten stubs, only the last matching, a POST of a
// 120-byte body. Each case's predicate has %d where the stub's number goes.
var bodyCases = []struct {
	name, pred, body, contentType string
}{
	{"json-equals", `{"equals":{"body":{"user":{"name":"user%d","role":"admin"}}}}`, benchJSON, "application/json"},
	{"jsonpath", `{"equals":{"body":"user%d"},"jsonpath":{"selector":"$.user.name"}}`, benchJSON, "application/json"},
	{"xpath", `{"equals":{"body":"user%d"},"xpath":{"selector":"//user/name"}}`, benchXML, "application/xml"},
	{"nested", `{"and":[{"equals":{"method":"POST"}},{"or":[{"equals":{"path":"/n/%d"}},{"startsWith":{"path":"/nested/%d/"}}]},{"not":{"contains":{"body":"forbidden"}}}]}`, benchJSON, "application/json"},
}

const (
	benchJSON = `{"user":{"name":"user9","role":"admin","email":"user9@example.com"},"order":{"id":12345,"items":["a1","b2"]}}`
	benchXML  = `<order><user><name>user9</name><role>admin</role><email>u9@example.com</email></user><id>12345</id></order>`
)

// BenchmarkTenStubs is the predicate work of one bench request: a fresh
// request (nothing parsed yet) tried against ten stubs until the last
// matches.
func BenchmarkTenStubs(b *testing.B) {
	for _, c := range bodyCases {
		b.Run(c.name, func(b *testing.B) {
			ps := make([]Predicate, 10)
			for i := range ps {
				var err error
				if ps[i], err = Compile(json.RawMessage(strings.ReplaceAll(c.pred, "%d", fmt.Sprint(i))), Options{}); err != nil {
					b.Fatal(err)
				}
			}
			tmpl := message.Request{Method: "POST", Path: "/nested/9/x",
				Headers: []message.KV{{Name: "Host", Value: "localhost"}, {Name: "Content-Type", Value: c.contentType}},
				Body:    []byte(c.body)}
			var r message.Request
			match := func() int {
				r = tmpl
				for i, p := range ps {
					if p.Match(&r) {
						return i
					}
				}
				return -1
			}
			if got := match(); got != 9 {
				b.Fatalf("stub %d matched, want 9", got)
			}
			b.ReportAllocs()
			for b.Loop() {
				match()
			}
		})
	}
}
