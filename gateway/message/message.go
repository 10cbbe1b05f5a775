// Package message holds the HTTP request and response as riftgate's engine
// sees them: Mountebank's "simplified request" and its response fields, with
// the JSON shapes mb prints in savedRequests, recorded stubs and inject
// scripts.
//
// A Request filled from a live connection borrows the connection's buffers:
// its strings are valid only until the handler returns. Clone makes a copy
// that may be kept (saved requests, proxy recordings).
package message

import (
	"bytes"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// KV is one name/value pair, with the name as received.
type KV struct {
	Name  string
	Value string
}

// PathKey is one path a request may need to have to match a stub: all of
// it, or (Prefix) its start, compared without regard to ASCII case. The
// predicate package derives them and the stub table indexes by them.
type PathKey struct {
	Text   string
	Prefix bool
}

// Request is one request to an imposter.
type Request struct {
	Method    string
	Target    string // the request-target as sent ("/path?q=1"), which a proxy forwards
	Path      string // decoded, without the query string
	Query     []KV   // decoded, in order; a repeated name appears once per value
	Headers   []KV   // in order, names as received
	Body      []byte // decompressed when the client sent gzip or br, as mb does
	Timestamp time.Time
	// Kind is the request's shape; for TCP, Body is mb's data string, and
	// for SMTP, Mail holds the message.
	Kind Kind
	Mail *Mail
	// MessageType and Connection are a WebSocket request's: "text",
	// "binary" or "open" (the handshake), and the connection's id.
	MessageType string
	Connection  string
	// Fields and Raw are a Custom request's object.
	Fields map[string]any
	Raw    []byte

	// The client's address, rendered on first use (most requests never
	// need it) into addrBuf, which a TCP address fits: requestFrom and ip
	// then borrow it like the other strings borrow the connection's
	// buffers.
	addr        net.Addr
	requestFrom string
	ip          string
	addrBuf     [64]byte

	form     []KV
	formDone bool
	views    []view
}

// A View is something matchers derive from a request and share: the body
// parsed as JSON or as XML, say. A View value is its own key (a pointer,
// so comparing is cheap), and Make computes it. A value Make returns that
// has a Release method is released when the request is reset, so that it
// can lend what it is made of to a later request's: nothing may keep it,
// or anything it holds, past the request.
type View interface {
	Make(r *Request) any
}

// releaser is a view's value that gives back its room (see View).
type releaser interface{ Release() }

type view struct {
	key View
	val any
}

// View returns v made of r, making it at most once per request however
// many matchers ask: a body is parsed once, not once per stub.
func (r *Request) View(v View) any {
	for i := range r.views {
		if r.views[i].key == v {
			return r.views[i].val
		}
	}
	val := v.Make(r)
	r.views = append(r.views, view{v, val})
	return val
}

// Reset empties r for reuse, keeping its slices' capacity.
func (r *Request) Reset() {
	q, h, f, vs := r.Query[:0], r.Headers[:0], r.form[:0], r.views
	for _, v := range vs {
		if rv, ok := v.val.(releaser); ok {
			rv.Release()
		}
	}
	clear(vs) // let go of what the views held
	*r = Request{Query: q, Headers: h, form: f, views: vs[:0]}
}

// RequestFrom returns "ip:port" of the client, as mb shows it (see
// renderAddr).
func (r *Request) RequestFrom() string {
	r.renderAddr()
	return r.requestFrom
}

// RequestFromLen is len(r.RequestFrom()), worked out without rendering
// the address when it is an IPv4 one (the usual case), for a caller that
// needs its length on every request and its text on few.
func (r *Request) RequestFromLen() int {
	if t, ok := r.addr.(*net.TCPAddr); ok {
		if ip4 := t.IP.To4(); ip4 != nil && t.Zone == "" && t.Port >= 0 {
			n := len("...:") + decimalLen(uint64(t.Port))
			if len(t.IP) == net.IPv6len {
				n += len(mappedPrefix)
			}
			for _, o := range ip4 {
				n += decimalLen(uint64(o))
			}
			return n
		}
	}
	return len(r.RequestFrom())
}

func decimalLen(n uint64) int {
	l := 1
	for ; n >= 10; n /= 10 {
		l++
	}
	return l
}

// IP returns the client's IP address.
func (r *Request) IP() string {
	r.renderAddr()
	return r.ip
}

// SetRemote sets the client's address as text, for requests that do not come
// from a connection (inject scripts, tests, stored requests).
func (r *Request) SetRemote(requestFrom, ip string) {
	r.addr, r.requestFrom, r.ip = nil, requestFrom, ip
}

// mappedPrefix is how Node writes an IPv4 client of a dual-stack socket.
const mappedPrefix = "::ffff:"

// renderAddr renders the client's address as Node renders a socket's
// remote address, which is what mb records: in the family of the socket
// it came on, so that an IPv4 client of a dual-stack listener (an imposter
// without a host) is "::ffff:127.0.0.1", then ":" and the port, with no
// brackets around an IPv6 address ("::1:5000"). Go keeps the family too:
// an address from an IPv6 socket is 16 bytes long, from an IPv4 one 4.
// One string holds both fields: every computed response needs it, and two
// renderings cost about a microsecond.
func (r *Request) renderAddr() {
	if r.addr == nil {
		return
	}
	a := r.addr
	r.addr = nil
	t, ok := a.(*net.TCPAddr)
	if !ok || t.Port < 0 {
		r.requestFrom = a.String()
		r.ip = r.requestFrom
		if host, _, err := net.SplitHostPort(r.requestFrom); err == nil {
			r.ip = host
		}
		return
	}
	b := r.addrBuf[:0]
	if ip4 := t.IP.To4(); ip4 != nil && t.Zone == "" {
		// The usual case, written directly: a third of netip's cost.
		if len(t.IP) == net.IPv6len {
			b = append(b, mappedPrefix...)
		}
		b = appendOctet(b, ip4[0])
		for _, o := range ip4[1:] {
			b = appendOctet(append(b, '.'), o)
		}
	} else if ip, ok := netip.AddrFromSlice(t.IP); ok {
		b = ip.WithZone(t.Zone).AppendTo(b)
	} // else no address: ":port", as net.TCPAddr renders it
	end := len(b)
	b = strconv.AppendUint(append(b, ':'), uint64(t.Port), 10)
	if &b[0] == &r.addrBuf[0] { // it fitted: no copy
		r.requestFrom = unsafe.String(&b[0], len(b))
	} else {
		r.requestFrom = string(b)
	}
	r.ip = r.requestFrom[:end]
}

// appendOctet appends o in decimal.
func appendOctet(b []byte, o byte) []byte {
	switch {
	case o >= 100:
		return append(b, '0'+o/100, '0'+o/10%10, '0'+o%10)
	case o >= 10:
		return append(b, '0'+o/10, '0'+o%10)
	}
	return append(b, '0'+o)
}

// Header returns the first value of the named header, ignoring case.
func (r *Request) Header(name string) (string, bool) {
	for i := range r.Headers {
		if strings.EqualFold(r.Headers[i].Name, name) {
			return r.Headers[i].Value, true
		}
	}
	return "", false
}

// IsForm reports whether the body is an urlencoded form, by Content-Type.
func (r *Request) IsForm() bool {
	ct, ok := r.Header("Content-Type")
	if !ok {
		return false
	}
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.EqualFold(strings.TrimSpace(ct), "application/x-www-form-urlencoded")
}

// Form returns the body's fields when it is an urlencoded form, parsing it at
// most once per request. It returns nil otherwise.
func (r *Request) Form() []KV {
	if r.formDone {
		return r.form
	}
	r.formDone = true
	if len(r.Body) == 0 || !r.IsForm() {
		return nil
	}
	r.form = appendQuery(r.form[:0], string(r.Body))
	return r.form
}

// BinaryString is the base64 text mb holds for a Binary r: the text its
// producer gave (or a copy left), else its bytes' base64.
func (r *Response) BinaryString() string {
	if r.BinaryText != "" {
		return r.BinaryText
	}
	return EncodeData(r.Body, true)
}

// Clone returns a deep copy of r that does not share memory with the
// connection it came from.
func (r *Request) Clone() *Request {
	c := &Request{
		Method:      strings.Clone(r.Method),
		Target:      strings.Clone(r.Target),
		Path:        strings.Clone(r.Path),
		Query:       cloneKVs(r.Query),
		Headers:     cloneKVs(r.Headers),
		Body:        bytes.Clone(r.Body),
		Timestamp:   r.Timestamp,
		Kind:        r.Kind,
		Mail:        r.Mail, // never changed once parsed
		MessageType: r.MessageType,
		Connection:  strings.Clone(r.Connection),
		Fields:      r.Fields, // never changed once parsed
		Raw:         r.Raw,
		requestFrom: strings.Clone(r.RequestFrom()),
		ip:          strings.Clone(r.IP()),
	}
	return c
}

func cloneKVs(kvs []KV) []KV {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]KV, len(kvs))
	for i, kv := range kvs {
		out[i] = KV{strings.Clone(kv.Name), strings.Clone(kv.Value)}
	}
	return out
}

