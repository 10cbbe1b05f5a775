package message

import (
	"unsafe"

	"github.com/valyala/fasthttp"
)

// FillFromFastHTTP fills r from a live request without copying: every string
// and the body borrow ctx's buffers and are valid only until the handler
// returns. Use Clone to keep the request.
func (r *Request) FillFromFastHTTP(ctx *fasthttp.RequestCtx) {
	req := &ctx.Request
	r.Method = b2s(req.Header.Method())
	r.Path = b2s(req.URI().Path())
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

func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
