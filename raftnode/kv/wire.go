package kv

import (
	"errors"
	"fmt"
	"math"

	"github.com/fxamacker/cbor/v2"
)

// Wire format (pinned by TestWireFormatIsPinned). Every union is a CBOR
// array whose first element is an unsigned tag; each variant's field list is
// fixed, so a change is a new tag, never a new field:
//
//	Command  Put      [0, key bstr, value bstr, expect, ttl_ms uint | null, now_ms uint]
//	         Delete   [1, key bstr, expect, now_ms uint]
//	         TakeOnce [2, key bstr, expect, now_ms uint]
//	         Evict    [3, cutoff_ms uint, limit uint]
//	Expect   Absent [0] | Version [1, v uint] | Any [2]
//	Response Written [0, version] | Deleted [1, removed bool] |
//	         Taken [2, record | null] | Evicted [3, count, more_expired bool] |
//	         Conflict [4, record | null] | Rejected [5, reason uint]
//	Record   [value bstr, version uint, expires_at_ms uint (0: never)]
//
// A null ttl is Put.NoExpiry. Encodings are CBOR core deterministic;
// decoding rejects indefinite lengths, wrong major types, wrong arities and
// trailing bytes.

// Command tags.
const (
	tagPut      = 0
	tagDelete   = 1
	tagTakeOnce = 2
	tagEvict    = 3
)

// Response tags.
const (
	tagWritten  = 0
	tagDeleted  = 1
	tagTaken    = 2
	tagEvicted  = 3
	tagConflict = 4
	tagRejected = 5
)

// responseArity is each response variant's element count, tag included.
var responseArity = [...]int{tagWritten: 2, tagDeleted: 2, tagTaken: 2, tagEvicted: 3, tagConflict: 2, tagRejected: 2}

// ErrDecode wraps every wire and snapshot decoding failure.
var ErrDecode = errors.New("kv: decode")

var (
	encMode = mustEncMode()
	decMode = mustDecMode()
)

func mustEncMode() cbor.EncMode {
	o := cbor.CoreDetEncOptions()
	o.NilContainers = cbor.NilContainerAsEmpty
	m, err := o.EncMode()
	if err != nil {
		panic(err) // static options: cannot fail at run time
	}
	return m
}

func mustDecMode() cbor.DecMode {
	m, err := cbor.DecOptions{
		IndefLength:      cbor.IndefLengthForbidden,
		MaxArrayElements: math.MaxInt32, // snapshots hold one element per record
	}.DecMode()
	if err != nil {
		panic(err) // static options: cannot fail at run time
	}
	return m
}

// EncodeCommand returns the wire bytes of c.
func EncodeCommand(c Command) ([]byte, error) {
	v, err := commandWire(c)
	if err != nil {
		return nil, err
	}
	return encMode.Marshal(v)
}

func commandWire(c Command) ([]any, error) {
	switch c := c.(type) {
	case Put:
		var ttl any = c.TTLMs
		if c.NoExpiry {
			if c.TTLMs != 0 {
				return nil, fmt.Errorf("kv: encode Put: NoExpiry with TTL %d", c.TTLMs)
			}
			ttl = nil
		}
		return []any{tagPut, []byte(c.Key), c.Value, c.Expect.wire(), ttl, c.NowMs}, nil
	case Delete:
		return []any{tagDelete, []byte(c.Key), c.Expect.wire(), c.NowMs}, nil
	case TakeOnce:
		return []any{tagTakeOnce, []byte(c.Key), c.Expect.wire(), c.NowMs}, nil
	case Evict:
		return []any{tagEvict, c.CutoffMs, c.Limit}, nil
	}
	return nil, fmt.Errorf("kv: encode: unknown command %T", c)
}

// DecodeCommand parses wire bytes produced by EncodeCommand.
func DecodeCommand(b []byte) (Command, error) {
	c, err := decodeCommand(b)
	if err != nil {
		return nil, fmt.Errorf("%w command: %w", ErrDecode, err)
	}
	return c, nil
}

func decodeCommand(b []byte) (Command, error) {
	tag, f, err := union(b)
	if err != nil {
		return nil, err
	}
	var d fields
	switch tag {
	case tagPut:
		if err := f.arity(6); err != nil {
			return nil, err
		}
		c := Put{Key: d.key(f[1]), Value: d.bytes(f[2]), Expect: d.expect(f[3]), NowMs: d.uint(f[5])}
		if isNull(f[4]) {
			c.NoExpiry = true
		} else {
			c.TTLMs = d.uint(f[4])
		}
		return c, d.err
	case tagDelete:
		if err := f.arity(4); err != nil {
			return nil, err
		}
		c := Delete{Key: d.key(f[1]), Expect: d.expect(f[2]), NowMs: d.uint(f[3])}
		return c, d.err
	case tagTakeOnce:
		if err := f.arity(4); err != nil {
			return nil, err
		}
		c := TakeOnce{Key: d.key(f[1]), Expect: d.expect(f[2]), NowMs: d.uint(f[3])}
		return c, d.err
	case tagEvict:
		if err := f.arity(3); err != nil {
			return nil, err
		}
		c := Evict{CutoffMs: d.uint(f[1]), Limit: d.uint32(f[2])}
		return c, d.err
	}
	return nil, fmt.Errorf("unknown command tag %d", tag)
}

