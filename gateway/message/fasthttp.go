package message

import (
	"bytes"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// FillFromFastHTTP fills r from a live request without copying: every string
// and the body borrow ctx's buffers and are valid only until the handler
// returns. Use Clone to keep the request.
func (r *Request) FillFromFastHTTP(ctx *fasthttp.RequestCtx) {
	req := &ctx.Request
	r.Method = b2s(req.Header.Method())
	r.Path = b2s(rawPath(req.Header.RequestURI()))
	for k, v := range req.URI().QueryArgs().All() {
		r.Query = append(r.Query, KV{b2s(k), b2s(v)})
	}
	for k, v := range req.Header.All() {
		r.Headers = append(r.Headers, KV{b2s(k), b2s(v)})
	}
	r.Body = bodyOf(req)
	r.addr = ctx.RemoteAddr()
	r.Timestamp = ctx.Time()
}

// bodyOf returns the body, decompressed when the client sent gzip or br, as
// mb does; a body that fails to decompress is kept as it came.
func bodyOf(req *fasthttp.Request) []byte {
	switch string(req.Header.ContentEncoding()) {
	case "gzip":
		if b, err := req.BodyGunzip(); err == nil {
			return b
		}
	case "br":
		if b, err := req.BodyUnbrotli(); err == nil {
			return b
		}
	}
	return req.Body()
}

// rawPath returns the path of a request-target as sent, percent-encoding
// intact, as mb's WHATWG URL pathname keeps it. An absolute-form target
// (proxy requests) is cut to its path.
func rawPath(uri []byte) []byte {
	// Only an absolute-form target has a scheme to skip; in origin form a
	// "://" can only be in the query.
	if len(uri) > 0 && uri[0] != '/' {
		if i := bytes.Index(uri, []byte("://")); i >= 0 {
			uri = uri[i+3:]
			if j := bytes.IndexByte(uri, '/'); j >= 0 {
				uri = uri[j:]
			} else {
				uri = []byte("/")
			}
		}
	}
	for i, c := range uri { // bytes.IndexAny builds a set on every call
		if c == '?' || c == '#' {
			uri = uri[:i]
			break
		}
	}
	if len(uri) == 0 {
		return []byte("/")
	}
	return uri
}

func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
