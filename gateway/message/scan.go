package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// The JSON readers of this package (DecodeJS, ObjectFields, ReadMultiMap,
// Members) sit on the proxy's recording path, where encoding/json's Token
// API cost a quarter of the CPU. They share the strict scanner below: it
// takes only what encoding/json takes (RFC 8259, whitespace being space,
// tab, newline and carriage return) and unquotes strings as it does.
// Whenever the scanner refuses an input, or meets something it leaves to
// encoding/json (deep nesting), the reader runs its encoding/json-based
// ...Slow twin instead, so errors, and the results for what the scanner
// refuses, stay those of encoding/json.

// fastDepth bounds the nesting the scanner follows for the readers whose
// encoding/json limit (10000, counted its own way) it does not reproduce:
// deeper input takes the slow path, which gives encoding/json's answer.
const fastDepth = 1000

// jsonScan reads one JSON text from data; pos is the next byte to read.
// Its methods report false for input they do not take.
type jsonScan struct {
	data []byte
	pos  int

	// arena holds the bytes of the strings a read makes, so that they
	// take an allocation per chunk rather than one each. Bytes in it
	// are never written again once a string shares them.
	arena []byte
	// vals and keys are scratch stacks for the members of the arrays and
	// objects being read, so that each gets slices of its exact size.
	vals []any
	keys []string
}

// stacks makes the scratch stacks at a size that most documents do not
// outgrow, rather than growing them from nothing.
func (s *jsonScan) stacks() {
	if s.vals == nil {
		s.keys, s.vals = make([]string, 0, 16), make([]any, 0, 32)
	}
}

// keep is b as a string, its bytes in the arena.
func (s *jsonScan) keep(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if cap(s.arena)-len(s.arena) < len(b) {
		chunk := min(len(s.data), 16<<10)
		if len(b) > chunk/4 {
			return string(b) // a long string is not worth a chunk
		}
		s.arena = make([]byte, 0, chunk)
	}
	n := len(s.arena)
	s.arena = append(s.arena, b...)
	return unsafe.String(&s.arena[n], len(b))
}

// ws skips JSON whitespace.
func (s *jsonScan) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek is the next byte, or 0 at the end (0 never starts a JSON token).
func (s *jsonScan) peek() byte {
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

// end reports whether only whitespace is left.
func (s *jsonScan) end() bool {
	s.ws()
	return s.pos == len(s.data)
}

// str scans the string starting at pos (a '"'). It returns the bytes
// between the quotes and whether they need unquoting (escapes or invalid
// UTF-8); without, they are the string's value as they are.
func (s *jsonScan) str() (body []byte, escaped, ok bool) {
	d := s.data
	i := s.pos + 1
	for i < len(d) {
		c := d[i]
		switch {
		case c == '"':
			body = d[s.pos+1 : i]
			s.pos = i + 1
			return body, escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(d) {
				return nil, false, false
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+5 >= len(d) || hex4(d[i+2:i+6]) < 0 {
					return nil, false, false
				}
				i += 6
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		case c < utf8.RuneSelf:
			i++
		default:
			// A multi-byte sequence holds no quote, backslash or control
			// byte, so stepping over it whole is safe.
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				escaped = true // becomes U+FFFD
			}
			i += size
		}
	}
	return nil, false, false
}

// string scans a string and returns its value.
func (s *jsonScan) string() (string, bool) {
	body, escaped, ok := s.str()
	if !ok {
		return "", false
	}
	if !escaped {
		return s.keep(body), true
	}
	return unquoteBody(body), true
}

// hex4 is the value of four hex digits, or -1.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// unquoteBody is a string's value from the bytes between its quotes, which
// str has checked, with encoding/json's rules: a \u escape of a surrogate
// pairs with a following \u escape of the other half or becomes U+FFFD,
// and each byte of invalid UTF-8 becomes U+FFFD.
func unquoteBody(b []byte) string {
	out := make([]byte, 0, len(b)+utf8.UTFMax)
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '\\':
			switch e := b[i+1]; e {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(b[i+2:])
				i += 6
				if utf16.IsSurrogate(r) {
					if i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
						if p := utf16.DecodeRune(r, hex4(b[i+2:])); p != utf8.RuneError {
							out = utf8.AppendRune(out, p)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
				continue
			default: // '"', '\\', '/'
				out = append(out, e)
			}
			i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			out = utf8.AppendRune(out, r)
			i += size
		}
	}
	// out is not written again: the string can share its bytes.
	return unsafe.String(unsafe.SliceData(out), len(out))
}

// number scans a number and returns its text.
func (s *jsonScan) number() ([]byte, bool) {
	d := s.data
	i := s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i >= len(d):
		return nil, false
	case d[i] == '0':
		i++
	case '1' <= d[i] && d[i] <= '9':
		i = digits(d, i+1)
	default:
		return nil, false
	}
	if i < len(d) && d[i] == '.' {
		if i+1 >= len(d) || !isDigit(d[i+1]) {
			return nil, false
		}
		i = digits(d, i+1)
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return nil, false
		}
		i = digits(d, i)
	}
	num := d[s.pos:i]
	s.pos = i
	return num, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func digits(d []byte, i int) int {
	for i < len(d) && isDigit(d[i]) {
		i++
	}
	return i
}

