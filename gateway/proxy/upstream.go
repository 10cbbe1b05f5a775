package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/riftgate/riftgate/gateway/message"
	"github.com/valyala/fasthttp"
)

// httpPool is one http upstream address and its idle keep-alive connections.
// The proxy writes each request and reads each answer itself, through
// fasthttp's parser, so that it sees the upstream's header fields as sent
// (order, spelling, repeats), which mb records and answers with; fasthttp's
// client reorders and respells them, and invents a Content-Type.
type httpPool struct {
	addr    string
	tls     *tls.Config // nil for http
	timeout time.Duration
	idle    chan *upstreamConn
}

type upstreamConn struct {
	net.Conn
	r *bufio.Reader
}

const maxIdlePerUpstream = 64

func newHTTPPool(addr string, cfg *tls.Config, timeout time.Duration) *httpPool {
	return &httpPool{addr: addr, tls: cfg, timeout: timeout, idle: make(chan *upstreamConn, maxIdlePerUpstream)}
}

// answer is an upstream's response.
type answer struct {
	status  int
	headers []message.KV // as sent
	body    []byte       // decoded from chunked framing
}

// do sends one request (its bytes ready to write) and reads the answer. A
// request on a reused connection that the upstream had closed is sent again
// on a new one, as any HTTP client does.
func (u *httpPool) do(ctx context.Context, req []byte, head bool) (*answer, error) {
	deadline := time.Now().Add(u.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for attempt := 0; ; attempt++ {
		c, reused, err := u.conn(ctx, deadline)
		if err != nil {
			return nil, err
		}
		a, keep, sent, err := exchange(c, req, head, deadline)
		if err == nil {
			if keep {
				u.put(c)
			} else {
				c.Close()
			}
			return a, nil
		}
		c.Close()
		if !reused || sent || attempt > 0 {
			return nil, err
		}
	}
}

func (u *httpPool) conn(ctx context.Context, deadline time.Time) (*upstreamConn, bool, error) {
	select {
	case c := <-u.idle:
		return c, true, nil
	default:
	}
	d := net.Dialer{Deadline: deadline}
	nc, err := d.DialContext(ctx, "tcp", u.addr)
	if err != nil {
		return nil, false, err
	}
	if u.tls != nil {
		tc := tls.Client(nc, u.tls)
		_ = tc.SetDeadline(deadline)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, false, err
		}
		nc = tc
	}
	return &upstreamConn{Conn: nc, r: bufio.NewReaderSize(nc, 64<<10)}, false, nil
}

func (u *httpPool) put(c *upstreamConn) {
	_ = c.SetDeadline(time.Time{})
	select {
	case u.idle <- c:
	default:
		c.Close()
	}
}

// close drops the idle connections.
func (u *httpPool) close() {
	for {
		select {
		case c := <-u.idle:
			c.Close()
		default:
			return
		}
	}
}

// exchange writes req on c and reads one answer. sent reports whether any
// byte of an answer arrived, after which a retry could repeat a request the
// upstream acted on.
func exchange(c *upstreamConn, req []byte, head bool, deadline time.Time) (a *answer, keep, sent bool, err error) {
	_ = c.SetDeadline(deadline)
	if _, err := c.Write(req); err != nil {
		return nil, false, false, err
	}
	header, err := peekHeader(c.r)
	if err != nil {
		return nil, false, len(header) > 0, err
	}
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	resp.Header.DisableNormalizing()
	resp.SkipBody = head
	if err := resp.Read(c.r); err != nil {
		return nil, false, true, err
	}
	a = &answer{status: resp.StatusCode(), headers: headerFields(header), body: bytes.Clone(resp.Body())}
	return a, !resp.ConnectionClose(), true, nil
}

// peekHeader returns the answer's status line and header, which stay
// buffered in r for the parser.
func peekHeader(r *bufio.Reader) (string, error) {
	for {
		buf, _ := r.Peek(r.Buffered())
		if i := bytes.Index(buf, []byte("\r\n\r\n")); i >= 0 {
			return string(buf[:i]), nil
		}
		if r.Buffered() == r.Size() {
			return string(buf), errors.New("upstream header larger than the read buffer")
		}
		if _, err := r.Peek(r.Buffered() + 1); err != nil {
			return string(buf), err
		}
	}
}

// headerFields are the header fields after the status line, as sent; their
// names and values share head's memory.
func headerFields(head string) []message.KV {
	out := make([]message.KV, 0, strings.Count(head, "\n"))
	_, head, _ = strings.Cut(head, "\n") // the status line
	for head != "" {
		var line string
		line, head, _ = strings.Cut(head, "\n")
		line = strings.TrimRight(line, "\r")
		if k, v, ok := strings.Cut(line, ":"); ok && k != "" {
			out = append(out, message.KV{Name: k, Value: strings.Trim(v, " \t")})
		}
	}
	return out
}

// errKind names what went wrong reaching an upstream in mb's terms.
func errKind(err error) string {
	var dns *net.DNSError
	switch {
	case errors.Is(err, errBadURL):
		return "bad url"
	case errors.As(err, &dns):
		return "resolve"
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF):
		return "connect"
	}
	return ""
}

