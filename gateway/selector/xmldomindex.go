package selector

import (
	"sort"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The parser searches its text from where a tag starts, and reads it
// again from the next '<' when the tag turns out not to be one. A reader
// that did the same would cost a hostile text's length squared, so these
// are the searches' answers kept for the next tag (each search's start
// only grows while the text is read), and an index of UTF-16 offsets for
// the lengths the parser counts in JavaScript's units.

// search is a search's last answer: found for any start from from up to
// found, the first match at or after the start.
type search struct {
	from, found int
	valid       bool
}

// at answers from the last search when it can, else by find(from), which
// returns a match's position or len(src) for none.
func (c *search) at(from int, find func(int) int) int {
	if c.valid && from >= c.from && from <= c.found {
		return c.found
	}
	c.from, c.found, c.valid = from, find(from), true
	return c.found
}

// spaceThenLT is where, from from on, the first JavaScript space followed
// by '<' starts (/\s</), or len(src).
func (r *domReader) spaceThenLT(from int) int {
	return r.stl.at(from, func(from int) int {
		for j := from; ; {
			k := strings.IndexByte(r.src[j:], '<')
			if k < 0 {
				return len(r.src)
			}
			at := j + k
			if at > from {
				if c, size := utf8.DecodeLastRuneInString(r.src[from:at]); jsSpace(c) {
					return at - size
				}
			}
			j = at + 1
		}
	})
}

// lineEnd is where, from from on, the first line terminator is (what
// JavaScript's '.' does not match, of which the text has only \n and
// U+2029 left once its newlines are normalized), or len(src).
func (r *domReader) lineEnd(from int) int {
	return r.eol.at(from, func(from int) int {
		i := strings.IndexByte(r.src[from:], '\n')
		j := strings.Index(r.src[from:], "\u2029")
		switch {
		case i < 0 && j < 0:
			return len(r.src)
		case i < 0 || j >= 0 && j < i:
			return from + j
		}
		return from + i
	})
}

// trimEnd is end with the [ \t\n\r] before it cut off, but not before
// from. Many end tags may end at one '>'.
func (r *domReader) trimEnd(from, end int) int {
	if !r.trim.valid || r.trim.from != end {
		t := end
		for t > 0 && strings.IndexByte(" \t\n\r", r.src[t-1]) >= 0 {
			t--
		}
		r.trim = search{from: end, found: t, valid: true}
	}
	return max(r.trim.found, from)
}

// spaceOrLT is the first '<' or JavaScript space in src[from:limit] and
// its size, or limit. The end tag at from is then read from there on, and
// no other end tag's name starts before it.
func (r *domReader) spaceOrLT(from, limit int) (int, int) {
	for i := from; i < limit; {
		c, size := utf8.DecodeRuneInString(r.src[i:])
		if c == '<' || jsSpace(c) {
			return i, size
		}
		i += size
	}
	return limit, 0
}

// u16Index maps byte offsets of the text to UTF-16 offsets, with a mark
// every u16Step bytes or so; an ASCII text needs none.
type u16Index struct {
	built, ascii bool
	bytes, units []int
}

const u16Step = 256

func (r *domReader) u16() *u16Index {
	x := &r.units
	if x.built {
		return x
	}
	x.built = true
	x.ascii = true
	for i := 0; i < len(r.src); i++ {
		if r.src[i] >= utf8.RuneSelf {
			x.ascii = false
			break
		}
	}
	if x.ascii {
		return x
	}
	units := 0
	next := 0
	for i, c := range r.src {
		if i >= next {
			x.bytes, x.units = append(x.bytes, i), append(x.units, units)
			next = i + u16Step
		}
		units += utf16.RuneLen(c)
	}
	x.bytes, x.units = append(x.bytes, len(r.src)), append(x.units, units)
	return x
}

// unitsAt is the UTF-16 offset of byte b, a character's start.
func (r *domReader) unitsAt(b int) int {
	x := r.u16()
	if x.ascii {
		return b
	}
	m := sort.SearchInts(x.bytes, b+1) - 1
	units := x.units[m]
	for _, c := range r.src[x.bytes[m]:b] {
		units += utf16.RuneLen(c)
	}
	return units
}

// utf16 is the length of src[a:b] in JavaScript, in UTF-16 code units.
func (r *domReader) utf16(a, b int) int { return r.unitsAt(b) - r.unitsAt(a) }

// advance16 is the byte offset units UTF-16 code units after byte i. The
// parser works out where an end tag ends from the length of a name that
// is not always the text it came from, so the length is counted as
// JavaScript counts it. An offset inside a character rounds up to its
// end; past the text's end, bytes are units.
func (r *domReader) advance16(i, units int) int {
	x := r.u16()
	if x.ascii || units <= 0 {
		return i + max(units, 0)
	}
	target := r.unitsAt(i) + units
	total := x.units[len(x.units)-1]
	if target >= total {
		return len(r.src) + target - total
	}
	m := sort.SearchInts(x.units, target+1) - 1
	b, at := x.bytes[m], x.units[m]
	for at < target {
		c, size := utf8.DecodeRuneInString(r.src[b:])
		at += utf16.RuneLen(c)
		b += size
	}
	return b
}