// literal scans true, false or null, whichever lit is.
func (s *jsonScan) literal(lit string) bool {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
		return false
	}
	s.pos += len(lit)
	return true
}

// object reads an object's members, s at its '{': for each it reads the
// key (its bytes as written; escaped when they need unquoting) and calls
// member with s at the value, which member reads. It reports false where
// the grammar or member refuses.
func (s *jsonScan) object(member func(key []byte, escaped bool) bool) bool {
	s.pos++
	s.ws()
	if s.peek() == '}' {
		s.pos++
		return true
	}
	for {
		if s.peek() != '"' {
			return false
		}
		key, escaped, ok := s.str()
		if !ok {
			return false
		}
		s.ws()
		if s.peek() != ':' {
			return false
		}
		s.pos++
		s.ws()
		if !member(key, escaped) {
			return false
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.pos++
			s.ws()
		case '}':
			s.pos++
			return true
		default:
			return false
		}
	}
}

// array reads an array's elements, s at its '[', calling elem with s at
// each, which elem reads; false where the grammar or elem refuses.
func (s *jsonScan) array(elem func() bool) bool {
	s.pos++
	s.ws()
	if s.peek() == ']' {
		s.pos++
		return true
	}
	for {
		if !elem() {
			return false
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.pos++
			s.ws()
		case ']':
			s.pos++
			return true
		default:
			return false
		}
	}
}

// keyString is an object key's value (see object).
func (s *jsonScan) keyString(key []byte, escaped bool) string {
	if escaped {
		return unquoteBody(key)
	}
	return s.keep(key)
}

// skip reads a value, at nesting depth depth, and keeps nothing of it.
func (s *jsonScan) skip(depth int) bool {
	switch s.peek() {
	case '{':
		return depth < fastDepth && s.object(func([]byte, bool) bool { return s.skip(depth + 1) })
	case '[':
		return depth < fastDepth && s.array(func() bool { return s.skip(depth + 1) })
	case '"':
		_, _, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		_, ok := s.number()
		return ok
	}
}

