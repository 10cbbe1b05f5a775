package predicate

import (
	"regexp"
	"testing"

	"github.com/riftgate/riftgate/gateway/message"
	"pgregory.net/rapid"
)

// Runes whose case folding is not one-to-one or not ASCII: the Kelvin sign
// folds with k, long s with s, and the others have no ASCII partner.
var foldRunes = []string{"a", "A", "k", "K", "\u212a", "s", "S", "\u017f", "ß", "ẞ", "é", "É", "/", "1", "-", "\xff", "\ufffd"}

// TestRegexPrefilterProperty holds the prefilter to the engine: it never
// rules out a string the regexp matches, so MatchString agrees with the
// regexp everywhere, with and without (?i) and ^.
func TestRegexPrefilterProperty(t *testing.T) {
	piece := rapid.SampledFrom(foldRunes)
	rapid.Check(t, func(t *rapid.T) {
		lit := ""
		for range rapid.IntRange(0, 4).Draw(t, "litLen") {
			lit += regexp.QuoteMeta(piece.Draw(t, "lit"))
		}
		expr := rapid.SampledFrom([]string{"", "(?i)"}).Draw(t, "flags") +
			rapid.SampledFrom([]string{"", "^", "(?m)^"}).Draw(t, "anchor") + lit +
			rapid.SampledFrom([]string{"", "$", "[a-z]+", ".*", `\d`, "(x|y)", "|b"}).Draw(t, "tail")
		re, err := regexp.Compile(expr)
		if err != nil {
			t.Skip(err)
		}
		x := newRegex(re)
		s := ""
		for range rapid.IntRange(0, 8).Draw(t, "inLen") {
			s += piece.Draw(t, "in")
		}
		if got, want := x.MatchString(s), re.MatchString(s); got != want {
			t.Fatalf("%q (lit %q fold %v anchored %v) on %q: %v, regexp says %v", expr, x.lit, x.fold, x.anchored, s, got, want)
		}
	})
}

// TestRegexPrefilterApplies checks that the patterns it is for get one.
func TestRegexPrefilterApplies(t *testing.T) {
	for _, tc := range []struct {
		expr, lit      string
		fold, anchored bool
	}{
		{`(?i)^/r/5/[a-z]+$`, "/R/5/", true, true}, // a folded literal is kept in upper case
		{`^/api/v\d+/orders`, "/api/v", false, true},
		{`orders/\d+`, "orders/", false, false},
		{`(?i)(a|b)c`, "", false, false},
		{`a|b`, "", false, false},
	} {
		x := newRegex(regexp.MustCompile(tc.expr))
		if x.lit != tc.lit || x.fold != tc.fold || x.anchored != tc.anchored {
			t.Errorf("%s: lit %q fold %v anchored %v, want %q %v %v", tc.expr, x.lit, x.fold, x.anchored, tc.lit, tc.fold, tc.anchored)
		}
	}
}

// BenchmarkMatchesPathMiss is the common case of many `matches` stubs: a
// pattern whose literal start rules the path out.
func BenchmarkMatchesPathMiss(b *testing.B) {
	benchMiss(b, `{"matches":{"path":"^/r/5/[a-z]+$"}}`, &message.Request{Method: "GET", Path: "/r/99/abc"})
}

func benchMiss(b *testing.B, pred string, r *message.Request) {
	p, err := Compile([]byte(pred), Options{})
	if err != nil {
		b.Fatal(err)
	}
	if p.Match(r) {
		b.Fatalf("%s matches", pred)
	}
	b.ReportAllocs()
	for b.Loop() {
		p.Match(r)
	}
}

// FuzzRegexPrefilter: for any pattern Go compiles and any input, the
// prefiltered match agrees with the regexp's.
func FuzzRegexPrefilter(f *testing.F) {
	f.Add(`(?i)^/r/5/[a-z]+$`, "/R/5/abc")
	f.Add(`(?i)k`, "\u212a")
	f.Add(`ſ+`, "S")
	f.Fuzz(func(t *testing.T, expr, s string) {
		re, err := regexp.Compile(expr)
		if err != nil {
			return
		}
		if got, want := newRegex(re).MatchString(s), re.MatchString(s); got != want {
			t.Fatalf("%q on %q: %v, regexp says %v", expr, s, got, want)
		}
	})
}
