package loadtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/valyala/fasthttp"
)

// helloBody is what the raw server answers: the smallest useful response,
// so that it measures the HTTP stack and nothing else.
var helloBody = []byte("hello")

func helloHandler(ctx *fasthttp.RequestCtx) {
	// Stated explicitly so that a recorded copy (proxyOnce) keeps the
	// connection open too.
	ctx.Response.Header.SetBytesKV([]byte("Connection"), []byte("keep-alive"))
	ctx.Response.Header.SetContentTypeBytes([]byte("text/plain"))
	ctx.SetBody(helloBody)
}

// ServeHello serves the raw fasthttp "hello" server on ln until ctx is
// cancelled: the upper bound any fasthttp-based gateway can reach here.
func ServeHello(ctx context.Context, ln net.Listener) error {
	srv := &fasthttp.Server{
		Handler: helloHandler, Name: "riftload-hello", CloseOnShutdown: true,
		// Bounds how long the worker-pool cleaner outlives Shutdown.
		MaxIdleWorkerDuration: 100 * time.Millisecond,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("hello server: %w", err)
	case <-ctx.Done():
	}
	if err := srv.Shutdown(); err != nil {
		return fmt.Errorf("hello server: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("hello server: %w", err)
	}
	return nil
}

// ServeProxy serves a raw fasthttp reverse proxy on ln until ctx is
// cancelled: every request is forwarded as it is to upstream
// (http://host:port) on a pooled keep-alive connection, and the answer is
// copied back on the client's connection, kept open too. It is the limit
// for any fasthttp-based proxy on the same upstream (issue 34:
// proxyTransparent with _rift.proxyKeepAlive against it). The pool is a
// channel rather than a fasthttp.HostClient, whose cleaner goroutine would
// outlive the server.
func ServeProxy(ctx context.Context, ln net.Listener, upstream string) error {
	u, err := url.Parse(upstream)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("proxy: upstream %q: want http://host:port", upstream)
	}
	p := &rawProxy{addr: u.Host, idle: make(chan *proxyConn, 1024)}
	defer p.close()
	srv := &fasthttp.Server{
		Handler: p.serve, Name: "riftload-proxy", CloseOnShutdown: true,
		MaxIdleWorkerDuration: 100 * time.Millisecond,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("proxy server: %w", err)
	case <-ctx.Done():
	}
	if err := srv.Shutdown(); err != nil {
		return fmt.Errorf("proxy server: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("proxy server: %w", err)
	}
	return nil
}

type proxyConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

type rawProxy struct {
	addr string
	idle chan *proxyConn
}

func (p *rawProxy) serve(ctx *fasthttp.RequestCtx) {
	req := &ctx.Request
	req.SetHost(p.addr)
	// A pooled connection the upstream closed meanwhile fails at once:
	// one retry on a fresh one.
	for attempt := 0; ; attempt++ {
		pc, fresh, err := p.get()
		if err == nil {
			err = p.exchange(pc, req, &ctx.Response)
		}
		if err == nil {
			if ctx.Response.ConnectionClose() {
				pc.c.Close()
			} else {
				p.put(pc)
			}
			return
		}
		if pc != nil {
			pc.c.Close()
		}
		if fresh || attempt > 0 {
			ctx.Response.Reset()
			ctx.Error("proxy: "+err.Error(), fasthttp.StatusBadGateway)
			return
		}
	}
}

func (p *rawProxy) exchange(pc *proxyConn, req *fasthttp.Request, resp *fasthttp.Response) error {
	deadline := time.Now().Add(15 * time.Second)
	if err := pc.c.SetDeadline(deadline); err != nil {
		return err
	}
	if err := req.Write(pc.w); err != nil {
		return err
	}
	if err := pc.w.Flush(); err != nil {
		return err
	}
	resp.Reset()
	return resp.Read(pc.r)
}

func (p *rawProxy) get() (pc *proxyConn, fresh bool, err error) {
	select {
	case pc := <-p.idle:
		return pc, false, nil
	default:
	}
	c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
	if err != nil {
		return nil, true, err
	}
	return &proxyConn{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}, true, nil
}

func (p *rawProxy) put(pc *proxyConn) {
	select {
	case p.idle <- pc:
	default:
		pc.c.Close()
	}
}

// close closes the idle connections; it runs after the server has shut
// down, when no handler holds one.
func (p *rawProxy) close() {
	for {
		select {
		case pc := <-p.idle:
			pc.c.Close()
		default:
			return
		}
	}
}
