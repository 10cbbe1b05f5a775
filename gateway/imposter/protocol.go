package imposter

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strconv"
	"sync"

	"github.com/riftgate/riftgate/gateway/message"
	"github.com/valyala/fasthttp"
)

// server is what differs between an http(s), a tcp and an smtp imposter:
// how connections on the listener become requests and how answers go back.
// Everything between (matching, response cycling, behaviors, recording) is
// the imposter's, shared by all three.
type server interface {
	// serve accepts on ln until ln is closed.
	serve(ln net.Listener) error
	// shutdown closes ln and every open connection, and waits for the
	// requests in flight.
	shutdown(ctx context.Context) error
}

// newServer returns the protocol's server.
func (imp *Imposter) newServer() server {
	switch imp.spec.Protocol {
	case "tcp":
		return newTCPServer(imp)
	case "smtp":
		return newSMTPServer(imp)
	case "ws", "wss":
		return newWSServer(imp)
	case "grpc":
		return newGRPCServer(imp)
	}
	h := &httpServer{imp: imp, h2: newH2Server(imp)}
	handler := imp.Handler()
	if imp.spec.Protocol == "http" {
		handler = h.serveH2C
	}
	h.s = fasthttp.Server{
		Handler:                       handler,
		Name:                          "",
		NoDefaultServerHeader:         true,
		NoDefaultContentType:          true,
		DisableHeaderNamesNormalizing: true,
		DisablePreParseMultipartForm:  true,
		MaxRequestBodySize:            imp.opts.MaxBodyBytes,
		Logger:                        fasthttpLogger{imp.log},
	}
	if imp.spec.Protocol == "https" {
		h.s.NextProto("h2", h.h2.serveTLS)
	}
	return h
}

// httpServer serves http and https imposters through fasthttp, and their
// HTTP/2 connections through h2 (h2.go).
type httpServer struct {
	imp *Imposter
	s   fasthttp.Server
	h2  *h2Server
}

func (h *httpServer) serve(ln net.Listener) error {
	if h.imp.spec.Protocol == "http" {
		ln = sniffListener{Listener: ln, h2: h.h2}
	}
	return h.s.Serve(ln)
}

// serveH2C is a plaintext imposter's handler: a request with
// `Connection: Upgrade` may ask for h2c, which the stubs never see.
func (h *httpServer) serveH2C(ctx *fasthttp.RequestCtx) {
	if ctx.Request.Header.ConnectionUpgrade() && h.h2.upgradeH2C(ctx) {
		return
	}
	h.imp.serve(ctx)
}

// shutdown closes the connections taken over from fasthttp (upgraded to
// WebSocket or HTTP/2) first, since fasthttp waits for the HTTP/2 ones it
// serves, then stops fasthttp.
func (h *httpServer) shutdown(ctx context.Context) error {
	err := h.imp.upgraded.shutdown(ctx)
	if ferr := h.s.ShutdownWithContext(ctx); err == nil {
		err = ferr
	}
	return err
}

// choose counts and records req, and picks the stub (nil for none) and the
// response that answer it; the flows it reads run under ctx, the
// request's budget.
func (imp *Imposter) choose(ctx context.Context, req *message.Request) (*Stub, *response, error) {
	return imp.chooseIn(ctx, imp.table.Load(), req)
}

// chooseOpen is choose for a WebSocket handshake: only the stubs that name
// type "open" answer it, and a nil response (with no error) means none
// matched: the handshake is then accepted as it is.
func (imp *Imposter) chooseOpen(ctx context.Context, req *message.Request) (*Stub, *response, error) {
	t := imp.table.Load()
	if t.opens == nil {
		imp.recorder().count(req)
		return nil, nil, nil
	}
	st, r, err := imp.chooseIn(ctx, t.opens, req)
	if st == nil && err == nil {
		return nil, nil, nil
	}
	return st, r, err
}

// recorder is the imposter that counts and records imp's requests: an
// upgraded connection's messages are its http imposter's.
func (imp *Imposter) recorder() *Imposter {
	if imp.parent != nil {
		return imp.parent
	}
	return imp
}

// count counts req and records it when the imposter records.
func (imp *Imposter) count(req *message.Request) {
	imp.numReqs.Add(1)
	if imp.recordReqs {
		imp.record(req)
	}
}

