package imposter

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/meter"
	"github.com/riftgate/riftgate/gateway/wsproto"
	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
)

// HTTP/2 on http and https imposters. fasthttp speaks only HTTP/1.1 and
// keeps serving every connection that is not HTTP/2, as it did; the
// connections that are HTTP/2 are handed, whole, to Go's HTTP/2 server:
//
//   - https: the TLS handshake offers h2 by ALPN, and fasthttp passes a
//     connection that negotiated it to h2Server.serveTLS (its NextProto);
//   - http, prior knowledge: every accepted connection is a sniffConn,
//     whose first read looks for the client preface ("PRI * HTTP/2.0...")
//     and, finding it, serves the connection as HTTP/2 from there;
//   - http, `Upgrade: h2c`: the fasthttp handler answers 101 and serves
//     the rest of the connection as HTTP/2, the request that asked being
//     its stream 1.
//
// Each HTTP/2 request becomes the message.Request an HTTP/1.1 request
// makes (message.FillFromHTTP) and goes through the same choose and
// compute, so stubs, recording, behaviors, proxies and flows are the
// same; only the writing differs (writeH2).

// h2MaxHeaderBytes bounds a request's header block (HPACK decoded): Go's
// server answers 431 past it, on that stream only.
const h2MaxHeaderBytes = 64 << 10

// h2Server serves an http or https imposter's HTTP/2 connections.
type h2Server struct {
	imp *Imposter
	//lint:ignore SA1019 see serveConn: net/http's server cannot take a connection over.
	srv  http2.Server
	base http.Server // only its limits and error log are used
}

func newH2Server(imp *Imposter) *h2Server {
	s := &h2Server{imp: imp}
	s.base.MaxHeaderBytes = h2MaxHeaderBytes
	// A client's broken connection is its own affair, not the process's:
	// Go's server says so at debug level.
	s.base.ErrorLog = slog.NewLogLogger(imp.log.Handler(), slog.LevelDebug)
	return s
}

// serveConn serves c as HTTP/2 until it closes or the imposter stops.
// raw is the connection to close (c itself, or what c reads through); up
// and settings are an h2c upgrade's request and HTTP2-Settings, nil
// otherwise.
func (s *h2Server) serveConn(c, raw net.Conn, up *http.Request, settings []byte) {
	s.imp.upgraded.adopt(raw, func() {
		h := &h2Conn{imp: s.imp, conn: c, addr: raw.RemoteAddr()}
		//lint:ignore SA1019 ServeConn is the one entry point that serves an h2c upgrade's request and a connection another server accepted; net/http has neither.
		s.srv.ServeConn(c, &http2.ServeConnOpts{
			Context: s.imp.ctx, BaseConfig: &s.base, Handler: h,
			UpgradeRequest: up, Settings: settings,
		})
	})
}

// serveTLS is fasthttp's NextProto handler for "h2".
func (s *h2Server) serveTLS(c net.Conn) error {
	s.serveConn(c, c, nil, nil)
	return nil
}

// sniffListener makes every connection of a plaintext http imposter a
// sniffConn.
type sniffListener struct {
	net.Listener
	h2 *h2Server
}

func (l sniffListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, h2: l.h2}, nil
}

// What a sniffConn has found its connection to be.
const (
	sniffing int32 = iota
	sniffedHTTP1
	sniffedHTTP2
)

// sniffConn is a plaintext connection fasthttp serves, until its first
// bytes turn out to be the HTTP/2 client preface: its first Read then
// serves the connection as HTTP/2, in fasthttp's goroutine, and tells
// fasthttp the connection ended. After an HTTP/1.1 start, Read is the
// connection's own, so HTTP/1.1 pays one branch per read.
type sniffConn struct {
	net.Conn
	h2    *h2Server
	state atomic.Int32
}

var h2Preface = []byte(http2.ClientPreface)

func (c *sniffConn) Read(p []byte) (int, error) {
	if c.state.Load() == sniffedHTTP1 {
		return c.Conn.Read(p)
	}
	if c.state.Load() == sniffedHTTP2 {
		return 0, io.EOF
	}
	n, h2, err := readPreface(c.Conn, p)
	if !h2 {
		c.state.Store(sniffedHTTP1)
		return n, err
	}
	c.state.Store(sniffedHTTP2)
	rc := &replayConn{Conn: c.Conn, pending: bytes.Clone(p[:n])}
	c.h2.serveConn(rc, c.Conn, nil, nil)
	return 0, io.EOF
}

