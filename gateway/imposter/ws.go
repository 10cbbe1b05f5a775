package imposter

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/meter"
	"github.com/riftgate/riftgate/gateway/wsproto"
)

// wsServer serves a ws or wss imposter: each connection's opening
// handshake is read here, answered by the stubs that name type "open" (or
// accepted), and every message after it is one request, as each chunk is
// one on a tcp imposter. The connection loop (serveWS) is shared with http
// imposters whose stubs upgrade a request.
type wsServer struct {
	imp   *Imposter
	conns conns
}

func newWSServer(imp *Imposter) *wsServer { return &wsServer{imp: imp} }

func (s *wsServer) serve(ln net.Listener) error { return s.conns.serve(ln, s.handle) }

func (s *wsServer) shutdown(ctx context.Context) error { return s.conns.shutdown(ctx) }

// Timings of a connection's life outside the limits.
const (
	// wsHandshakeTimeout bounds reading the opening handshake.
	wsHandshakeTimeout = 10 * time.Second
	// wsCloseWait is how long a close frame sent waits for the peer's.
	wsCloseWait = 2 * time.Second
	// wsReadBuffer is the connection's read buffer: a frame header and a
	// small message are read from it without a system call.
	wsReadBuffer = 4096
	// wsKeptBuffer bounds the message buffer an idle connection keeps.
	wsKeptBuffer = 64 << 10
	// maxWSSchedules bounds the schedules (`every`) one connection runs.
	maxWSSchedules = 64
)

// wsHandshake is an opening handshake as the connection loop needs it.
type wsHandshake struct {
	key       string
	target    string // path and query, as sent
	headers   []message.KV
	protocols []string // Sec-WebSocket-Protocol offered
	addr      net.Addr
}

func (s *wsServer) handle(nc net.Conn) {
	_ = nc.SetReadDeadline(time.Now().Add(wsHandshakeTimeout))
	br := bufio.NewReaderSize(nc, wsReadBuffer)
	hr, err := wsproto.ReadRequest(br)
	if err != nil {
		if !errors.Is(err, io.EOF) && !isTimeout(err) {
			_, _ = nc.Write(wsproto.AppendRefusal(nil, http.StatusBadRequest, nil, []byte(err.Error())))
		}
		return
	}
	key, err := wsproto.CheckUpgrade(hr.Method, hr.Get, hr.Values)
	if err != nil {
		var he *wsproto.HandshakeError
		errors.As(err, &he)
		var extra []wsproto.Header
		if he.Status == http.StatusUpgradeRequired {
			extra = []wsproto.Header{{Name: "Sec-WebSocket-Version", Value: "13"}}
		}
		_, _ = nc.Write(wsproto.AppendRefusal(nil, he.Status, extra, []byte(he.Reason)))
		s.imp.meters.WS.Refused.Add(1)
		return
	}
	_ = nc.SetReadDeadline(time.Time{})
	hs := &wsHandshake{key: key, target: hr.Target, protocols: hr.Values("Sec-WebSocket-Protocol"), addr: nc.RemoteAddr()}
	for _, h := range hr.Headers {
		hs.headers = append(hs.headers, message.KV{Name: h.Name, Value: h.Value})
	}
	s.imp.serveWS(nc, br, hs, nil)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Session is one connection of a connection-oriented protocol (WebSocket)
// as a responder sees it: where it keeps what lives as long as the
// connection (a proxy's upstream), and how it sends the client a message
// of its own accord.
type Session struct {
	// ID is the connection's id, the requests' `connection`.
	ID  string
	ctx context.Context
	c   *wsConn

	mu     sync.Mutex
	vals   map[any]any
	onDone []func()
}

// Context ends when the connection does.
func (s *Session) Context() context.Context { return s.ctx }

// Value returns what SetValue kept under key, or nil.
func (s *Session) Value(key any) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vals[key]
}

// SetValue keeps v under key for the connection's life.
func (s *Session) SetValue(key, v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vals == nil {
		s.vals = map[any]any{}
	}
	s.vals[key] = v
}

// OnClose registers f to run when the connection ends (after its last
// request is answered).
func (s *Session) OnClose(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onDone = append(s.onDone, f)
}

