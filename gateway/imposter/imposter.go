// Package imposter is one Mountebank imposter: its definition (Spec), its
// compiled, indexed stub table, its listener, and the request path from a
// fasthttp handler to the bytes written back.
package imposter

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/intern"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/meter"
	"github.com/riftgate/riftgate/gateway/reqlog"
	"github.com/valyala/fasthttp"
)

// Options are the process-wide settings an imposter needs.
type Options struct {
	Logger   *slog.Logger
	Compiler *Compiler
	// Listen binds the imposter's port; the gateway wraps it to enforce
	// --localOnly and --ipWhitelist at accept time.
	Listen func(network, addr string) (net.Listener, error)
	// RecordAll is mb's --mock: every imposter records its requests.
	RecordAll bool
	// RecordMatches is mb's --debug: every stub keeps the requests it
	// matched and what it answered, shown as "matches" in its JSON.
	RecordMatches bool
	// Matches, when set, keeps what stubs matched under RecordMatches
	// beyond this process (a single node's --datadir keeps them in mb's
	// matches/ folders).
	Matches MatchLog
	// DefaultHost is mb's --host, used when the imposter names none.
	DefaultHost string
	// Store keeps flows (scenario states among them); without it a request
	// has no flow.
	Store flow.Store
	// Cycles, when set, keeps the positions of response cycles (a cluster
	// keeps each in flow state, so that a stub cycles once across every
	// node); nil counts them on each stub, in this process.
	Cycles Cycles
	// CustomCallbackTemplate is mb's callbackURLTemplate for custom
	// protocols (".../imposters/:port/_requests"), CustomLogLevel the log
	// level their processes are told.
	CustomCallbackTemplate string
	CustomLogLevel         string
	// MaxBodyBytes caps request bodies on the imposter's listener.
	MaxBodyBytes int
	// Budget bounds the time a request spends on its flows, counted from
	// its arrival: every flow operation, lock wait and retry it makes
	// shares it (DefaultBudget when zero).
	Budget time.Duration
	// Meters returns the meters for an imposter's metric label (mb's log
	// scope, "[http:4545 name] "); the imposter keeps private ones when it
	// is nil.
	Meters func(label string) *meter.Imposter
	// Requests keeps the requests imposters record (gateway/reqlog); an
	// imposter that records without it keeps them in a temporary folder
	// of its own.
	Requests *reqlog.Manager
	// MaxRecorded caps the requests each imposter keeps, oldest dropped
	// first (--maxRecordedRequests; 0: no cap); an imposter's own
	// _rift.maxRecordedRequests takes precedence.
	MaxRecorded int64
}

// Imposter is a running imposter.
type Imposter struct {
	spec  *Spec
	opts  Options
	log   *slog.Logger
	table atomic.Pointer[table]
	dflt  *response // the response when no stub matches
	// endOfRequest is a tcp imposter's endOfRequestResolver, or nil.
	endOfRequest EndOfRequest
	// flowScope prefixes every flow id of the imposter, and portFlow is the
	// id of a request without a flow header: made once, not per request.
	flowScope, portFlow string
	// flowIDs keeps the scoped ids of the flows seen last: a load test's
	// virtual users send theirs again and again.
	flowIDs *intern.Cache

	ignoredMu sync.Mutex
	ignored   map[string]bool // fields already warned about

	// reqs keeps the recorded requests (nil when the imposter records
	// none), in ownReqs when Options.Requests is nil.
	reqs       *reqlog.Log
	ownReqs    *reqlog.Manager
	numReqs    atomic.Int64 // numberOfRequests: reset with the saved requests
	meters     *meter.Imposter
	recordReqs bool

	// cfg is the configuration the stubs were last compiled against, and
	// ws the WebSocket imposter an upgraded connection is served by (an
	// http imposter's; ws_upgrade.go).
	cfg      atomic.Pointer[config.State]
	ws       atomic.Pointer[upgradeTarget]
	upgraded conns
	// parent is, for the ws imposter an http imposter upgrades to, that
	// imposter: it counts and records the requests.
	parent *Imposter

	// grpcTLS is a grpc imposter's TLS configuration, nil for plaintext.
	grpcTLS *tls.Config

	ln   net.Listener
	srv  server // the protocol's: fasthttp for http(s), tcp.go, smtp.go
	done chan struct{}
	// ctx lives as long as the listener: computed responses run under it,
	// never under fasthttp's RequestCtx, which is reused after the handler.
	ctx    context.Context
	cancel context.CancelFunc
}

