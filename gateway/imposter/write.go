package imposter

import (
	"bytes"
	"io"
	"net"
	"strings"
	"sync"

	"github.com/riftgate/riftgate/gateway/message"
	"github.com/valyala/fasthttp"
)

// writeResponse writes r as mb's http server does in every way a client can
// rely on: the stub's headers as given, and `Connection: close` unless the
// stub sets Connection. It allocates nothing.
func writeResponse(ctx *fasthttp.RequestCtx, r *message.Response) {
	writeHeader(&ctx.Response.Header, r)
	writeBody(ctx, r)
}

// writeStatic writes an `is` response whose header was rendered once, when
// the stub was compiled: copying it costs a fraction of setting each header
// again, which fasthttp validates every time.
func writeStatic(ctx *fasthttp.RequestCtx, r *message.Response, h *fasthttp.ResponseHeader) {
	h.CopyTo(&ctx.Response.Header)
	writeBody(ctx, r)
}

// writeBody frames r's body as mb's (Node's) server does: with the
// Content-Length the stub names (recomputed), or else in chunks, one
// chunk here. fasthttp flushes a chunk as it writes it and the last chunk
// with the response, two writes where a length takes one; the connection
// holds the first (holdConn), so that both leave in one.
func writeBody(ctx *fasthttp.RequestCtx, r *message.Response) {
	if namesLength(r) {
		ctx.Response.SetBodyRaw(r.Body)
		return
	}
	frameBody(ctx, r.Body)
}

// frameBody makes body ctx's response body, in chunks where Node sends
// them: not for HEAD (no body, and no length named), nor for a status
// without a body, nor to an HTTP/1.0 client (mb closes the connection
// after the body; fasthttp names its length: content-length in
// docs/mountebank-differences.md).
func frameBody(ctx *fasthttp.RequestCtx, body []byte) {
	switch {
	case ctx.IsHead():
	case !ctx.Request.Header.IsHTTP11() || bodiless(ctx.Response.StatusCode()):
		ctx.Response.SetBodyRaw(body)
	default:
		setChunked(ctx, body)
	}
}

// setChunked makes body ctx's response body, sent in chunks.
func setChunked(ctx *fasthttp.RequestCtx, body []byte) {
	b := bodyPool.Get().(*chunkedBody)
	b.Reset(body)
	if len(body) <= maxHeld {
		b.conn = heldConn(ctx.Conn())
	}
	ctx.Response.SetBodyStream(b, -1)
}

// namesLength reports whether r's headers name a Content-Length.
func namesLength(r *message.Response) bool {
	for i := range r.Headers {
		if strings.EqualFold(r.Headers[i].Name, "Content-Length") {
			return true
		}
	}
	return false
}

// bodiless: 1xx, 204 and 304 answers have no body to frame.
func bodiless(status int) bool { return status < 200 || status == 204 || status == 304 }

// chunkedBody is a body fasthttp writes in chunks, as one chunk; it goes
// back to bodyPool when fasthttp closes it.
type chunkedBody struct {
	bytes.Reader
	conn *holdConn // holds the chunk's write, when set
}

var bodyPool = sync.Pool{New: func() any { return new(chunkedBody) }}

// SupportsBodyWriteTo tells fasthttp to write the body whole, one chunk.
func (b *chunkedBody) SupportsBodyWriteTo() bool { return true }

// WriteTo writes the body, one chunk that fasthttp flushes at once: the
// connection holds that write (the header and the chunk) for the last
// chunk, which fasthttp writes next.
func (b *chunkedBody) WriteTo(w io.Writer) (int64, error) {
	if b.conn != nil && b.Len() > 0 { // an empty body writes nothing here
		b.conn.hold = true
	}
	return b.Reader.WriteTo(w)
}

// Close implements io.Closer: fasthttp is done with the body.
func (b *chunkedBody) Close() error {
	b.Reset(nil)
	b.conn = nil
	bodyPool.Put(b)
	return nil
}

// maxHeld is the largest body whose first write a connection holds: its
// header and chunk fit fasthttp's write buffer, so that they are one write.
const maxHeld = 2048

// holdConn is an imposter's HTTP/1 connection that can hold one write, the
// first of a chunked response, to send it with the next, its last chunk.
// Only the goroutine that serves the connection writes to it.
type holdConn struct {
	net.Conn
	hold bool   // hold the next write
	held []byte // the write held, if any (in buf)
	buf  []byte
}

func (c *holdConn) Write(p []byte) (int, error) {
	switch {
	case c.held != nil:
		c.buf = append(c.held, p...)
		c.held = nil
		if _, err := c.Conn.Write(c.buf); err != nil {
			return 0, err
		}
		return len(p), nil
	case c.hold:
		c.hold = false
		c.held = append(c.buf[:0], p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// NetConn is the connection under c.
func (c *holdConn) NetConn() net.Conn { return c.Conn }

// Close sends what is held first.
func (c *holdConn) Close() error {
	if c.held != nil {
		_, _ = c.Conn.Write(c.held)
		c.held = nil
	}
	return c.Conn.Close()
}

// holdListener makes each connection a holdConn.
type holdListener struct{ net.Listener }

func (l holdListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &holdConn{Conn: c}, nil
}

// heldConn finds the holdConn under c (sniffConn, TLS), or nil.
func heldConn(c net.Conn) *holdConn {
	for {
		switch w := c.(type) {
		case *holdConn:
			return w
		case interface{ NetConn() net.Conn }: // *sniffConn, *tls.Conn
			c = w.NetConn()
		default:
			return nil
		}
	}
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
			// fasthttp frames the body itself (writeBody).
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