// Close closes the connection, unless HTTP/2 took it: fasthttp closes it
// after the Read that handed it over, and shutdown closes it from there.
func (c *sniffConn) Close() error {
	if c.state.Load() == sniffedHTTP2 {
		return nil
	}
	return c.Conn.Close()
}

// readPreface reads a connection's first bytes into p and reports
// whether they are the HTTP/2 client preface. A preface split across
// segments is read on while what came is its start; anything else
// returns at once, with the bytes in p, where fasthttp wants them anyway.
func readPreface(r io.Reader, p []byte) (n int, h2 bool, err error) {
	n, err = r.Read(p)
	for err == nil && n < len(h2Preface) && n < len(p) && bytes.HasPrefix(h2Preface, p[:n]) {
		var m int
		m, err = r.Read(p[n:])
		n += m
	}
	return n, n >= len(h2Preface) && bytes.Equal(p[:len(h2Preface)], h2Preface), err
}

// NetConn returns the connection, for resetOnClose.
func (c *sniffConn) NetConn() net.Conn { return c.Conn }

// replayConn reads pending before the connection's next bytes: the
// bytes a sniffConn read to recognize the preface.
type replayConn struct {
	net.Conn
	pending []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// NetConn returns the connection, for resetOnClose.
func (c *replayConn) NetConn() net.Conn { return c.Conn }

// upgradeH2C takes an `Upgrade: h2c` request over from fasthttp: it
// answers 101 and serves the connection as HTTP/2, with the request as
// stream 1. It reports false, leaving the request to the stubs, for any
// other upgrade (WebSocket's among them).
func (s *h2Server) upgradeH2C(ctx *fasthttp.RequestCtx) bool {
	h := &ctx.Request.Header
	if !strings.EqualFold(strings.TrimSpace(string(h.Peek("Upgrade"))), "h2c") {
		return false
	}
	settings, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(string(h.Peek("HTTP2-Settings")), "="))
	if err != nil || len(h.Peek("HTTP2-Settings")) == 0 {
		return false // RFC 9113 says so: an upgrade without valid settings is not one
	}
	up, err := http.NewRequest(string(h.Method()), "http://"+string(h.Host())+string(h.RequestURI()), bytes.NewReader(bytes.Clone(ctx.Request.Body())))
	if err != nil {
		return false
	}
	up.RequestURI = string(h.RequestURI())
	up.RemoteAddr = ctx.RemoteAddr().String()
	for k, v := range h.All() {
		name := string(k)
		switch {
		case strings.EqualFold(name, "Connection"), strings.EqualFold(name, "Upgrade"),
			strings.EqualFold(name, "HTTP2-Settings"), strings.EqualFold(name, "Host"):
			// the upgrade's own, and not the request's once it is HTTP/2
		default:
			up.Header.Add(name, string(v))
		}
	}
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		raw := c
		if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
			raw = u.UnsafeConn() // c's Close does nothing; raw's ends the connection
		}
		if _, err := io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"); err != nil {
			raw.Close()
			return
		}
		s.serveConn(hijackedConn{Conn: c, raw: raw}, raw, up, settings)
	})
	return true
}

// hijackedConn reads through fasthttp's hijacked connection (which keeps
// what fasthttp had buffered) and closes the connection underneath.
type hijackedConn struct {
	net.Conn
	raw net.Conn
}

func (c hijackedConn) Close() error { return c.raw.Close() }

// h2Conn is the http.Handler of one HTTP/2 connection.
type h2Conn struct {
	imp  *Imposter
	conn net.Conn // what the HTTP/2 server reads and writes: faults break it
	addr net.Addr
}

// errFaulted ends a stream whose connection a fault broke.
var errFaulted = http.ErrAbortHandler