// js reads a value as JSON.parse does (see DecodeJS); depth counts as
// decodeJSSlow counts it.
func (s *jsonScan) js(depth int) (any, bool) {
	if depth > maxJSDepth {
		return nil, false
	}
	switch s.peek() {
	case '{':
		s.stacks()
		// Members go on the stacks from here (arrays use vals alone, so
		// the two differ).
		kbase, vbase := len(s.keys), len(s.vals)
		ok := s.object(func(key []byte, escaped bool) bool {
			k := s.keyString(key, escaped)
			v, ok := s.js(depth + 1)
			s.keys, s.vals = append(s.keys, k), append(s.vals, v)
			return ok
		})
		keys, vals := s.keys[kbase:], s.vals[vbase:]
		var o *JSObject
		if ok {
			o = &JSObject{Vals: make(map[string]any, len(keys))}
			if len(keys) > 0 {
				o.Keys = make([]string, 0, len(keys))
			}
			for i, k := range keys {
				if _, seen := o.Vals[k]; !seen {
					o.Keys = append(o.Keys, k)
				}
				o.Vals[k] = vals[i]
			}
		}
		clear(vals) // let the stack hold no values
		s.keys, s.vals = s.keys[:kbase], s.vals[:vbase]
		return o, ok
	case '[':
		s.stacks()
		base := len(s.vals)
		ok := s.array(func() bool {
			v, ok := s.js(depth + 1)
			s.vals = append(s.vals, v)
			return ok
		})
		var a []any
		if ok {
			a = append([]any{}, s.vals[base:]...)
		}
		clear(s.vals[base:])
		s.vals = s.vals[:base]
		return a, ok
	case '"':
		v, ok := s.string()
		return v, ok
	case 't':
		return true, s.literal("true")
	case 'f':
		return false, s.literal("false")
	case 'n':
		return nil, s.literal("null")
	default:
		num, ok := s.number()
		if !ok {
			return nil, false
		}
		// ParseFloat keeps no reference to its argument (its errors
		// hold a copy), so the number's bytes need no copy.
		f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(num), len(num)), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, false
		}
		return f, true
	}
}

// generic reads a value as encoding/json's Decode into an any with
// UseNumber does: map[string]any, []any, json.Number, string, bool or nil.
func (s *jsonScan) generic(depth int) (any, bool) {
	switch s.peek() {
	case '{':
		if depth >= fastDepth {
			return nil, false
		}
		m := map[string]any{}
		ok := s.object(func(key []byte, escaped bool) bool {
			v, ok := s.generic(depth + 1)
			m[s.keyString(key, escaped)] = v
			return ok
		})
		return m, ok
	case '[':
		if depth >= fastDepth {
			return nil, false
		}
		a := []any{}
		ok := s.array(func() bool {
			v, ok := s.generic(depth + 1)
			a = append(a, v)
			return ok
		})
		return a, ok
	case '"':
		v, ok := s.string()
		return v, ok
	case 't':
		return true, s.literal("true")
	case 'f':
		return false, s.literal("false")
	case 'n':
		return nil, s.literal("null")
	default:
		num, ok := s.number()
		return json.Number(num), ok
	}
}

// DecodeGeneric is encoding/json's Decoder.Decode of data's first value
// into an any with UseNumber: on the scanner when data is that value
// alone, else on encoding/json (trailing data included, as Decode ignores
// it).
func DecodeGeneric(data []byte) (any, error) {
	s := jsonScan{data: data}
	s.ws()
	if v, ok := s.generic(0); ok && s.end() {
		return v, nil
	}
	return decodeGenericSlow(data)
}

