package ui

import (
	"strconv"
	"strings"
)

// PrefersHTML reports whether an Accept header picks text/html over
// application/json, as Mountebank's express (res.format with json listed
// first, through the negotiator package) picks: for each type, the most
// specific Accept entry that matches it gives its quality; the higher
// quality wins, then the more specific match, then the entry the client
// listed first; a full tie goes to JSON. No Accept, or one naming neither,
// is JSON (mb answers 406 to the latter; riftgate keeps answering JSON).
func PrefersHTML(accept string) bool {
	if accept == "" {
		return false
	}
	entries := parseAccept(accept)
	html := best(entries, "text", "html")
	if html.q <= 0 {
		return false
	}
	json := best(entries, "application", "json")
	if json.q <= 0 {
		return true
	}
	if html.q != json.q {
		return html.q > json.q
	}
	if html.s != json.s {
		return html.s > json.s
	}
	return html.o < json.o
}

type mediaRange struct {
	typ, sub string
	q        float64
}

// priority is how well one Accept entry matches a type: its quality q,
// specificity s (4 for the type, 2 for the subtype) and position o.
type priority struct {
	q float64
	s int
	o int
}

func parseAccept(accept string) []mediaRange {
	var out []mediaRange
	for part := range strings.SplitSeq(accept, ",") {
		fields := strings.Split(part, ";")
		typ, sub, ok := strings.Cut(strings.ToLower(strings.TrimSpace(fields[0])), "/")
		if !ok || typ == "" || sub == "" {
			continue
		}
		m := mediaRange{typ: strings.TrimSpace(typ), sub: strings.TrimSpace(sub), q: 1}
		for _, p := range fields[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && q >= 0 && q <= 1 {
					m.q = q
				}
			}
		}
		out = append(out, m)
	}
	return out
}

// best returns the priority of the most specific entry matching typ/sub
// (the higher quality on equal specificity), or q 0 when none does.
func best(entries []mediaRange, typ, sub string) priority {
	p := priority{q: 0, s: -1, o: -1}
	for i, e := range entries {
		s := 0
		switch {
		case e.typ == typ:
			s |= 4
		case e.typ != "*":
			continue
		}
		switch {
		case e.sub == sub:
			s |= 2
		case e.sub != "*":
			continue
		}
		if s > p.s || (s == p.s && e.q > p.q) {
			p = priority{q: e.q, s: s, o: i}
		}
	}
	return p
}
