package message

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/riftgate/riftgate/gateway/mberr"
)

// Kind says which of mb's request shapes a Request has: http's (method,
// path, query, headers, body), tcp's (data, held in Body as mb's string:
// the bytes as text, or base64 in binary mode), smtp's (Mail), or
// riftgate's WebSocket message (data in Body as tcp's is, MessageType,
// Connection, and the handshake's Path, Query and Headers), or riftgate's
// gRPC request ({path, value, metadata, peer}).
type Kind uint8

// The request shapes.
const (
	HTTP Kind = iota
	TCP
	SMTP
	WS
	// Custom is a custom protocol's request (mb's --protofile): the JSON
	// object its process sent, in Fields (decoded, numbers as json.Number)
	// and Raw (as sent).
	Custom
	// GRPC is a gRPC request: Path is the method's ("/pkg.Service/Method"),
	// Body the message in protobuf's JSON mapping (a JSON array of them
	// for a client stream), Headers the metadata, and the client's
	// address its peer.
	GRPC
)

// The MessageType of a WebSocket request: a text or binary message (whose
// data is base64), or the opening handshake.
const (
	WSText   = "text"
	WSBinary = "binary"
	WSOpen   = "open"
)

// Mail is an smtp request's message, as mb's smtpRequest reads it from
// mailparser: each field is JSON-like (string, []any, map[string]any) in
// the form mb prints, so predicates and scripts see mb's values.
type Mail struct {
	EnvelopeFrom string
	EnvelopeTo   []string
	From         Address
	To, Cc, Bcc  []Address
	Subject      string
	HasSubject   bool // mailparser leaves subject undefined when there is none
	// References and InReplyTo are mailparser's: a string for one id, an
	// array for several, or (absent) an empty array.
	References any
	InReplyTo  any
	Text, HTML string
	// Attachments are mailparser's attachment objects, already in the
	// JSON shape mb prints.
	Attachments []map[string]any
}

// Address is a mailbox: mailparser's {address, name}.
type Address struct {
	Address string
	Name    string
}

// mailFields are an smtp request's fields in mb's order, after requestFrom
// and ip.
var mailFields = []string{"envelopeFrom", "envelopeTo", "from", "to", "cc", "bcc", "subject",
	"priority", "references", "inReplyTo", "text", "html", "attachments"}

// MailFields lists the fields of an smtp request, in mb's order.
func MailFields() []string { return append([]string{"requestFrom", "ip"}, mailFields...) }

// Value returns an smtp request field as a JSON-like value (string, []any,
// map[string]any), or ok false for a field mb's request lacks.
func (m *Mail) Value(field string) (v any, ok bool) {
	addr := func(a Address) any { return map[string]any{"address": a.Address, "name": a.Name} }
	addrs := func(as []Address) any {
		out := make([]any, len(as))
		for i, a := range as {
			out[i] = addr(a)
		}
		return out
	}
	switch field {
	case "envelopeFrom":
		return m.EnvelopeFrom, true
	case "envelopeTo":
		return anys(m.EnvelopeTo), true
	case "from":
		return addr(m.From), true
	case "to":
		return addrs(m.To), true
	case "cc":
		return addrs(m.Cc), true
	case "bcc":
		return addrs(m.Bcc), true
	case "subject":
		return m.Subject, m.HasSubject
	case "priority":
		// mailparser's simpleParser never copies the priority header onto
		// the mail it returns, so mb's `email.priority || 'normal'` is
		// always 'normal'.
		return "normal", true
	case "references":
		return idList(m.References), true
	case "inReplyTo":
		return idList(m.InReplyTo), true
	case "text":
		return m.Text, true
	case "html":
		return m.HTML, true
	case "attachments":
		out := make([]any, len(m.Attachments))
		for i, a := range m.Attachments {
			out[i] = a
		}
		return out, true
	}
	return nil, false
}

func idList(v any) any {
	switch v := v.(type) {
	case nil:
		return []any{}
	case []string:
		return anys(v)
	}
	return v
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// DecodeBase64 decodes s as node's Buffer.from(s, 'base64') does: the
// standard and URL-safe alphabets both, characters outside them skipped,
// decoding stopping at the first '=', and a last lone character dropped.
// It never fails.
func DecodeBase64(s string) []byte {
	var clean []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '=':
			i = len(s)
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '+', c == '/':
			clean = append(clean, c)
		case c == '-':
			clean = append(clean, '+')
		case c == '_':
			clean = append(clean, '/')
		}
	}
	if len(clean)%4 == 1 {
		clean = clean[:len(clean)-1]
	}
	out := make([]byte, base64.RawStdEncoding.DecodedLen(len(clean)))
	n, _ := base64.RawStdEncoding.Decode(out, clean)
	return out[:n]
}

