package rift

import "iter"

// Request is a read-only view of the request envelope (ABI v1 section 5).
// Nothing is decoded until an accessor is called, and then only what it
// needs, so a handler pays only for what it reads: Go code in a guest runs
// far slower than native (an allocation costs about half a microsecond),
// and decoding a small request eagerly cost about 20 µs a call.
//
// The kit reuses a Request and its envelope from call to call: neither the
// Request nor a slice Body returns may be kept after the handler returns.
// Strings are copies and may be kept.
type Request struct {
	env []byte
	// at holds, for each known key, the offset in env of its value; zero
	// means absent, since offset 0 is the envelope's own map head.
	at      [keyResponse + 1]int
	resp    *Response
	indexed bool
	err     error
	// load, when set, fetches env on first use: the kit reads the request
	// from the host only if the handler looks at it.
	load func() ([]byte, error)
}

// ParseRequest checks a whole request envelope and indexes its fields. Keys
// may come in any order and unknown keys are skipped, as ABI v1 requires of
// a guest. The Request reads env, which must not change while it is used.
func ParseRequest(env []byte) (*Request, error) {
	r := &Request{env: env}
	if err := r.index(); err != nil {
		return nil, err
	}
	return r, nil
}

// reset makes r a view of the envelope load returns, fetched and indexed
// on first use.
func (r *Request) reset(load func() ([]byte, error)) { *r = Request{load: load} }

// Err reports a malformed envelope, found by the first accessor called;
// the accessors then return zero values. The host writes well-formed
// envelopes, so a plugin need not check: the kit fails the call when a
// handler read a malformed one.
func (r *Request) Err() error { return r.err }

// index checks the whole envelope once and records where each field is.
// It allocates only for a decorate call's response.
func (r *Request) index() error {
	if r.indexed {
		return r.err
	}
	r.indexed = true
	if r.load != nil {
		if r.env, r.err = r.load(); r.err != nil {
			return r.err
		}
	}
	d := decoder{b: r.env}
	c := d.mapLen()
	for i := 0; i < c && d.err == nil; i++ {
		k, ok := d.key()
		if !ok {
			d.skip(1)
			continue
		}
		at := d.off
		switch k {
		case keyMethod, keyPath, keyFlow, keyRequestFrom:
			d.textView()
		case keyQuery, keyHeaders:
			n := d.mapLen()
			for j := 0; j < n && d.err == nil; j++ {
				d.textView()
				d.textView()
			}
		case keyBody:
			d.bytesView()
		case keyResponse:
			r.resp = d.response()
		default:
			d.skip(1)
			continue
		}
		r.at[k] = at // a repeated key: the last one wins
	}
	if d.err == nil && d.off != len(r.env) {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		r.at, r.resp, r.err = [keyResponse + 1]int{}, nil, d.err
	}
	return r.err
}

// field returns a decoder positioned at key's value, or ok false.
func (r *Request) field(key int) (d decoder, ok bool) {
	if r.index() != nil || r.at[key] == 0 {
		return decoder{}, false
	}
	return decoder{b: r.env, off: r.at[key]}, true
}

func (r *Request) text(key int) string {
	if d, ok := r.field(key); ok {
		return string(d.textView())
	}
	return ""
}

// Method returns the HTTP method.
func (r *Request) Method() string { return r.text(keyMethod) }

// Path returns the path, without the query string.
func (r *Request) Path() string { return r.text(keyPath) }

// Flow returns the request's scoped flow id.
func (r *Request) Flow() string { return r.text(keyFlow) }

// RequestFrom returns the client's ip:port.
func (r *Request) RequestFrom() string { return r.text(keyRequestFrom) }

// Body returns the body. The slice is the kit's: it is valid only until the
// handler returns.
func (r *Request) Body() []byte {
	if d, ok := r.field(keyBody); ok {
		return d.bytesView()
	}
	return nil
}

// Query returns the query parameter named name, or "". The host joins a
// repeated parameter's values with ",".
func (r *Request) Query(name string) string {
	return string(r.find(keyQuery, name, false))
}

// Header returns the header named name, compared without regard to case,
// or "". The host joins a repeated header's values with ", ".
func (r *Request) Header(name string) string {
	return string(r.find(keyHeaders, name, true))
}

// find returns the value of the first pair named name in the text map at
// key, without copying; a plain loop, since Header is on hot paths.
func (r *Request) find(key int, name string, fold bool) []byte {
	d, ok := r.field(key)
	if !ok {
		return nil
	}
	for range d.mapLen() {
		k, v := d.textView(), d.textView()
		if fold && equalFold(k, name) || !fold && string(k) == name {
			return v
		}
	}
	return nil
}

// Headers yields every header as received, in order.
func (r *Request) Headers() iter.Seq2[string, string] { return r.strings(keyHeaders) }

// QueryParams yields every query parameter as received, in order.
func (r *Request) QueryParams() iter.Seq2[string, string] { return r.strings(keyQuery) }

// Response returns the response being decorated, or nil outside a
// decorate call.
func (r *Request) Response() *Response {
	if r.index() != nil {
		return nil
	}
	return r.resp
}

func (r *Request) strings(key int) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for k, v := range r.pairs(key) {
			if !yield(string(k), string(v)) {
				return
			}
		}
	}
}

// pairs yields the text map at key without copying.
func (r *Request) pairs(key int) iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		d, ok := r.field(key)
		if !ok {
			return
		}
		n := d.mapLen()
		for range n {
			if !yield(d.textView(), d.textView()) {
				return
			}
		}
	}
}

func equalFold[T string | []byte](a T, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