// New compiles spec, taking the modules its stubs name from cfg. Nothing is
// bound until Serve, and a spec that does not compile leaves nothing
// behind.
func New(spec *Spec, opts Options, cfg *config.State) (*Imposter, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	// The imposter keeps its spec but not the stubs': each compiled stub
	// holds its own, and a list of them all would keep every parse of a
	// recording alive.
	kept := *spec
	kept.Stubs = nil
	imp := &Imposter{spec: &kept, opts: opts, recordReqs: spec.RecordRequests || opts.RecordAll}
	imp.log = opts.Logger.With("imposter", imp.scope())
	imp.flowScope = flow.Scope(spec.Port, spec.Flow.Fleet)
	imp.portFlow = imp.flowScope + strconv.Itoa(spec.Port)
	if spec.Flow.Header != "" {
		imp.flowIDs = intern.New(keptFlowIDs, maxKeptFlowID)
	}
	if imp.meters = meter.NewImposter(); opts.Meters != nil {
		imp.meters = opts.Meters(imp.MetricLabel())
	}
	imp.warnIgnored(imp.log, imp.wsIgnored(spec.Ignored))
	dflt, isJSON, err := imp.buildIs(nil, spec.DefaultResponse)
	if err != nil {
		return nil, mberr.New(mberr.BadData, "defaultResponse: "+err.Error())
	}
	imp.dflt = &response{spec: &ResponseSpec{Kind: "is"}, static: dflt, jsonBody: isJSON, header: RenderHeader(dflt)}
	if spec.IsWS() {
		if imp.dflt.ws, err = wsAnswerOf(dflt.Body); err != nil {
			return nil, mberr.New(mberr.BadData, "defaultResponse: "+err.Error())
		}
	}
	if spec.IsGRPC() {
		if imp.dflt.grpc, err = grpcAnswerOf(spec.GRPC, dflt.Body); err != nil {
			return nil, mberr.New(mberr.BadData, "defaultResponse: "+err.Error())
		}
	}
	// As mb does, every stub's refusals are answered together.
	var errs mberr.List
	stubs := make([]*Stub, 0, len(spec.Stubs))
	for _, ss := range spec.Stubs {
		st, err := imp.CompileStub(ss, cfg)
		if err != nil {
			errs = append(errs, mberr.All(err)...)
			continue
		}
		stubs = append(stubs, st)
	}
	if c := opts.Compiler; c != nil {
		if err := endOfRequestResolverProblem(spec, c.AllowInjection); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	keys := make([]config.Key, len(stubs))
	for i, st := range stubs {
		keys[i] = st.Spec.Key
	}
	imp.table.Store(newTable(stubs, keys))
	imp.cfg.Store(cfg)
	if err := imp.compileEndOfRequest(); err != nil {
		return nil, err
	}
	if imp.recordReqs {
		if err := imp.openRequests(); err != nil {
			return nil, mberr.New(mberr.CannotStartServer, "cannot record requests: "+err.Error())
		}
	}
	imp.ctx, imp.cancel = context.WithCancel(context.Background())
	return imp, nil
}

// openRequests opens the log the imposter records into: under its
// RecordKey, which a restart on --datadir finds again.
func (imp *Imposter) openRequests() error {
	m := imp.opts.Requests
	if m == nil {
		dir, err := os.MkdirTemp("", "riftgate-requests-")
		if err != nil {
			return fmt.Errorf("recorded requests: %w", err)
		}
		if m, err = reqlog.Open(reqlog.Options{Dir: dir, Logger: imp.log}); err != nil {
			os.RemoveAll(dir)
			return err
		}
		imp.ownReqs = m
	}
	name := imp.spec.RecordKey
	if name == "" {
		name = strconv.Itoa(imp.spec.Port)
	}
	max := imp.opts.MaxRecorded
	if imp.spec.MaxRecorded != nil {
		max = *imp.spec.MaxRecorded
	}
	l, err := m.Open(name, max)
	for i := 2; errors.Is(err, reqlog.ErrOpen); i++ {
		// Another imposter of the same port and definition still records
		// (one that replaces it is being built): this one starts apart.
		l, err = m.Open(name+"~"+strconv.Itoa(i), max)
	}
	if err != nil {
		if imp.ownReqs != nil {
			_ = imp.ownReqs.Close()
		}
		return err
	}
	imp.reqs = l
	return nil
}

// CompileStub compiles one stub for this imposter, without adding it,
// taking the modules it names from cfg.
func (imp *Imposter) CompileStub(ss *StubSpec, cfg *config.State) (*Stub, error) {
	c := imp.opts.Compiler
	if c == nil {
		c = &Compiler{}
	}
	st, err := c.compileStub(Build{Imposter: imp, Stub: ss, Config: cfg})
	if cfg != nil {
		imp.cfg.Store(cfg)
	}
	if err == nil {
		imp.warnIgnored(imp.logger(), imp.wsIgnored(ss.Ignored))
	}
	return st, err
}

// SetStubs makes stubs the imposter's stub list, keys their places in the
// configuration's order (which AddStubs places stubs by). Requests already
// matching finish against the list they loaded.
func (imp *Imposter) SetStubs(stubs []*Stub, keys []config.Key) {
	imp.table.Store(newTable(stubs, keys))
}

// Spec returns the imposter's definition. Its Stubs reflect creation time;
// Stubs returns the current ones.
func (imp *Imposter) Spec() *Spec { return imp.spec }

// Port returns the imposter's port.
func (imp *Imposter) Port() int { return imp.spec.Port }

// Listen binds the port spec asks for on its host (or the default host),
// through opts.Listen, without serving it: port 0 binds a free port.
func Listen(spec *Spec, opts Options) (net.Listener, error) {
	host := spec.Host
	if host == "" {
		host = opts.DefaultHost
	}
	if spec.Custom != nil {
		return listenCustom(spec, opts, host)
	}
	listen := opts.Listen
	if listen == nil {
		listen = net.Listen
	}
	// An IPv4 address binds an IPv4 socket, as Node binds it: Go would make
	// 0.0.0.0 dual-stack, and answer IPv6 clients mb refuses.
	network := "tcp"
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is4() {
		network = "tcp4"
	}
	ln, err := listen(network, net.JoinHostPort(host, strconv.Itoa(spec.Port)))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, mberr.AddressInUse(host, spec.Port)
		}
		return nil, mberr.New(mberr.CannotStartServer, err.Error())
	}
	return ln, nil
}

