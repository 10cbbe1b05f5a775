package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// Options configure one run.
type Options struct {
	// Targets are base URLs (http://host:port, https://host:port), used
	// round-robin per request, so a cluster's nodes share the load. An
	// https target's port defaults to 443, an http one's to 80.
	Targets []string
	// Connections is the number of virtual users, each with at most one
	// request in flight: the concurrency, and the connection count.
	Connections int
	// Rate, when positive, selects the open loop: requests are scheduled at
	// this constant rate (per second) whatever the server does, and latency
	// is measured from each request's intended send time. Zero selects the
	// closed loop: every virtual user sends its next request as soon as the
	// previous one is answered.
	Rate float64
	// Duration bounds the measured phase; Requests bounds its request count.
	// At least one must be set; the run stops at whichever comes first.
	Duration time.Duration
	Requests int64
	// Warmup runs the load for this long before measuring; its requests are
	// counted apart and not in the latencies.
	Warmup time.Duration
	// Timeout bounds each request, connecting included (default 5 s); a
	// request gets between 7/8 of it and all of it.
	Timeout time.Duration
	// Scenario is the request sequence each virtual user runs.
	Scenario *Scenario
	// Interval is the timeline's resolution (default 1 s).
	Interval time.Duration
	// Progress, when set, receives a one-line progress bar, redrawn in place.
	Progress io.Writer
	// TCP, when set, makes every request a raw tcp exchange (see
	// TCPExchange); the scenario's steps then only count iterations.
	TCP *TCPExchange
	// WS, when set, makes every request a WebSocket round trip on the
	// virtual user's connection (see WSExchange), likewise.
	WS *WSExchange
	// Ramp, when set, is the load profile, in place of Rate and Duration
	// (the stages' total is the measured duration; Warmup holds the ramp's
	// start value first). A "users" ramp needs Connections of at least
	// its peak. Without it, the scenario's own Ramp is used.
	Ramp *Ramp
	// Checks are assertions every step makes on its responses, besides
	// the scenario's own (see check).
	Checks []string
	// Thresholds are pass/fail conditions, besides the scenario's own
	// (see threshold); Result.Thresholds holds how each fared.
	Thresholds []string
	// TLS configures the client side of https targets: roots
	// (InsecureSkipVerify, RootCAs), a client certificate (Certificates)
	// and the server name (ServerName; empty means each target's host).
	// nil means the system's roots and each target's host. Every virtual
	// user handshakes when it connects, within Timeout; a reconnect
	// resumes the session through a cache shared by the users, one per
	// target (unless ClientSessionCache is set), so that a run measures
	// the server, not its handshakes.
	TLS *tls.Config
	// TLSFullHandshake turns session resumption off: every connection
	// makes a full handshake.
	TLSFullHandshake bool
	// NoKeepAlive makes every request open a connection of its own and
	// ask the server to close it (Connection: close): each latency then
	// includes the connect and, over https, the handshake. A tcp exchange
	// closes its connection too.
	NoKeepAlive bool
	// HTTP2 loads http:// targets over h2c with prior knowledge and
	// https:// ones over h2, negotiated by ALPN and required (see h2.go).
	HTTP2 bool
	// GRPC, when set, makes every request a gRPC call (see GRPCExchange)
	// to grpc:// or grpcs:// targets; the scenario's steps then carry
	// only the checks.
	GRPC *GRPCExchange
}

const (
	defaultTimeout  = 5 * time.Second
	defaultInterval = time.Second
	maxConnections  = 100000
)

