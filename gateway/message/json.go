package message

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// timeLayout is JavaScript's Date.prototype.toJSON format, which mb uses for
// saved requests' timestamps.
const timeLayout = "2006-01-02T15:04:05.000Z"

// MarshalJSON renders r as mb renders a saved request: requestFrom, method,
// path, query, headers, body, ip, form (for urlencoded bodies) and timestamp.
// Repeated query parameters and headers become arrays.
func (r *Request) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if r.Kind == Custom {
		// mb records the protocol's object as sent, with its timestamp.
		raw := bytes.TrimSpace(r.Raw)
		b.Write(raw[:len(raw)-1])
		if !r.Timestamp.IsZero() {
			if len(r.Fields) > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"timestamp":`)
			writeString(&b, r.Timestamp.UTC().Format(timeLayout))
		}
		b.WriteByte('}')
		return b.Bytes(), nil
	}
	if r.Kind != HTTP {
		r.writeOther(&b)
		return b.Bytes(), nil
	}
	b.WriteString(`{"requestFrom":`)
	writeString(&b, r.RequestFrom())
	b.WriteString(`,"method":`)
	writeString(&b, r.Method)
	b.WriteString(`,"path":`)
	writeString(&b, r.Path)
	b.WriteString(`,"query":`)
	WriteMultiMap(&b, r.Query)
	b.WriteString(`,"headers":`)
	WriteMultiMap(&b, r.Headers)
	b.WriteString(`,"body":`)
	writeString(&b, string(r.Body))
	b.WriteString(`,"ip":`)
	writeString(&b, r.IP())
	if form := r.Form(); form != nil {
		b.WriteString(`,"form":`)
		WriteMultiMap(&b, form)
	}
	if !r.Timestamp.IsZero() {
		b.WriteString(`,"timestamp":`)
		writeString(&b, r.Timestamp.UTC().Format(timeLayout))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// writeOther renders a tcp or smtp request as mb saves it: requestFrom, ip,
// then tcp's data or smtp's message fields, and the timestamp; a WebSocket
// message in the same way, with the connection, the handshake's path,
// query and headers, the message's type and its data.
func (r *Request) writeOther(b *bytes.Buffer) {
	if r.Kind == GRPC {
		r.writeGRPC(b)
		return
	}
	b.WriteString(`{"requestFrom":`)
	writeString(b, r.RequestFrom())
	b.WriteString(`,"ip":`)
	writeString(b, r.IP())
	switch {
	case r.Kind == TCP:
		b.WriteString(`,"data":`)
		writeString(b, string(r.Body))
	case r.Kind == WS:
		b.WriteString(`,"connection":`)
		writeString(b, r.Connection)
		b.WriteString(`,"path":`)
		writeString(b, r.Path)
		b.WriteString(`,"query":`)
		WriteMultiMap(b, r.Query)
		b.WriteString(`,"headers":`)
		WriteMultiMap(b, r.Headers)
		b.WriteString(`,"type":`)
		writeString(b, r.MessageType)
		b.WriteString(`,"data":`)
		writeString(b, string(r.Body))
	case r.Mail != nil:
		r.Mail.writeJSON(b)
	}
	if !r.Timestamp.IsZero() {
		b.WriteString(`,"timestamp":`)
		writeString(b, r.Timestamp.UTC().Format(timeLayout))
	}
	b.WriteByte('}')
}

// writeGRPC renders a gRPC request as mountebank-grpc shows one: the
// method's path, the message as JSON (null when it is none), the metadata
// and the peer.
func (r *Request) writeGRPC(b *bytes.Buffer) {
	b.WriteString(`{"path":`)
	writeString(b, r.Path)
	b.WriteString(`,"value":`)
	if v := bytes.TrimSpace(r.Body); len(v) > 0 && json.Valid(v) {
		b.Write(v)
	} else {
		b.WriteString("null")
	}
	b.WriteString(`,"metadata":`)
	WriteMultiMap(b, r.Headers)
	b.WriteString(`,"peer":`)
	writeString(b, r.RequestFrom())
	if !r.Timestamp.IsZero() {
		b.WriteString(`,"timestamp":`)
		writeString(b, r.Timestamp.UTC().Format(timeLayout))
	}
	b.WriteByte('}')
}

// UnmarshalJSON reads mb's request shape (the one MarshalJSON writes, and the
// one inject scripts and test requests use). Missing fields stay empty.
func (r *Request) UnmarshalJSON(data []byte) error {
	var raw struct {
		RequestFrom string          `json:"requestFrom"`
		Method      string          `json:"method"`
		Path        string          `json:"path"`
		Query       json.RawMessage `json:"query"`
		Headers     json.RawMessage `json:"headers"`
		Body        json.RawMessage `json:"body"`
		IP          string          `json:"ip"`
		Timestamp   string          `json:"timestamp"`
		Data        *string         `json:"data"`
		Type        string          `json:"type"`
		Connection  string          `json:"connection"`
		Value       json.RawMessage `json:"value"`
		Metadata    json.RawMessage `json:"metadata"`
		Peer        *string         `json:"peer"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("request: %w", err)
	}
	q, err := ReadMultiMap(raw.Query)
	if err != nil {
		return fmt.Errorf("request query: %w", err)
	}
	h, err := ReadMultiMap(raw.Headers)
	if err != nil {
		return fmt.Errorf("request headers: %w", err)
	}
	body, err := bodyText(raw.Body)
	if err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	*r = Request{Method: raw.Method, Path: raw.Path, Query: q, Headers: h, Body: body}
	if raw.Data != nil && raw.Method == "" {
		// A tcp request, or a WebSocket message (which has a type).
		r.Kind, r.Body = TCP, []byte(*raw.Data)
		if raw.Type != "" {
			r.Kind, r.MessageType, r.Connection = WS, raw.Type, raw.Connection
		}
	}
	r.SetRemote(raw.RequestFrom, raw.IP)
	if raw.Peer != nil && raw.Method == "" {
		// A gRPC request: its value stays JSON, its metadata are headers.
		md, err := ReadMultiMap(raw.Metadata)
		if err != nil {
			return fmt.Errorf("request metadata: %w", err)
		}
		r.Kind, r.Headers, r.Body = GRPC, md, bytes.Clone(bytes.TrimSpace(raw.Value))
		r.SetRemote(*raw.Peer, hostOf(*raw.Peer))
	}
	if raw.Timestamp != "" {
		if t, err := time.Parse(time.RFC3339Nano, raw.Timestamp); err == nil {
			r.Timestamp = t
		}
	}
	return nil
}

// hostOf is the address without its port.
func hostOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return strings.TrimPrefix(strings.TrimSuffix(addr[:i], "]"), "[")
	}
	return addr
}

// bodyText accepts a JSON string, or any other JSON value, which mb
// stringifies.
func bodyText(raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []byte(s), nil
	}
	return bytes.Clone(raw), nil
}