// writeRequest renders the request mb's proxy sends for r: the request
// target as received, the client's header fields (repeats together, as mb's
// header map holds them), injectHeaders over them, the upstream's Host
// unless an injected header names one, and a Content-Length for a body the
// client framed by neither length nor chunks.
func writeRequest(r *message.Request, host string, inject []message.KV) []byte {
	var b bytes.Buffer
	target := r.Target
	if target == "" {
		target = r.Path
		if len(r.Query) > 0 {
			target += "?" + queryString(r.Query)
		}
	} else if target[0] != '/' {
		target = string(rawPath([]byte(target))) + rawQuery(target)
	}
	headers := outgoing(r.Headers, host, inject)
	size := len(r.Method) + len(target) + 64 + len(r.Body)
	for _, h := range headers {
		size += len(h.Name) + len(h.Value) + 4
	}
	b.Grow(size)
	b.WriteString(r.Method)
	b.WriteByte(' ')
	b.WriteString(target)
	b.WriteString(" HTTP/1.1\r\n")
	hasLength := false
	for _, h := range headers {
		if strings.EqualFold(h.Name, "content-length") || strings.EqualFold(h.Name, "transfer-encoding") {
			hasLength = true
		}
	}
	for _, h := range headers {
		b.WriteString(h.Name)
		b.WriteString(": ")
		b.WriteString(h.Value)
		b.WriteString("\r\n")
	}
	chunked := false
	for _, h := range headers {
		if strings.EqualFold(h.Name, "transfer-encoding") && strings.Contains(strings.ToLower(h.Value), "chunked") {
			chunked = true
		}
	}
	if !hasLength && len(r.Body) > 0 {
		// mb's own, added to the header object after the client's.
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(r.Body))
	}
	hasConnection := false
	for _, h := range headers {
		hasConnection = hasConnection || strings.EqualFold(h.Name, "connection")
	}
	if !hasConnection {
		// Node's keep-alive agent says so when the client did not.
		b.WriteString("Connection: keep-alive\r\n")
	}
	if !hasLength && len(r.Body) == 0 && bodyMethod(r.Method) {
		b.WriteString("Content-Length: 0\r\n") // Node's, for a method that may have a body
	}
	b.WriteString("\r\n")
	if chunked {
		if len(r.Body) > 0 {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(r.Body), r.Body)
		}
		b.WriteString("0\r\n\r\n")
	} else {
		b.Write(r.Body)
	}
	return b.Bytes()
}

// bodyMethod: Node sends Content-Length: 0 for these when there is no body.
func bodyMethod(m string) bool {
	switch m {
	case "GET", "HEAD", "DELETE", "OPTIONS", "TRACE", "CONNECT":
		return false
	}
	return true
}

// outgoing merges the header fields as Node merges the object mb hands it:
// one field per name regardless of case, at the first one's place, with the
// last spelling and value; a name repeated with the same spelling keeps its
// values, as mb's header map holds them in an array.
func outgoing(client []message.KV, host string, inject []message.KV) []message.KV {
	if out, ok := outgoingDistinct(client, host, inject); ok {
		return out
	}
	return outgoingMerged(client, host, inject)
}

// outgoingMerged is outgoing for any fields.
func outgoingMerged(client []message.KV, host string, inject []message.KV) []message.KV {
	type field struct {
		name   string
		values []string
	}
	var fields []*field
	byExact := map[string]*field{}
	byLower := map[string]*field{}
	set := func(name string, values []string, appendSame bool) {
		if f := byExact[name]; f != nil && appendSame {
			f.values = append(f.values, values...)
			return
		}
		lower := strings.ToLower(name)
		if f := byLower[lower]; f != nil {
			f.name, f.values = name, values
			byExact[name] = f
			return
		}
		f := &field{name: name, values: values}
		fields = append(fields, f)
		byExact[name], byLower[lower] = f, f
	}
	for _, h := range client {
		set(h.Name, []string{h.Value}, true)
	}
	injectedHost := false
	for _, h := range inject {
		set(h.Name, []string{h.Value}, false)
		injectedHost = injectedHost || strings.EqualFold(h.Name, "host")
	}
	if !injectedHost {
		set("host", []string{host}, false)
	}
	var out []message.KV
	for _, f := range fields {
		for _, v := range f.values {
			out = append(out, message.KV{Name: f.name, Value: v})
		}
	}
	return out
}

// outgoingDistinct is outgoing where no two of the client's and injected
// names are alike regardless of case, so that nothing merges but the host
// (the usual request): the client's fields and the injected ones, with the
// host in place of the client's Host. ok is false otherwise, and for more
// fields than are worth comparing pairwise.
func outgoingDistinct(client []message.KV, host string, inject []message.KV) (out []message.KV, ok bool) {
	n := len(client) + len(inject)
	if n > 32 {
		return nil, false
	}
	out = make([]message.KV, 0, n+1)
	out = append(append(out, client...), inject...)
	for i := range out {
		for j := range i {
			if strings.EqualFold(out[i].Name, out[j].Name) {
				return nil, false
			}
		}
	}
	for i := range out {
		if strings.EqualFold(out[i].Name, "host") {
			if i < len(client) { // an injected Host stands
				out[i] = message.KV{Name: "host", Value: host}
			}
			return out, true
		}
	}
	return append(out, message.KV{Name: "host", Value: host}), true
}

func rawQuery(target string) string {
	if i := strings.IndexByte(target, '?'); i >= 0 {
		return target[i:]
	}
	return ""
}

// rawPath is the path of an absolute-form target.
func rawPath(target []byte) []byte {
	if i := bytes.Index(target, []byte("://")); i >= 0 {
		target = target[i+3:]
		if j := bytes.IndexByte(target, '/'); j >= 0 {
			target = target[j:]
		} else {
			return []byte("/")
		}
	}
	if i := bytes.IndexAny(target, "?#"); i >= 0 {
		target = target[:i]
	}
	return target
}