// Serve serves the imposter on ln, a listener Listen bound for its port,
// until Stop. The imposter owns ln from here, even on error.
func (imp *Imposter) Serve(ln net.Listener) error {
	if imp.spec.IsHTTP() {
		ln = holdListener{ln}
	}
	if imp.spec.Protocol == "https" || imp.spec.Protocol == "wss" {
		cfg, err := imp.tlsConfig()
		if err != nil {
			ln.Close()
			return err
		}
		ln = tls.NewListener(ln, cfg)
	}
	if imp.spec.IsGRPC() {
		// grpc-go's credentials do the handshake: they offer h2 by ALPN
		// and tell the handler who the client is.
		cfg, err := imp.grpcTLSConfig()
		if err != nil {
			ln.Close()
			return err
		}
		imp.grpcTLS = cfg
	}
	imp.ln = ln
	if imp.spec.Custom != nil {
		srv, err := imp.customServerFor(ln)
		if err != nil {
			ln.Close()
			return err
		}
		imp.srv = srv
	} else {
		imp.srv = imp.newServer()
	}
	imp.done = make(chan struct{})
	go func() {
		defer close(imp.done)
		_ = imp.srv.serve(ln)
	}()
	imp.log.Info("Open for business...")
	return nil
}

// Stop ends what the imposter still computes, closes the listener and
// every open connection, and waits for the server to finish. An imposter
// that never served only releases its context.
func (imp *Imposter) Stop(ctx context.Context) error {
	imp.cancel()
	if t := imp.ws.Load(); t != nil {
		t.imp.cancel()
	}
	if imp.srv == nil {
		return nil
	}
	// A server closes only the listeners its serve loop has taken (for
	// fasthttp, those Serve has registered); closing ours first ends a
	// loop that has not got that far, which would otherwise accept
	// forever.
	imp.ln.Close()
	err := imp.srv.shutdown(ctx)
	if errors.Is(err, net.ErrClosed) {
		err = nil // the listener closed above: nothing went wrong
	}
	<-imp.done
	imp.log.Info("Ciao for now")
	return err
}

