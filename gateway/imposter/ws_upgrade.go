package imposter

import (
	"github.com/riftgate/riftgate/gateway/config"
	"net"
	"strings"
	"sync"

	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/meter"
	"github.com/riftgate/riftgate/gateway/wsproto"
	"github.com/valyala/fasthttp"
)

// An http imposter's stub that answers `is` with statusCode 101 takes the
// connection over as a WebSocket when the request is an opening
// handshake: its `is` is the handshake's answer as a ws response object
// (headers, subprotocol, a greeting), and the connection's messages are
// then matched against the imposter's stubs, compiled for the ws protocol
// (so that `data`, `type` and `connection` are fields, and responses are
// ws response objects). That compilation, the upgradeTarget, is made at
// the first upgrade and again after the stubs change; an imposter that
// never upgrades pays nothing for it, and its static path only tests a
// response's upgrade flag.

// upgradeTarget is the ws imposter an http imposter's upgraded
// connections are served by, compiled from the stub table src.
type upgradeTarget struct {
	src *table
	imp *Imposter
}

// upgradeMu serializes building upgrade targets (rare: once per stub
// change of an imposter that upgrades).
var upgradeMu sync.Mutex

// upgradeWS answers an upgrade stub: a request that is no handshake gets
// the reason, one that is has its connection hijacked and served as a
// WebSocket after the 101.
func (imp *Imposter) upgradeWS(ctx *fasthttp.RequestCtx, req *message.Request, r *response) {
	header := func(name string) string { v, _ := req.Header(name); return v }
	values := func(name string) []string {
		var out []string
		for _, h := range req.Headers {
			if strings.EqualFold(h.Name, name) {
				for _, v := range strings.Split(h.Value, ",") {
					if v = strings.TrimSpace(v); v != "" {
						out = append(out, v)
					}
				}
			}
		}
		return out
	}
	key, err := wsproto.CheckUpgrade(req.Method, header, values)
	if err != nil {
		he := err.(*wsproto.HandshakeError)
		ctx.Response.Reset()
		ctx.SetStatusCode(he.Status)
		if he.Status == 426 {
			ctx.Response.Header.Set("Sec-WebSocket-Version", "13")
		}
		ctx.SetBodyString(he.Reason)
		imp.meters.WS.Refused.Add(1)
		return
	}
	target, err := imp.upgradeTarget()
	if err != nil {
		imp.writeError(ctx, err)
		return
	}
	hs := &wsHandshake{key: key, target: strings.Clone(req.Target), protocols: values("Sec-WebSocket-Protocol"), addr: ctx.RemoteAddr()}
	for _, h := range req.Headers {
		hs.headers = append(hs.headers, message.KV{Name: strings.Clone(h.Name), Value: strings.Clone(h.Value)})
	}
	a := r.ws
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		raw := c
		if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
			raw = u.UnsafeConn() // c's Close does nothing; raw's ends the connection
		}
		imp.upgraded.adopt(raw, func() { target.imp.serveWS(raw, c, hs, a) })
	})
}

// upgradeTarget returns the ws imposter compiled from the current stubs,
// making it if the stubs changed since the last one. A stub that does not
// compile for ws (an http-only response) is left out, and said so.
func (imp *Imposter) upgradeTarget() (*upgradeTarget, error) {
	t := imp.table.Load()
	if cur := imp.ws.Load(); cur != nil && cur.src == t {
		return cur, nil
	}
	upgradeMu.Lock()
	defer upgradeMu.Unlock()
	if cur := imp.ws.Load(); cur != nil && cur.src == t {
		return cur, nil
	}
	opts := imp.opts
	opts.Meters = func(string) *meter.Imposter { return imp.meters }
	opts.RecordAll = false
	spec := &Spec{Protocol: "ws", Port: imp.spec.Port, Host: imp.spec.Host, Name: imp.spec.Name, Flow: imp.spec.Flow, WS: DefaultWSLimits}
	cfg := imp.cfg.Load()
	w, err := New(spec, opts, cfg)
	if err != nil {
		return nil, mberr.New(mberr.CannotStartServer, "websocket upgrade: "+err.Error())
	}
	w.parent = imp
	var stubs []*Stub
	var keys []config.Key
	for _, st := range t.stubs {
		if st.upgrades() {
			continue // the handshake's own stubs answer no message
		}
		c, err := w.CompileStub(st.Spec, cfg)
		if err != nil {
			imp.log.Warn("a stub does not compile for WebSocket messages; upgraded connections skip it", "err", err)
			continue
		}
		stubs = append(stubs, c)
		keys = append(keys, c.Spec.Key)
	}
	w.SetStubs(stubs, keys)
	target := &upgradeTarget{src: t, imp: w}
	imp.ws.Store(target)
	return target, nil
}

// upgrades reports whether a stub has a response that upgrades.
func (s *Stub) upgrades() bool {
	for _, r := range s.responses().responses {
		if r.upgrade {
			return true
		}
	}
	return false
}