// Send writes one message to the client now, outside any request (a
// proxy forwarding what its upstream sent unasked); binary picks the type.
func (s *Session) Send(data []byte, binary bool) error {
	if s.c.live.Load() == nil {
		return errNotOpen
	}
	if s.ctx.Err() != nil {
		return net.ErrClosed // the connection has ended
	}
	return s.c.write(wsMessage{data: data, binary: binary}.appendFrame(nil), 1)
}

// errNotOpen is a Send before the handshake is answered.
var errNotOpen = errors.New("websocket: the connection is not open yet")

// Close closes the connection with a close frame (code 0: none).
func (s *Session) Close(code int, reason string) {
	if s.c.live.Load() != nil && s.ctx.Err() == nil {
		s.c.closeWith(code, reason)
	}
}

func (s *Session) done() {
	s.mu.Lock()
	fs := s.onDone
	s.onDone = nil
	s.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// wsConn is one open WebSocket connection of an imposter.
type wsConn struct {
	imp *Imposter
	// budget is the message being answered's context (its flow budget),
	// renewed for each message without an allocation.
	budget budget
	nc     net.Conn
	conn   *wsproto.Conn
	// live is conn once the handshake is answered, for the Session's
	// callers on other goroutines.
	live atomic.Pointer[wsproto.Conn]
	sess *Session
	ctx  context.Context
	lim  WSLimits
	// closing: a close frame went out; messages after it are dropped.
	closing atomic.Bool
	// schedules are the `every` sends running, and wg their goroutines.
	schedules int
	wg        sync.WaitGroup
	// The rate limit's window: its start and the messages in it.
	window time.Time
	inWin  int
}

// connIDs gives each connection an id: a prefix random per process, so
// that ids (which can name flows) do not repeat across restarts, and a
// counter.
var connIDs struct {
	once   sync.Once
	prefix string
	n      atomic.Uint64
}

func nextConnID() string {
	connIDs.once.Do(func() {
		var b [4]byte
		_, _ = rand.Read(b[:])
		connIDs.prefix = hex.EncodeToString(b[:]) + "-"
	})
	return connIDs.prefix + strconv.FormatUint(connIDs.n.Add(1), 10)
}

// serveWS runs one connection whose handshake hs was read from nc (r
// reads on, from what was buffered past the handshake): the handshake's
// answer, then every message, until either side closes. pre, when not
// nil, is the answer an http imposter's stub already chose for the
// handshake.
func (imp *Imposter) serveWS(nc net.Conn, r io.Reader, hs *wsHandshake, pre *wsAnswer) {
	lim := imp.spec.WS
	if lim == (WSLimits{}) {
		lim = DefaultWSLimits
	}
	ctx, cancel := context.WithCancel(imp.ctx)
	defer cancel()
	w := &wsConn{imp: imp, nc: nc, ctx: ctx, lim: lim}
	w.sess = &Session{ID: nextConnID(), ctx: ctx, c: w}
	m := &imp.meters.WS
	open := m.Open.Add(1)
	defer m.Open.Add(-1)

	req := new(message.Request)
	w.fill(req, hs)
	req.MessageType = message.WSOpen

	if int(open) > lim.MaxConnections {
		// Accepted, to say why in the protocol's own words.
		_, _ = nc.Write(wsproto.AppendAccept(nil, hs.key, "", nil))
		_, _ = nc.Write(wsproto.AppendClose(nil, wsproto.CloseTryAgainLater,
			"too many connections (limits.maxConnections "+strconv.Itoa(lim.MaxConnections)+")", nil))
		m.Limited[meter.WSConnections].Add(1)
		imp.log.Warn("websocket connection over the limit; closed with 1013", "maxConnections", lim.MaxConnections)
		w.drainClose()
		return
	}
	a := pre
	if a == nil {
		var ok bool
		if a, ok = w.answerOpen(req, hs); !ok {
			return
		}
	}
	head := wsproto.AppendAccept(nil, hs.key, a.subprotocol, a.headers)
	if a.wire != nil && a.every == 0 {
		head = append(head, a.wire...)
	}
	_ = nc.SetWriteDeadline(time.Now().Add(lim.WriteTimeout))
	if _, err := nc.Write(head); err != nil {
		return
	}
	m.Opened.Add(1)
	w.conn = wsproto.NewConn(nc, r, true, lim.MaxMessageBytes)
	w.conn.WriteTimeout = lim.WriteTimeout
	w.live.Store(w.conn)
	defer func() {
		cancel()
		w.wg.Wait()
		w.sess.done()
		w.forgetFlow(req)
	}()
	if a.wire != nil && a.every == 0 {
		m.Sent.Add(uint64(len(a.msgs)))
		if a.close != nil {
			w.closeWith(a.close.code, a.close.reason)
		}
	} else if !w.deliver(a) {
		return
	}
	w.loop(req, hs)
}

// forgetFlow clears the connection's flow when each connection is its
// own flow: no later request can reach it.
func (w *wsConn) forgetFlow(req *message.Request) {
	imp := w.imp
	if !imp.spec.Flow.Connection || imp.opts.Store == nil {
		return
	}
	req.Connection = w.sess.ID
	id := imp.FlowID(req)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := imp.opts.Store.Clear(ctx, id); err != nil {
		imp.log.Debug("clearing a closed connection's flow", "flow", id, "err", err)
	}
}

// fill makes req a request of the connection, with hs's path, query and
// headers; its type and data are the message's.
func (w *wsConn) fill(req *message.Request, hs *wsHandshake) {
	path, rawQuery := wsproto.ParseTarget(hs.target)
	req.Reset()
	req.Kind = message.WS
	req.Target, req.Path = hs.target, path
	req.Query = append(req.Query, message.ParseQuery(rawQuery)...)
	req.Headers = append(req.Headers, hs.headers...)
	req.Connection = w.sess.ID
	req.Timestamp = time.Now()
	req.SetAddr(hs.addr)
}

// answerOpen answers the handshake from the stubs that name type "open":
// the answer to accept it with, or ok false when it was refused (or a
// fault or an error answered it).
func (w *wsConn) answerOpen(req *message.Request, hs *wsHandshake) (*wsAnswer, bool) {
	imp := w.imp
	start := time.Now()
	w.budget = imp.newBudget(start)
	st, r, err := imp.chooseOpen(&w.budget, req)
	matched := meter.Now()
	defer func() { imp.observe(st, err, start, matched) }()
	if err == nil && r == nil {
		return &wsAnswer{wire: []byte{}}, true
	}
	var resp *message.Response
	var a *wsAnswer
	if err == nil {
		if r.fault != "" {
			w.fault(r.fault)
			return nil, false
		}
		if resp = r.static; resp == nil || r.behaviors != nil {
			resp, err = imp.compute(&w.budget, &Call{Imposter: imp, Request: req, Stub: st, Session: w.sess}, r)
		}
	}
	if err == nil && resp != nil {
		a, err = wsAnswerFor(r, resp)
	}
	if err != nil {
		e := mberr.As(err)
		imp.log.Error("error generating response", "err", err)
		status := http.StatusInternalServerError
		if mberr.Own(e.Code) {
			status = e.Status
		}
		_, _ = w.nc.Write(wsproto.AppendRefusal(nil, status, []wsproto.Header{{Name: "Content-Type", Value: "application/json"}}, mberr.Body(e)))
		imp.meters.WS.Refused.Add(1)
		return nil, false
	}
	if a == nil { // a responder answered on the connection itself
		return nil, false
	}
	if st != nil && imp.opts.RecordMatches {
		st.recordMatch(imp, req, r, resp)
	}
	if a.status != 0 && a.status != http.StatusSwitchingProtocols {
		_, _ = w.nc.Write(wsproto.AppendRefusal(nil, a.status, a.headers, a.body))
		imp.meters.WS.Refused.Add(1)
		return nil, false
	}
	if a.subprotocol != "" && !contains(hs.protocols, a.subprotocol) {
		imp.log.Warn("websocket subprotocol the client did not offer; sent anyway", "subprotocol", a.subprotocol)
	}
	return a, true
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// loop reads the connection's messages, each a request, until it ends.
func (w *wsConn) loop(req *message.Request, hs *wsHandshake) {
	rd := w.conn.Reader()
	var text []byte // a binary message's data as base64, reused
	for {
		op, p, err := rd.Next()
		if err != nil {
			w.readError(err)
			return
		}
		switch op {
		case wsproto.OpPing:
			if !w.allow() {
				return
			}
			if err := w.conn.WriteMessage(wsproto.OpPong, p); err != nil {
				w.writeError(err)
				return
			}
			continue
		case wsproto.OpPong:
			continue
		case wsproto.OpClose:
			code, _ := wsproto.ParseClose(p)
			if code == wsproto.CloseNoStatus {
				code = 0
			}
			_ = w.conn.WriteClose(code, "")
			return
		}
		if w.closing.Load() {
			continue // after our close frame, data is dropped (RFC 6455 §1.4)
		}
		if !w.allow() {
			return
		}
		w.fill(req, hs)
		if op == wsproto.OpBinary {
			text = base64.StdEncoding.AppendEncode(text[:0], p)
			req.MessageType, req.Body = message.WSBinary, text
		} else {
			req.MessageType, req.Body = message.WSText, p
		}
		if !w.respond(req) {
			return
		}
		rd.Release(wsKeptBuffer)
		if cap(text) > wsKeptBuffer {
			text = nil
		}
	}
}

// allow counts a message against the rate limit; false means the
// connection was closed for passing it.
func (w *wsConn) allow() bool {
	now := time.Now()
	if now.Sub(w.window) >= time.Second {
		w.window, w.inWin = now, 0
	}
	w.inWin++
	if w.inWin <= w.lim.MessagesPerSecond {
		return true
	}
	w.imp.meters.WS.Limited[meter.WSRate].Add(1)
	w.imp.log.Warn("websocket client over the message rate; closed with 1008", "messagesPerSecond", w.lim.MessagesPerSecond)
	w.closeWith(wsproto.ClosePolicyViolation, "over "+strconv.Itoa(w.lim.MessagesPerSecond)+" messages per second (limits.messagesPerSecond)")
	w.drainClose()
	return false
}

// readError ends a connection whose read failed: a protocol violation is
// answered with its close code (1009 for a message over the size limit).
func (w *wsConn) readError(err error) {
	var pe *wsproto.ProtocolError
	if !errors.As(err, &pe) {
		return // the client went away, or we closed the connection
	}
	if pe.Code == wsproto.CloseTooBig {
		w.imp.meters.WS.Limited[meter.WSMessageSize].Add(1)
		w.imp.log.Warn("websocket message over the size limit; closed with 1009", "maxMessageBytes", w.lim.MaxMessageBytes)
	} else {
		w.imp.log.Info("websocket protocol error; closing", "err", err)
	}
	w.closeWith(pe.Code, pe.Reason)
	// The rest of what the client sends may be unreadable: the socket
	// is closed after a short wait, without reading for its close.
	time.Sleep(10 * time.Millisecond)
}

// writeError counts a write that failed on its deadline (a client that
// does not read) and closes the connection.
func (w *wsConn) writeError(err error) {
	if isTimeout(err) {
		w.imp.meters.WS.Limited[meter.WSWriteTimeout].Add(1)
		w.imp.log.Warn("websocket client not reading; closed", "writeTimeout", w.lim.WriteTimeout)
	}
	w.nc.Close()
}

// respond answers one message; false means the connection is done.
func (w *wsConn) respond(req *message.Request) bool {
	imp := w.imp
	start := time.Now()
	w.budget = imp.newBudget(start)
	st, r, err := imp.choose(&w.budget, req)
	defer imp.observe(st, err, start, meter.Now())
	if err != nil {
		return w.answerError(err)
	}
	if r.fault != "" {
		w.fault(r.fault)
		return false
	}
	resp, a := r.static, r.ws
	if resp == nil || r.behaviors != nil {
		if resp, err = imp.compute(&w.budget, &Call{Imposter: imp, Request: req, Stub: st, Session: w.sess}, r); err != nil {
			return w.answerError(err)
		}
		if resp == nil {
			return true
		}
		if a, err = wsAnswerFor(r, resp); err != nil {
			return w.answerError(err)
		}
	}
	ok := w.deliver(a)
	if st != nil && imp.opts.RecordMatches {
		st.recordMatch(imp, req, r, resp)
	}
	return ok
}

// answerError answers a message whose response could not be made with
// mb's error JSON as a text message, the connection left open, as a tcp
// imposter does; false means the connection is done. A flow that is
// unavailable (its owner cannot be reached: an http imposter's 503)
// closes the connection instead, with 1013 (try again later) and the
// cause as the reason: a client cannot tell an error message from a
// stub's answer, and a session whose state is out of reach is not one
// to go on with.
func (w *wsConn) answerError(err error) bool {
	w.imp.log.Error("error generating response", "err", err)
	e := mberr.As(err)
	if e.Code == mberr.FlowUnavailable {
		w.closeWith(wsproto.CloseTryAgainLater, wsproto.TruncateReason(e.Code+": "+e.Message))
		return true
	}
	return w.write(wsMessage{data: mberr.Body(e)}.appendFrame(nil), 1) == nil
}

// fault acts out a fault on the connection: a reset, or bytes that are no
// frame, then the end.
func (w *wsConn) fault(kind string) {
	if kind == "RANDOM_DATA_THEN_CLOSE" {
		_, _ = w.nc.Write(randomThenClose)
		return
	}
	resetOnClose(w.nc)
}

// deliver sends an answer: its messages now (waiting where they say), or
// on its schedule; then its close. false means the connection is done.
func (w *wsConn) deliver(a *wsAnswer) bool {
	if a.every > 0 {
		w.schedule(a)
		return true
	}
	if !w.send(a) {
		return false
	}
	if a.close != nil {
		w.closeWith(a.close.code, a.close.reason)
	}
	return true
}

// send writes an answer's messages once: rendered whole, or one by one
// after their waits.
func (w *wsConn) send(a *wsAnswer) bool {
	if a.wire != nil {
		if len(a.wire) == 0 {
			return true
		}
		return w.write(a.wire, len(a.msgs)) == nil
	}
	for _, m := range a.msgs {
		if m.wait > 0 && !sleep(w.ctx, m.wait) {
			return false
		}
		if w.write(m.appendFrame(nil), 1) != nil {
			return false
		}
	}
	return true
}

// write sends frames (n messages) whole, unless a close frame went out.
func (w *wsConn) write(frames []byte, n int) error {
	if w.closing.Load() {
		return nil
	}
	err := w.conn.WriteFrames(frames)
	if err != nil {
		if !errors.Is(err, net.ErrClosed) {
			w.writeError(err)
		}
		return err
	}
	w.imp.meters.WS.Sent.Add(uint64(n))
	return nil
}

// schedule sends an answer's messages at once and then every a.every,
// a.times in all (for ever when 0), then its close; at most
// maxWSSchedules run on one connection.
func (w *wsConn) schedule(a *wsAnswer) {
	if w.schedules >= maxWSSchedules {
		w.imp.log.Warn("websocket connection has too many schedules; one more is dropped", "max", maxWSSchedules)
		return
	}
	w.schedules++
	w.wg.Go(func() {
		t := time.NewTicker(a.every)
		defer t.Stop()
		for i := 0; a.times == 0 || i < a.times; i++ {
			if i > 0 {
				select {
				case <-w.ctx.Done():
					return
				case <-t.C:
				}
			}
			if w.closing.Load() || !w.send(a) {
				return
			}
		}
		if a.close != nil {
			w.closeWith(a.close.code, a.close.reason)
		}
	})
}

// closeWith sends a close frame, once, and gives the client wsCloseWait
// to answer it before the read ends.
func (w *wsConn) closeWith(code int, reason string) {
	if w.conn == nil || w.closing.Swap(true) {
		return
	}
	_ = w.conn.WriteClose(code, reason)
	_ = w.nc.SetReadDeadline(time.Now().Add(wsCloseWait))
}

// drainClose waits briefly for the client's close frame after ours,
// reading nothing else, so that the close handshake completes for a
// client that answers it.
func (w *wsConn) drainClose() {
	_ = w.nc.SetReadDeadline(time.Now().Add(wsCloseWait))
	buf := make([]byte, 512)
	for {
		if _, err := w.nc.Read(buf); err != nil {
			return
		}
	}
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
