package plugins

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Envelope keys, ABI v1 section 5. They are frozen: new keys may be added,
// these never change.
const (
	reqMethod      = 1
	reqPath        = 2
	reqQuery       = 3
	reqHeaders     = 4
	reqBody        = 5
	reqFlow        = 6
	reqRequestFrom = 7
	reqResponse    = 8

	respStatus  = 1
	respHeaders = 2
	respBody    = 3
)

// CBOR major types (RFC 8949 section 3.1), already shifted into the high
// three bits of the initial byte.
const (
	majUint   = 0 << 5
	majNegint = 1 << 5
	majBytes  = 2 << 5
	majText   = 3 << 5
	majArray  = 4 << 5
	majMap    = 5 << 5
	majTag    = 6 << 5
	majSimple = 7 << 5
)

// maxNesting bounds how deep the decoder follows nested items it skips, so a
// hostile envelope cannot exhaust the Go stack.
const maxNesting = 32

// Pair is one name/value pair of a query string or a header list, in the
// order received. Repeated names are allowed; the encoder joins them.
type Pair struct {
	Name, Value string
}

// Response is a response envelope: the one a guest wrote, or the one being
// decorated. Status 0 means "absent" and encodes as the ABI default (200 is
// left implicit).
type Response struct {
	Status  int
	Headers []Pair
	Body    []byte
}

// appendHead appends a CBOR initial byte for major type maj and argument n,
// in the shortest form (canonical CBOR, RFC 8949 section 4.2.1).
func appendHead(dst []byte, maj byte, n uint64) []byte {
	switch {
	case n < 24:
		return append(dst, maj|byte(n))
	case n <= 0xff:
		return append(dst, maj|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(dst, maj|25), uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(dst, maj|26), uint32(n))
	default:
		return binary.BigEndian.AppendUint64(append(dst, maj|27), n)
	}
}

func appendText(dst []byte, s string) []byte {
	return append(appendHead(dst, majText, uint64(len(s))), s...)
}

func appendBytes(dst []byte, b []byte) []byte {
	return append(appendHead(dst, majBytes, uint64(len(b))), b...)
}

