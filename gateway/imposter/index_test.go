package imposter

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/message"
	"github.com/valyala/fasthttp"
	"pgregory.net/rapid"
)

// TestIndexPropertyMatchesAScan holds the path index (exact paths and
// path starts, from equals, startsWith and anchored matches) to a plain
// ordered scan, over random stub lists and paths that differ in case.
func TestIndexPropertyMatchesAScan(t *testing.T) {
	seg := rapid.SampledFrom([]string{"a", "A", "b", "k", "1", "12", "\u212a"})
	path := func(t *rapid.T, label string) string {
		p := ""
		for range rapid.IntRange(0, 3).Draw(t, label+"-n") {
			p += "/" + seg.Draw(t, label)
		}
		return p
	}
	rapid.Check(t, func(t *rapid.T) {
		var stubs []string
		for i := range rapid.IntRange(1, 8).Draw(t, "stubs") {
			p := path(t, "stub")
			cs := rapid.Bool().Draw(t, "caseSensitive")
			var pred string
			switch rapid.IntRange(0, 4).Draw(t, "kind") {
			case 0:
				pred = fmt.Sprintf(`{"equals":{"path":%q},"caseSensitive":%v}`, p, cs)
			case 1:
				pred = fmt.Sprintf(`{"startsWith":{"path":%q},"caseSensitive":%v}`, p, cs)
			case 2:
				pred = fmt.Sprintf(`{"matches":{"path":%q},"caseSensitive":%v}`, "^"+p+`(/\d+)?$`, cs)
			case 3:
				pred = fmt.Sprintf(`{"contains":{"path":%q}}`, p)
			default:
				pred = `{"equals":{"method":"GET"}}`
			}
			stubs = append(stubs, fmt.Sprintf(`{"predicates":[%s],"responses":[{"is":{"body":"%d"}}]}`, pred, i))
		}
		spec, err := ParseSpec([]byte(`{"protocol":"http","stubs":[` + strings.Join(stubs, ",") + `]}`))
		if err != nil {
			t.Fatal(err)
		}
		imp, err := New(spec, Options{Compiler: testCompiler})
		if err != nil {
			t.Fatal(err)
		}
		tbl := imp.table.Load()
		for range 4 {
			p := path(t, "request")
			if p == "" {
				p = "/"
			}
			var req fasthttp.Request
			req.SetRequestURI(p)
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, nil)
			r := new(message.Request)
			r.FillFromFastHTTP(&ctx)
			got := tbl.match(r, nil)
			var want *Stub
			for _, s := range tbl.stubs {
				if s.matches(r) {
					want = s
					break
				}
			}
			if got != want {
				t.Fatalf("%s: index chose %s, scan chose %s\n%s", p, body(got), body(want), strings.Join(stubs, "\n"))
			}
		}
	})
}

func body(s *Stub) string {
	if s == nil {
		return "none"
	}
	var ps []string
	for _, p := range s.Spec.Predicates {
		ps = append(ps, string(p))
	}
	return strings.Join(ps, ",")
}
