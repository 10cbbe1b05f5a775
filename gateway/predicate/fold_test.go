package predicate

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// foldText draws text that is mostly ASCII, with the non-ASCII runes whose
// lower case has another length (İ, K-as-Kelvin), and invalid bytes.
func foldText() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		parts := rapid.SliceOfN(rapid.SampledFrom([]string{"a", "B", "z", "Z", "/", "0", "é", "É", "İ", "\u212a", "\xff", "ß", "Σ", ""}), 0, 20).Draw(t, "parts")
		return strings.Join(parts, "")
	})
}

// The fast folds answer what lowering the text and comparing would.
func TestFoldsAreLowerThenCompare(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, p := foldText().Draw(t, "s"), foldText().Draw(t, "p")
		if rapid.Bool().Draw(t, "within") && s != "" {
			// Often a piece of s itself, so that the folds find it.
			i := rapid.IntRange(0, len(s)-1).Draw(t, "from")
			p = s[i:rapid.IntRange(i, len(s)).Draw(t, "to")]
		}
		low := lower(p)
		if got, want := foldEq(s, low), lower(s) == low; got != want {
			t.Fatalf("foldEq(%q, %q) = %v, lower says %v", s, low, got, want)
		}
		if got, want := foldPrefix(s, low), strings.HasPrefix(lower(s), low); got != want {
			t.Fatalf("foldPrefix(%q, %q) = %v, lower says %v", s, low, got, want)
		}
		if got, want := foldSuffix(s, low), strings.HasSuffix(lower(s), low); got != want {
			t.Fatalf("foldSuffix(%q, %q) = %v, lower says %v", s, low, got, want)
		}
		if got, want := foldContains(s, low), strings.Contains(lower(s), low); got != want {
			t.Fatalf("foldContains(%q, %q) = %v, lower says %v", s, low, got, want)
		}
	})
}