// ServeHTTP is serve for one HTTP/2 request.
func (h *h2Conn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	imp := h.imp
	start := time.Now()
	limit := int64(imp.opts.MaxBodyBytes)
	if limit <= 0 {
		limit = fasthttp.DefaultMaxRequestBodySize
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
		}
		return // otherwise the client reset the stream
	}
	x := exchanges.Get().(*exchange)
	req := &x.req
	req.FillFromHTTP(r, body, h.addr)
	x.budget = imp.newBudget(start)
	st, rsp, err := imp.choose(&x.budget, req)
	matched := meter.Now()
	faulted := ""
	var out *message.Response
	switch {
	case err != nil:
		imp.writeErrorH2(w, err)
	case rsp.upgrade:
		refuseUpgradeH2(imp, w, req)
		out = rsp.static
	case rsp.fault != "":
		faulted = rsp.fault
	case rsp.static != nil && rsp.behaviors == nil && !imp.corsPreflight(req):
		writeH2(w, rsp.static)
		out = rsp.static
	default:
		x.call = Call{Imposter: imp, Request: req, Stub: st, matched: matched, scratch: &x.resp, room: &x.body}
		resp, err := imp.compute(&x.budget, &x.call, rsp)
		switch {
		case err != nil:
			imp.writeErrorH2(w, err)
		case resp != nil:
			if imp.corsPreflight(req) {
				resp = resp.Clone()
				addCORS(req, resp)
			}
			writeH2(w, resp)
			// The response may live in the exchange's scratch and body
			// room, which the next request reuses: it leaves now.
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			out = resp
		}
	}
	if st != nil && out != nil && imp.opts.RecordMatches {
		st.recordMatch(imp, req, rsp, out)
	}
	imp.observe(st, err, start, matched)
	x.endCall()
	x.release()
	if faulted != "" {
		h.fault(faulted)
	}
}

// fault breaks the HTTP/2 connection as fault breaks an HTTP/1.1 one: a
// fault is the connection's, not one stream's.
func (h *h2Conn) fault(kind string) {
	if kind == "RANDOM_DATA_THEN_CLOSE" {
		_, _ = h.conn.Write(randomThenClose)
	} else {
		resetOnClose(h.conn)
	}
	h.conn.Close()
	panic(errFaulted) // no answer on the stream: the server resets it quietly
}

// hopByHop reports whether name is a header HTTP/2 forbids (RFC 9113
// 8.2.2): it is the connection's, which HTTP/2 frames itself.
func hopByHop(name string) bool {
	for _, h := range [...]string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Content-Length"} {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}

// writeH2 writes r on an HTTP/2 stream: the stub's headers (but the
// connection's own), no Content-Type the stub does not set (Go would
// sniff one, fasthttp is told not to), and the body with its length.
func writeH2(w http.ResponseWriter, r *message.Response) {
	h := w.Header()
	for i := range r.Headers {
		kv := &r.Headers[i]
		if hopByHop(kv.Name) {
			continue
		}
		name := http.CanonicalHeaderKey(kv.Name)
		h[name] = append(h[name], kv.Value)
	}
	if _, ok := h["Content-Type"]; !ok {
		h["Content-Type"] = nil // a nil value is never written
	}
	h["Content-Length"] = []string{strconv.Itoa(len(r.Body))}
	status := r.StatusCode
	if status < 200 || status > 999 {
		// A 1xx is an interim answer in HTTP/2, never the final one the
		// stream needs: a 500 says the stub cannot be answered so.
		status = http.StatusInternalServerError
	}
	w.WriteHeader(status)
	_, _ = w.Write(r.Body)
}

// writeErrorH2 is writeError on an HTTP/2 stream.
func (imp *Imposter) writeErrorH2(w http.ResponseWriter, err error) {
	e := *mberr.As(err)
	imp.log.Error("error generating response", "err", err)
	if !mberr.Own(e.Code) {
		e.Status = http.StatusInternalServerError
	}
	e.Name = "Error"
	writeH2(w, &message.Response{
		StatusCode: e.Status,
		Headers:    []message.KV{{Name: "Content-Type", Value: "application/json"}},
		Body:       mberr.Body(&e),
	})
}

// refuseUpgradeH2 answers an upgrade stub's request over HTTP/2, which
// has no WebSocket handshake (RFC 8441's is not offered): as upgradeWS
// answers a request that is no handshake.
func refuseUpgradeH2(imp *Imposter, w http.ResponseWriter, req *message.Request) {
	header := func(name string) string { v, _ := req.Header(name); return v }
	values := func(string) []string { return nil }
	status, reason := http.StatusBadRequest, "WebSocket over HTTP/2 is not supported"
	var he *wsproto.HandshakeError
	if _, err := wsproto.CheckUpgrade(req.Method, header, values); errors.As(err, &he) {
		status, reason = he.Status, he.Reason
	}
	imp.meters.WS.Refused.Add(1)
	writeH2(w, &message.Response{StatusCode: status, Body: []byte(reason)})
}