func (o *Options) validate() error {
	if len(o.Targets) == 0 {
		return errors.New("no target URL")
	}
	if o.Connections <= 0 || o.Connections > maxConnections {
		return fmt.Errorf("connections must be in 1..%d, not %d", maxConnections, o.Connections)
	}
	if o.Duration <= 0 && o.Requests <= 0 {
		return errors.New("set a duration or a request count")
	}
	if o.Rate < 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0) {
		return fmt.Errorf("rate must be a positive number, not %v", o.Rate)
	}
	if o.Scenario == nil {
		return errors.New("no scenario")
	}
	if o.HTTP2 && (o.TCP != nil || o.WS != nil || o.GRPC != nil) {
		return errors.New("HTTP/2 is for http:// and https:// targets")
	}
	if o.GRPC != nil && (o.TCP != nil || o.WS != nil) {
		return errors.New("a run is gRPC, tcp or WebSocket, not two of them")
	}
	if o.Ramp != nil && o.Scenario.Ramp != nil {
		return errors.New("a ramp is given twice: in the options and in the scenario")
	}
	if ramp := o.ramp(); ramp != nil {
		if err := ramp.validate(); err != nil {
			return err
		}
		if o.Rate > 0 {
			return errors.New("a ramp sets the rate: give its start value in the ramp, not a rate")
		}
		if o.Duration > 0 && o.Duration != ramp.Total() {
			return fmt.Errorf("a ramp lasts %v, its stages' total: give no duration", ramp.Total())
		}
		if peak := int(math.Ceil(ramp.Peak())); ramp.Unit == unitUsers && o.Connections < peak {
			return fmt.Errorf("the ramp reaches %d users but there are %d connections", peak, o.Connections)
		}
	}
	return nil
}

func (o *Options) ramp() *Ramp {
	if o.Ramp != nil {
		return o.Ramp
	}
	return o.Scenario.Ramp
}

type target struct {
	addr string      // host:port to dial
	host []byte      // Host header
	tls  *tls.Config // https only
}

func parseTarget(raw string, o *Options) (target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, fmt.Errorf("target %q: %w", raw, err)
	}
	switch u.Scheme {
	case "http", "https", "tcp", "ws", "wss", "grpc", "grpcs":
	default:
		u.Host = ""
	}
	if u.Host == "" {
		return target{}, fmt.Errorf("target %q: want http://host:port, https://host:port, ws://host:port, wss://host:port, grpc://host:port, grpcs://host:port or tcp://host:port", raw)
	}
	t := target{addr: u.Host, host: []byte(u.Host)}
	if u.Scheme == "https" || u.Scheme == "wss" || u.Scheme == "grpcs" {
		t.tls = targetTLS(o.TLS, u.Hostname(), o.TLSFullHandshake)
	}
	if u.Port() == "" {
		if t.tls != nil {
			t.addr = net.JoinHostPort(u.Hostname(), "443")
		} else {
			t.addr = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	return t, nil
}

// runner is the state one Run shares between its workers.
type runner struct {
	opts        Options
	targets     []target
	steps       []compiledStep
	flowHeader  []byte
	flowPrefix  []byte
	base        time.Time
	measureFrom int64 // ns since base
	end         int64 // ns since base; 0 when bounded by count only
	ramp        *Ramp
	rate        *profile   // open loop: requests per second over time
	users       *profile   // closed loop with a ramp: virtual users over time
	slots       chan int64 // open loop: intended send times, released on time by pace
	thresholds  []*threshold
	nChecks     int
	gate        userGate     // closed-loop ramp: which users may send
	measured    atomic.Int64 // requests sent in the measured phase
	stopped     atomic.Bool
	shards      []*shard
	lastDone    atomic.Int64
	// TLS handshakes made, and how many of them resumed a session.
	handshakes, resumed atomic.Int64
}

func (r *runner) now() int64 { return int64(time.Since(r.base)) }

// Run drives the load described by opts until its bound is reached or ctx
// is cancelled, and returns the measurements.
func Run(ctx context.Context, opts Options) (*Result, error) {
	r, err := newRunner(opts)
	if err != nil {
		return nil, err
	}
	if x := r.opts.GRPC; x != nil && x.desc == nil {
		if err := x.resolve(ctx, r.targets[0]); err != nil {
			return nil, fmt.Errorf("loadtest: %w", err)
		}
	}
	return r.run(ctx), nil
}

func newRunner(opts Options) (*runner, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = defaultTimeout
	}
	if opts.Interval <= 0 {
		opts.Interval = defaultInterval
	}
	if opts.Scenario != nil {
		if ramp := opts.ramp(); ramp != nil && opts.Duration == 0 {
			opts.Duration = ramp.Total()
		}
	}
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	steps, err := opts.Scenario.compile(opts.Checks...)
	if err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	r := &runner{opts: opts, steps: steps, ramp: opts.ramp()}
	if r.thresholds, err = opts.Scenario.thresholds(opts.Thresholds); err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	for _, st := range steps {
		r.nChecks += len(st.checks)
	}
	for _, t := range opts.Targets {
		tg, err := parseTarget(t, &r.opts)
		if err != nil {
			return nil, fmt.Errorf("loadtest: %w", err)
		}
		r.targets = append(r.targets, tg)
	}
	r.flowHeader = []byte(opts.Scenario.flowHeader())
	r.flowPrefix = []byte(opts.Scenario.FlowIDPrefix)
	if len(r.flowPrefix) == 0 {
		var b [3]byte
		_, _ = rand.Read(b[:])
		r.flowPrefix = []byte("rl" + hex.EncodeToString(b[:]))
	}
	nStages := 0
	switch {
	case r.ramp != nil:
		nStages = len(r.ramp.Stages)
		p := rampProfile(r.ramp, opts.Warmup)
		if r.ramp.Unit == unitRate {
			r.rate = p
		} else {
			r.users = p
		}
	case opts.Rate > 0:
		r.rate = constantProfile(opts.Rate)
	}
	nShards := min(opts.Connections, 2*runtime.GOMAXPROCS(0))
	for range nShards {
		r.shards = append(r.shards, newShard(len(steps), nStages, r.nChecks))
	}
	r.base = time.Now() // run sets it again once its users are connected
	r.measureFrom = int64(opts.Warmup)
	if opts.Duration > 0 {
		r.end = r.measureFrom + int64(opts.Duration)
	}
	return r, nil
}