// MetricLabel is the imposter's label in mb's metrics: its log scope in
// brackets, with mb's trailing space.
func (imp *Imposter) MetricLabel() string { return "[" + imp.scope() + "] " }

func (imp *Imposter) scope() string { return scopeOf(imp.spec) }

func scopeOf(spec *Spec) string {
	s := spec.Protocol + ":" + strconv.Itoa(spec.Port)
	if spec.Name != "" {
		s += " " + spec.Name
	}
	return s
}

// Handler returns the imposter's request handler, which Start serves on
// its listener; a caller that has no socket (a benchmark of the request
// path) may call it directly once Start has run.
func (imp *Imposter) Handler() fasthttp.RequestHandler { return imp.serve }

// exchange is one http request's working state, pooled: the request, and
// the Call a responder gets (valid only while it answers).
type exchange struct {
	req  message.Request
	call Call
	// resp is the call's scratch response (Call.Scratch), kept apart so
	// that a call that needs none costs no zeroing of it.
	resp message.Response
	// body is Call.BodyRoom's buffer, kept from request to request.
	body []byte
	// budget is the request's context, in the exchange so that making it
	// costs no allocation.
	budget budget
}

// endCall lets go of what the call's responder left in the exchange: a
// scratch response it used, a body room grown past maxKeptBody.
func (x *exchange) endCall() {
	if x.call.scratched {
		x.resp = message.Response{}
	}
	if cap(x.body) > maxKeptBody {
		x.body = nil
	}
	x.call = Call{}
}

// release returns the exchange to the pool, its request reset.
func (x *exchange) release() {
	x.req.Reset()
	x.budget = budget{}
	exchanges.Put(x)
}

// maxKeptBody bounds the body room an idle exchange keeps.
const maxKeptBody = 16 << 10

// Flow ids kept per imposter, and the longest kept (with its scope).
const keptFlowIDs, maxKeptFlowID = 256, 128

var exchanges = sync.Pool{New: func() any { return new(exchange) }}

// serve is the hot path: match, pick the stub's next response, write it.
func (imp *Imposter) serve(ctx *fasthttp.RequestCtx) {
	x := exchanges.Get().(*exchange)
	req := &x.req
	req.FillFromFastHTTP(ctx)
	start := ctx.Time() // read by fasthttp before it called the handler
	x.budget = imp.newBudget(start)
	st, r, err := imp.choose(&x.budget, req)
	matched := meter.Now()
	switch {
	case err != nil:
		imp.writeError(ctx, err)
	case r.static != nil && r.behaviors == nil && !r.upgrade && !imp.corsPreflight(req):
		writeStatic(ctx, r.static, r.header)
		if st != nil && imp.opts.RecordMatches {
			st.recordMatch(imp, req, r, r.static)
		}
	default:
		x.call = Call{Imposter: imp, Request: req, Stub: st, matched: matched, scratch: &x.resp, room: &x.body}
		resp := imp.respondSlow(ctx, &x.budget, &x.call, r)
		if st != nil && resp != nil && imp.opts.RecordMatches {
			st.recordMatch(imp, req, r, resp)
		}
		x.endCall()
	}
	imp.observe(st, err, start, matched)
	x.release()
}

