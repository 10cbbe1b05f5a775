package imposter

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/internal/heaptest"
	"github.com/valyala/fasthttp"
	"pgregory.net/rapid"
)

// TestIndexPropertyMatchesAScan holds the path index (exact paths and
// path starts, from equals, startsWith, anchored matches and an or of
// them) to a plain
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
			switch rapid.IntRange(0, 5).Draw(t, "kind") {
			case 0:
				pred = fmt.Sprintf(`{"equals":{"path":%q},"caseSensitive":%v}`, p, cs)
			case 1:
				pred = fmt.Sprintf(`{"startsWith":{"path":%q},"caseSensitive":%v}`, p, cs)
			case 2:
				pred = fmt.Sprintf(`{"matches":{"path":%q},"caseSensitive":%v}`, "^"+p+`(/\d+)?$`, cs)
			case 3:
				pred = fmt.Sprintf(`{"contains":{"path":%q}}`, p)
			case 4:
				// Several keys, which may overlap (the same stub on
				// more than one candidate list).
				q := path(t, "stub")
				op := rapid.SampledFrom([]string{"equals", "startsWith"})
				pred = fmt.Sprintf(`{"or":[{%q:{"path":%q}},{%q:{"path":%q}},{"and":[{"equals":{"method":"GET"}},{"startsWith":{"path":%q}}]}]}`,
					op.Draw(t, "op"), p, op.Draw(t, "op"), q, p+q)
			default:
				pred = `{"equals":{"method":"GET"}}`
			}
			stubs = append(stubs, fmt.Sprintf(`{"predicates":[%s],"responses":[{"is":{"body":"%d"}}]}`, pred, i))
		}
		spec, err := ParseSpec([]byte(`{"protocol":"http","stubs":[` + strings.Join(stubs, ",") + `]}`))
		if err != nil {
			t.Fatal(err)
		}
		imp, err := New(spec, Options{Compiler: testCompiler}, nil)
		if err != nil {
			t.Fatal(err)
		}
		tbl := imp.table.Load()
		// The same stubs, some in the table as built and the others added
		// one by one, as recordings add them, in any order.
		all := tbl.stubs
		var base, added []*Stub
		var keys []config.Key
		for i, st := range all {
			st.Spec.Key = config.NewKey(uint64(2*(i+1)), 0)
			if rapid.Bool().Draw(t, "added") {
				added = append(added, st)
			} else {
				base, keys = append(base, st), append(keys, st.Spec.Key)
			}
		}
		mixed := newTable(base, keys)
		mixed = mixed.withAdded(nil) // a table with added stubs, even if none
		for _, st := range rapid.Permutation(added).Draw(t, "order") {
			mixed = mixed.withAdded([]*Stub{st})
		}
		for range 4 {
			p := path(t, "request")
			if p == "" {
				p = "/"
			}
			if got, want := matchBoth(tbl, p); got != want {
				t.Fatalf("%s: index chose %s, scan chose %s\n%s", p, body(got), body(want), strings.Join(stubs, "\n"))
			}
			if got, want := matchBoth(mixed, p); got != want {
				t.Fatalf("%s: with added stubs, index chose %s, scan chose %s\n%s", p, body(got), body(want), strings.Join(stubs, "\n"))
			}
		}
		if got := mixed.all(); len(got) != len(all) || !slicesEqual(got, all) {
			t.Fatalf("the stubs in order, with added ones, differ")
		}
	})
}

func slicesEqual(a, b []*Stub) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
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

// TestIndexFindsTheSameStubAsAScan checks the path index against a plain
// ordered scan, with paths that differ only in case.
func TestIndexFindsTheSameStubAsAScan(t *testing.T) {
	spec, err := ParseSpec([]byte(`{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"path":"/A"}}],"responses":[{"is":{"body":"0"}}]},
		{"predicates":[{"equals":{"path":"/a"},"caseSensitive":true}],"responses":[{"is":{"body":"1"}}]},
		{"predicates":[{"startsWith":{"path":"/a"}}],"responses":[{"is":{"body":"2"}}]},
		{"predicates":[{"equals":{"path":"/b"}}],"responses":[{"is":{"body":"3"}}]},
		{"predicates":[{"equals":{"path":"/k"}}],"responses":[{"is":{"body":"5"}}]},
		{"responses":[{"is":{"body":"4"}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	imp, err := New(spec, Options{Compiler: testCompiler}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tbl := imp.table.Load()
	// "/\u212a" (the Kelvin sign) lowercases to "/k", as in JavaScript.
	for _, path := range []string{"/a", "/A", "/ab", "/b", "/B", "/c", "/Ä", "/k", "/\u212a"} {
		if got, want := matchBoth(tbl, path); got != want {
			t.Errorf("%s: index chose %v, scan chose %v", path, got, want)
		}
	}
}

// matchBoth matches a request for path through the table's index, and by
// an ordered scan of its stubs.
func matchBoth(tbl *table, path string) (indexed, scanned *Stub) {
	var req fasthttp.Request
	req.SetRequestURI(path)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, nil)
	r := new(message.Request)
	r.FillFromFastHTTP(&ctx)
	for _, s := range tbl.all() {
		if s.matches(r) {
			scanned = s
			break
		}
	}
	return tbl.match(r, nil), scanned
}

// Matching a table that recordings added stubs to allocates nothing,
// whether the request's path has an added stub or not: it runs on every
// request a replay answers.
func TestMatchWithAddedStubsAllocatesNothing(t *testing.T) {
	if heaptest.Race {
		t.Skip("the race detector changes what is allocated")
	}
	var stubs []string
	for i := range 3 {
		stubs = append(stubs, fmt.Sprintf(`{"predicates":[{"equals":{"path":"/r/%d"}}],"responses":[{"is":{"body":"%d"}}]}`, i, i))
	}
	spec, err := ParseSpec([]byte(`{"protocol":"http","stubs":[` + strings.Join(stubs, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	imp, err := New(spec, Options{Compiler: testCompiler}, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := imp.table.Load().stubs
	for i, st := range all {
		st.Spec.Key = config.NewKey(uint64(2*(i+1)), 0)
	}
	tbl := newTable(all[:1], []config.Key{all[0].Spec.Key}).withAdded(all[1:])
	for _, path := range []string{"/r/1", "/r/2", "/none"} {
		r := &message.Request{Method: "GET", Path: path}
		if allocs := testing.AllocsPerRun(100, func() { tbl.match(r, nil) }); allocs != 0 {
			t.Errorf("%s: %.0f allocations a match", path, allocs)
		}
	}
}
