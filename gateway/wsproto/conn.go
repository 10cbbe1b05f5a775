package wsproto

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Conn is one end of a WebSocket connection. Reads are for one goroutine;
// writes may come from several, and each write (a batch of frames) goes
// out whole, in one system call.
type Conn struct {
	nc     net.Conn
	rd     *Reader
	client bool
	// WriteTimeout bounds each write: a peer that stops reading fails the
	// write once its socket buffer is full, instead of blocking it for
	// ever. Zero is no bound.
	WriteTimeout time.Duration

	wmu       sync.Mutex
	closeSent bool
	mask      [4]byte // a client's masking key, new for each write (under wmu)
}

// NewConn wraps a connection whose handshake is done. r reads it (a
// buffered reader that may hold bytes already read past the handshake);
// server says which end this is; maxMessage bounds a message read (0: no
// bound).
func NewConn(nc net.Conn, r io.Reader, server bool, maxMessage int) *Conn {
	if r == nil {
		r = bufio.NewReaderSize(nc, 4096)
	}
	return &Conn{nc: nc, rd: NewReader(r, server, maxMessage), client: !server}
}

// NetConn returns the underlying connection.
func (c *Conn) NetConn() net.Conn { return c.nc }

// Reader returns the frame reader, for a caller that wants control frames
// itself (Next) rather than ReadMessage's handling of them.
func (c *Conn) Reader() *Reader { return c.rd }

// ReadMessage returns the next text or binary message. It answers pings
// with pongs and skips pongs; a close frame is answered with a close frame
// (the same code) and returned as a *CloseError.
func (c *Conn) ReadMessage() (op byte, payload []byte, err error) {
	for {
		op, p, err := c.rd.Next()
		if err != nil {
			return 0, nil, err
		}
		switch op {
		case OpPing:
			if err := c.WriteMessage(OpPong, p); err != nil {
				return 0, nil, err
			}
		case OpPong:
		case OpClose:
			code, reason := ParseClose(p)
			echo := code
			if echo == CloseNoStatus {
				echo = 0
			}
			_ = c.WriteClose(echo, "")
			return 0, nil, &CloseError{Code: code, Reason: reason}
		default:
			return op, p, nil
		}
	}
}

var writeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledWrite bounds a write buffer kept for reuse.
const maxPooledWrite = 64 << 10

// Write sends the frames fill appends, in one write. fill gets the mask
// to use (nil on a server) and must not keep dst.
func (c *Conn) Write(fill func(dst []byte, mask *[4]byte) []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent {
		return net.ErrClosed
	}
	return c.writeLocked(fill)
}

func (c *Conn) writeLocked(fill func(dst []byte, mask *[4]byte) []byte) error {
	bp := writeBufs.Get().(*[]byte)
	var mask *[4]byte
	if c.client {
		binary.LittleEndian.PutUint32(c.mask[:], mrand.Uint32())
		mask = &c.mask
	}
	b := fill((*bp)[:0], mask)
	if c.WriteTimeout > 0 {
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.WriteTimeout))
	}
	_, err := c.nc.Write(b)
	if cap(b) <= maxPooledWrite {
		*bp = b[:0]
		writeBufs.Put(bp)
	}
	return err
}

// WriteFrames sends frames already rendered (server frames, unmasked),
// whole, without copying them.
func (c *Conn) WriteFrames(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent {
		return net.ErrClosed
	}
	if c.WriteTimeout > 0 {
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.WriteTimeout))
	}
	_, err := c.nc.Write(b)
	return err
}

// WriteMessage sends one message (or control frame).
func (c *Conn) WriteMessage(op byte, payload []byte) error {
	return c.Write(func(dst []byte, mask *[4]byte) []byte { return AppendFrame(dst, op, payload, mask) })
}

// WriteClose sends a close frame (code 0: without a code), once: any write
// after it fails with net.ErrClosed.
func (c *Conn) WriteClose(code int, reason string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent {
		return nil
	}
	c.closeSent = true
	return c.writeLocked(func(dst []byte, mask *[4]byte) []byte { return AppendClose(dst, code, reason, mask) })
}

// CloseSent reports whether a close frame has been sent.
func (c *Conn) CloseSent() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.closeSent
}

// Close closes the underlying connection, without a close frame.
func (c *Conn) Close() error { return c.nc.Close() }

