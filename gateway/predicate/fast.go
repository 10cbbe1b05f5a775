package predicate

import (
	"encoding/binary"
	"strings"
	"unicode/utf8"

	"github.com/riftgate/riftgate/gateway/message"
)

// fastField is one expected field that the allocation-free path checks: a
// scalar expectation on a plain request string, or on one name of the
// query, headers or form.
type fastField struct {
	field fieldKind
	name  string // for query, headers and form: the expected name
	exp   string
	truth bool // exists: the expectation's truthiness
	re    *regex
	// present: an empty object expectation, which only needs the field.
	present bool
}

// fieldKind is a request field the fast path reads: a number, so that
// reading it is a jump, not a string comparison.
type fieldKind uint8

const (
	fieldMethod fieldKind = iota
	fieldPath
	fieldBody
	fieldRequestFrom
	fieldIP
	fieldQuery
	fieldHeaders
	fieldForm
	fieldType
	fieldConnection
)

var fieldKinds = map[string]fieldKind{
	"method": fieldMethod, "path": fieldPath, "body": fieldBody, "requestFrom": fieldRequestFrom,
	"ip": fieldIP, "query": fieldQuery, "headers": fieldHeaders, "form": fieldForm,
	"type": fieldType, "connection": fieldConnection,
}

// compileFast returns the fast path's fields, or nil when mb's generic
// algorithm is needed (selectors, except, deepEquals, nested or array
// expectations, unknown fields).
func (l *leaf) compileFast() []fastField {
	if l.fields == customSchema || l.op == opDeepEquals || l.except != nil || l.jsonpath != nil || l.xpath != nil {
		return nil
	}
	if l.existsCfg && l.op != opExists {
		return nil
	}
	m, ok := l.expected.(map[string]any)
	if !ok || len(m) == 0 {
		return nil
	}
	var out []fastField
	for _, k := range keysOf(m) {
		f := l.fieldOf(k)
		switch f {
		case "method", "path", "body", "requestFrom", "ip", "type", "connection":
			ff, ok := l.fastScalar(m[k])
			if !ok {
				return nil
			}
			ff.field = fieldKinds[f]
			out = append(out, ff)
		case "query", "headers", "form":
			sub, ok := m[k].(map[string]any)
			if !ok {
				return nil
			}
			for _, name := range keysOf(sub) {
				ff, ok := l.fastScalar(sub[name])
				if !ok {
					return nil
				}
				ff.field, ff.name = fieldKinds[f], name
				out = append(out, ff)
			}
			if len(sub) == 0 {
				// An empty expectation only needs the field to exist.
				out = append(out, fastField{field: fieldKinds[f], present: true})
			}
		default:
			return nil
		}
	}
	return out
}

func (l *leaf) fastScalar(v any) (fastField, bool) {
	if isObject(v) || isUndefined(v) {
		return fastField{}, false
	}
	s, ok := toString(v)
	if !ok {
		return fastField{}, false // null never equals a string; leave it to the generic path
	}
	ff := fastField{exp: s, truth: truthy(v)}
	if l.op == opMatches {
		ff.re = l.regexes[s]
	}
	return ff, true
}

func (l *leaf) matchFast(r *message.Request) bool {
	for i := range l.fast {
		f := &l.fast[i]
		var ok bool
		switch f.field {
		case fieldMethod:
			ok = l.testFast(f, r.Method)
		case fieldPath:
			ok = l.testFast(f, r.Path)
		case fieldBody:
			ok = l.testFast(f, b2s(r.Body))
		case fieldRequestFrom:
			ok = l.testFast(f, r.RequestFrom())
		case fieldIP:
			ok = l.testFast(f, r.IP())
		case fieldType:
			ok = l.testFast(f, r.MessageType)
		case fieldConnection:
			ok = l.testFast(f, r.Connection)
		case fieldQuery:
			ok = l.testMulti(f, r.Query, false)
		case fieldHeaders:
			ok = l.testMulti(f, r.Headers, true)
		case fieldForm:
			if len(r.Body) == 0 || !r.IsForm() {
				return false // mb's request has no form: nothing under it matches
			}
			ok = l.testMulti(f, r.Form(), false)
		}
		if !ok {
			return false
		}
	}
	return true
}

// testMulti applies mb's array semantics: no value compares as "", one as
// itself, several match when any does (and always for a truthy exists).
// headers selects mb's header quirk (see skipEmpty).
func (l *leaf) testMulti(f *fastField, kvs []message.KV, headers bool) bool {
	if f.present {
		return true
	}
	name, ok := l.spelling(f.name, kvs)
	if !ok {
		return l.testFast(f, "")
	}
	start := 0
	if headers {
		start = skipEmpty(kvs, name)
	}
	n := 0
	for i := start; i < len(kvs); i++ {
		if kvs[i].Name == name {
			n++
		}
	}
	switch n {
	case 0:
		return l.testFast(f, "")
	case 1:
		for i := start; i < len(kvs); i++ {
			if kvs[i].Name == name {
				return l.testFast(f, kvs[i].Value)
			}
		}
	}
	if l.op == opExists && f.truth {
		return true
	}
	for i := start; i < len(kvs); i++ {
		if kvs[i].Name == name && l.testFast(f, kvs[i].Value) {
			return true
		}
	}
	return false
}

