package message

import (
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// FillFromHTTP fills r from a request Go's HTTP/2 server decoded, so that
// it is the request an HTTP/1.1 client sending the same thing would make
// of FillFromFastHTTP: the target as sent, the query decoded by the same
// rules, the body decompressed as mb does, and the :authority
// pseudo-header as a Host header. HTTP/2 sends names in lower case and Go
// hands them over in a map: they are given in Go's canonical spelling
// ("User-Agent", as HTTP/1.1 clients spell them), Host first and the rest
// sorted by name, since the order they came in is not kept. body is the
// request's body, read whole; addr is the client's address. r keeps
// body's bytes.
func (r *Request) FillFromHTTP(req *http.Request, body []byte, addr net.Addr) {
	r.Method = req.Method
	r.Target = req.RequestURI
	if r.Target == "" && req.URL != nil {
		r.Target = req.URL.RequestURI()
	}
	r.Path = string(rawPath([]byte(r.Target)))
	if q := queryOf(r.Target); q != "" {
		var args fasthttp.Args
		args.Parse(q)
		for k, v := range args.All() {
			r.Query = append(r.Query, KV{string(k), string(v)})
		}
	}
	if req.Host != "" {
		r.Headers = append(r.Headers, KV{"Host", req.Host})
	}
	names := make([]string, 0, len(req.Header))
	for name := range req.Header {
		if !strings.EqualFold(name, "Host") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		for _, v := range req.Header[name] {
			r.Headers = append(r.Headers, KV{name, v})
		}
	}
	r.Body = decompressed(req.Header.Get("Content-Encoding"), body)
	r.addr = addr
	r.Timestamp = time.Now()
}

// queryOf returns the query of a request-target, without '?' and any
// fragment.
func queryOf(target string) string {
	i := strings.IndexByte(target, '?')
	if i < 0 {
		return ""
	}
	q := target[i+1:]
	if j := strings.IndexByte(q, '#'); j >= 0 {
		q = q[:j]
	}
	return q
}

// decompressed is bodyOf for a body read whole: gzip and br are
// decompressed with the functions fasthttp's request uses, and a body
// that fails to decompress is kept as it came.
func decompressed(encoding string, body []byte) []byte {
	switch encoding {
	case "gzip":
		if b, err := fasthttp.AppendGunzipBytes(nil, body); err == nil {
			return b
		}
	case "br":
		if b, err := fasthttp.AppendUnbrotliBytes(nil, body); err == nil {
			return b
		}
	}
	return body
}
