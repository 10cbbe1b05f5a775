package imposter

import (
	"bytes"
	"net"
	"strings"
	"sync"

	"github.com/riftgate/riftgate/gateway/message"
	"github.com/valyala/fasthttp"
)

// writeResponse writes r the way mb's http server does: the stub's headers
// as given, `Connection: close` unless the stub sets Connection, a
// Content-Length only when the stub names one (recomputed), and chunked
// transfer encoding otherwise. It allocates nothing.
func writeResponse(ctx *fasthttp.RequestCtx, r *message.Response) {
	resp := &ctx.Response
	resp.SetStatusCode(r.StatusCode)
	hasConnection, hasLength := false, false
	for i := range r.Headers {
		kv := &r.Headers[i]
		switch {
		case strings.EqualFold(kv.Name, "Connection"):
			hasConnection = true
			if strings.EqualFold(kv.Value, "close") {
				resp.SetConnectionClose()
			} else {
				resp.Header.Set(kv.Name, kv.Value)
			}
		case strings.EqualFold(kv.Name, "Content-Length"):
			hasLength = true
		case strings.EqualFold(kv.Name, "Transfer-Encoding"):
			// fasthttp frames the body itself.
		case strings.EqualFold(kv.Name, "Content-Type"):
			resp.Header.SetContentType(kv.Value)
		default:
			resp.Header.Add(kv.Name, kv.Value)
		}
	}
	if !hasConnection {
		resp.SetConnectionClose()
	}
	if hasLength || len(r.Body) == 0 && ctx.IsHead() {
		resp.SetBodyRaw(r.Body)
		return
	}
	br := readerPool.Get().(*bodyReader)
	br.Reset(r.Body)
	resp.SetBodyStream(br, -1)
}

// bodyReader streams a body as chunks and goes back to its pool when
// fasthttp closes it after writing.
type bodyReader struct{ bytes.Reader }

func (b *bodyReader) Close() error {
	b.Reset(nil)
	readerPool.Put(b)
	return nil
}

var readerPool = sync.Pool{New: func() any { return new(bodyReader) }}

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