// appendQuery decodes an urlencoded string into pairs, as node's
// querystring.parse does: '+' is a space and bad escapes are kept literally.
func appendQuery(dst []KV, s string) []KV {
	for s != "" {
		var part string
		part, s, _ = strings.Cut(s, "&")
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		dst = append(dst, KV{unescape(k), unescape(v)})
	}
	return dst
}

func unescape(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return strings.ReplaceAll(s, "+", " ")
}

// ParseQuery decodes a raw query string (without '?') into pairs.
func ParseQuery(raw string) []KV { return appendQuery(nil, raw) }

// Response is what an imposter answers: a stub's `is` fields after
// behaviors, or a proxied or injected response.
type Response struct {
	StatusCode int
	Headers    []KV // in order; a repeated name is sent once per value
	Body       []byte
	// Binary is mb's `_mode: "binary"`: Body holds the decoded bytes, and
	// JSON renders it as base64.
	Binary bool
	// Rendered, when set, is StatusCode and Headers rendered for the wire
	// once, by a producer that shares them between the responses it hands
	// out (a plugin that answers with the same headers every call): the
	// status, the headers and the body must then not be changed. Whoever
	// would change them changes a Clone, which has none.
	Rendered *fasthttp.ResponseHeader
	// MB is the object mb holds for this response when it differs from
	// what the fields above print: a proxy's (the body as JSON.parse read
	// it, _mode, _proxyResponseTime). --debug's matches show it.
	MB []byte
	// NoDefault marks a tcp response whose data is truthy to mb and yet
	// decodes to no bytes (`[]`, a binary "="): it writes nothing, where an
	// empty data (a falsy one, or what a copy or lookup left empty) takes
	// the defaultResponse's.
	NoDefault bool
	// BinaryText is the text a Binary Body was decoded from, when its
	// producer had one: mb's copy and lookup replace their tokens in that
	// text and decode it after, and a token need not survive decoding
	// ("${X}" decodes to nothing).
	BinaryText string
}

// Header returns the first value of the named header, ignoring case.
func (r *Response) Header(name string) (string, bool) {
	for i := range r.Headers {
		if strings.EqualFold(r.Headers[i].Name, name) {
			return r.Headers[i].Value, true
		}
	}
	return "", false
}

// SetHeader replaces every value of the named header (ignoring case, keeping
// the first occurrence's spelling) with one value, or appends it.
func (r *Response) SetHeader(name, value string) {
	out := r.Headers[:0]
	set := false
	for _, kv := range r.Headers {
		if strings.EqualFold(kv.Name, name) {
			if set {
				continue
			}
			kv.Value, set = value, true
		}
		out = append(out, kv)
	}
	if !set {
		out = append(out, KV{name, value})
	}
	r.Headers = out
}

// Clone returns a deep copy of r, not Rendered. MB, which nothing writes
// in place, is shared.
func (r *Response) Clone() *Response {
	return &Response{
		StatusCode: r.StatusCode,
		Headers:    cloneKVs(r.Headers),
		Body:       bytes.Clone(r.Body),
		Binary:     r.Binary,
		MB:         r.MB,
		NoDefault:  r.NoDefault,
		BinaryText: r.BinaryText,
	}
}
