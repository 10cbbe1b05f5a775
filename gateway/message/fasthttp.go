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
	r.Target = b2s(req.Header.RequestURI())
	r.Path = b2s(rawPath(req.Header.RequestURI()))
	for k, v := range req.URI().QueryArgs().All() {
		r.Query = append(r.Query, KV{b2s(k), b2s(v)})
	}
	if raw := req.Header.RawHeaders(); len(raw) > 0 {
		r.Headers = appendRawHeaders(r.Headers, raw)
	} else {
		for k, v := range req.Header.All() {
			r.Headers = append(r.Headers, KV{b2s(k), b2s(v)})
		}
	}
	r.Body = bodyOf(req)
	r.addr = ctx.RemoteAddr()
	r.Timestamp = ctx.Time()
}

// appendRawHeaders appends the header fields as the client sent them: in
// order, names spelled as sent, as mb's rawHeaders keeps them (fasthttp's
// own view moves Host, Content-Type and a few others first and respells
// them).
func appendRawHeaders(dst []KV, raw []byte) []KV {
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		line = bytes.TrimRight(line, "\r")
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			continue
		}
		name := line[:colon]
		value := bytes.Trim(line[colon+1:], " \t")
		if line[0] == ' ' || line[0] == '\t' {
			continue // an obsolete folded line: fasthttp refuses those anyway
		}
		dst = append(dst, KV{b2s(name), b2s(value)})
	}
	return dst
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