// WriteMultiMap writes pairs as a JSON object in first-seen order of names;
// a name with several values gets an array.
func WriteMultiMap(b *bytes.Buffer, kvs []KV) {
	b.WriteByte('{')
	for i, kv := range kvs {
		if seenBefore(kvs[:i], kv.Name) {
			continue
		}
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, kv.Name)
		b.WriteByte(':')
		n := 0
		for _, o := range kvs[i:] {
			if o.Name == kv.Name {
				n++
			}
		}
		if n == 1 {
			writeString(b, kv.Value)
			continue
		}
		b.WriteByte('[')
		first := true
		for _, o := range kvs[i:] {
			if o.Name != kv.Name {
				continue
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			writeString(b, o.Value)
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
}

func seenBefore(kvs []KV, name string) bool {
	for _, kv := range kvs {
		if kv.Name == name {
			return true
		}
	}
	return false
}

// ReadMultiMap reads a JSON object whose values are strings, arrays of
// strings, or other scalars (stringified), into pairs in the object's order.
func ReadMultiMap(raw json.RawMessage) ([]KV, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, nil
	}
	if kvs, ok := readMultiMapFast(trimmed); ok {
		return kvs, nil
	}
	return readMultiMapSlow(raw)
}

// readMultiMapSlow is ReadMultiMap on encoding/json: it answers what the
// scanner leaves, and its errors are ReadMultiMap's.
func readMultiMapSlow(raw json.RawMessage) ([]KV, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("want an object, got %v", tok)
	}
	var out []KV
	for d.More() {
		kt, err := d.Token()
		if err != nil {
			return nil, err
		}
		name, _ := kt.(string)
		var v any
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		out = appendValues(out, name, v)
	}
	return out, nil
}

