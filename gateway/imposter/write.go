package imposter

import (
	"net"
	"strings"

	"github.com/riftgate/riftgate/gateway/message"
	"github.com/valyala/fasthttp"
)

// writeResponse writes r as mb's http server does in every way a client can
// rely on: the stub's headers as given, and `Connection: close` unless the
// stub sets Connection. The body always goes with a Content-Length, where mb
// would use chunked encoding when the stub names no length: see
// docs/RATIONALE.md ("Bodies are framed with Content-Length"). It allocates
// nothing.
func writeResponse(ctx *fasthttp.RequestCtx, r *message.Response) {
	writeHeader(&ctx.Response.Header, r)
	ctx.Response.SetBodyRaw(r.Body)
}

// writeStatic writes an `is` response whose header was rendered once, when
// the stub was compiled: copying it costs a fraction of setting each header
// again, which fasthttp validates every time.
func writeStatic(ctx *fasthttp.RequestCtx, r *message.Response, h *fasthttp.ResponseHeader) {
	h.CopyTo(&ctx.Response.Header)
	ctx.Response.SetBodyRaw(r.Body)
}

// RenderHeader renders r's header once, as the imposter's server would on
// a fresh response (names as given, no default Content-Type), for
// writeStatic, and for responders that share a rendered header between
// responses (message.Response.Rendered).
func RenderHeader(r *message.Response) *fasthttp.ResponseHeader {
	h := new(fasthttp.ResponseHeader)
	h.DisableNormalizing()
	h.SetNoDefaultContentType(true)
	writeHeader(h, r)
	return h
}

func writeHeader(h *fasthttp.ResponseHeader, r *message.Response) {
	h.SetStatusCode(r.StatusCode)
	hasConnection := false
	for i := range r.Headers {
		kv := &r.Headers[i]
		switch {
		case strings.EqualFold(kv.Name, "Connection"):
			hasConnection = true
			if strings.EqualFold(kv.Value, "close") {
				h.SetConnectionClose()
			} else {
				h.Set(kv.Name, kv.Value)
			}
		case strings.EqualFold(kv.Name, "Content-Length"), strings.EqualFold(kv.Name, "Transfer-Encoding"):
			// fasthttp frames the body itself, with the length it has.
		case strings.EqualFold(kv.Name, "Content-Type"):
			h.SetContentType(kv.Value)
		default:
			h.Add(kv.Name, kv.Value)
		}
	}
	if !hasConnection {
		h.SetConnectionClose()
	}
}

// randomThenClose is what mb writes for RANDOM_DATA_THEN_CLOSE; any garbage
// would do, but the same bytes make the two comparable.
var randomThenClose = []byte(`Htijy%@tWXJ/hQ#[Q:7G@dH4"gu[QaX&`)

// fault breaks the connection instead of answering.
func fault(ctx *fasthttp.RequestCtx, kind string) {
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		if kind == "RANDOM_DATA_THEN_CLOSE" {
			_, _ = c.Write(randomThenClose)
			return
		}
		resetOnClose(c)
	})
}

// resetOnClose makes Close send a TCP reset rather than a FIN.
func resetOnClose(c net.Conn) {
	for {
		switch w := c.(type) {
		case *net.TCPConn:
			_ = w.SetLinger(0)
			return
		case interface{ NetConn() net.Conn }: // *tls.Conn
			c = w.NetConn()
		case interface{ UnsafeConn() net.Conn }: // fasthttp's hijacked conn
			c = w.UnsafeConn()
		default:
			return
		}
	}
}

// corsPreflight reports whether r is a CORS preflight this imposter answers.
func (imp *Imposter) corsPreflight(r *message.Request) bool {
	if !imp.spec.AllowCORS || r.Method != "OPTIONS" {
		return false
	}
	_, h := r.Header("Access-Control-Request-Headers")
	_, m := r.Header("Access-Control-Request-Method")
	_, o := r.Header("Origin")
	return h && m && o
}

func addCORS(req *message.Request, resp *message.Response) {
	h, _ := req.Header("Access-Control-Request-Headers")
	m, _ := req.Header("Access-Control-Request-Method")
	o, _ := req.Header("Origin")
	resp.SetHeader("Access-Control-Allow-Headers", h)
	resp.SetHeader("Access-Control-Allow-Methods", m)
	resp.SetHeader("Access-Control-Allow-Origin", o)
}