// CloseHandshake sends a close frame and waits (up to wait) for the
// peer's, discarding messages until then, and closes the connection.
func (c *Conn) CloseHandshake(code int, reason string, wait time.Duration) error {
	err := c.WriteClose(code, reason)
	if err == nil {
		_ = c.nc.SetReadDeadline(time.Now().Add(wait))
		for {
			op, _, rerr := c.rd.Next()
			if rerr != nil || op == OpClose {
				break
			}
		}
	}
	if cerr := c.nc.Close(); err == nil {
		err = cerr
	}
	return err
}

// DialOptions are a client's handshake settings.
type DialOptions struct {
	// Header holds extra request header fields (Origin, cookies,
	// Sec-WebSocket-Protocol), in order.
	Header []Header
	// TLS configures wss; nil uses a default config for the host.
	TLS *tls.Config
	// MaxMessage bounds a message read (0: no bound).
	MaxMessage int
	// Dialer dials the TCP connection; nil uses a net.Dialer.
	Dialer *net.Dialer
}

// Response is a server's answer to the handshake.
type Response struct {
	Status  int
	Headers []Header
	Body    []byte // a refusal's body (up to 64 KiB)
}

// Get returns the first value of the named header, ignoring case.
func (r *Response) Get(name string) string {
	for _, h := range r.Headers {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// ErrRefused wraps a handshake the server answered with anything but 101.
var ErrRefused = errors.New("websocket: handshake refused")

// Dial opens a client connection to a ws:// or wss:// URL. On a refusal it
// returns the server's response with an error wrapping ErrRefused.
func Dial(ctx context.Context, rawURL string, opts DialOptions) (*Conn, *Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, fmt.Errorf("websocket: %w", err)
	}
	host := u.Host
	if u.Port() == "" {
		switch u.Scheme {
		case "wss", "https":
			host = net.JoinHostPort(u.Hostname(), "443")
		default:
			host = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	d := opts.Dialer
	if d == nil {
		d = &net.Dialer{}
	}
	nc, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, nil, fmt.Errorf("websocket: dial %s: %w", host, err)
	}
	if u.Scheme == "wss" || u.Scheme == "https" {
		cfg := opts.TLS
		if cfg == nil {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName = u.Hostname()
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, nil, fmt.Errorf("websocket: tls: %w", err)
		}
		nc = tc
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	c, resp, err := handshake(nc, u, opts)
	if !stop() {
		err = errors.Join(err, ctx.Err())
	}
	if err != nil {
		nc.Close()
		return nil, resp, err
	}
	_ = nc.SetDeadline(time.Time{})
	return c, resp, nil
}

func handshake(nc net.Conn, u *url.URL, opts DialOptions) (*Conn, *Response, error) {
	var k [16]byte
	_, _ = rand.Read(k[:])
	key := base64.StdEncoding.EncodeToString(k[:])
	target := u.RequestURI()
	hs := append([]Header{{"Upgrade", "websocket"}, {"Connection", "Upgrade"},
		{"Sec-WebSocket-Key", key}, {"Sec-WebSocket-Version", "13"}}, opts.Header...)
	if _, err := nc.Write(headBytes("GET", target, u.Host, hs)); err != nil {
		return nil, nil, fmt.Errorf("websocket: handshake: %w", err)
	}
	br := bufio.NewReaderSize(nc, 4096)
	hr, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		return nil, nil, fmt.Errorf("websocket: handshake answer: %w", err)
	}
	resp := &Response{Status: hr.StatusCode}
	for name, vs := range hr.Header {
		for _, v := range vs {
			resp.Headers = append(resp.Headers, Header{name, v})
		}
	}
	if hr.StatusCode != http.StatusSwitchingProtocols {
		resp.Body, _ = io.ReadAll(io.LimitReader(hr.Body, 64<<10))
		hr.Body.Close()
		return nil, resp, fmt.Errorf("%w: %d %s", ErrRefused, hr.StatusCode, http.StatusText(hr.StatusCode))
	}
	if got := hr.Header.Get("Sec-WebSocket-Accept"); got != AcceptKey(key) {
		return nil, resp, fmt.Errorf("websocket: handshake answer has the wrong Sec-WebSocket-Accept %q", got)
	}
	return NewConn(nc, br, false, opts.MaxMessage), resp, nil
}