// canonicalLess orders text keys as canonical CBOR does: the bytewise order
// of their encodings, which for text strings is shorter first, then bytewise.
func canonicalLess(a, b Pair) int {
	if c := cmp.Compare(len(a.Name), len(b.Name)); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// encoder holds the scratch space for encoding one envelope; an instance
// reuses it for every call so the hot path does not allocate.
type encoder struct {
	buf   []byte
	pairs []Pair
}

// appendTextMap appends pairs as a canonical CBOR map of text to text. A
// repeated name becomes one key whose values are joined with sep, in the
// order received (a stable sort keeps that order).
func (e *encoder) appendTextMap(dst []byte, pairs []Pair, sep string) []byte {
	e.pairs = append(e.pairs[:0], pairs...)
	ps := e.pairs
	slices.SortStableFunc(ps, canonicalLess)
	n := 0
	for i := range ps {
		if i == 0 || ps[i].Name != ps[i-1].Name {
			n++
		}
	}
	dst = appendHead(dst, majMap, uint64(n))
	for i := 0; i < len(ps); {
		j, size := i+1, len(ps[i].Value)
		for j < len(ps) && ps[j].Name == ps[i].Name {
			size += len(sep) + len(ps[j].Value)
			j++
		}
		dst = appendText(dst, ps[i].Name)
		dst = appendHead(dst, majText, uint64(size))
		for k := i; k < j; k++ {
			if k > i {
				dst = append(dst, sep...)
			}
			dst = append(dst, ps[k].Value...)
		}
		i = j
	}
	clear(e.pairs) // drop references to the caller's strings
	return dst
}

// appendResponse appends r as a canonical response envelope. The status is
// omitted when it is 0, headers when there are none.
func (e *encoder) appendResponse(dst []byte, r *Response) []byte {
	n := uint64(1)
	if r.Status != 0 {
		n++
	}
	if len(r.Headers) > 0 {
		n++
	}
	dst = appendHead(dst, majMap, n)
	if r.Status != 0 {
		dst = appendHead(append(dst, respStatus), majUint, uint64(r.Status))
	}
	if len(r.Headers) > 0 {
		dst = e.appendTextMap(append(dst, respHeaders), r.Headers, ", ")
	}
	return appendBytes(append(dst, respBody), r.Body)
}

// encodeRequest encodes in's request envelope into e.buf and returns it.
// The result is valid until the next call.
func (e *encoder) encodeRequest(in *Input) []byte {
	n := uint64(7)
	if in.Response != nil {
		n++
	}
	b := appendHead(e.buf[:0], majMap, n)
	b = appendText(append(b, reqMethod), in.Method)
	b = appendText(append(b, reqPath), in.Path)
	b = e.appendTextMap(append(b, reqQuery), in.Query, ",")
	b = e.appendTextMap(append(b, reqHeaders), in.Headers, ", ")
	b = appendBytes(append(b, reqBody), in.Body)
	b = appendText(append(b, reqFlow), in.FlowID)
	b = appendText(append(b, reqRequestFrom), text(in.RequestFrom))
	if in.Response != nil {
		b = e.appendResponse(append(b, reqResponse), in.Response)
	}
	e.buf = b
	return b
}

// requestSize returns len(encodeRequest(in)) without encoding, so that the
// host can pass the entry point the envelope's length (ABI v1 section 6)
// and encode only if the guest reads it: many plugins answer from flow
// state and config alone. It reports false when working the length out
// would cost about what encoding does (many pairs, or a decorate call's
// response), and the caller then encodes.
func requestSize(in *Input) (int, bool) {
	const maxPairs = 16 // the duplicate search below is quadratic
	if in.Response != nil || len(in.Query) > maxPairs || len(in.Headers) > maxPairs {
		return 0, false
	}
	n := 1 + 7 // the map's head and seven one-byte keys
	n += textSize(len(in.Method)) + textSize(len(in.Path)) + textSize(len(in.Body)) +
		textSize(len(in.FlowID)) + textSize(textLen(in.RequestFrom))
	n += textMapSize(in.Query, len(",")) + textMapSize(in.Headers, len(", "))
	return n, true
}

// headSize is the length of appendHead's output for argument n.
func headSize(n uint64) int {
	switch {
	case n < 24:
		return 1
	case n <= 0xff:
		return 2
	case n <= 0xffff:
		return 3
	case n <= 0xffffffff:
		return 5
	}
	return 9
}

// textSize is the encoded length of a text or byte string of n bytes.
func textSize(n int) int { return headSize(uint64(n)) + n }

// textMapSize is the length appendTextMap writes for pairs: one key per
// distinct name, its values joined by sep bytes.
func textMapSize(pairs []Pair, sep int) int {
	keys, size := 0, 0
next:
	for i, p := range pairs {
		for _, q := range pairs[:i] {
			if q.Name == p.Name {
				continue next // counted with its first occurrence
			}
		}
		joined := len(p.Value)
		for _, q := range pairs[i+1:] {
			if q.Name == p.Name {
				joined += sep + len(q.Value)
			}
		}
		keys++
		size += textSize(len(p.Name)) + textSize(joined)
	}
	return headSize(uint64(keys)) + size
}

// Errors of the response decoder, wrapped with the offset where they occur.
var (
	errTruncated  = errors.New("truncated")
	errIndefinite = errors.New("indefinite length not allowed")
	errMalformed  = errors.New("malformed item")
)

// decoder reads definite-length CBOR from a byte slice.
type decoder struct {
	b   []byte
	off int
	// memo, when set, is the header map decoded last: the same bytes
	// again decode to the same (never modified) pairs, without allocating.
	memo *headerMemo
	// room, when set, is where a body is copied (see Input.BodyRoom).
	room *[]byte
}

// headerMemo is a header map's bytes (its head included) and what they
// decoded to.
type headerMemo struct {
	raw   []byte
	pairs []Pair
}

// head reads an initial byte and its argument. It rejects indefinite
// lengths and the reserved additional-information values.
func (d *decoder) head() (maj byte, arg uint64, err error) {
	if d.off >= len(d.b) {
		return 0, 0, errTruncated
	}
	ib := d.b[d.off]
	d.off++
	maj, ai := ib&0xe0, ib&0x1f
	var n int
	switch {
	case ai < 24:
		return maj, uint64(ai), nil
	case ai == 24:
		n = 1
	case ai == 25:
		n = 2
	case ai == 26:
		n = 4
	case ai == 27:
		n = 8
	case ai == 31:
		return 0, 0, errIndefinite
	default:
		return 0, 0, errMalformed
	}
	if len(d.b)-d.off < n {
		return 0, 0, errTruncated
	}
	for _, c := range d.b[d.off : d.off+n] {
		arg = arg<<8 | uint64(c)
	}
	d.off += n
	if maj == majSimple && n == 1 && arg < 32 {
		// RFC 8949 section 3.3: simple values below 32 take one byte.
		return 0, 0, errMalformed
	}
	return maj, arg, nil
}

// take returns the next n bytes of a string item.
func (d *decoder) take(n uint64) ([]byte, error) {
	if n > uint64(len(d.b)-d.off) {
		return nil, errTruncated
	}
	s := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return s, nil
}

// text reads a text string item.
func (d *decoder) text() ([]byte, error) {
	maj, n, err := d.head()
	if err != nil {
		return nil, err
	}
	if maj != majText {
		return nil, fmt.Errorf("want text: %w", errMalformed)
	}
	s, err := d.take(n)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(s) {
		return nil, fmt.Errorf("text is not UTF-8: %w", errMalformed)
	}
	return s, nil
}

// skip steps over one complete item of any type, which is how unknown keys
// are ignored.
func (d *decoder) skip(depth int) error {
	if depth > maxNesting {
		return fmt.Errorf("nested deeper than %d: %w", maxNesting, errMalformed)
	}
	maj, n, err := d.head()
	if err != nil {
		return err
	}
	switch maj {
	case majUint, majNegint, majSimple:
		return nil
	case majBytes, majText:
		_, err = d.take(n)
		return err
	case majTag:
		return d.skip(depth + 1)
	case majArray, majMap:
		items := n
		if maj == majMap {
			if n > uint64(len(d.b)) {
				return errTruncated
			}
			items = 2 * n
		}
		// Every item takes at least one byte, so a count past what is left
		// is truncated; checking first keeps a huge count from spinning.
		if items > uint64(len(d.b)-d.off) {
			return errTruncated
		}
		for range items {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	}
	return errMalformed
}

// decodeResponse decodes a response envelope a guest wrote. Keys may come in
// any order; unknown keys are skipped; a known key may appear once. The
// result's strings and body are copies, independent of b: the body in
// *room when room is set, else fresh.
func decodeResponse(b []byte, memo *headerMemo, room *[]byte) (Response, error) {
	var r Response
	d := decoder{b: b, memo: memo, room: room}
	if err := d.response(&r); err != nil {
		return Response{}, fmt.Errorf("response envelope at byte %d: %w", d.off, err)
	}
	if d.off != len(b) {
		return Response{}, fmt.Errorf("response envelope: %d bytes after the map: %w", len(b)-d.off, errMalformed)
	}
	return r, nil
}

func (d *decoder) response(r *Response) error {
	maj, n, err := d.head()
	if err != nil {
		return err
	}
	if maj != majMap {
		return fmt.Errorf("want a map: %w", errMalformed)
	}
	if n > uint64(len(d.b)) {
		return errTruncated
	}
	var seen uint8
	for range n {
		start := d.off
		kmaj, key, err := d.head()
		if err != nil {
			return err
		}
		if kmaj != majUint || key < respStatus || key > respBody {
			// An unknown key, of any type (known keys are small unsigned
			// integers): skip the key if it is not one, then its value.
			if kmaj != majUint {
				d.off = start
				if err := d.skip(0); err != nil {
					return err
				}
			}
			if err := d.skip(0); err != nil {
				return err
			}
			continue
		}
		bit := uint8(1) << key
		if seen&bit != 0 {
			return fmt.Errorf("key %d repeated: %w", key, errMalformed)
		}
		seen |= bit
		switch key {
		case respStatus:
			vmaj, v, err := d.head()
			if err != nil {
				return err
			}
			if vmaj != majUint || v < 100 || v > 599 {
				return fmt.Errorf("status must be an unsigned integer from 100 to 599: %w", errMalformed)
			}
			r.Status = int(v)
		case respHeaders:
			if err := d.headers(r); err != nil {
				return err
			}
		case respBody:
			vmaj, v, err := d.head()
			if err != nil {
				return err
			}
			if vmaj != majBytes && vmaj != majText {
				return fmt.Errorf("body must be bytes or text: %w", errMalformed)
			}
			s, err := d.take(v)
			if err != nil {
				return err
			}
			if d.room != nil && len(s) > 0 {
				*d.room = append((*d.room)[:0], s...)
				r.Body = *d.room
			} else {
				r.Body = slices.Clone(s)
			}
		}
	}
	if r.Status == 0 {
		r.Status = 200
	}
	return nil
}

func (d *decoder) headers(r *Response) error {
	// A CBOR item is prefix-free: bytes that begin with a whole header map
	// decoded before hold that map, and no other.
	if m := d.memo; m != nil && m.raw != nil && bytes.HasPrefix(d.b[d.off:], m.raw) {
		d.off += len(m.raw)
		r.Headers = m.pairs
		return nil
	}
	mapStart := d.off
	maj, n, err := d.head()
	if err != nil {
		return err
	}
	if maj != majMap {
		return fmt.Errorf("headers must be a map: %w", errMalformed)
	}
	if 2*n > uint64(len(d.b)-d.off) {
		return errTruncated
	}
	// One pass checks the map, a second cuts the names and values out of a
	// single copy of its bytes: two allocations for any number of headers.
	start := d.off
	for range 2 * n {
		if _, err := d.text(); err != nil {
			return err
		}
	}
	all := string(d.b[start:d.off])
	r.Headers = make([]Pair, n)
	in := decoder{b: d.b[start:d.off]}
	next := func() string {
		_, l, _ := in.head() // checked by the first pass
		s := all[in.off : in.off+int(l)]
		in.off += int(l)
		return s
	}
	for i := range r.Headers {
		r.Headers[i].Name = next()
		r.Headers[i].Value = next()
	}
	if m := d.memo; m != nil && d.off-mapStart <= maxCachedResponse {
		m.raw, m.pairs = append(m.raw[:0], d.b[mapStart:d.off]...), r.Headers
	}
	return nil
}
