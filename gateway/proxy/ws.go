package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/wsproto"
)

// wsUpstream proxies a WebSocket imposter's messages: each client
// connection gets its own connection to `to` (ws:// or wss://, with the
// client's path, query and headers), opened at its first proxied message
// and closed with it.
//
// proxyTransparent forwards both ways as messages come: what the upstream
// sends goes to the client at once. proxyOnce and proxyAlways record
// exchanges: the answer to a message is what the upstream sends after it
// until it has been quiet for answerQuietMs (after waiting up to
// answerWaitMs for the first message), recorded as a response object; what
// it sends outside an exchange goes to the client unrecorded.
type wsUpstream struct {
	to          string
	base        *url.URL // nil when `to` is no ws or wss URL
	transparent bool
	wait, quiet time.Duration
	timeout     time.Duration
	inject      []message.KV
}

// Defaults of a ws proxy's answer timers.
const (
	defaultAnswerWait  = time.Second
	defaultAnswerQuiet = 100 * time.Millisecond
	// wsUpBuffer bounds the upstream messages one exchange collects.
	wsUpBuffer = 1024
)

// streamUpstream parses the `to` of a proxy on a message-stream imposter
// (ws, grpc): a URL with a scheme and no path, as http's must be.
func streamUpstream(s spec, raw json.RawMessage) (*url.URL, error) {
	u, err := url.Parse(s.To)
	if err != nil || u.Scheme == "" {
		return nil, mberr.New(mberr.BadData, "Invalid URL").WithSource(raw)
	}
	if u.Path != "" && u.Path != "/" {
		return nil, mberr.New(mberr.BadData, fmt.Sprintf("proxy.to must not contain a path '%s'", u.Path))
	}
	return u, nil
}

func (f *Factory) newWS(s spec, raw json.RawMessage, imp *imposter.Imposter) (imposter.Responder, error) {
	u, err := streamUpstream(s, raw)
	if err != nil {
		return nil, err
	}
	p, err := f.responder(s, raw)
	if err != nil {
		return nil, err
	}
	up := &wsUpstream{to: s.To, transparent: s.Mode == "proxyTransparent", timeout: f.timeout(),
		wait: defaultAnswerWait, quiet: defaultAnswerQuiet}
	if s.AnswerWaitMs > 0 {
		up.wait = time.Duration(s.AnswerWaitMs) * time.Millisecond
	}
	if s.AnswerQuietMs > 0 {
		up.quiet = time.Duration(s.AnswerQuietMs) * time.Millisecond
	}
	up.inject, _ = message.ReadMultiMap(s.InjectHeaders)
	if (u.Scheme == "ws" || u.Scheme == "wss") && u.Host != "" {
		up.base = u
	}
	p.up = up
	return p, nil
}

// wsUpKey keys a client connection's upstream in its Session.
type wsUpKey struct{ to string }

// wsUp is one client connection's upstream connection.
type wsUp struct {
	conn *wsproto.Conn
	mu   sync.Mutex
	// pending is the exchange collecting answers, nil between exchanges.
	pending chan upMsg
	done    chan struct{} // the reader returned
}

// upMsg is one thing the upstream sent: a message, or its close.
type upMsg struct {
	data   []byte
	binary bool
	closed bool
	code   int
	reason string
}

// skipHeaders are the handshake's fields the upstream's own handshake sets.
var skipHeaders = map[string]bool{"host": true, "upgrade": true, "connection": true, "sec-websocket-key": true,
	"sec-websocket-version": true, "sec-websocket-extensions": true, "sec-websocket-accept": true,
	"content-length": true, "transfer-encoding": true}

