package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
)

// tcpUpstream proxies a tcp imposter's requests: the request's data is
// written on a new connection to `to` (tcp://host:port), and the answer is
// what the upstream sends until the imposter's endOfRequestResolver accepts
// it (without one, its first read), as mb's tcpProxy does.
type tcpUpstream struct {
	to        string
	addr      string // "" when `to` is not a tcp URL: every call fails, as in mb
	binary    bool
	keepalive bool
	timeout   time.Duration
	imp       *imposter.Imposter
}

// maxTCPAnswer bounds what an upstream's answer may grow to while the
// endOfRequestResolver waits for more.
const maxTCPAnswer = 16 << 20

func (f *Factory) newTCP(s spec, raw json.RawMessage, imp *imposter.Imposter) (imposter.Responder, error) {
	if err := checkTo(s.To); err != nil {
		return nil, err
	}
	u, err := url.Parse(s.To)
	if err != nil || u.Scheme == "" {
		// mb's dry run calls new URL(to), which throws.
		return nil, mberr.New(mberr.BadData, "Invalid URL").WithSource(raw)
	}
	p, err := f.responder(s, raw)
	if err != nil {
		return nil, err
	}
	up := &tcpUpstream{to: s.To, binary: imp.Spec().Mode == "binary", keepalive: s.Keepalive, timeout: f.timeout(), imp: imp}
	if u.Scheme == "tcp" {
		up.addr = u.Host
	}
	p.up = up
	return p, nil
}

func (t *tcpUpstream) call(ctx context.Context, c *imposter.Call) (json.RawMessage, error) {
	r := c.Request
	if t.addr == "" {
		return nil, mberr.New(mberr.InvalidProxy, "Unable to proxy to any protocol other than tcp").WithSource(t.to)
	}
	start := time.Now()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", t.addr)
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) {
			return nil, mberr.New(mberr.InvalidProxy, "Cannot resolve "+strconv.Quote(t.to))
		}
		return nil, mberr.New(mberr.InvalidProxy, "Unable to connect to "+strconv.Quote(t.to))
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer func() {
		if stop() && t.keepalive {
			// mb leaves the connection to the upstream to close; it is
			// drained until then, and closed when the imposter stops.
			go func() {
				defer context.AfterFunc(parent, func() { conn.Close() })()
				_, _ = io.Copy(io.Discard, conn)
				conn.Close()
			}()
			return
		}
		conn.Close()
	}()
	if _, err := conn.Write(message.DecodeData(string(r.Body), t.binary)); err != nil {
		return nil, mberr.New(mberr.InvalidProxy, "Proxy "+t.to+" transmission error: "+err.Error())
	}
	eor := t.imp.EndOfRequest()
	var answer []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := conn.Read(buf)
		answer = append(answer, buf[:n]...)
		if n > 0 && (eor == nil || eor(answer)) {
			break
		}
		if len(answer) > maxTCPAnswer {
			return nil, mberr.New(mberr.InvalidProxy, fmt.Sprintf("Proxy %s answered more than %d bytes without ending", t.to, maxTCPAnswer))
		}
		if errors.Is(err, io.EOF) {
			// mb would wait forever for an answer the upstream will never
			// finish; what it sent is the answer.
			break
		}
		if err != nil {
			return nil, mberr.New(mberr.InvalidProxy, "Proxy "+t.to+" transmission error: "+err.Error())
		}
	}
	return tcpIs(message.EncodeData(answer, t.binary), time.Since(start).Milliseconds()), nil
}

// tcpIs is the `is` mb records for a tcp answer.
func tcpIs(data string, elapsedMs int64) json.RawMessage {
	b := []byte(`{"data":`)
	b = message.AppendJSONString(b, data)
	b = append(b, `,"_proxyResponseTime":`...)
	b = strconv.AppendInt(b, elapsedMs, 10)
	return append(b, '}')
}

func (t *tcpUpstream) response(is json.RawMessage) (*message.Response, error) {
	var f struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(is, &f); err != nil {
		return nil, err
	}
	return &message.Response{Body: message.DecodeData(f.Data, t.binary), Binary: t.binary}, nil
}

func (t *tcpUpstream) isJSON(r *message.Response, orig json.RawMessage) json.RawMessage {
	again, err := t.response(orig)
	if err == nil && bytes.Equal(again.Body, r.Body) {
		return orig
	}
	var f struct {
		T int64 `json:"_proxyResponseTime"`
	}
	_ = json.Unmarshal(orig, &f)
	return tcpIs(message.EncodeData(r.Body, t.binary), f.T)
}