func (r *runner) run(ctx context.Context) *Result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Every virtual user connects before any sends, as wrk's do: under a
	// request budget (-n), users that dial one by one while the first
	// already sends let it spend the whole budget. A failed dial is
	// tried again, and counted, by the loop.
	var wg, dialled sync.WaitGroup
	start := make(chan struct{})
	for i := range r.opts.Connections {
		w := r.newWorker(i)
		wg.Add(1)
		dialled.Add(1)
		go func() {
			defer wg.Done()
			// Without keep-alive every request connects, the first too.
			switch {
			case r.opts.WS != nil && !r.opts.NoKeepAlive:
				_, _ = w.connectWS(ctx, w.rr, r.opts.WS) // the handshake too
			case r.opts.HTTP2 && !r.opts.NoKeepAlive:
				w.connectH2(ctx, w.rr)
			case r.opts.GRPC != nil:
				w.connectGRPC(w.rr)
			case r.opts.TCP == nil && r.opts.WS == nil && r.opts.GRPC == nil && !r.opts.NoKeepAlive:
				_, _ = w.connect(ctx, w.rr)
			}
			dialled.Done()
			<-start
			w.loop(ctx)
		}()
	}
	dialled.Wait()
	// The schedule starts now, once the users are connected.
	r.base = time.Now()
	col := newCollector(r)
	var colWG sync.WaitGroup
	colWG.Add(1)
	go func() {
		defer colWG.Done()
		col.loop(ctx)
	}()
	// The pacer ends with the workers: they may stop (count reached, time
	// up) while it waits to hand over a slot that nobody will take.
	var pacer sync.WaitGroup
	pctx, stopPacer := context.WithCancel(ctx)
	defer stopPacer()
	if r.rate != nil {
		r.slots = make(chan int64, r.opts.Connections)
		pacer.Go(func() { r.pace(pctx) })
	}
	if r.users != nil {
		r.gate.init()
		pacer.Go(func() { r.rampUsers(pctx) })
	}
	close(start)
	wg.Wait()
	stopPacer()
	pacer.Wait()
	cancel()
	colWG.Wait()
	return r.result(col)
}

