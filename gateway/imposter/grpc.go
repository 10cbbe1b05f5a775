package imposter

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/riftgate/riftgate/gateway/grpcproto"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/meter"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// gRPC's limits.
const (
	// GRPCMaxMessageBytes bounds one message a client sends, as grpc-go's
	// servers bound it by default: past it the call fails with
	// RESOURCE_EXHAUSTED.
	GRPCMaxMessageBytes = 4 << 20
	// grpcMaxStreamBytes bounds a client stream's messages together, as
	// JSON: the request holds them all.
	grpcMaxStreamBytes = 16 << 20
	// grpcMaxStreams bounds the streams one connection has open at once.
	grpcMaxStreams = 1000
)

// grpcServer serves a grpc imposter with grpc-go: one handler for every
// method (grpc.UnknownServiceHandler) reads and writes undecoded frames
// (grpcproto.Codec), and decodes them with the method's types; server
// reflection answers from the imposter's descriptors. HTTP/2 flow control
// bounds what is buffered for a client that does not read.
type grpcServer struct {
	imp   *Imposter
	srv   *grpc.Server
	conns grpcConns
}

// grpcConns are the connections the server accepted, by the client's
// address, so that a fault can break the one a call came on.
type grpcConns struct {
	net.Listener
	mu   sync.Mutex
	open map[string]net.Conn
}

func (c *grpcConns) Accept() (net.Conn, error) {
	conn, err := c.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: conn, owner: c}
	c.mu.Lock()
	c.open[conn.RemoteAddr().String()] = conn
	c.mu.Unlock()
	return tc, nil
}

func (c *grpcConns) get(addr net.Addr) net.Conn {
	if addr == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open[addr.String()]
}

// trackedConn forgets itself when closed.
type trackedConn struct {
	net.Conn
	owner *grpcConns
	once  sync.Once
}

func (t *trackedConn) Close() error {
	t.once.Do(func() {
		t.owner.mu.Lock()
		delete(t.owner.open, t.Conn.RemoteAddr().String())
		t.owner.mu.Unlock()
	})
	return t.Conn.Close()
}

func newGRPCServer(imp *Imposter) *grpcServer {
	s := &grpcServer{imp: imp, conns: grpcConns{open: map[string]net.Conn{}}}
	opts := []grpc.ServerOption{
		grpc.ForceServerCodec(grpcproto.Codec{}),
		grpc.UnknownServiceHandler(s.handle),
		grpc.MaxRecvMsgSize(GRPCMaxMessageBytes),
		grpc.MaxConcurrentStreams(grpcMaxStreams),
		// Stop returns once every handler has: no goroutine outlives
		// the imposter.
		grpc.WaitForHandlers(true),
	}
	if imp.grpcTLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(imp.grpcTLS)))
	}
	s.srv = grpc.NewServer(opts...)
	imp.spec.GRPC.RegisterReflection(s.srv)
	return s
}

func (s *grpcServer) serve(ln net.Listener) error {
	s.conns.Listener = ln
	return s.srv.Serve(&s.conns)
}