// chooseIn is choose over the stubs of t.
func (imp *Imposter) chooseIn(ctx context.Context, t *table, req *message.Request) (*Stub, *response, error) {
	imp.recorder().count(req)
	var st *Stub
	if t.scenarios {
		var err error
		if st, err = imp.matchScenario(ctx, t, req); err != nil {
			return nil, nil, err
		}
	} else {
		st = t.match(req, nil)
	}
	if st == nil {
		return nil, imp.dflt, nil
	}
	if st.cycleKey() != "" && imp.spec.Flow.CyclesPerFlow && imp.opts.Store != nil {
		r, err := imp.nextInFlow(ctx, st, req)
		return st, r, err
	}
	r, err := imp.next(ctx, st)
	return st, r, err
}

// next returns st's next response: from the stub's own position, or from
// Options.Cycles when the stub has responses to cycle through and one is
// set.
func (imp *Imposter) next(ctx context.Context, st *Stub) (*response, error) {
	key := st.cycleKey()
	if key == "" || imp.opts.Cycles == nil {
		return st.next(), nil
	}
	pos, err := imp.opts.Cycles.Next(ctx, key, imp.spec.Flow.Policy)
	if err != nil {
		return nil, unavailable(err)
	}
	return st.at(pos), nil
}

// compute produces the response r gives that is not a plain `is`: a copy
// of a static one that has behaviors, or a responder's, with behaviors
// applied. call names the imposter, the request and the stub (nil for
// none); compute fills in the rest. A nil response and no error means the
// responder answered on the connection itself. ctx is the request's
// budget.
func (imp *Imposter) compute(ctx context.Context, call *Call, r *response) (*message.Response, error) {
	req := call.Request
	var resp *message.Response
	if r.static != nil {
		resp = r.static.Clone()
	} else {
		call.FlowID, call.behaviors = imp.FlowID(req), r.behaviors
		var err error
		if resp, err = r.responder.Respond(ctx, call); err != nil || resp == nil {
			return nil, err
		}
	}
	if r.behaviors != nil && (r.responder == nil || !r.handlesBehaviors) {
		if resp.Rendered != nil {
			resp = resp.Clone() // behaviors change their own copy
		}
		if err := r.behaviors.Apply(ctx, req, resp); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// responseJSON renders a response as mb shows it in a stub's --debug
// matches: http's status, headers and body, or tcp's data.
func (imp *Imposter) responseJSON(resp *message.Response) []byte {
	var b bytes.Buffer
	protocol := imp.spec.Protocol
	if imp.spec.Custom != nil {
		protocol = "custom" // its process's response object, as ws's
	}
	switch protocol {
	case "tcp":
		return resp.TCPObject()
	case "smtp":
		b.WriteString(`{}`)
	case "ws", "wss", "grpc", "custom":
		if len(resp.Body) == 0 {
			return []byte(`{}`)
		}
		return resp.Body
	default:
		b.WriteString(`{"statusCode":`)
		b.WriteString(strconv.Itoa(resp.StatusCode))
		b.WriteString(`,"headers":`)
		message.WriteMultiMap(&b, resp.Headers)
		body, _ := json.Marshal(string(resp.Body))
		b.WriteString(`,"body":`)
		b.Write(body)
		b.WriteByte('}')
	}
	return b.Bytes()
}

// adopt tracks conn, which another server accepted (fasthttp, before an
// upgrade), while handle runs on it; false when shutdown has begun, and
// handle is not run.
func (c *conns) adopt(conn net.Conn, handle func()) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		conn.Close()
		return false
	}
	if c.open == nil {
		c.open = map[net.Conn]struct{}{}
	}
	c.open[conn] = struct{}{}
	c.wg.Add(1)
	c.mu.Unlock()
	defer c.wg.Done()
	defer c.forget(conn)
	handle()
	return true
}

// conns tracks a tcp or smtp server's open connections, so that shutdown
// closes them and waits for their handlers.
type conns struct {
	mu     sync.Mutex
	ln     net.Listener
	open   map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// serve accepts on ln, running handle for each connection in its own
// goroutine, until ln is closed.
func (c *conns) serve(ln net.Listener, handle func(net.Conn)) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		ln.Close()
		return nil
	}
	c.ln = ln
	c.mu.Unlock()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return nil // the listener was closed
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			conn.Close()
			continue
		}
		if c.open == nil {
			c.open = map[net.Conn]struct{}{}
		}
		c.open[conn] = struct{}{}
		c.wg.Add(1)
		c.mu.Unlock()
		go func() {
			defer c.wg.Done()
			defer c.forget(conn)
			handle(conn)
		}()
	}
}

func (c *conns) forget(conn net.Conn) {
	conn.Close()
	c.mu.Lock()
	delete(c.open, conn)
	c.mu.Unlock()
}

// shutdown closes the listener and every connection, and waits for the
// handlers to return (or ctx to end).
func (c *conns) shutdown(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	if c.ln != nil {
		c.ln.Close()
	}
	for conn := range c.open {
		conn.Close()
	}
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
