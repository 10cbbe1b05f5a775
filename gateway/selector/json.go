package selector

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// ParseJSON parses any JSON value, as JavaScript's JSON.parse does, into
// what encoding/json decodes (objects as map[string]any, arrays as []any,
// numbers as json.Number) and accepts exactly what encoding/json accepts
// (FuzzParseJSON holds the two together). It is about four times faster:
// it scans once and allocates only what it returns.
func ParseJSON(text string) (any, bool) { return ParseJSONWith(text, nil, nil) }

// ParseJSONWith is ParseJSON with every object key passed through key and
// every string value through str (nil: as they are), as the document is
// read, so that a transformed document costs one pass. A key that two
// keys transform into keeps the value of the later in the document, as
// transforming each key of JSON.parse's object in order would.
func ParseJSONWith(text string, key, str func(string) string) (any, bool) {
	return ParseJSONInto(text, key, str, nil)
}

// ParseJSONInto is ParseJSONWith making its objects and arrays in what room
// lends (nil: new ones). The document is then valid only until
// room.Release.
func ParseJSONInto(text string, key, str func(string) string, room *Room) (any, bool) {
	p := jsonParser{s: text, key: key, str: str, room: room}
	// The pending members and elements live in recycled room, so that
	// only the maps and slices the document is made of are allocated.
	pend := pendingRoom.Get().(*pending)
	p.kvs, p.vals = pend.kvs[:0], pend.vals[:0]
	v, ok := p.document()
	if cap(p.kvs) <= maxPendingRoom && cap(p.vals) <= maxPendingRoom {
		if !ok {
			// A parse that gave up may leave what it had read: drop
			// it (a whole parse clears as it goes).
			clear(p.kvs[:cap(p.kvs)])
			clear(p.vals[:cap(p.vals)])
		}
		pend.kvs, pend.vals = p.kvs[:0], p.vals[:0]
	}
	pendingRoom.Put(pend)
	return v, ok
}

// pending is a parser's room for the members and elements it has read of
// the objects and arrays it is in.
type pending struct {
	kvs  []jsonKV
	vals []any
}

var pendingRoom = sync.Pool{New: func() any { return new(pending) }}

// maxPendingRoom bounds the room a parse gives back, so that one huge
// document does not pin its room.
const maxPendingRoom = 1024

// maxDepth is encoding/json's limit on nesting.
const maxDepth = 10000

// Room lends a parser the maps and array elements that earlier documents were
// made of, so that a document parsed on every request, and dropped at its
// end, costs no allocation for its objects and arrays once the room it
// needs exists: on a 120-byte body of three objects and an array, seven
// of fifteen allocations, and 960 of 1256 bytes.
type Room struct {
	free, lent []map[string]any
	elems      []any // the arrays' elements, each array a full slice of it
}

// maxLentMaps, maxLentMapLen and maxLentElems bound what Release keeps, so
// that one huge document does not pin its room.
const (
	maxLentMaps   = 64
	maxLentMapLen = 64
	maxLentElems  = 1024
)

func (m *Room) get(n int) map[string]any {
	var out map[string]any
	if k := len(m.free); k > 0 {
		out = m.free[k-1]
		m.free[k-1] = nil
		m.free = m.free[:k-1]
	} else {
		out = make(map[string]any, n)
	}
	m.lent = append(m.lent, out)
	return out
}

// array returns a copy of vals in the room: a full slice, so that an
// append to it copies instead of writing over the next array.
func (m *Room) array(vals []any) []any {
	if len(m.elems)+len(vals) > cap(m.elems) {
		// Arrays already made keep the old room; the new one is kept.
		m.elems = make([]any, 0, max(2*cap(m.elems), len(vals), 16))
	}
	at := len(m.elems)
	m.elems = append(m.elems, vals...)
	return m.elems[at:len(m.elems):len(m.elems)]
}

// Release takes back every map lent since the last Release, emptied, and
// the arrays' room: the documents made of them must no longer be in use.
func (m *Room) Release() {
	clear(m.elems)
	m.elems = m.elems[:0]
	if cap(m.elems) > maxLentElems {
		m.elems = nil
	}
	for i, mp := range m.lent {
		if len(mp) <= maxLentMapLen && len(m.free) < maxLentMaps {
			clear(mp)
			m.free = append(m.free, mp)
		}
		m.lent[i] = nil
	}
	m.lent = m.lent[:0]
}

type jsonParser struct {
	room     *Room // nil: allocate the maps and arrays
	s        string
	i        int
	depth    int
	key, str func(string) string
	// order, when set, records each object's keys in document order.
	order keyOrder
	buf   []byte // unescaping room
	// kvs and vals hold the members and elements of the objects and
	// arrays being read, innermost last.
	kvs  []jsonKV
	vals []any
}

type jsonKV struct {
	k string
	v any
}

func (p *jsonParser) document() (any, bool) {
	p.ws()
	v, ok := p.value()
	if !ok {
		return nil, false
	}
	p.ws()
	if p.i != len(p.s) {
		return nil, false // trailing data
	}
	return v, true
}