// DecodeUTF8 turns bytes into text as node's buf.toString('utf8') does:
// every byte that does not start a valid sequence becomes U+FFFD.
func DecodeUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			sb.WriteRune(utf8.RuneError)
			b = b[1:]
			continue
		}
		sb.Write(b[:n])
		b = b[n:]
	}
	return sb.String()
}

// EncodeData renders bytes as a tcp imposter's string in its mode: base64
// in binary mode, text (as node decodes utf8) in text mode.
func EncodeData(b []byte, binary bool) string {
	if binary {
		return base64.StdEncoding.EncodeToString(b)
	}
	return DecodeUTF8(b)
}

// DecodeData is EncodeData's inverse: the bytes a tcp imposter writes for a
// response's data string.
func DecodeData(s string, binary bool) []byte {
	if binary {
		return DecodeBase64(s)
	}
	return []byte(s)
}

// writeMail writes an smtp request's fields (after requestFrom and ip).
func (m *Mail) writeJSON(b *bytes.Buffer) {
	for _, f := range mailFields {
		v, ok := m.Value(f)
		if !ok {
			continue
		}
		b.WriteByte(',')
		writeString(b, f)
		b.WriteByte(':')
		writeValue(b, v)
	}
}

// writeValue writes a JSON-like value as JSON.stringify would (no
// indentation); map keys go in the order mb's objects have them.
func writeValue(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case string:
		writeString(b, v)
	case bool:
		if v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int:
		b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(v), 10))
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeValue(b, e)
		}
		b.WriteByte(']')
	case []byte:
		// A node Buffer, as JSON.stringify renders it.
		b.WriteString(`{"type":"Buffer","data":[`)
		for i, c := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(c), 10))
		}
		b.WriteString("]}")
	case map[string]any:
		b.WriteByte('{')
		for i, k := range orderedKeys(v) {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			writeValue(b, v[k])
		}
		b.WriteByte('}')
	}
}

// keyOrder is the order of the keys mb's smtp objects have (addresses and
// mailparser's attachments); other keys follow, sorted.
var keyOrder = []string{"address", "name", "type", "content", "contentType", "partId", "release",
	"contentDisposition", "filename", "contentId", "cid", "related", "headers", "checksum", "size"}

func orderedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for _, k := range keyOrder {
		if _, ok := m[k]; ok {
			out = append(out, k)
		}
	}
	var rest []string
	for k := range m {
		known := false
		for _, o := range keyOrder {
			known = known || o == k
		}
		if !known {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// SetAddr sets the client's address from a connection, rendered on first
// use as a fasthttp request's is.
func (r *Request) SetAddr(a net.Addr) { r.addr, r.requestFrom, r.ip = a, "", "" }

// invalidArgType is what mb writes on a tcp connection when a response's
// data is neither a string nor an array: Node's Buffer.from throws, and mb's
// error handler answers with the error's code alone.
var invalidArgType = mberr.Body(&mberr.Error{Raw: json.RawMessage(`{"code":"ERR_INVALID_ARG_TYPE"}`)})

// TCPData renders a tcp response's data as mb writes it with
// Buffer.from(data || defaultData, encoding): nil for a falsy data (the
// default then applies), a string decoded for the wire, an array as one
// byte an element (JavaScript's ToUint8), and anything else as Node's
// error. A truthy data that decodes to no bytes (`[]`, a binary "=")
// comes back empty and not nil: it writes nothing, and no default.
func TCPData(raw json.RawMessage, binary bool) []byte {
	if Falsy(raw) {
		return nil
	}
	raw = bytes.TrimSpace(raw)
	switch raw[0] {
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		if b := DecodeData(s, binary); b != nil {
			return b
		}
		return []byte{}
	case '[':
		var elems []any
		if json.Unmarshal(raw, &elems) != nil {
			return bytes.Clone(invalidArgType)
		}
		out := make([]byte, len(elems))
		for i, e := range elems {
			out[i] = toUint8(e)
		}
		return out
	case '{':
		if b, ok := bufferFromObject(raw); ok {
			return b
		}
	}
	return bytes.Clone(invalidArgType)
}

// bufferFromObject is Node's Buffer.from of a plain object: an array-like
// (a numeric length: its elements 0 to length-1; another length: no bytes)
// or a Buffer as JSON.stringify renders one ({"type": "Buffer", "data":
// [...]}), which is what an injection answers when it hands back the
// Buffer a socket gave it. ok is false where Node throws.
func bufferFromObject(raw json.RawMessage) ([]byte, bool) {
	var obj map[string]any
	if json.Unmarshal(raw, &obj) != nil {
		return nil, false
	}
	if n, has := obj["length"]; has {
		f, isNum := n.(float64)
		if !isNum {
			return []byte{}, true
		}
		// Node's fromArrayLike: length truncated, a negative or NaN one
		// is none.
		size := 0
		if f > 0 && f < 1<<24 {
			size = int(f)
		}
		out := make([]byte, size)
		for i := range out {
			out[i] = toUint8(obj[strconv.Itoa(i)])
		}
		return out, true
	}
	data, isArr := obj["data"].([]any)
	if obj["type"] != "Buffer" || !isArr {
		return nil, false
	}
	out := make([]byte, len(data))
	for i, e := range data {
		out[i] = toUint8(e)
	}
	return out, true
}

// TCPDefaultData renders a tcp defaultResponse's data, the last resort of
// mb's Buffer.from(data || defaultData): there only the empty string writes
// nothing, and a data that is falsy or missing is Node's error too.
func TCPDefaultData(raw json.RawMessage, binary bool) []byte {
	if t := bytes.TrimSpace(raw); string(t) != `""` && Falsy(t) {
		return bytes.Clone(invalidArgType)
	}
	return TCPData(raw, binary)
}

// SetTCPData sets r's data from a tcp response object, obj, as TCPData
// renders its data, and NoDefault when that data is truthy and yet no
// bytes. An object that r's data does not print back as {"data": "..."}
// (other fields, a data that is not a string or is base64 that does not
// round-trip, no data at all) is also kept as mb holds it, in r.MB, for
// --debug's matches.
func SetTCPData(r *Response, obj json.RawMessage) {
	raw := bytes.TrimSpace(TCPDataMember(obj))
	r.Body = TCPData(raw, r.Binary)
	r.NoDefault = r.Body != nil && len(r.Body) == 0
	r.MB, r.BinaryText = nil, ""
	if obj = bytes.TrimSpace(obj); string(r.TCPObject()) != string(obj) {
		r.MB = bytes.Clone(obj)
	}
	if r.Binary && len(raw) > 0 && raw[0] == '"' {
		_ = json.Unmarshal(raw, &r.BinaryText)
	}
}

// TCPDataMember returns a tcp response object's data, nil when it has
// none or is not an object.
func TCPDataMember(obj json.RawMessage) json.RawMessage {
	if m, err := Members(obj, "data"); err == nil {
		return m[0]
	}
	return nil
}

// TCPShows reports whether mb, a tcp response object as mb holds it, still
// renders data: a behavior that rewrote the data after it was set makes
// it stale.
func TCPShows(mb json.RawMessage, data []byte, binary bool) bool {
	m, err := Members(mb, "data")
	return err == nil && bytes.Equal(TCPData(m[0], binary), data)
}

// TCPObject is a tcp response as mb holds it, which its matches and
// behaviors see: r.MB while that still renders the data, else {"data"}
// with the data's text (in binary mode the base64 as given, or as a copy
// left it).
func (r *Response) TCPObject() []byte {
	if r.MB != nil && TCPShows(r.MB, r.Body, r.Binary) {
		return r.MB
	}
	text := EncodeData(r.Body, false)
	if r.Binary {
		text = r.BinaryString()
	}
	return append(AppendJSONString([]byte(`{"data":`), text), '}')
}

// toUint8 is JavaScript's ToUint8 of a JSON value: a number truncated and
// taken modulo 256, NaN (what most non-numbers become) as 0.
func toUint8(v any) byte {
	var f float64
	switch v := v.(type) {
	case float64:
		f = v
	case bool:
		if v {
			f = 1
		}
	case string:
		s := strings.TrimSpace(v)
		if s == "" {
			return 0
		}
		n, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0
		}
		f = n
	default:
		return 0
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return byte(int64(math.Mod(math.Trunc(f), 256)))
}