// worker is one virtual user: its own connection to each target, request,
// response and render buffers, reused for every request so that the loop
// does not allocate.
type worker struct {
	r      *runner
	id     int64
	shard  *shard
	conns  []conn   // by target index, dialled on first use
	wire   [][]byte // by step and target: request bytes built once
	req    *fasthttp.Request
	resp   *fasthttp.Response
	vars   vars
	step   int
	rr     int
	buf    []byte // rendered path, header values and body, back to back
	sample sample
	doc    jsonDoc // the response body as JSON, for jsonpath checks
	// wsFrame is the WebSocket message a worker sends, masked, rendered
	// once; wsHdr is room for a frame header it reads.
	wsFrame []byte
	wsHdr   [8]byte
	// h2 are the HTTP/2 clients by target (h2.go), and h2Body the room
	// their answers are read into.
	h2     []*http.Client
	h2Pre  []net.Conn // made before the run, for the first request
	h2Body bytes.Buffer
	// grpc are the gRPC client connections by target (grpc.go); grpcOut
	// the last call's answers, grpcBuf a unary answer's room, grpcCode
	// its status.
	grpc     []*grpc.ClientConn
	grpcOut  [][]byte
	grpcBuf  []byte
	grpcCode codes.Code
}

func (r *runner) newWorker(i int) *worker {
	w := &worker{
		r:     r,
		id:    int64(i),
		shard: r.shards[i%len(r.shards)],
		req:   fasthttp.AcquireRequest(),
		resp:  fasthttp.AcquireResponse(),
		rr:    i % len(r.targets),
		conns: make([]conn, len(r.targets)),
		buf:   make([]byte, 0, 4096),
	}
	w.vars.vu = w.id
	w.setFlowID()
	return w
}

func (w *worker) setFlowID() {
	f := append(w.vars.flowID[:0], w.r.flowPrefix...)
	f = append(f, '-')
	f = strconv.AppendInt(f, w.vars.vu, 10)
	if w.r.opts.Scenario.FlowPerIteration {
		f = append(f, '-')
		f = strconv.AppendInt(f, w.vars.iter, 10)
	}
	w.vars.flowID = f
}

func (w *worker) close() {
	for i := range w.conns {
		w.conns[i].close()
	}
	w.closeH2()
	w.closeGRPC()
	fasthttp.ReleaseRequest(w.req)
	fasthttp.ReleaseResponse(w.resp)
}

func (w *worker) loop(ctx context.Context) {
	defer w.close()
	for !w.r.stopped.Load() && ctx.Err() == nil {
		if w.r.users != nil && !w.r.gate.wait(ctx, w.id) {
			return
		}
		if !w.once(ctx) {
			return
		}
	}
}