// EncodeResponse returns the wire bytes of r.
func EncodeResponse(r Response) ([]byte, error) {
	var v []any
	switch r := r.(type) {
	case Written:
		v = []any{tagWritten, r.Version}
	case Deleted:
		v = []any{tagDeleted, r.Removed}
	case Taken:
		v = []any{tagTaken, r.Record.wire()}
	case Evicted:
		v = []any{tagEvicted, r.Count, r.MoreExpired}
	case Conflict:
		v = []any{tagConflict, r.Current.wire()}
	case Rejected:
		v = []any{tagRejected, uint8(r.Reason)}
	default:
		return nil, fmt.Errorf("kv: encode: unknown response %T", r)
	}
	return encMode.Marshal(v)
}

// DecodeResponse parses wire bytes produced by EncodeResponse.
func DecodeResponse(b []byte) (Response, error) {
	r, err := decodeResponse(b)
	if err != nil {
		return nil, fmt.Errorf("%w response: %w", ErrDecode, err)
	}
	return r, nil
}

func decodeResponse(b []byte) (Response, error) {
	tag, f, err := union(b)
	if err != nil {
		return nil, err
	}
	var d fields
	if tag >= uint64(len(responseArity)) {
		return nil, fmt.Errorf("unknown response tag %d", tag)
	}
	if err := f.arity(responseArity[tag]); err != nil {
		return nil, err
	}
	var r Response
	switch tag {
	case tagWritten:
		r = Written{Version: d.uint(f[1])}
	case tagDeleted:
		r = Deleted{Removed: d.bool(f[1])}
	case tagTaken:
		r = Taken{Record: d.record(f[1])}
	case tagEvicted:
		r = Evicted{Count: d.uint32(f[1]), MoreExpired: d.bool(f[2])}
	case tagConflict:
		r = Conflict{Current: d.record(f[1])}
	case tagRejected:
		r = Rejected{Reason: Reason(d.uint8(f[1]))}
	}
	return r, d.err
}

func (e Expect) wire() []any {
	if e.kind == ExpectVersion {
		return []any{uint8(e.kind), e.version}
	}
	return []any{uint8(e.kind)}
}

func (r *Record) wire() any {
	if r == nil {
		return nil
	}
	return []any{r.Value, r.Version, r.ExpiresAtMs}
}

// union splits a tagged array into its tag and elements.
func union(b []byte) (uint64, elems, error) {
	f, err := array(b)
	if err != nil {
		return 0, nil, err
	}
	if len(f) == 0 {
		return 0, nil, errors.New("empty array, no tag")
	}
	var d fields
	tag := d.uint(f[0])
	return tag, f, d.err
}

type elems []cbor.RawMessage

func (f elems) arity(n int) error {
	if len(f) != n {
		return fmt.Errorf("tag %x: %d elements, want %d", []byte(f[0]), len(f), n)
	}
	return nil
}

func array(b []byte) (elems, error) {
	if len(b) == 0 || b[0]>>5 != 4 {
		return nil, errors.New("not an array")
	}
	var f elems
	if err := decMode.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	return f, nil
}

func isNull(raw cbor.RawMessage) bool { return len(raw) == 1 && raw[0] == 0xf6 }

// fields decodes elements with strict major types, keeping the first error
// so a variant decodes in one expression.
type fields struct{ err error }

func (d *fields) fail(what string, raw cbor.RawMessage) {
	if d.err == nil {
		d.err = fmt.Errorf("want %s, got % x", what, []byte(raw))
	}
}

func (d *fields) uint(raw cbor.RawMessage) uint64 {
	var v uint64
	if len(raw) == 0 || raw[0]>>5 != 0 || decMode.Unmarshal(raw, &v) != nil {
		d.fail("unsigned integer", raw)
	}
	return v
}

func (d *fields) uint32(raw cbor.RawMessage) uint32 {
	v := d.uint(raw)
	if v > math.MaxUint32 {
		d.fail("uint32", raw)
	}
	return uint32(v)
}

func (d *fields) uint8(raw cbor.RawMessage) uint8 {
	v := d.uint(raw)
	if v > math.MaxUint8 {
		d.fail("uint8", raw)
	}
	return uint8(v)
}

func (d *fields) bool(raw cbor.RawMessage) bool {
	if len(raw) != 1 || (raw[0] != 0xf4 && raw[0] != 0xf5) {
		d.fail("bool", raw)
	}
	return len(raw) == 1 && raw[0] == 0xf5
}

// bytes returns nil for an empty byte string, so decoded values compare
// equal to unset ones.
func (d *fields) bytes(raw cbor.RawMessage) []byte {
	var v []byte
	if len(raw) == 0 || raw[0]>>5 != 2 || decMode.Unmarshal(raw, &v) != nil {
		d.fail("byte string", raw)
	}
	if len(v) == 0 {
		return nil
	}
	return v
}

func (d *fields) key(raw cbor.RawMessage) string { return string(d.bytes(raw)) }

func (d *fields) expect(raw cbor.RawMessage) Expect {
	f, err := array(raw)
	if err != nil || len(f) == 0 {
		d.fail("expect", raw)
		return Expect{}
	}
	switch k := ExpectKind(d.uint8(f[0])); {
	case k == ExpectVersion && len(f) == 2:
		return Version(d.uint(f[1]))
	case (k == ExpectAbsent || k == ExpectAny) && len(f) == 1:
		return Expect{kind: k}
	}
	d.fail("expect", raw)
	return Expect{}
}

func (d *fields) record(raw cbor.RawMessage) *Record {
	if isNull(raw) {
		return nil
	}
	f, err := array(raw)
	if err != nil || len(f) != 3 {
		d.fail("record", raw)
		return nil
	}
	return &Record{Value: d.bytes(f[0]), Version: d.uint(f[1]), ExpiresAtMs: d.uint(f[2])}
}
