package reqlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/riftgate/riftgate/gateway/message"
)

// A record is one recorded request in the log's own encoding (version 1,
// the segment header's): its kind, its time, then its fields, each string
// a uvarint length and its bytes:
//
//	http:  requestFrom ip method path uvarint(#query) (name value)* uvarint(#headers) (name value)* body
//	tcp:   requestFrom ip data
//	json:  the request as mb's JSON (smtp's, whose message has no fields of its own here)
//
// The time is Unix nanoseconds, 8 bytes little-endian (fixed, so that the
// log can order it as it appends), 0 for none. Everything mb shows
// of a request is derived from these (form from the body and its
// Content-Type): a record renders to exactly the JSON the request would.
const (
	kindHTTP byte = 1
	kindTCP  byte = 2
	kindJSON byte = 3
)

var errCorrupt = errors.New("reqlog: corrupt record")

// AppendRecord appends r's record to dst.
func AppendRecord(dst []byte, r *message.Request) []byte {
	var ts int64
	if !r.Timestamp.IsZero() {
		ts = r.Timestamp.UnixNano()
	}
	switch r.Kind {
	case message.HTTP:
		dst = append(dst, kindHTTP)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(ts))
		dst = appendStr(dst, r.RequestFrom())
		dst = appendStr(dst, r.IP())
		dst = appendStr(dst, r.Method)
		dst = appendStr(dst, r.Path)
		dst = appendKVs(dst, r.Query)
		dst = appendKVs(dst, r.Headers)
		dst = binary.AppendUvarint(dst, uint64(len(r.Body)))
		return append(dst, r.Body...)
	case message.TCP:
		dst = append(dst, kindTCP)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(ts))
		dst = appendStr(dst, r.RequestFrom())
		dst = appendStr(dst, r.IP())
		dst = binary.AppendUvarint(dst, uint64(len(r.Body)))
		return append(dst, r.Body...)
	}
	js, _ := r.MarshalJSON() // never fails
	return AppendJSONRecord(dst, r.Timestamp, js)
}

// AppendJSONRecord appends the record of a request known only as mb's
// JSON, which arrived at t (zero: unknown): what a member of an older
// build sends of its recordings. It renders as that JSON, unchanged.
func AppendJSONRecord(dst []byte, t time.Time, js []byte) []byte {
	var ts int64
	if !t.IsZero() {
		ts = t.UnixNano()
	}
	dst = append(dst, kindJSON)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(ts))
	dst = binary.AppendUvarint(dst, uint64(len(js)))
	return append(dst, js...)
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendKVs(dst []byte, kvs []message.KV) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(kvs)))
	for _, kv := range kvs {
		dst = appendStr(dst, kv.Name)
		dst = appendStr(dst, kv.Value)
	}
	return dst
}

// Record is a decoded record. Its request's strings and body borrow the
// record's bytes: they are valid as long as those are, and a Record is
// reused from one Decode to the next.
type Record struct {
	// Time is when the request arrived (zero when it had no time).
	Time time.Time
	// Request holds an http or tcp record; JSON holds any other (smtp).
	Request message.Request
	JSON    []byte
}

// Decode reads rec into r.
func (r *Record) Decode(rec []byte) error {
	r.Request.Reset()
	r.JSON = nil
	d := decoder{b: rec}
	kind := d.byte()
	ts := d.int64()
	r.Time = time.Time{}
	if ts != 0 {
		r.Time = time.Unix(0, ts)
	}
	switch kind {
	case kindHTTP:
		from, ip := d.str(), d.str()
		r.Request.Method, r.Request.Path = d.str(), d.str()
		r.Request.Query = d.kvs(r.Request.Query)
		r.Request.Headers = d.kvs(r.Request.Headers)
		r.Request.Body = d.bytes()
		r.Request.SetRemote(from, ip)
	case kindTCP:
		from, ip := d.str(), d.str()
		r.Request.Kind = message.TCP
		r.Request.Body = d.bytes()
		r.Request.SetRemote(from, ip)
	case kindJSON:
		r.Request.Kind = message.SMTP
		r.JSON = d.bytes()
	default:
		return fmt.Errorf("%w: kind %d", errCorrupt, kind)
	}
	if d.err != nil || len(d.b) != 0 {
		return errCorrupt
	}
	r.Request.Timestamp = r.Time
	return nil
}

// AppendJSON appends the request as mb shows it in an imposter's requests.
func (r *Record) AppendJSON(b *bytes.Buffer) {
	if r.JSON != nil {
		b.Write(r.JSON)
		return
	}
	js, _ := r.Request.MarshalJSON() // never fails
	b.Write(js)
}

// RecordTime reads only a record's time, as a merge by time needs it.
func RecordTime(rec []byte) (time.Time, error) {
	d := decoder{b: rec}
	d.byte()
	ts := d.int64()
	if d.err != nil {
		return time.Time{}, d.err
	}
	if ts == 0 {
		return time.Time{}, nil
	}
	return time.Unix(0, ts), nil
}

// decoder reads a record's fields; the first fault sticks in err and
// leaves every later field empty.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() { d.err, d.b = errCorrupt, nil }

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) int64() int64 {
	if len(d.b) < 8 {
		d.fail()
		return 0
	}
	v := int64(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}

// orderTime makes rec's time no earlier than after, and returns it: a log
// holds its requests in the order they were appended, and a merged view
// of several logs needs each in time order too. Requests served at once
// are appended in an order a little different from their arrival; the
// later ones by arrival move forward by that much (well under the
// millisecond that mb's JSON shows, at most).
func orderTime(rec []byte, after int64) int64 {
	ts := int64(binary.LittleEndian.Uint64(rec[1:9]))
	if ts == 0 {
		return after // a request without a time stays without
	}
	if ts < after {
		ts = after
		binary.LittleEndian.PutUint64(rec[1:9], uint64(ts))
	}
	return ts
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	b := d.bytes()
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func (d *decoder) kvs(dst []message.KV) []message.KV {
	n := d.uvarint()
	// Each pair takes at least two bytes: a count past that is corrupt,
	// and must not size an allocation.
	if n > uint64(len(d.b))/2 {
		d.fail()
		return dst[:0]
	}
	dst = dst[:0]
	for range n {
		dst = append(dst, message.KV{Name: d.str(), Value: d.str()})
	}
	return dst
}