func (p *jsonParser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (any, bool) {
	if p.i >= len(p.s) {
		return nil, false
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, ok := p.string()
		if ok && p.str != nil {
			s = p.str(s)
		}
		return s, ok
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	case strings.HasPrefix(p.s[p.i:], "true"):
		p.i += 4
		return true, true
	case strings.HasPrefix(p.s[p.i:], "false"):
		p.i += 5
		return false, true
	case strings.HasPrefix(p.s[p.i:], "null"):
		p.i += 4
		return nil, true
	}
	return nil, false
}

func (p *jsonParser) object() (any, bool) {
	if p.depth++; p.depth > maxDepth {
		return nil, false
	}
	defer func() { p.depth-- }()
	p.i++ // {
	mark := len(p.kvs)
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return p.finish(mark), true
	}
	for {
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, false
		}
		k, ok := p.string()
		if !ok {
			return nil, false
		}
		if p.key != nil {
			k = p.key(k)
		}
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, false
		}
		p.i++
		p.ws()
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		p.kvs = append(p.kvs, jsonKV{k, v})
		if more, ok := p.next('}'); !ok {
			return nil, false
		} else if !more {
			return p.finish(mark), true
		}
	}
}

// next reads what follows a member or element: a comma (more) or the
// closing bracket.
func (p *jsonParser) next(closing byte) (more, ok bool) {
	p.ws()
	if p.i >= len(p.s) {
		return false, false
	}
	switch p.s[p.i] {
	case ',':
		p.i++
		p.ws()
		return true, true
	case closing:
		p.i++
		return false, true
	}
	return false, false
}

// finish makes the map of the object whose members start at p.kvs[mark].
func (p *jsonParser) finish(mark int) map[string]any {
	kvs := p.kvs[mark:]
	var m map[string]any
	if p.room != nil {
		m = p.room.get(len(kvs))
	} else {
		m = make(map[string]any, len(kvs))
	}
	var keys []string
	for _, kv := range kvs {
		if _, dup := m[kv.k]; !dup && p.order != nil {
			keys = append(keys, kv.k)
		}
		m[kv.k] = kv.v
	}
	if p.order != nil {
		p.order[mapID(m)] = keys
	}
	clear(kvs)
	p.kvs = p.kvs[:mark]
	return m
}

func (p *jsonParser) array() (any, bool) {
	if p.depth++; p.depth > maxDepth {
		return nil, false
	}
	defer func() { p.depth-- }()
	p.i++ // [
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return []any{}, true
	}
	mark := len(p.vals)
	defer func() {
		clear(p.vals[mark:])
		p.vals = p.vals[:mark]
	}()
	for {
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		p.vals = append(p.vals, v)
		if more, ok := p.next(']'); !ok {
			return nil, false
		} else if !more {
			if p.room != nil {
				return p.room.array(p.vals[mark:]), true
			}
			return slices.Clone(p.vals[mark:]), true
		}
	}
}

func (p *jsonParser) number() (any, bool) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.s) && p.s[p.i] == '0':
		p.i++
	case p.digits() == 0:
		return nil, false
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return nil, false
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return nil, false
		}
	}
	return json.Number(p.s[start:p.i]), true
}

func (p *jsonParser) digits() int {
	start := p.i
	for p.i < len(p.s) && '0' <= p.s[p.i] && p.s[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

// string reads a string at p.i (its opening quote). Without escapes or
// invalid UTF-8 it is a slice of the text.
func (p *jsonParser) string() (string, bool) {
	p.i++ // "
	start := p.i
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == '"':
			s := p.s[start:p.i]
			p.i++
			return s, true
		case c == '\\':
			return p.unescape(start)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			if r, n := utf8.DecodeRuneInString(p.s[p.i:]); r == utf8.RuneError && n == 1 {
				return p.unescape(start)
			} else {
				p.i += n
			}
		default:
			p.i++
		}
	}
	return "", false
}

// unescape finishes reading a string from start, unescaping as
// encoding/json does: invalid UTF-8 and lone surrogates become U+FFFD.
func (p *jsonParser) unescape(start int) (string, bool) {
	b := append(p.buf[:0], p.s[start:p.i]...)
	defer func() { p.buf = b[:0] }()
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return string(b), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return "", false
			}
			p.i += 2
			switch p.s[p.i-1] {
			case '"', '\\', '/':
				b = append(b, p.s[p.i-1])
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := hex4(p.s[p.i:])
				if !ok {
					return "", false
				}
				p.i += 4
				if utf16.IsSurrogate(r) {
					r2, ok := rune(-1), false
					if strings.HasPrefix(p.s[p.i:], `\u`) {
						r2, ok = hex4(p.s[p.i+2:])
					}
					if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
						p.i += 6
						r = dec
					} else {
						r = utf8.RuneError
					}
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", false
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.i++
		default:
			r, n := utf8.DecodeRuneInString(p.s[p.i:])
			if r == utf8.RuneError && n == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, p.s[p.i:p.i+n]...)
			}
			p.i += n
		}
	}
	return "", false
}

func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for i := range 4 {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
