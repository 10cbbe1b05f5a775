package predicate

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"
)

// regex is a compiled `matches` pattern with a prefilter: the literal text
// every match begins with, checked before the regexp engine runs. mb's
// `matches` is case-insensitive by default, and Go's regexp does not scan
// for a case-folded prefix, so with a hundred `matches` stubs a request
// cost a hundred engine runs of ~150 ns each to reject all but one.
type regex struct {
	re  *regexp.Regexp
	lit string // every match begins with lit ("": no prefilter)
	// fold: lit matches case-insensitively, as the regexp's (?i) does;
	// anchored: the match starts at the input's start.
	fold, anchored bool
}

func newRegex(re *regexp.Regexp) *regex {
	x := &regex{re: re}
	t, err := syntax.Parse(re.String(), syntax.Perl) // as regexp.Compile parses
	if err != nil {
		return x
	}
	subs := []*syntax.Regexp{t}
	if t.Op == syntax.OpConcat {
		subs = t.Sub
	}
	if len(subs) > 0 && subs[0].Op == syntax.OpBeginText {
		x.anchored, subs = true, subs[1:]
	}
	// A literal U+FFFD would also match invalid UTF-8, which the byte
	// comparisons below do not see as it.
	if len(subs) > 0 && subs[0].Op == syntax.OpLiteral && !strings.ContainsRune(string(subs[0].Rune), utf8.RuneError) {
		x.lit = string(subs[0].Rune)
		x.fold = subs[0].Flags&syntax.FoldCase != 0
	}
	return x
}

// MatchString reports whether s contains a match.
func (x *regex) MatchString(s string) bool {
	return (x.lit == "" || x.mayMatch(s)) && x.re.MatchString(s)
}

// mayMatch is false only when no match can begin anywhere in s.
func (x *regex) mayMatch(s string) bool {
	switch {
	case !x.fold && x.anchored:
		return strings.HasPrefix(s, x.lit)
	case !x.fold:
		return strings.Contains(s, x.lit)
	case x.anchored:
		return hasFoldPrefix(s, x.lit)
	}
	for i := range s {
		if hasFoldPrefix(s[i:], x.lit) {
			return true
		}
	}
	return false
}

// hasFoldPrefix reports whether s begins with p under simple case folding,
// rune by rune, which is how a (?i) literal matches: a rune matches every
// rune of its unicode.SimpleFold orbit ('k', 'K' and the Kelvin sign).
func hasFoldPrefix(s, p string) bool {
	// Bytes first, while both are ASCII: most paths and patterns are.
	i := 0
	for ; i < len(p) && i < len(s); i++ {
		sc, pc := s[i], p[i]
		if sc >= utf8.RuneSelf || pc >= utf8.RuneSelf {
			break
		}
		if sc != pc && (sc|0x20 != pc|0x20 || sc|0x20 < 'a' || sc|0x20 > 'z') {
			return false
		}
	}
	s, p = s[i:], p[i:]
	for _, pr := range p {
		if s == "" {
			return false
		}
		sr, n := utf8.DecodeRuneInString(s)
		s = s[n:]
		if sr == pr {
			continue
		}
		if sr < utf8.RuneSelf && pr < utf8.RuneSelf {
			// Two ASCII runes fold together only as letters of one case pair.
			if sr|0x20 != pr|0x20 || sr|0x20 < 'a' || sr|0x20 > 'z' {
				return false
			}
			continue
		}
		if !sameFold(sr, pr) {
			return false
		}
	}
	return true
}

func sameFold(a, b rune) bool {
	for r := unicode.SimpleFold(a); r != a; r = unicode.SimpleFold(r) {
		if r == b {
			return true
		}
	}
	return false
}