// scalarString renders a decoded JSON value as JavaScript's String() would
// for the scalars mb accepts in header and query objects.
func scalarString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return "null"
	case bool:
		if v {
			return "true"
		}
		return "false"
	case json.Number:
		return v.String()
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// writeString writes s as a JSON string the way JavaScript's JSON.stringify
// does.
func writeString(b *bytes.Buffer, s string) {
	b.Write(AppendJSONString(b.AvailableBuffer(), s))
}

// AppendJSONString appends s as JavaScript's JSON.stringify writes a string:
// quoted, with only '"', '\\' and control characters escaped (no HTML
// escaping, unlike encoding/json). Invalid UTF-8 becomes U+FFFD, as it does
// once a JavaScript engine has decoded it.
func AppendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Field is one member of a JSON object, its value still encoded.
type Field struct {
	Key   string
	Value json.RawMessage
}

// ObjectFields decodes a JSON object into its members in the order written.
// A repeated key keeps its first position and its last value, as
// JavaScript's JSON.parse does. Trailing data after the object is an error.
func ObjectFields(raw []byte) ([]Field, error) {
	if fields, ok := objectFieldsFast(raw); ok {
		return fields, nil
	}
	if len(raw) == 0 {
		// A field that is not there, asked for often (a response without
		// `_behaviors`): encoding/json's answer, without its decoder.
		return nil, io.EOF
	}
	return objectFieldsSlow(raw)
}

// objectFieldsSlow is ObjectFields on encoding/json: it answers what the
// scanner leaves, and its errors are ObjectFields's.
func objectFieldsSlow(raw []byte) ([]Field, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var out []Field
	for d.More() {
		kt, err := d.Token()
		if err != nil {
			return nil, err
		}
		k, _ := kt.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		dup := false
		for i := range out {
			if out[i].Key == k {
				out[i].Value, dup = v, true
				break
			}
		}
		if !dup {
			out = append(out, Field{k, v})
		}
	}
	if _, err := d.Token(); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the JSON object")
	}
	return out, nil
}

// ObjectMap decodes a JSON object into its keys, in order, and its members
// by key.
func ObjectMap(raw []byte) ([]string, map[string]json.RawMessage, error) {
	fields, err := ObjectFields(raw)
	if err != nil {
		return nil, nil, err
	}
	keys := make([]string, len(fields))
	obj := make(map[string]json.RawMessage, len(fields))
	for i, f := range fields {
		keys[i], obj[f.Key] = f.Key, f.Value
	}
	return keys, obj, nil
}

// WithArray is the JSON object obj with a member name whose value is the
// array of items, added last. obj must be an object as compact JSON
// writes it ("{}" or "{...}") with no member name already.
func WithArray(obj []byte, name string, items []json.RawMessage) []byte {
	var b bytes.Buffer
	b.Write(obj[:len(obj)-1])
	if len(obj) > 2 {
		b.WriteByte(',')
	}
	writeString(&b, name)
	b.WriteString(`:[`)
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// appendValues adds a multimap member's value to out: each element of an
// array under the name, anything else once.
func appendValues(out []KV, name string, v any) []KV {
	if l, ok := v.([]any); ok {
		for _, e := range l {
			out = append(out, KV{name, scalarString(e)})
		}
		return out
	}
	return append(out, KV{name, scalarString(v)})
}