// shutdown ends every call (their contexts end, and with them any wait)
// and closes every connection, as deleting an http imposter does.
func (s *grpcServer) shutdown(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.srv.Stop(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// grpcTLS reports whether a grpc imposter serves TLS: when it has a key
// and a certificate, or asks for the client's (mutualAuth, which then
// uses the built-in pair unless it has its own).
func (s *Spec) grpcTLS() bool { return s.Key != "" && s.Cert != "" || s.MutualAuth }

// grpcTLSConfig is the imposter's TLS configuration for gRPC: https's,
// offering h2 by ALPN (grpc-go's credentials add it).
func (imp *Imposter) grpcTLSConfig() (*tls.Config, error) {
	if !imp.spec.grpcTLS() {
		return nil, nil
	}
	return imp.tlsConfig()
}

// handle serves one call of any method.
func (s *grpcServer) handle(_ any, stream grpc.ServerStream) error {
	full, _ := grpc.MethodFromServerStream(stream)
	set := s.imp.spec.GRPC
	m := set.Method(full)
	if m == nil {
		svc, method := splitMethod(full)
		if !slices.Contains(set.Services(), svc) {
			return status.Errorf(codes.Unimplemented, "unknown service %s", svc)
		}
		return status.Errorf(codes.Unimplemented, "unknown method %s for service %s", method, svc)
	}
	ctx := stream.Context()
	base := message.Request{Kind: message.GRPC, Path: full, Headers: incomingMetadata(ctx)}
	var addr net.Addr
	if p, ok := peer.FromContext(ctx); ok {
		addr = p.Addr
	}
	c := &grpcCall{s: s, stream: stream, m: m, set: set, ctx: ctx, base: &base, addr: addr}
	switch {
	case m.ClientStream && m.ServerStream:
		// Each message is a request of its own, answered as it comes,
		// as each message on a WebSocket is.
		for {
			js, err := c.recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if done, err := c.answer(js); done || err != nil {
				return err
			}
		}
	case m.ClientStream:
		js, err := c.recvAll()
		if err != nil {
			return err
		}
		_, err = c.answer(js)
		return err
	default:
		js, err := c.recv()
		if errors.Is(err, io.EOF) {
			return status.Error(codes.InvalidArgument, "the call sent no request message")
		}
		if err != nil {
			return err
		}
		_, err = c.answer(js)
		return err
	}
}

// splitMethod splits "/pkg.Service/Method".
func splitMethod(full string) (svc, method string) {
	full = strings.TrimPrefix(full, "/")
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[:i], full[i+1:]
	}
	return full, ""
}

// incomingMetadata is the call's metadata as a request's headers, sorted
// by key (a map has no order); binary values as base64, the pseudo-headers
// left out.
func incomingMetadata(ctx context.Context) []message.KV {
	md, _ := metadata.FromIncomingContext(ctx)
	keys := make([]string, 0, len(md))
	for k := range md {
		if !strings.HasPrefix(k, ":") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []message.KV
	for _, k := range keys {
		for _, v := range md[k] {
			if strings.HasSuffix(k, "-bin") {
				v = base64.StdEncoding.EncodeToString([]byte(v))
			}
			out = append(out, message.KV{Name: k, Value: v})
		}
	}
	return out
}

// grpcCall is one call on its way.
type grpcCall struct {
	s      *grpcServer
	stream grpc.ServerStream
	m      *grpcproto.Method
	set    *grpcproto.Set
	ctx    context.Context
	base   *message.Request
	addr   net.Addr
	// sentHeader: the header metadata went out (with the first message).
	sentHeader bool
}

// recv reads one message as JSON; one that does not decode as the
// method's input fails the call with INVALID_ARGUMENT.
func (c *grpcCall) recv() ([]byte, error) {
	var f grpcproto.Frame
	if err := c.stream.RecvMsg(&f); err != nil {
		return nil, err // io.EOF, or grpc-go's status (RESOURCE_EXHAUSTED past the size)
	}
	js, err := c.set.ToJSON(c.m.In, f)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "the message is not a %s: %s", c.m.In.FullName(), grpcproto.ErrorText(err))
	}
	return js, nil
}

// recvAll reads a client stream whole, as a JSON array.
func (c *grpcCall) recvAll() ([]byte, error) {
	out := []byte{'['}
	for n := 0; ; n++ {
		js, err := c.recv()
		if errors.Is(err, io.EOF) {
			return append(out, ']'), nil
		}
		if err != nil {
			return nil, err
		}
		if len(out)+len(js) > grpcMaxStreamBytes {
			return nil, status.Errorf(codes.ResourceExhausted, "the client stream's messages pass %d bytes", grpcMaxStreamBytes)
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, js...)
	}
}

