package message

import "unicode/utf8"

// isCanonicalJS reports whether data is already what CanonicalJSON makes
// of it, judged in one pass without building the value: compact, numbers
// as small integers, strings escaped exactly as JSON.stringify escapes
// them, no repeated key. It answers false whenever it is not sure (a
// fraction, a large number, an unusual escape, non-ASCII beyond plain
// UTF-8, deep nesting), which only costs the slow way. What we write
// ourselves (recordings, stored stubs, compact API bodies) passes.
func isCanonicalJS(data []byte) bool {
	c := canonScan{data: data}
	return c.value(0) && c.pos == len(data)
}

type canonScan struct {
	data []byte
	pos  int
}

// canonMaxDepth and canonMaxKeys bound what the quick check takes on.
const (
	canonMaxDepth = 64
	canonMaxKeys  = 32
)

func (c *canonScan) value(depth int) bool {
	if c.pos >= len(c.data) || depth > canonMaxDepth {
		return false
	}
	switch b := c.data[c.pos]; {
	case b == '{':
		return c.object(depth)
	case b == '[':
		return c.list(']', func() bool { return c.value(depth + 1) })
	case b == '"':
		_, ok := c.str()
		return ok
	case b == 't':
		return c.lit("true")
	case b == 'f':
		return c.lit("false")
	case b == 'n':
		return c.lit("null")
	case b == '-' || b >= '0' && b <= '9':
		return c.number()
	}
	return false
}

func (c *canonScan) object(depth int) bool {
	var room [8][]byte
	keys := room[:0]
	return c.list('}', func() bool {
		if c.pos >= len(c.data) || c.data[c.pos] != '"' {
			return false
		}
		k, ok := c.str()
		if !ok || len(keys) == canonMaxKeys || string(k) == `"__proto__"` {
			return false
		}
		for _, o := range keys {
			if string(o) == string(k) { // a repeated key: JSON.parse keeps its last value
				return false
			}
		}
		keys = append(keys, k)
		return c.lit(":") && c.value(depth+1)
	})
}

// list reads an array or object from its opening byte to close: no
// element, or elements read by elem with a comma and nothing else between.
func (c *canonScan) list(close byte, elem func() bool) bool {
	c.pos++ // '[' or '{'
	if c.pos < len(c.data) && c.data[c.pos] == close {
		c.pos++
		return true
	}
	for {
		if !elem() || c.pos >= len(c.data) {
			return false
		}
		switch c.data[c.pos] {
		case ',':
			c.pos++
		case close:
			c.pos++
			return true
		default:
			return false
		}
	}
}

// str reads a string, returning it quotes included.
func (c *canonScan) str() ([]byte, bool) {
	start := c.pos
	c.pos++
	for c.pos < len(c.data) {
		b := c.data[c.pos]
		switch {
		case b == '"':
			c.pos++
			return c.data[start:c.pos], true
		case b < 0x20:
			return nil, false
		case b == '\\':
			if c.pos+1 >= len(c.data) {
				return nil, false
			}
			switch c.data[c.pos+1] {
			case '"', '\\', 'n', 'r', 't', 'b', 'f':
				c.pos += 2
			case 'u':
				// Only the control characters without a short form.
				if c.pos+5 >= len(c.data) || string(c.data[c.pos+2:c.pos+4]) != "00" {
					return nil, false
				}
				h, l := c.data[c.pos+4], c.data[c.pos+5]
				if h != '0' && h != '1' || !(l >= '0' && l <= '9' || l >= 'a' && l <= 'f') {
					return nil, false
				}
				if h == '0' && (l == '8' || l == '9' || l == 'a' || l == 'c' || l == 'd') {
					return nil, false // \b \t \n \f \r
				}
				c.pos += 6
			default:
				return nil, false
			}
		case b < utf8.RuneSelf:
			c.pos++
		default:
			r, n := utf8.DecodeRune(c.data[c.pos:])
			if r == utf8.RuneError || r == '\u2028' || r == '\u2029' {
				return nil, false
			}
			c.pos += n
		}
	}
	return nil, false
}

func (c *canonScan) lit(s string) bool {
	if len(c.data)-c.pos < len(s) || string(c.data[c.pos:c.pos+len(s)]) != s {
		return false
	}
	c.pos += len(s)
	return true
}

// number takes integers of up to 15 digits, which JavaScript holds
// exactly and prints as written; not -0, which it prints as 0.
func (c *canonScan) number() bool {
	start := c.pos
	if c.data[c.pos] == '-' {
		c.pos++
	}
	digits := c.pos
	for c.pos < len(c.data) && c.data[c.pos] >= '0' && c.data[c.pos] <= '9' {
		c.pos++
	}
	n := c.pos - digits
	switch {
	case n == 0 || n > 15:
		return false
	case c.data[digits] == '0' && (n > 1 || digits > start):
		return false // a leading zero, or -0
	}
	if c.pos < len(c.data) {
		if b := c.data[c.pos]; b == '.' || b == 'e' || b == 'E' {
			return false
		}
	}
	return true
}
