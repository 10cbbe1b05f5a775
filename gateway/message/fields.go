package message

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strconv"
)

// ResponseFields are the fields of an `is` response, or of what an inject
// script answers, before the imposter's defaultResponse fills in what they
// leave out: as in mb's postProcess (`stub.x || defaultResponse.x`), a
// field whose value is falsy counts as left out, each field on its own.
type ResponseFields struct {
	// Status is the statusCode as a whole number from 100 to 999, or 0
	// when it is set (truthy) but not one: the response then has 200.
	Status    int
	HasStatus bool
	// Headers are the headers in order, repeated names once per value.
	Headers    []KV
	HasHeaders bool
	// Body is what is sent: a string body's text, an object or array
	// body as JSON.stringify(body, null, 4) renders it (BodyJSON), another
	// scalar's JSON text.
	Body     []byte
	BodyJSON bool
	HasBody  bool
	Mode     string // _mode
}

var nonBase64 = regexp.MustCompile(`[^A-Za-z0-9=+/]+`)

// Response is the response f gives with d (the defaultResponse's fields)
// filling what f leaves out; isJSON reports an object or array body. The
// response owns f's slices, not d's.
func (f *ResponseFields) Response(d *ResponseFields) (r *Response, isJSON bool, err error) {
	return f.ResponseInto(d, new(Response))
}

// ResponseInto is Response made in r, which it overwrites: a caller that
// lends a response (imposter.Call.Scratch) allocates none.
func (f *ResponseFields) ResponseInto(d *ResponseFields, r *Response) (_ *Response, isJSON bool, err error) {
	*r = Response{StatusCode: 200}
	switch {
	case f.HasStatus:
		r.StatusCode = cmp.Or(f.Status, 200)
	case d.HasStatus:
		r.StatusCode = cmp.Or(d.Status, 200)
	}
	switch {
	case f.HasHeaders:
		r.Headers = f.Headers
	case d.HasHeaders:
		r.Headers = slices.Clone(d.Headers)
	}
	r.Binary = cmp.Or(f.Mode, d.Mode) == "binary"
	switch {
	case f.HasBody:
		r.Body, isJSON = f.Body, f.BodyJSON
	case d.HasBody:
		r.Body, isJSON = slices.Clone(d.Body), d.BodyJSON
	}
	if r.Binary {
		r.BinaryText = string(r.Body)
		r.Body, isJSON = DecodeHTTPBinary(r.BinaryText), false
	}
	return r, isJSON, nil
}

// DecodeHTTPBinary decodes an http response's binary body as mb does: it
// strips what is not base64, then Buffer.from decodes leniently.
func DecodeHTTPBinary(s string) []byte {
	return DecodeBase64(nonBase64.ReplaceAllString(s, ""))
}

// ParseResponseFields reads the fields of an `is`-shaped JSON object; an
// empty raw has none.
func ParseResponseFields(raw json.RawMessage) (ResponseFields, error) {
	var f ResponseFields
	if len(raw) == 0 {
		return f, nil
	}
	m, err := Members(raw, "statusCode", "headers", "body", "_mode")
	if err != nil {
		return f, err
	}
	status, headers, body := m[0], m[1], m[2]
	if !Falsy(status) {
		f.HasStatus = true
		if code, ok := StatusCode(status); ok {
			f.Status = code
		}
	}
	if !Falsy(headers) {
		h, err := ResponseHeaders(headers)
		if err != nil {
			return f, err
		}
		f.Headers, f.HasHeaders = h, true
	}
	if !Falsy(body) {
		f.Body, f.BodyJSON = BodyBytes(body)
		f.HasBody = true
	}
	if len(m[3]) > 0 {
		if err := json.Unmarshal(m[3], &f.Mode); err != nil {
			return f, err
		}
	}
	return f, nil
}

// Members returns the raw values of an object's members named names, nil
// for an absent one, reading keys as JavaScript does: by exact name, the
// last of duplicates winning. Go's decoder into a struct would also take
// "Body" or "BODY" for "body", which mb ignores. A raw that is not an
// object (or null) is an error.
func Members(raw []byte, names ...string) ([]json.RawMessage, error) {
	if out, ok := membersFast(raw, names); ok {
		return out, nil
	}
	return membersSlow(raw, names...)
}

// membersSlow is Members on encoding/json: it answers what the scanner
// leaves, and its errors are Members's.
func membersSlow(raw []byte, names ...string) ([]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, len(names))
	for i, n := range names {
		out[i] = m[n]
	}
	return out, nil
}

// Falsy reports whether a JSON value is one JavaScript counts as false.
func Falsy(v json.RawMessage) bool {
	t := bytes.TrimSpace(v)
	switch string(t) {
	case "", "null", "false", "0", `""`:
		return true
	}
	if t[0] == '-' || (t[0] >= '0' && t[0] <= '9') {
		f, err := strconv.ParseFloat(string(t), 64)
		return err == nil && f == 0 // -0, 0.0 and 0e5 are zero too
	}
	return false
}

// BodyBytes renders a body's JSON as mb sends it: strings as they are,
// objects and arrays as JSON.stringify(body, null, 4), other scalars as
// their text.
func BodyBytes(raw json.RawMessage) (b []byte, isJSON bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, false
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return []byte(s), false
	}
	// As JSON.parse then JSON.stringify(body, null, 4) or String(body)
	// print it: a repeated key's last value in its first place, numbers
	// and escapes as JavaScript writes them.
	v, err := DecodeJS(raw)
	if err != nil {
		return bytes.Clone(raw), raw[0] == '{' || raw[0] == '['
	}
	switch v.(type) {
	case *JSObject, []any:
		return EncodeJS(v, "    ", false), true
	}
	return []byte(JSString(v)), false
}

// ResponseHeaders reads a headers object whose values are strings, numbers
// or arrays of them.
func ResponseHeaders(raw json.RawMessage) ([]KV, error) {
	if bytes.TrimSpace(raw)[0] != '{' {
		return nil, errors.New("headers must be an object")
	}
	return ReadMultiMap(raw)
}

// StatusCode reads a statusCode: a whole number from 100 to 999, or a
// string holding one.
func StatusCode(raw json.RawMessage) (int, bool) {
	n, ok := WholeNumber(raw)
	return int(n), ok && n >= 100 && n <= 999
}

// WholeNumber reads a JSON number or numeric string without a fraction.
func WholeNumber(raw json.RawMessage) (int64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0, false
		}
		raw = []byte(s)
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}
