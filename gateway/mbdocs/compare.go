package mbdocs

import (
	"fmt"
	"github.com/riftgate/riftgate/gateway/message"
	"regexp"
	"sort"
	"strings"
)

// Check compares an answer with the expectation by the rules of mb's own
// docs test: both are trimmed, the lines holding <volatile> values have those
// values replaced, and the JSON between the first '{' and the last '}' is
// rewritten with sorted keys and two-space indentation. Then the two must be
// equal, or, for a partial assertion, every expected line must appear in the
// answer, in order (a trailing comma allowed).
//
// One rule is riftgate's: the header lines of an HTTP answer are compared
// in sorted order, because HTTP gives the order of different header fields
// no meaning (RFC 9110 §5.3) and Go's HTTP servers order them their own way;
// docs/mountebank-differences.md lists it.
func (e *Expectation) Check(actual string) error {
	vol, err := e.volatileLines()
	if err != nil {
		return err
	}
	want, got := normalize(e.Text, vol), normalize(actual, vol)
	if e.Partial {
		if missing := missingLines(lines(want), lines(got)); len(missing) > 0 {
			return fmt.Errorf("missing lines %q\n--- answer (normalized)\n%s\n--- expected (normalized)\n%s", missing, got, want)
		}
		return nil
	}
	if want != got {
		return fmt.Errorf("answer differs\n%s", diff(want, got))
	}
	return nil
}

func lines(s string) []string { return strings.Split(strings.ReplaceAll(s, "\r", ""), "\n") }

// volatileLines turns each volatile value into a pattern for its line: the
// line as the page shows it, leading space as \s+, the value as (.+). A line
// that is used is removed, so that a second, identical volatile line (two
// timestamps) gets a pattern of its own.
func (e *Expectation) volatileLines() ([]*regexp.Regexp, error) {
	ls := lines(strings.TrimSpace(e.Text))
	var out []*regexp.Regexp
	for _, v := range e.Volatile {
		i := -1
		for j, l := range ls {
			if strings.Contains(l, v) {
				i = j
				break
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("volatile value %q is on no line", v)
		}
		line := ls[i]
		rest := strings.TrimLeft(line, " \t")
		prefix := ""
		if len(rest) < len(line) {
			prefix = `\s+`
		}
		before, after, _ := strings.Cut(rest, v)
		out = append(out, regexp.MustCompile("^"+prefix+regexp.QuoteMeta(before)+"(.+)"+regexp.QuoteMeta(after)+"$"))
		ls = append(ls[:i], ls[i+1:]...)
	}
	return out, nil
}

const volatileMark = `"VOLATILE"`

// replaceVolatile replaces, for each pattern, the value on the first line it
// matches that holds no replaced value yet.
func replaceVolatile(text string, patterns []*regexp.Regexp) string {
	for _, p := range patterns {
		ls := lines(text)
		for i, l := range ls {
			if strings.Contains(l, "VOLATILE") {
				continue
			}
			if m := p.FindStringSubmatch(l); m != nil {
				ls[i] = strings.ReplaceAll(strings.Replace(l, m[1], volatileMark, 1), `""`, `"`)
				break
			}
		}
		text = strings.Join(ls, "\n")
	}
	return text
}

func normalize(text string, vol []*regexp.Regexp) string {
	text = replaceVolatile(strings.TrimSpace(text), vol)
	text = sortHeaders(text)
	if i, j := strings.Index(text, "{"), strings.LastIndex(text, "}"); i >= 0 && j > i {
		if v, err := message.DecodeJS([]byte(text[i : j+1])); err == nil {
			text = text[:i] + string(message.EncodeJS(v, "  ", true)) + text[j+1:]
		}
	}
	return text
}

// sortHeaders sorts the header lines of a text that is an HTTP answer.
func sortHeaders(text string) string {
	if !strings.HasPrefix(text, "HTTP/") {
		return text
	}
	ls := lines(text)
	end := len(ls)
	for i, l := range ls {
		if strings.TrimSpace(l) == "" {
			end = i
			break
		}
	}
	sort.Strings(ls[1:end])
	return strings.Join(ls, "\n")
}

// missingLines are the expected lines not found, in order, in actual.
func missingLines(expected, actual []string) []string {
	var missing []string
	last := -1
	for _, e := range expected {
		e = strings.TrimSpace(e)
		found := -1
		for i := last + 1; i < len(actual); i++ {
			a := strings.TrimSpace(actual[i])
			if a == e || a == e+"," {
				found = i
				break
			}
		}
		if found < 0 {
			missing = append(missing, e)
		} else {
			last = found
		}
	}
	return missing
}

// diff shows the first differing line of two texts with some context.
func diff(want, got string) string {
	w, g := lines(want), lines(got)
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	from := max(0, i-3)
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at line %d\n--- expected\n", i+1)
	for _, l := range w[from:min(len(w), i+4)] {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("--- answer\n")
	for _, l := range g[from:min(len(g), i+4)] {
		b.WriteString("  " + l + "\n")
	}
	fmt.Fprintf(&b, "--- whole answer (normalized)\n%s", got)
	return b.String()
}