// skipEmpty returns where mb's values of a repeated header start: mb
// collects them with `current ? concat : value`, so empty values before the
// first non-empty one are dropped; when all are empty, only the last is
// left.
func skipEmpty(kvs []message.KV, name string) int {
	last := -1
	for i := range kvs {
		if kvs[i].Name != name {
			continue
		}
		if kvs[i].Value != "" {
			return i
		}
		last = i
	}
	if last < 0 {
		return 0
	}
	return last
}

// spelling returns the exact name whose values mb compares with an
// expected name: the name itself when keys keep their case, else, of the
// spellings that lower to it, the one that appeared last (see multi).
func (l *leaf) spelling(want string, kvs []message.KV) (string, bool) {
	if !l.lowerKeys {
		return want, true
	}
	name, found := "", false
	for i := range kvs {
		if foldEq(kvs[i].Name, want) && firstOf(kvs, i) {
			name, found = kvs[i].Name, true
		}
	}
	return name, found
}

func (l *leaf) testFast(f *fastField, s string) bool {
	switch l.op {
	case opEquals:
		if l.lowerValues {
			return foldEq(s, f.exp)
		}
		return s == f.exp
	case opContains:
		if l.lowerValues {
			return foldContains(s, f.exp)
		}
		return bytesContains(s, f.exp)
	case opStartsWith:
		if l.lowerValues {
			return foldPrefix(s, f.exp)
		}
		return len(s) >= len(f.exp) && s[:len(f.exp)] == f.exp
	case opEndsWith:
		if l.lowerValues {
			return foldSuffix(s, f.exp)
		}
		return len(s) >= len(f.exp) && s[len(s)-len(f.exp):] == f.exp
	case opMatches:
		return f.re != nil && f.re.MatchString(s)
	case opExists:
		if f.truth {
			return s != ""
		}
		return s == ""
	}
	return false
}

// isASCII reads eight bytes at a time: a request body is scanned whole.
func isASCII(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if binary.LittleEndian.Uint64([]byte(s[i:i+8]))&0x8080808080808080 != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// foldEq reports lower(s) == low without allocating for ASCII s. It reads
// s once and stops at the first difference: lower maps rune by rune, and
// an ASCII rune to one ASCII byte, so while s is ASCII the bytes of
// lower(s) are s's own, lowered, and a difference in them, or a length
// that runs out, decides. Only a non-ASCII byte before that needs lower.
func foldEq(s, low string) bool {
	if s == low { // the common case, and a compare the runtime vectorises
		return true
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return lower(s) == low
		}
		if i >= len(low) || lowerByte(c) != low[i] {
			return false
		}
	}
	return len(s) == len(low)
}

// foldPrefix reports strings.HasPrefix(lower(s), low), reading only as much
// of s as low is long while s is ASCII (see foldEq).
func foldPrefix(s, low string) bool {
	for i := 0; i < len(low); i++ {
		if i >= len(s) {
			return false
		}
		c := s[i]
		if c >= utf8.RuneSelf {
			t := lower(s)
			return len(t) >= len(low) && t[:len(low)] == low
		}
		if lowerByte(c) != low[i] {
			return false
		}
	}
	return true
}

func foldSuffix(s, low string) bool {
	if !isASCII(s) {
		t := lower(s)
		return len(t) >= len(low) && t[len(t)-len(low):] == low
	}
	return len(s) >= len(low) && foldEq(s[len(s)-len(low):], low)
}

// foldContains reports strings.Contains(lower(s), low). For ASCII s it
// looks for low's first byte, in either case, with the runtime's
// vectorised search, and compares only there.
func foldContains(s, low string) bool {
	if !isASCII(s) {
		return bytesContains(lower(s), low)
	}
	if low == "" {
		return true
	}
	if len(low) > len(s) {
		return false
	}
	first, other := low[0], low[0]
	if 'a' <= first && first <= 'z' {
		other = first - ('a' - 'A')
	}
	// window holds the positions where low can start; next[k] is the
	// next position of first (k 0) or other (k 1) at or after i, or -1.
	window := s[:len(s)-len(low)+1]
	next := [2]int{strings.IndexByte(window, first), -1}
	if other != first {
		next[1] = strings.IndexByte(window, other)
	}
	for {
		i, k := next[0], 0
		if i < 0 || next[1] >= 0 && next[1] < i {
			i, k = next[1], 1
		}
		if i < 0 {
			return false
		}
		if foldEq(s[i+1:i+len(low)], low[1:]) {
			return true
		}
		c := first
		if k == 1 {
			c = other
		}
		if j := strings.IndexByte(window[i+1:], c); j >= 0 {
			next[k] = i + 1 + j
		} else {
			next[k] = -1
		}
	}
}