// upstream returns the session's upstream, dialing it if it has none or
// the last one ended, with ch (nil for none) as its pending exchange: set
// before a new upstream's reader starts, so that what the upstream sends
// when it opens belongs to the exchange that opened it.
func (w *wsUpstream) upstream(ctx context.Context, c *imposter.Call, ch chan upMsg) (*wsUp, error) {
	sess := c.Session
	key := wsUpKey{w.to}
	if up, ok := sess.Value(key).(*wsUp); ok {
		select {
		case <-up.done:
		default:
			up.mu.Lock()
			up.pending = ch
			up.mu.Unlock()
			return up, nil
		}
	}
	r := c.Request
	u := *w.base
	u.Path, u.RawQuery = "", ""
	target := u.String() + r.Target
	var hs []wsproto.Header
	for _, h := range r.Headers {
		if !skipHeaders[strings.ToLower(h.Name)] {
			hs = append(hs, wsproto.Header{Name: h.Name, Value: h.Value})
		}
	}
	for _, h := range w.inject {
		hs = append(hs, wsproto.Header{Name: h.Name, Value: h.Value})
	}
	dctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	conn, _, err := wsproto.Dial(dctx, target, wsproto.DialOptions{Header: hs, TLS: insecureTLS(w.base.Hostname())})
	if err != nil {
		if errors.Is(err, wsproto.ErrRefused) {
			return nil, mberr.New(mberr.InvalidProxy, "Proxy "+w.to+" refused the handshake: "+err.Error())
		}
		return nil, mberr.New(mberr.InvalidProxy, "Unable to connect to "+strconv.Quote(w.to))
	}
	up := &wsUp{conn: conn, done: make(chan struct{}), pending: ch}
	go up.read(sess)
	sess.SetValue(key, up)
	sess.OnClose(func() {
		// The reader takes the upstream's answering close (or gives up
		// at the deadline); only then is the connection closed.
		_ = conn.WriteClose(wsproto.CloseGoingAway, "")
		_ = conn.NetConn().SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		<-up.done
		conn.Close()
	})
	return up, nil
}

// read takes the upstream's messages: to the exchange waiting for them,
// else straight to the client; the upstream's close closes the client
// unless an exchange records it.
func (up *wsUp) read(sess *imposter.Session) {
	defer close(up.done)
	for {
		op, p, err := up.conn.ReadMessage()
		m := upMsg{data: bytes.Clone(p), binary: op == wsproto.OpBinary}
		if err != nil {
			m = upMsg{closed: true, code: wsproto.CloseAbnormal}
			var ce *wsproto.CloseError
			if errors.As(err, &ce) {
				m.code, m.reason = ce.Code, ce.Reason
			}
		}
		up.mu.Lock()
		taken := false
		if up.pending != nil {
			select {
			case up.pending <- m:
				taken = true
			default:
			}
		}
		up.mu.Unlock()
		if !taken {
			toClient(sess, m)
		}
		if err != nil {
			return
		}
	}
}

// toClient hands the client what the upstream sent outside an exchange.
func toClient(sess *imposter.Session, m upMsg) {
	if !m.closed {
		_ = sess.Send(m.data, m.binary)
		return
	}
	code := m.code
	if code == wsproto.CloseNoStatus || code == wsproto.CloseAbnormal {
		code = wsproto.CloseGoingAway
	}
	sess.Close(code, m.reason)
}

func (w *wsUpstream) call(ctx context.Context, c *imposter.Call) (json.RawMessage, error) {
	if w.base == nil {
		return nil, mberr.New(mberr.InvalidProxy, "Unable to proxy to any protocol other than ws or wss").WithSource(w.to)
	}
	r := c.Request
	if c.Session == nil {
		return nil, mberr.New(mberr.InvalidProxy, "a ws proxy needs a connection")
	}
	start := time.Now()
	var ch chan upMsg
	if !w.transparent && r.MessageType != message.WSOpen {
		ch = make(chan upMsg, wsUpBuffer)
	}
	up, err := w.upstream(ctx, c, ch)
	if err != nil {
		return nil, err
	}
	if r.MessageType == message.WSOpen {
		// The handshake opened the upstream connection; nothing to send.
		return json.RawMessage(`{"messages":[]}`), nil
	}
	op, data := wsproto.OpText, r.Body
	if r.MessageType == message.WSBinary {
		op, data = wsproto.OpBinary, message.DecodeBase64(string(r.Body))
	}
	if w.transparent {
		if err := up.conn.WriteMessage(op, data); err != nil {
			return nil, mberr.New(mberr.InvalidProxy, "Proxy "+w.to+" transmission error: "+err.Error())
		}
		return json.RawMessage(`{"messages":[]}`), nil
	}
	var got []upMsg
	last := start
	err = up.conn.WriteMessage(op, data)
	if err == nil {
		got, last = w.collect(ctx, ch, start)
	}
	up.mu.Lock()
	up.pending = nil
	up.mu.Unlock()
	for {
		select {
		case m := <-ch:
			toClient(c.Session, m)
			continue
		default:
		}
		break
	}
	if err != nil {
		return nil, mberr.New(mberr.InvalidProxy, "Proxy "+w.to+" transmission error: "+err.Error())
	}
	return wsIs(got, elapsedMs(last.Sub(start))), nil
}