// once sends one request and records it. It returns false when the run is
// over for this worker.
func (w *worker) once(ctx context.Context) bool {
	r := w.r
	now := r.now()
	intended := now
	if r.rate != nil {
		var ok bool
		select {
		case intended, ok = <-r.slots:
		case <-ctx.Done():
		}
		if !ok {
			return false // the schedule is over
		}
		// Stop at the end of the wall-clock time too: a server that cannot
		// keep up must not stretch the run.
		if r.end > 0 && r.now() >= r.end {
			r.stopped.Store(true)
			return false
		}
	} else if r.end > 0 && now >= r.end {
		r.stopped.Store(true)
		return false
	}
	sent := r.now()
	if sent >= r.measureFrom && r.opts.Requests > 0 && r.measured.Add(1) > r.opts.Requests {
		r.stopped.Store(true)
		return false
	}
	st := &r.steps[w.step]
	var err error
	switch {
	case r.opts.TCP != nil:
		err = w.doTCP(ctx, w.rr, r.opts.TCP)
	case r.opts.WS != nil:
		err = w.doWS(ctx, w.rr, r.opts.WS)
	case r.opts.HTTP2:
		w.prepare(st, &r.targets[w.rr])
		err = w.doH2(ctx, w.rr)
	case r.opts.GRPC != nil:
		err = w.doGRPC(ctx, w.rr, r.opts.GRPC, len(st.checks) > 0)
	default:
		wire := w.wireFor(st)
		if wire == nil {
			w.prepare(st, &r.targets[w.rr])
		}
		err = w.do(ctx, w.rr, wire)
	}
	if err != nil && ctx.Err() != nil {
		return false // cut short by cancellation: not the server's error
	}
	done := r.now()
	w.sample = sample{intended: intended, sent: sent, done: done, err: err, expect: st.expectStatus,
		step: st, stepIndex: w.step, stage: -1}
	if r.ramp != nil {
		w.sample.stage = r.profile().stageAt(intended)
	}
	switch {
	case err != nil:
	case r.opts.TCP != nil || r.opts.WS != nil:
		w.sample.status = st.expectStatus // a tcp or ws answer has no status: its bytes were checked
	default:
		if r.opts.GRPC != nil {
			// The call checked its status against GRPCExchange.Expect; its
			// answer, as JSON, is w.resp's body.
			w.sample.status, w.sample.expect = int(w.grpcCode), 0
		} else {
			w.sample.status = w.resp.StatusCode()
		}
		if len(st.checks) > 0 {
			w.doc = jsonDoc{}
			w.sample.resp, w.sample.doc = w.resp, &w.doc
			for i, c := range st.checks {
				if !c.eval(w.resp, &w.doc) {
					w.sample.failed |= 1 << i
				}
			}
		}
	}
	w.shard.record(&w.sample, r.measureFrom)
	w.sample.err, w.sample.resp, w.doc.v = nil, nil, nil
	for last := r.lastDone.Load(); done > last && !r.lastDone.CompareAndSwap(last, done); last = r.lastDone.Load() {
	}
	w.advance()
	return true
}

// pace releases the open loop's schedule slots, each at its intended send
// time, to whichever worker is free; when none is, slots wait in the
// channel and their lateness counts as latency. One pacer, not a timer per
// worker: a worker's sleep is as late as the Go timer that ends it, and
// each timer costs the generator syscalls it needs for sending.
func (r *runner) pace(ctx context.Context) {
	defer close(r.slots)
	var s sleeper
	defer s.close()
	seg := 0
	for slot := int64(0); ; slot++ {
		intended, ok := r.rate.timeOf(float64(slot), &seg)
		if !ok || (r.end > 0 && intended >= r.end) || r.stopped.Load() {
			return
		}
		if d := intended - r.now(); d > 0 && !s.sleep(ctx, r, intended) {
			return
		}
		select {
		case r.slots <- intended:
		case <-ctx.Done():
			return
		}
	}
}

// profile is the run's load profile: the rate's or the users'.
func (r *runner) profile() *profile {
	if r.rate != nil {
		return r.rate
	}
	return r.users
}

