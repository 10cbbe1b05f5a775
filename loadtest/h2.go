package loadtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// HTTP/2 load (Options.HTTP2): each virtual user keeps one HTTP/2
// connection of its own to each target, with one stream in flight, as
// over HTTP/1.1 it keeps one connection with one request: h2c with prior
// knowledge to an http:// target, h2 negotiated by ALPN (and required)
// to an https:// one. The requests are the scenario's, rendered as for
// HTTP/1.1; Go's HTTP/2 client (net/http, one Transport per user and
// target) carries them, and its answer is copied into the worker's
// fasthttp response, so that statuses, checks and thresholds read it as
// they read an HTTP/1.1 one. Unlike the HTTP/1.1 loop it allocates per
// request.

// h2Client returns the worker's HTTP/2 client to target t, made on first
// use.
func (w *worker) h2Client(t int) *http.Client {
	if w.h2 == nil {
		w.h2 = make([]*http.Client, len(w.r.targets))
		w.h2Pre = make([]net.Conn, len(w.r.targets))
	}
	if c := w.h2[t]; c != nil {
		return c
	}
	tg := &w.r.targets[t]
	p := new(http.Protocols)
	tr := &http.Transport{Protocols: p, DisableCompression: true, MaxConnsPerHost: 1}
	dialer := &net.Dialer{Timeout: w.r.opts.Timeout}
	if tg.tls != nil {
		p.SetHTTP2(true)
		cfg := tg.tls.Clone()
		cfg.NextProtos = []string{"h2"}
		tr.TLSClientConfig = cfg
		tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if c := w.takeH2Conn(t); c != nil {
				return c, nil
			}
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			tc := tls.Client(c, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				_ = c.Close()
				return nil, &tlsHandshakeError{addr: addr, err: err}
			}
			w.r.handshakes.Add(1)
			if tc.ConnectionState().DidResume {
				w.r.resumed.Add(1)
			}
			if proto := tc.ConnectionState().NegotiatedProtocol; proto != "h2" {
				_ = c.Close()
				return nil, fmt.Errorf("%s: the server does not offer h2 (ALPN %q)", addr, proto)
			}
			return tc, nil
		}
	} else {
		p.SetUnencryptedHTTP2(true)
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if c := w.takeH2Conn(t); c != nil {
				return c, nil
			}
			return dialer.DialContext(ctx, network, addr)
		}
	}
	c := &http.Client{Transport: tr, Timeout: w.r.opts.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	w.h2[t] = c
	return c
}

// connectH2 makes the worker's HTTP/2 connection to target t before the
// run starts, as every user connects first over HTTP/1.1: Go's client
// has no way to connect without a request, so the connection is made
// here, through the client's own dial, and handed to it at its first
// request.
func (w *worker) connectH2(ctx context.Context, t int) {
	tr := w.h2Client(t).Transport.(*http.Transport)
	dial := tr.DialContext
	if w.r.targets[t].tls != nil {
		dial = tr.DialTLSContext
	}
	if c, err := dial(ctx, "tcp", w.r.targets[t].addr); err == nil {
		w.h2Pre[t] = c
	}
}

// takeH2Conn returns the connection connectH2 made for target t, once.
func (w *worker) takeH2Conn(t int) net.Conn {
	c := w.h2Pre[t]
	w.h2Pre[t] = nil
	return c
}

// doH2 sends w.req, prepared for target t, over HTTP/2 and reads the
// answer into w.resp.
func (w *worker) doH2(ctx context.Context, t int) error {
	c := w.h2Client(t)
	tg := &w.r.targets[t]
	scheme := "http://"
	if tg.tls != nil {
		scheme = "https://"
	}
	req := w.req
	var body io.Reader
	if b := req.Body(); len(b) > 0 {
		body = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, string(req.Header.Method()), scheme+tg.addr+string(req.RequestURI()), body)
	if err != nil {
		return err
	}
	hr.Host = string(req.Header.Host())
	for k, v := range req.Header.All() {
		switch name := string(k); {
		case strings.EqualFold(name, "Host"), strings.EqualFold(name, "Connection"), strings.EqualFold(name, "Content-Length"):
			// HTTP/2's own: :authority, the stream's end, DATA frames
		default:
			hr.Header.Add(name, string(v))
		}
	}
	resp, err := c.Do(hr)
	if err != nil {
		return err
	}
	w.h2Body.Reset()
	_, err = w.h2Body.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	w.resp.Reset()
	w.resp.SetStatusCode(resp.StatusCode)
	for name, values := range resp.Header {
		for _, v := range values {
			w.resp.Header.Add(name, v)
		}
	}
	w.resp.SetBodyRaw(w.h2Body.Bytes())
	if w.r.opts.NoKeepAlive {
		c.CloseIdleConnections()
	}
	return nil
}

// closeH2 closes the worker's HTTP/2 connections.
func (w *worker) closeH2() {
	for i, c := range w.h2 {
		if c != nil {
			c.CloseIdleConnections()
		}
		if w.h2Pre[i] != nil {
			_ = w.h2Pre[i].Close()
		}
	}
}