// respondSlow builds a response that is not a plain `is`: faults, computed
// responses, behaviors and CORS preflights.
func (imp *Imposter) respondSlow(ctx *fasthttp.RequestCtx, bctx context.Context, call *Call, r *response) *message.Response {
	if r.upgrade {
		imp.upgradeWS(ctx, call.Request, r)
		return r.static
	}
	if r.fault != "" {
		fault(ctx, r.fault)
		return nil
	}
	resp, err := imp.compute(bctx, call, r)
	if err != nil {
		imp.writeError(ctx, err)
		return nil
	}
	if resp == nil { // the responder answered on the connection itself
		return nil
	}
	req := call.Request
	cors := imp.corsPreflight(req)
	if resp.Rendered != nil {
		if !cors {
			writeStatic(ctx, resp, resp.Rendered)
			imp.keepProxiedAlive(ctx, r, resp)
			return resp
		}
		resp = resp.Clone()
	}
	if cors {
		addCORS(req, resp)
	}
	writeResponse(ctx, resp)
	imp.keepProxiedAlive(ctx, r, resp)
	return resp
}

// keepProxiedAlive undoes the `Connection: close` a proxied answer without
// a Connection header of its own gets, when the imposter asks for it
// (_rift.proxyKeepAlive): a client then reuses its connection, as it would
// with the upstream itself. fasthttp still closes when the client asks.
func (imp *Imposter) keepProxiedAlive(ctx *fasthttp.RequestCtx, r *response, resp *message.Response) {
	if !imp.spec.ProxyKeepAlive || r.spec == nil || r.spec.Kind != "proxy" {
		return
	}
	for i := range resp.Headers {
		if strings.EqualFold(resp.Headers[i].Name, "Connection") {
			return
		}
	}
	ctx.Response.Header.ResetConnectionClose()
}

// writeError answers a request whose response could not be made as mb's
// imposters do: 500, whatever the error, with the error and its JavaScript
// name; riftgate's own conditions (an unreachable flow owner) keep their
// status.
func (imp *Imposter) writeError(ctx *fasthttp.RequestCtx, err error) {
	e := *mberr.As(err)
	imp.log.Error("error generating response", "err", err)
	if !mberr.Own(e.Code) {
		e.Status = http.StatusInternalServerError
	}
	e.Name = "Error"
	ctx.Response.Reset()
	ctx.Response.Header.DisableNormalizing()
	ctx.SetStatusCode(e.Status)
	ctx.SetContentType("application/json")
	if !ctx.Request.Header.ConnectionClose() {
		// Node says so for the 500 mb writes without headers of its own.
		ctx.Response.Header.Set("Connection", "keep-alive")
	}
	frameBody(ctx, mberr.Body(&e))
}

func (imp *Imposter) record(r *message.Request) { imp.reqs.Append(r) }

// RecordedRequests returns the recorded requests as they are now, to
// stream; nil when the imposter records none. The caller closes it.
func (imp *Imposter) RecordedRequests() *reqlog.Snapshot {
	if imp.reqs == nil {
		return nil
	}
	return imp.reqs.Snapshot()
}

// RecordedLog returns the log of recorded requests, nil when the imposter
// records none.
func (imp *Imposter) RecordedLog() *reqlog.Log { return imp.reqs }

// RecordedStats are what an imposter keeps of its requests.
type RecordedStats struct {
	Kept, Dropped, Max int64
}

// Recorded returns how many requests the imposter holds, how many its cap
// dropped, and the cap (0: none).
func (imp *Imposter) Recorded() RecordedStats {
	if imp.reqs == nil {
		return RecordedStats{}
	}
	return RecordedStats{imp.reqs.Len(), imp.reqs.Dropped(), imp.reqs.Max()}
}

