package rift

import "strconv"

// Response is the response envelope. A zero Status means 200.
type Response struct {
	Status int
	// Headers are sent in order; a name may repeat, as Set-Cookie does. A
	// slice, not a map: it needs no sorting to encode the same way every
	// time, and costs a Go guest a fraction of what a map does.
	Headers []Header
	Body    []byte
	// env is the envelope Static encoded, sent instead of the fields.
	env []byte
}

// Static encodes r's envelope once and returns r, for a handler that
// answers the same response on every call (an acknowledgement, a 429):
// sending it then costs a copy, where encoding it was about a third of a
// small Go handler's time. Assignments to r's fields after Static are not
// sent; SetHeader drops the encoding, so that its change is.
func Static(r *Response) *Response {
	r.env = nil
	r.env = r.AppendCBOR(nil)
	return r
}

// Header is one response header.
type Header struct {
	Name, Value string
}

// Header returns the value of the first header named name, compared
// without regard to case, or "".
func (r *Response) Header(name string) string {
	if i := r.headerIndex(name); i >= 0 {
		return r.Headers[i].Value
	}
	return ""
}

// SetHeader replaces the value of the first header named name, compared
// without regard to case, or adds the header.
func (r *Response) SetHeader(name, value string) {
	r.env = nil
	if i := r.headerIndex(name); i >= 0 {
		r.Headers[i].Value = value
		return
	}
	r.Headers = append(r.Headers, Header{name, value})
}

func (r *Response) headerIndex(name string) int {
	for i, h := range r.Headers {
		if equalFold(h.Name, name) {
			return i
		}
	}
	return -1
}

// Envelope keys, ABI v1 section 5.
const (
	keyMethod      = 1
	keyPath        = 2
	keyQuery       = 3
	keyHeaders     = 4
	keyBody        = 5
	keyFlow        = 6
	keyRequestFrom = 7
	keyResponse    = 8

	keyStatus     = 1
	keyRespHeader = 2
	keyRespBody   = 3
)

// CBOR major types.
const (
	majUint   = 0
	majNeg    = 1
	majBytes  = 2
	majText   = 3
	majArray  = 4
	majMap    = 5
	majTag    = 6
	majSimple = 7
)

// maxDepth bounds nesting when skipping unknown values, so that a hostile
// envelope cannot exhaust the guest's stack.
const maxDepth = 32

// EnvelopeError reports a malformed envelope and where decoding stopped.
// It avoids fmt, which would add about half a megabyte to every guest.
type EnvelopeError struct {
	What   string
	Offset int
}

func (e *EnvelopeError) Error() string {
	return "rift: malformed envelope: " + e.What + " at offset " + strconv.Itoa(e.Offset)
}

// decoder reads definite-length CBOR. The first error sticks; later reads
// return zero values, so callers check err once per item.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = &EnvelopeError{What: what, Offset: d.off}
	}
}

// head reads an item's initial byte and argument.
func (d *decoder) head() (major byte, arg uint64) {
	if d.err != nil {
		return 0, 0
	}
	if d.off >= len(d.b) {
		d.fail("truncated")
		return 0, 0
	}
	ib := d.b[d.off]
	d.off++
	major, info := ib>>5, ib&0x1f
	var n int
	switch {
	case info < 24:
		return major, uint64(info)
	case info == 24:
		n = 1
	case info == 25:
		n = 2
	case info == 26:
		n = 4
	case info == 27:
		n = 8
	default:
		d.off--
		d.fail("indefinite length or reserved info")
		return 0, 0
	}
	if len(d.b)-d.off < n {
		d.fail("truncated argument")
		return 0, 0
	}
	for _, c := range d.b[d.off : d.off+n] {
		arg = arg<<8 | uint64(c)
	}
	d.off += n
	return major, arg
}

// payload returns the next n bytes of a string item without copying.
func (d *decoder) payload(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail("string past end")
		return nil
	}
	p := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return p
}

// count checks a container's length against what is left, so that a huge
// declared length fails before anything is allocated for it.
func (d *decoder) count(n uint64, minItemBytes int) int {
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.b)-d.off)/uint64(minItemBytes) {
		d.fail("container longer than input")
		return 0
	}
	return int(n)
}

// textView returns a text string's bytes without copying.
func (d *decoder) textView() []byte {
	m, n := d.head()
	if d.err == nil && m != majText {
		d.fail("want text")
	}
	return d.payload(n)
}

func (d *decoder) text() string { return string(d.textView()) }

// bytesView returns a byte or text string's bytes without copying.
func (d *decoder) bytesView() []byte {
	m, n := d.head()
	if d.err == nil && m != majBytes && m != majText {
		d.fail("want bytes")
	}
	p := d.payload(n)
	if len(p) == 0 {
		return nil
	}
	return p
}

