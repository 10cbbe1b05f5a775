package predicate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/message"
	"pgregory.net/rapid"
)

func mustCompile(t *rapid.T, src string) Predicate {
	p, err := Compile(json.RawMessage(src), Options{})
	if err != nil {
		t.Fatalf("compile %s: %v", src, err)
	}
	return p
}

// Hints must never exclude a request the predicate matches.
func TestPropHintsSound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 3).Draw(t, "preds")
		raws := make([]json.RawMessage, n)
		for i := range raws {
			raws[i] = json.RawMessage(genPred(t, 1))
		}
		p, err := CompileAll(raws, Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := genReq(t).message()
		if !p.Match(r) {
			return
		}
		h := Hints(p)
		if h.HasMethod && fold(r.Method, h.MethodCaseSensitive) != h.Method {
			t.Fatalf("%s matches %s but hint says method %q", raws, r.Method, h.Method)
		}
		if h.HasPath && fold(r.Path, h.PathCaseSensitive) != h.Path {
			t.Fatalf("%s matches %s but hint says path %q", raws, r.Path, h.Path)
		}
		if !prefixHintHolds(h, r.Path) {
			t.Fatalf("%s matches %s but hint says the path starts %q", raws, r.Path, h.PathPrefix)
		}
	})
}

// prefixHintHolds reports whether path, if ASCII (the index scans other
// paths), starts with h's PathPrefix regardless of ASCII case.
func prefixHintHolds(h Hint, path string) bool {
	if !h.HasPathPrefix || !isASCII(path) {
		return true
	}
	low := func(s string) string {
		b := []byte(s)
		for i, c := range b {
			if 'A' <= c && c <= 'Z' {
				b[i] = c + 'a' - 'A'
			}
		}
		return string(b)
	}
	return strings.HasPrefix(low(path), low(h.PathPrefix))
}

func fold(s string, caseSensitive bool) string {
	if caseSensitive {
		return s
	}
	return strings.ToLower(s)
}

// Hints are given where they are obviously due.
func TestHints(t *testing.T) {
	cases := []struct {
		preds []string
		want  Hint
	}{
		{[]string{`{"equals":{"method":"GET","path":"/A"}}`}, Hint{Method: "get", HasMethod: true, Path: "/a", HasPath: true}},
		{[]string{`{"equals":{"path":"/A"},"caseSensitive":true}`, `{"equals":{"method":"POST"}}`}, Hint{Method: "post", HasMethod: true, Path: "/A", HasPath: true, PathCaseSensitive: true}},
		{[]string{`{"equals":{"path":"/A"},"except":"x"}`}, Hint{}},
		{[]string{`{"equals":{"path":"/A"},"jsonpath":{"selector":"$.a"}}`}, Hint{}},
		{[]string{`{"startsWith":{"path":"/A"}}`}, Hint{PathPrefix: "/a", HasPathPrefix: true}},
		{[]string{`{"matches":{"path":"^/A/\\d+"}}`}, Hint{PathPrefix: "/A/", HasPathPrefix: true}},
		{[]string{`{"matches":{"path":"/A/\\d+"}}`}, Hint{}},
		{[]string{`{"contains":{"path":"/A"}}`}, Hint{}},
		{[]string{`{"deepEquals":{"path":"/A","method":"put"},"caseSensitive":true}`}, Hint{Method: "put", HasMethod: true, MethodCaseSensitive: true, Path: "/A", HasPath: true, PathCaseSensitive: true}},
		{[]string{`{"or":[{"equals":{"path":"/A"}},{"equals":{"path":"/B"}}]}`}, Hint{}},
		{[]string{`{"and":[{"equals":{"path":"/A"}},{"equals":{"method":"get"}}]}`}, Hint{Method: "get", HasMethod: true, Path: "/a", HasPath: true}},
		{[]string{`{"equals":{"Path":"/A"},"caseSensitive":true}`}, Hint{}},
	}
	for _, c := range cases {
		var raws []json.RawMessage
		for _, s := range c.preds {
			raws = append(raws, json.RawMessage(s))
		}
		p, err := CompileAll(raws, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := Hints(p); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.preds, got, c.want)
		}
	}
}

func TestPropNotInverts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		src := genPred(t, 1)
		p, np := mustCompile(t, src), mustCompile(t, fmt.Sprintf(`{"not":%s}`, src))
		r := genReq(t)
		if p.Match(r.message()) == np.Match(r.message()) {
			t.Fatalf("not(%s) does not invert", src)
		}
	})
}

func TestPropOrAnd(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genPred(t, 1), genPred(t, 1)
		pa, pb := mustCompile(t, a), mustCompile(t, b)
		or := mustCompile(t, fmt.Sprintf(`{"or":[%s,%s]}`, a, b))
		orSwapped := mustCompile(t, fmt.Sprintf(`{"or":[%s,%s]}`, b, a))
		and := mustCompile(t, fmt.Sprintf(`{"and":[%s,%s]}`, a, b))
		deMorgan := mustCompile(t, fmt.Sprintf(`{"not":{"or":[{"not":%s},{"not":%s}]}}`, a, b))
		all, err := CompileAll([]json.RawMessage{json.RawMessage(a), json.RawMessage(b)}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := genReq(t)
		ma, mb := pa.Match(r.message()), pb.Match(r.message())
		if or.Match(r.message()) != (ma || mb) || orSwapped.Match(r.message()) != (ma || mb) {
			t.Fatal("or is not a disjunction")
		}
		if and.Match(r.message()) != (ma && mb) || all.Match(r.message()) != (ma && mb) || deMorgan.Match(r.message()) != (ma && mb) {
			t.Fatal("and is not a conjunction")
		}
	})
}

// The allocation-free path must agree with mb's generic algorithm.
func TestPropFastEqualsGeneric(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		src := genLeaf(t)
		p := mustCompile(t, src)
		l := p.(*leaf)
		if l.fast == nil {
			return
		}
		slow := *l
		slow.fast = nil
		r := genReq(t)
		if got, want := l.Match(r.message()), slow.Match(r.message()); got != want {
			t.Fatalf("%s on %+v: fast %v, generic %v", src, r, got, want)
		}
	})
}

func TestEmptyMatchesAll(t *testing.T) {
	p, err := CompileAll(nil, Options{})
	if err != nil || !p.Match(&message.Request{}) {
		t.Fatalf("empty predicates: %v", err)
	}
}