func decodeGenericSlow(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// decodeJSFast is DecodeJS on the scanner; ok is false when it leaves the
// input to decodeJSSlow.
func decodeJSFast(data []byte) (v any, ok bool) {
	s := jsonScan{data: data}
	s.ws()
	v, ok = s.js(0)
	if !ok || !s.end() {
		return nil, false
	}
	return v, true
}

// objectFieldsFast is ObjectFields on the scanner; ok is false when it
// leaves the input to objectFieldsSlow.
func objectFieldsFast(raw []byte) (out []Field, ok bool) {
	s := jsonScan{data: raw}
	s.ws()
	if s.peek() != '{' {
		return nil, false
	}
	size := 0 // bytes of the values kept
	ok = s.object(func(key []byte, escaped bool) bool {
		// Not keyString: a few keys are not worth an arena chunk.
		k := string(key)
		if escaped {
			k = unquoteBody(key)
		}
		start := s.pos
		if !s.skip(1) {
			return false
		}
		// Point into raw for now; the values are copied at the end.
		v := json.RawMessage(raw[start:s.pos])
		for i := range out {
			if out[i].Key == k {
				size += len(v) - len(out[i].Value)
				out[i].Value = v
				return true
			}
		}
		out = append(out, Field{k, v})
		size += len(v)
		return true
	})
	if !ok {
		return nil, false
	}
	if !s.end() {
		return nil, false
	}
	// As Decode into a json.RawMessage, the values are copies; one buffer
	// holds them all, each capped so that appending to one copies it.
	buf := make([]byte, 0, size)
	for i := range out {
		n := len(buf)
		buf = append(buf, out[i].Value...)
		out[i].Value = buf[n:len(buf):len(buf)]
	}
	return out, true
}

// readMultiMapFast is ReadMultiMap on the scanner for a trimmed raw that
// is not empty or null; ok is false when it leaves raw to
// readMultiMapSlow. Like readMultiMapSlow, it stops at the first ']', '}'
// or end where a member could start, and reads nothing after it.
func readMultiMapFast(raw []byte) (out []KV, ok bool) {
	s := jsonScan{data: raw}
	s.ws()
	if s.peek() != '{' {
		return nil, false
	}
	s.pos++
	for first := true; ; first = false {
		s.ws()
		switch s.peek() {
		case 0:
			if s.pos == len(raw) {
				return out, true
			}
		case '}', ']':
			return out, true
		}
		if !first {
			if s.peek() != ',' {
				return nil, false
			}
			s.pos++
			s.ws()
		}
		if s.peek() != '"' {
			return nil, false
		}
		name, ok := s.string()
		if !ok {
			return nil, false
		}
		s.ws()
		if s.peek() != ':' {
			return nil, false
		}
		s.pos++
		s.ws()
		if s.peek() == '"' { // the usual case, without boxing
			v, ok := s.string()
			if !ok {
				return nil, false
			}
			out = append(out, KV{name, v})
			continue
		}
		v, ok := s.generic(1)
		if !ok {
			return nil, false
		}
		out = appendValues(out, name, v)
	}
}

// membersFast is Members on the scanner; ok is false when it leaves raw
// to membersSlow.
func membersFast(raw []byte, names []string) (out []json.RawMessage, ok bool) {
	out, found, ok := membersIn(raw, names)
	if ok && found {
		// As json.Unmarshal into json.RawMessage, the values are copies.
		size := 0
		for _, v := range out {
			size += len(v)
		}
		buf := make([]byte, 0, size)
		for i, v := range out {
			if v != nil {
				n := len(buf)
				buf = append(buf, v...)
				out[i] = buf[n:len(buf):len(buf)]
			}
		}
	}
	return out, ok
}

// Within is Members for JSON the scanner reads, with the values left in
// raw's memory, each capped so that appending to one copies it: for a
// caller that keeps raw and its parts. ok is false for what the scanner
// refuses.
func Within(raw []byte, names ...string) (out []json.RawMessage, ok bool) {
	out, _, ok = membersIn(raw, names)
	return out, ok
}

// Elements are a JSON array's elements, in raw's memory as Within's are;
// ok is false for what is not an array the scanner reads.
func Elements(raw []byte) (out []json.RawMessage, ok bool) {
	s := jsonScan{data: raw}
	s.ws()
	if s.peek() != '[' {
		return nil, false
	}
	ok = s.array(func() bool {
		start := s.pos
		if !s.skip(1) {
			return false
		}
		out = append(out, json.RawMessage(raw[start:s.pos:s.pos]))
		return true
	})
	return out, ok && s.end()
}

func membersIn(raw []byte, names []string) (out []json.RawMessage, found, ok bool) {
	s := jsonScan{data: raw}
	s.ws()
	out = make([]json.RawMessage, len(names))
	if s.peek() == 'n' {
		return out, false, s.literal("null") && s.end()
	}
	if s.peek() != '{' {
		return nil, false, false
	}
	ok = s.object(func(body []byte, escaped bool) bool {
		key := unsafe.String(unsafe.SliceData(body), len(body)) // compared only
		if escaped {
			key = unquoteBody(body)
		}
		start := s.pos
		if !s.skip(1) {
			return false
		}
		for i, n := range names {
			if n == key {
				out[i], found = raw[start:s.pos:s.pos], true
			}
		}
		return true
	})
	if !ok || !s.end() {
		return nil, false, false
	}
	return out, found, true
}