// collect gathers an exchange's answer: up to w.wait for the first
// message, then until the upstream is quiet for w.quiet, or it closed.
func (w *wsUpstream) collect(ctx context.Context, ch <-chan upMsg, start time.Time) ([]upMsg, time.Time) {
	var got []upMsg
	last := start
	t := time.NewTimer(w.wait)
	defer t.Stop()
	for {
		select {
		case m := <-ch:
			got, last = append(got, m), time.Now()
			if m.closed {
				return got, last
			}
			t.Reset(w.quiet)
		case <-t.C:
			return got, last
		case <-ctx.Done():
			return got, last
		}
	}
}

// wsIs is the response object recorded for an answer: the first message
// as data, the rest as messages, the upstream's close.
func wsIs(got []upMsg, elapsedMs int64) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	msg := func(m upMsg, obj bool) {
		text := string(m.data)
		if m.binary {
			text = base64.StdEncoding.EncodeToString(m.data)
		}
		obj = obj && m.binary // a text message in the list is its string
		if obj {
			b.WriteString(`{"data":`)
		}
		b.Write(message.AppendJSONString(nil, text))
		if m.binary {
			b.WriteString(`,"type":"binary"`)
		}
		if obj {
			b.WriteByte('}')
		}
	}
	var msgs []upMsg
	var closed *upMsg
	for i := range got {
		if got[i].closed {
			closed = &got[i]
			continue
		}
		msgs = append(msgs, got[i])
	}
	if len(msgs) > 0 {
		b.WriteString(`"data":`)
		msg(msgs[0], false)
		msgs = msgs[1:]
		b.WriteByte(',')
	}
	if len(msgs) > 0 || b.Len() == 1 {
		b.WriteString(`"messages":[`)
		for i, m := range msgs {
			if i > 0 {
				b.WriteByte(',')
			}
			msg(m, true)
		}
		b.WriteString("],")
	}
	if closed != nil {
		code := closed.code
		if code == wsproto.CloseNoStatus || code == wsproto.CloseAbnormal {
			code = wsproto.CloseGoingAway
		}
		fmt.Fprintf(&b, `"close":{"code":%d,"reason":`, code)
		b.Write(message.AppendJSONString(nil, closed.reason))
		b.WriteString("},")
	}
	fmt.Fprintf(&b, `"_proxyResponseTime":%d}`, elapsedMs)
	return b.Bytes()
}

// insecureTLS is a wss upstream's TLS: unverified, as mb's proxies are.
func insecureTLS(host string) *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, ServerName: host} //nolint:gosec // as mb
}

func (w *wsUpstream) response(is json.RawMessage) (*message.Response, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, is); err != nil {
		return nil, err
	}
	return &message.Response{Body: b.Bytes()}, nil
}

func (w *wsUpstream) isJSON(r *message.Response, orig json.RawMessage) json.RawMessage {
	again, err := w.response(orig)
	if err == nil && bytes.Equal(again.Body, r.Body) {
		return orig
	}
	return r.Body // behaviors rewrote it, their object is what is recorded
}
