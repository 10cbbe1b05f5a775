package predicate

import (
	"encoding/json"
	"fmt"
	"reflect"
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
		if keys := PathKeys(p); !pathKeysHold(keys, r.Path) {
			t.Fatalf("%s matches %s but its path keys are %+v", raws, r.Path, keys)
		}
	})
}

// pathKeysHold reports whether path, if ASCII (the index scans other
// paths), has one of keys regardless of ASCII case; nil keys hold for any.
func pathKeysHold(keys []PathKey, path string) bool {
	if keys == nil || !isASCII(path) {
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
	for _, k := range keys {
		if k.Prefix && strings.HasPrefix(low(path), low(k.Text)) || !k.Prefix && low(path) == low(k.Text) {
			return true
		}
	}
	return false
}

// Path keys are given where they are obviously due.
func TestPathKeys(t *testing.T) {
	exact := func(s ...string) (out []PathKey) {
		for _, p := range s {
			out = append(out, PathKey{Text: p})
		}
		return out
	}
	cases := []struct {
		preds []string
		want  []PathKey
	}{
		{[]string{`{"equals":{"method":"GET","path":"/A"}}`}, exact("/a")},
		{[]string{`{"equals":{"path":"/A"},"caseSensitive":true}`, `{"equals":{"method":"POST"}}`}, exact("/A")},
		{[]string{`{"equals":{"path":"/A"},"except":"x"}`}, nil},
		{[]string{`{"equals":{"path":"/A"},"jsonpath":{"selector":"$.a"}}`}, nil},
		{[]string{`{"startsWith":{"path":"/A"}}`}, []PathKey{{Text: "/a", Prefix: true}}},
		{[]string{`{"matches":{"path":"^/A/\\d+"}}`}, []PathKey{{Text: "/A/", Prefix: true}}},
		{[]string{`{"matches":{"path":"/A/\\d+"}}`}, nil},
		{[]string{`{"contains":{"path":"/A"}}`}, nil},
		{[]string{`{"deepEquals":{"path":"/A","method":"put"},"caseSensitive":true}`}, exact("/A")},
		// An or needs a key from every alternative, and has them all.
		{[]string{`{"or":[{"equals":{"path":"/A"}},{"equals":{"path":"/B"}}]}`}, exact("/a", "/b")},
		{[]string{`{"or":[{"equals":{"path":"/A"}},{"startsWith":{"path":"/B/"}}]}`}, []PathKey{{Text: "/a"}, {Text: "/b/", Prefix: true}}},
		{[]string{`{"or":[{"equals":{"path":"/A"}},{"equals":{"method":"GET"}}]}`}, nil},
		{[]string{`{"not":{"equals":{"path":"/A"}}}`}, nil},
		// An and takes its most selective child's: whole paths, then fewer.
		{[]string{`{"and":[{"equals":{"path":"/A"}},{"equals":{"method":"get"}}]}`}, exact("/a")},
		{[]string{`{"startsWith":{"path":"/A"}}`, `{"or":[{"equals":{"path":"/A/1"}},{"equals":{"path":"/A/2"}}]}`}, exact("/a/1", "/a/2")},
		{[]string{`{"or":[{"equals":{"path":"/A/1"}},{"equals":{"path":"/A/2"}}]}`, `{"equals":{"path":"/A/1"}}`}, exact("/a/1")},
		{[]string{`{"equals":{"Path":"/A"},"caseSensitive":true}`}, nil},
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
		if got := PathKeys(p); !reflect.DeepEqual(got, c.want) {
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