// NumberOfRequests is what numberOfRequests shows: the requests since the
// imposter started or its saved requests were reset.
func (imp *Imposter) NumberOfRequests() int64 { return imp.numReqs.Load() }

// ResetRequests forgets saved requests and the request count, as mb's
// DELETE /imposters/:id/savedRequests does.
func (imp *Imposter) ResetRequests() {
	if imp.reqs != nil {
		imp.reqs.Reset()
	}
	imp.numReqs.Store(0)
}

// CloseRequests lets go of the recorded requests once the imposter has
// stopped. keep says the process ends, and with --datadir they wait for
// the next start; otherwise (the imposter is deleted or replaced) they go.
func (imp *Imposter) CloseRequests(keep bool) {
	if imp.reqs != nil {
		if err := imp.reqs.Close(keep); err != nil {
			imp.logger().Error("closing recorded requests", "err", err)
		}
	}
	if imp.ownReqs != nil {
		_ = imp.ownReqs.Close()
	}
}

// Meters returns what the imposter counts for metrics.
func (imp *Imposter) Meters() *meter.Imposter { return imp.meters }

// observe counts a request that arrived at start, was matched (to st, or
// to none, or failed with err) at matched (a meter.Now) and answered now.
func (imp *Imposter) observe(st *Stub, err error, start time.Time, matched time.Duration) {
	imp.meters.Observe(st != nil || err != nil, matched-meter.At(start), meter.Now()-matched)
}

// Stubs returns the current compiled stubs, in order.
func (imp *Imposter) Stubs() []*Stub { return imp.table.Load().all() }

// AddStubs adds compiled stubs (recordings) to the table at their places
// (Spec.Key), without rebuilding it: O(log n) each, however many stubs
// the table holds. Calls must not run at once (the reconciler's commits
// never do); requests already matching finish against the table they
// loaded.
func (imp *Imposter) AddStubs(stubs []*Stub) {
	if len(stubs) > 0 && imp.table.Load().keys != nil {
		imp.table.Store(imp.table.Load().withAdded(stubs))
	}
}

// Replay answers r from the stub table as a new request would, but only from
// `is` responses. ok is false when r would reach a computed response: the
// proxy stub itself, once its recording is gone.
func (imp *Imposter) Replay(ctx context.Context, r *message.Request) (resp *message.Response, ok bool, err error) {
	st := imp.table.Load().match(r, nil)
	res := imp.dflt
	if st != nil {
		if res, err = imp.next(ctx, st); err != nil {
			return nil, false, err
		}
	}
	if res.static == nil {
		return nil, false, nil
	}
	resp = res.static.Clone()
	if res.behaviors != nil {
		if err := res.behaviors.Apply(ctx, r, resp); err != nil {
			return nil, false, err
		}
	}
	return resp, true, nil
}

func (imp *Imposter) logger() *slog.Logger {
	if imp.log != nil {
		return imp.log
	}
	return imp.opts.Logger.With("imposter", imp.scope())
}

// warnIgnored logs, once per imposter, each field mb would ignore, which
// riftgate ignores too: a typo shows in the log rather than as a refusal.
func (imp *Imposter) warnIgnored(log *slog.Logger, fields []string) {
	imp.ignoredMu.Lock()
	defer imp.ignoredMu.Unlock()
	var fresh []string
	for _, f := range fields {
		if !imp.ignored[f] {
			if imp.ignored == nil {
				imp.ignored = map[string]bool{}
			}
			imp.ignored[f] = true
			fresh = append(fresh, f)
		}
	}
	if len(fresh) > 0 {
		log.Warn("ignoring fields mb does not know: " + strings.Join(fresh, ", "))
	}
}

// fasthttpLogger sends fasthttp's own messages to slog at debug level.
type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Debug(fmt.Sprintf(format, args...))
}