// answer matches one request (value js) and sends its answer; done
// reports that the call ended (a status was sent).
func (c *grpcCall) answer(js []byte) (done bool, err error) {
	imp := c.s.imp
	req := &message.Request{Kind: message.GRPC, Path: c.base.Path, Headers: c.base.Headers, Body: js, Timestamp: time.Now()}
	if c.addr != nil {
		req.SetAddr(c.addr)
	}
	start := time.Now()
	b := imp.newBudget(start)
	b.Context = c.ctx // the client's deadline and cancellation end what the call computes
	st, r, err := imp.choose(&b, req)
	defer func() { imp.observe(st, err, start, meter.Now()) }()
	if err != nil {
		return true, grpcError(imp, err)
	}
	if r.fault != "" {
		c.fault(r.fault)
		return true, status.Error(codes.Unavailable, "fault: "+r.fault)
	}
	resp, a := r.static, r.grpc
	if resp == nil || r.behaviors != nil || a == nil {
		if resp, err = imp.compute(&b, &Call{Imposter: imp, Request: req, Stub: st}, r); err != nil {
			return true, grpcError(imp, err)
		}
		if resp == nil {
			return true, nil
		}
		if a, err = grpcAnswerOf(c.set, resp.Body); err != nil {
			imp.log.Error("error generating response", "err", err)
			return true, status.Error(codes.Internal, "riftgate: "+err.Error())
		}
	}
	if st != nil && imp.opts.RecordMatches {
		st.recordMatch(imp, req, r, resp)
	}
	return c.deliver(a)
}

// grpcError is the status of an answer that could not be made: riftgate's
// own conditions (an unreachable flow owner) are UNAVAILABLE, a call the
// client gave up on its own code, anything else INTERNAL.
func grpcError(imp *Imposter, err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	imp.log.Error("error generating response", "err", err)
	e := mberr.As(err)
	if mberr.Own(e.Code) {
		return status.Error(codes.Unavailable, e.Message)
	}
	return status.Error(codes.Internal, e.Message)
}

// deliver sends an answer: its header metadata, its messages, then its
// trailer and status. A unary method gets one message (an empty one when
// the answer has none); a stream any number.
func (c *grpcCall) deliver(a *grpcAnswer) (done bool, err error) {
	frames, err := a.frames(c.set, c.m)
	if err != nil {
		c.s.imp.log.Error("error generating response", "err", err)
		return true, status.Errorf(codes.Internal, "riftgate: the stub's value is not a %s: %s", c.m.Out.FullName(), grpcproto.ErrorText(err))
	}
	if !c.m.ServerStream {
		if len(frames) > 1 {
			return true, status.Errorf(codes.Internal, "riftgate: %s answers one message, and the stub's value has %d", c.m.Path, len(frames))
		}
		if len(frames) == 0 && a.st == nil {
			frames = []grpcproto.Frame{{}}
		}
		if a.st != nil {
			frames = nil // a failed unary call has no message
		}
	}
	if len(a.header) > 0 && !c.sentHeader {
		if err := c.stream.SetHeader(a.header); err != nil {
			return true, err
		}
	}
	if len(a.trailer) > 0 {
		c.stream.SetTrailer(a.trailer)
	}
	for i := range frames {
		if err := c.stream.SendMsg(&frames[i]); err != nil {
			return true, err
		}
		c.sentHeader = true
	}
	if a.st != nil {
		return true, a.st.Err()
	}
	// A unary or server-streaming answer ends the call; a bidi stream
	// goes on to the next message.
	return !c.m.ClientStream || !c.m.ServerStream, nil
}

// fault breaks the call's connection: a reset (RST), or bytes that are no
// HTTP/2 frame, then the end.
func (c *grpcCall) fault(kind string) {
	conn := c.s.conns.get(c.addr)
	if conn == nil {
		return
	}
	if kind == "RANDOM_DATA_THEN_CLOSE" {
		_, _ = conn.Write(randomThenClose)
	} else {
		resetOnClose(conn)
	}
	conn.Close()
}