// bytesOrText reads a byte or text string into a fresh slice.
func (d *decoder) bytesOrText() []byte {
	if p := d.bytesView(); p != nil {
		return append([]byte(nil), p...)
	}
	return nil
}

func (d *decoder) uint() uint64 {
	m, n := d.head()
	if d.err == nil && m != majUint {
		d.fail("want unsigned integer")
	}
	return n
}

// mapLen reads a map's head and returns how many pairs it holds.
func (d *decoder) mapLen() int {
	m, n := d.head()
	if d.err == nil && m != majMap {
		d.fail("want map")
	}
	return d.count(n, 2)
}

func (d *decoder) headers() []Header {
	c := d.mapLen()
	if d.err != nil || c == 0 {
		return nil
	}
	out := make([]Header, 0, c)
	for i := 0; i < c && d.err == nil; i++ {
		k := d.text()
		out = append(out, Header{k, d.text()})
	}
	return out
}

// skip passes over one item of any type the ABI allows, and over tags and
// floats too, which hosts never write but a later host might.
func (d *decoder) skip(depth int) {
	if depth > maxDepth {
		d.fail("nested too deeply")
		return
	}
	m, n := d.head()
	if d.err != nil {
		return
	}
	switch m {
	case majUint, majNeg, majSimple:
		// The argument was the whole item (floats included).
	case majBytes, majText:
		d.payload(n)
	case majArray:
		c := d.count(n, 1)
		for i := 0; i < c && d.err == nil; i++ {
			d.skip(depth + 1)
		}
	case majMap:
		c := d.count(n, 2)
		for i := 0; i < c && d.err == nil; i++ {
			d.skip(depth + 1)
			d.skip(depth + 1)
		}
	case majTag:
		d.skip(depth + 1)
	}
}

// key reads a map key; ok is false (and the key skipped) when it is not a
// small unsigned integer, so that the caller skips the value as unknown.
func (d *decoder) key() (k uint64, ok bool) {
	if d.err != nil || d.off >= len(d.b) {
		d.head() // records the truncation
		return 0, false
	}
	if d.b[d.off]>>5 != majUint {
		d.skip(0)
		return 0, false
	}
	return d.uint(), true
}

func (d *decoder) response() *Response {
	r := &Response{}
	c := d.mapLen()
	for i := 0; i < c && d.err == nil; i++ {
		k, ok := d.key()
		if !ok {
			d.skip(1)
			continue
		}
		switch k {
		case keyStatus:
			s := d.uint()
			if s > 999 {
				d.fail("status out of range")
			}
			r.Status = int(s)
		case keyRespHeader:
			r.Headers = d.headers()
		case keyRespBody:
			r.Body = d.bytesOrText()
		default:
			d.skip(1)
		}
	}
	return r
}

// appendHead is split so that the common short form inlines: every call
// in a guest costs a check-in with the host when calls have a deadline.
func appendHead(b []byte, major byte, n uint64) []byte {
	if n < 24 {
		return append(b, major<<5|byte(n))
	}
	return appendLongHead(b, major, n)
}

func appendLongHead(b []byte, major byte, n uint64) []byte {
	major <<= 5
	switch {
	case n <= 0xff:
		return append(b, major|24, byte(n))
	case n <= 0xffff:
		return append(b, major|25, byte(n>>8), byte(n))
	case n <= 0xffffffff:
		return append(b, major|26, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, major|27, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32),
		byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendText(b []byte, s string) []byte {
	return append(appendHead(b, majText, uint64(len(s))), s...)
}

func appendHeaders(b []byte, hs []Header) []byte {
	b = appendHead(b, majMap, uint64(len(hs)))
	for _, h := range hs {
		b = appendText(appendText(b, h.Name), h.Value)
	}
	return b
}

// AppendCBOR appends r's response envelope to b. It leaves out what the
// host defaults: status 0, no headers and an empty body.
func (r *Response) AppendCBOR(b []byte) []byte {
	if r.env != nil {
		return append(b, r.env...)
	}
	n := 0
	if r.Status != 0 {
		n++
	}
	if len(r.Headers) > 0 {
		n++
	}
	if len(r.Body) > 0 {
		n++
	}
	b = appendHead(b, majMap, uint64(n))
	if r.Status != 0 {
		b = appendHead(appendHead(b, majUint, keyStatus), majUint, uint64(r.Status))
	}
	if len(r.Headers) > 0 {
		b = appendHeaders(appendHead(b, majUint, keyRespHeader), r.Headers)
	}
	if len(r.Body) > 0 {
		b = appendHead(appendHead(b, majUint, keyRespBody), majBytes, uint64(len(r.Body)))
		b = append(b, r.Body...)
	}
	return b
}