// rampUsers moves the number of users allowed to send along the ramp, every
// few milliseconds, and lets them all go when the run ends.
func (r *runner) rampUsers(ctx context.Context) {
	defer r.gate.set(math.MaxInt64)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		now := r.now()
		if (r.end > 0 && now >= r.end) || r.stopped.Load() {
			return
		}
		// Rounded, so that the users sending average the ramp's line.
		r.gate.set(int64(math.Round(r.users.at(now))))
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// userGate holds back the virtual users numbered at or above the ramp's
// current value; the users below it send.
type userGate struct {
	n       atomic.Int64
	mu      sync.Mutex
	changed chan struct{} // closed, and replaced, when n changes
}

func (g *userGate) init() { g.changed = make(chan struct{}) }

func (g *userGate) set(n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n != g.n.Load() {
		g.n.Store(n)
		close(g.changed)
		g.changed = make(chan struct{})
	}
}

// wait returns true once user id may send, false if ctx ends first.
func (g *userGate) wait(ctx context.Context, id int64) bool {
	for id >= g.n.Load() {
		g.mu.Lock()
		ch := g.changed
		g.mu.Unlock()
		if id < g.n.Load() {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// coarseSlack is how late a Go timer may fire: the pacer sleeps on one
// until this close to a send time, and on a fineTimer after it.
const coarseSlack = 2 * time.Millisecond

// sleeper waits until a time on the run's clock.
type sleeper struct {
	timer *time.Timer
	fine  *fineTimer
}

// sleep waits until the run's clock reads until, or ctx ends (false).
func (s *sleeper) sleep(ctx context.Context, r *runner, until int64) bool {
	for {
		left := time.Duration(until - r.now())
		switch {
		case left <= 0:
			return true
		case ctx.Err() != nil:
			return false
		case left > coarseSlack:
			if !s.coarse(ctx, left-coarseSlack) {
				return false
			}
		default:
			if s.fine == nil {
				f, err := newFineTimer()
				if err != nil {
					return s.coarse(ctx, left) // no timerfd: late, but still paced
				}
				s.fine = f
			}
			if err := s.fine.sleep(left); err != nil {
				return s.coarse(ctx, left)
			}
		}
	}
}

func (s *sleeper) coarse(ctx context.Context, d time.Duration) bool {
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	select {
	case <-s.timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *sleeper) close() {
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.fine != nil {
		s.fine.close()
	}
}

func (w *worker) advance() {
	w.rr++
	if w.rr == len(w.r.targets) {
		w.rr = 0
	}
	w.step++
	if w.step == len(w.r.steps) {
		w.step = 0
		w.vars.iter++
		if w.r.opts.Scenario.FlowPerIteration {
			w.setFlowID()
		}
	}
}

// wireFor returns the request bytes of step st to the current target when
// they are the same every iteration (no {{iter}}, one flow per user),
// serialised once by fasthttp, as wrk prepares its request; nil otherwise.
func (w *worker) wireFor(st *compiledStep) []byte {
	if w.r.opts.Scenario.FlowPerIteration || st.perIteration() {
		return nil
	}
	i := w.step*len(w.r.targets) + w.rr
	if w.wire == nil {
		w.wire = make([][]byte, len(w.r.steps)*len(w.r.targets))
	}
	if w.wire[i] == nil {
		w.prepare(st, &w.r.targets[w.rr])
		var b bytes.Buffer
		bw := bufio.NewWriter(&b)
		if w.req.Write(bw) != nil || bw.Flush() != nil {
			return nil // let do report the error on the real connection
		}
		w.wire[i] = b.Bytes()
	}
	return w.wire[i]
}

// prepare fills the reused request for step st. Every template is rendered
// into w.buf, which grows to its high-water mark and then stays.
func (w *worker) prepare(st *compiledStep, t *target) {
	req := w.req
	req.Reset()
	buf := w.buf[:0]
	buf = st.path.render(buf, &w.vars)
	pathEnd := len(buf)
	buf = st.body.render(buf, &w.vars)
	bodyEnd := len(buf)
	req.Header.SetMethodBytes(st.method)
	req.SetRequestURIBytes(buf[:pathEnd])
	req.Header.SetHostBytes(t.host)
	for i := range st.headers {
		h := &st.headers[i]
		start := len(buf)
		buf = h.value.render(buf, &w.vars)
		req.Header.SetBytesKV(h.key, buf[start:])
	}
	if len(w.r.flowHeader) > 0 {
		req.Header.SetBytesKV(w.r.flowHeader, w.vars.flowID)
	}
	if w.r.opts.NoKeepAlive {
		req.SetConnectionClose()
	}
	if bodyEnd > pathEnd {
		req.SetBodyRaw(buf[pathEnd:bodyEnd])
	}
	w.buf = buf
}

// conn is one keep-alive connection with its buffers. fasthttp's Request and
// Response do the HTTP on it; see do for why not HostClient.
type conn struct {
	c        net.Conn
	br       *bufio.Reader
	bw       *bufio.Writer
	ws       bool        // the WebSocket handshake is done
	unwake   func() bool // stops the cancellation hook
	deadline time.Time
}

func (c *conn) close() {
	if c.c != nil {
		c.unwake()
		_ = c.c.Close()
		c.c = nil
		c.ws = false
	}
}

const connBufSize = 16 << 10

// do sends w.req on the worker's own connection to target t and reads
// w.resp, reconnecting when the previous request failed or the server asked
// to close. Owning the connection (one per virtual user, as wrk does) keeps
// the concurrency exact and the path free of pool locks, and leaves no
// idle-connection cleaner goroutine running after the run, as
// fasthttp.HostClient would.
func (w *worker) do(ctx context.Context, t int, wire []byte) error {
	cn, err := w.connect(ctx, t)
	if err != nil {
		return err
	}
	if wire != nil {
		_, err = cn.bw.Write(wire)
	} else {
		err = w.req.Write(cn.bw)
	}
	if err == nil {
		err = cn.bw.Flush()
	}
	if err == nil {
		err = w.resp.Read(cn.br)
	}
	if err != nil {
		if tc, ok := cn.c.(*tlsConn); ok && isTLSError(tc.readErr) {
			err = tc.readErr
		}
		cn.close()
		return err
	}
	if w.resp.ConnectionClose() || w.r.opts.NoKeepAlive {
		cn.close()
	}
	return nil
}

// connect returns the worker's connection to target t, dialled when it has
// none, with its deadline moved on.
func (w *worker) connect(ctx context.Context, t int) (*conn, error) {
	cn := &w.conns[t]
	timeout := w.r.opts.Timeout
	if cn.c == nil {
		tg := &w.r.targets[t]
		d := net.Dialer{Timeout: timeout}
		c, err := d.DialContext(ctx, "tcp", tg.addr)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", tg.addr, err)
		}
		cn.deadline = time.Time{}
		// A cancelled run (Ctrl-C) must not wait out a stalled server's
		// timeout: expire the connection's deadline at once. Set before
		// the handshake, it interrupts that too.
		cn.unwake = context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
		if tg.tls != nil {
			if c, err = w.handshake(cn, c, tg); err != nil {
				cn.unwake()
				return nil, err
			}
		}
		cn.c = c
		if cn.br == nil {
			cn.br = bufio.NewReaderSize(c, connBufSize)
			cn.bw = bufio.NewWriterSize(c, connBufSize)
		} else {
			cn.br.Reset(c)
			cn.bw.Reset(c)
		}
	}
	// Moving the deadline is a timer update in the runtime: do it only
	// when an eighth of the timeout has been used, so a request gets
	// between 7/8 of the timeout and all of it.
	if now := time.Now(); cn.deadline.Sub(now) < timeout-timeout/8 {
		cn.deadline = now.Add(timeout)
		if err := cn.c.SetDeadline(cn.deadline); err != nil {
			cn.close()
			return nil, err
		}
	}
	return cn, nil
}

// handshake runs the TLS handshake on c, within the timeout, and counts
// it; on failure c is closed.
func (w *worker) handshake(cn *conn, c net.Conn, tg *target) (net.Conn, error) {
	cn.deadline = time.Now().Add(w.r.opts.Timeout)
	if err := c.SetDeadline(cn.deadline); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("dial %s: %w", tg.addr, err)
	}
	tc := tls.Client(c, tg.tls)
	// Handshake, not HandshakeContext: the deadline (and the run's
	// cancellation, which expires it) bounds it without a goroutine.
	if err := tc.Handshake(); err != nil {
		_ = c.Close()
		return nil, &tlsHandshakeError{addr: tg.addr, err: err}
	}
	w.r.handshakes.Add(1)
	if tc.ConnectionState().DidResume {
		w.r.resumed.Add(1)
	}
	return &tlsConn{Conn: tc}, nil
}

// tlsConn remembers its last read error. fasthttp reports any error on a
// response's first byte as io.EOF, which would hide a TLS alert there: in
// TLS 1.3 a server's refusal of the client certificate is one, since the
// client's side of the handshake is over before the server checks it.
type tlsConn struct {
	*tls.Conn
	readErr error
}

func (c *tlsConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.readErr = err
	}
	return n, err
}
