package plugins

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Flow is the per-call flow handle: the request's flow, already chosen by
// the engine. Errors wrap ErrFlowNotFound, ErrFlowMismatch or
// ErrFlowTooLarge; any other error is treated as UNAVAILABLE. Get returns a
// value's version V, never 0 for a stored value. key, and value passed to
// Put and CAS, are guest memory, valid only during the call: a Flow that
// keeps either copies it (the flow store copies what it stores, so the host
// does not copy it first). The value Get returns need stay valid only until
// the Flow's next method call: the host copies it into guest memory first.
type Flow interface {
	Get(ctx context.Context, key []byte) (value []byte, version uint64, err error)
	Put(ctx context.Context, key, value []byte) error
	CAS(ctx context.Context, key []byte, expect uint64, value []byte) error
	Delete(ctx context.Context, key []byte) error
}

// Input is one call's request, configuration and flow. The host reads it
// only during Call.
type Input struct {
	Method      string
	Path        string // without the query string
	Query       []Pair // in order received; repeated names are joined with ","
	Headers     []Pair // in order received; repeated names are joined with ", "
	Body        []byte
	FlowID      string // the scoped flow id
	RequestFrom Text   // ip:port of the client; nil reads as ""
	// Config is the stub's "config" as JSON text; nil reads as null.
	Config []byte
	// Response is the response being decorated, for decorate calls only.
	Response *Response
	// Flow serves the flow imports; nil answers them UNAVAILABLE.
	Flow Flow
	// Start is when the caller began on the request; the deadline counts
	// from it, so the host need not read the clock (zero: from the call).
	Start time.Time
	// BodyRoom, if not nil, is a buffer the caller lends for the answer's
	// body: a body decoded afresh is copied into it (*BodyRoom keeps the
	// slice) instead of a new slice. The Output's Body then aliases it, so
	// the caller must not reuse the room while it uses the Output.
	BodyRoom *[]byte
}

// Text is a text of the request envelope that costs something to make:
// the host asks for its length on every call (the envelope's length is
// the entry point's argument), and for the text only when the guest reads
// the request, which many guests never do.
type Text interface {
	Len() int
	String() string
}

// Str is a Text already made.
type Str string

func (s Str) Len() int       { return len(s) }
func (s Str) String() string { return string(s) }

// text is t's text, "" for none.
func text(t Text) string {
	if t == nil {
		return ""
	}
	return t.String()
}

// textLen is t's length, 0 for none.
func textLen(t Text) int {
	if t == nil {
		return 0
	}
	return t.Len()
}

// Output is what a call produced.
type Output struct {
	// Result is the entry point's return value; its meaning depends on the
	// use (ABI section 6): the engine interprets it.
	Result int32
	// Response is the last response envelope the guest wrote, decoded, when
	// Wrote is true. Calls that wrote the same envelope may share its
	// slices: read them, never change them.
	Response Response
	Wrote    bool
	// Unavailable is true when a flow import returned UNAVAILABLE during the
	// call; it is set on failed calls too, so the engine can answer 503.
	// UnavailableErr is the first such failure, which says why.
	Unavailable    bool
	UnavailableErr error
}

// version is one registration of a module under a name. Replacing the
// module makes a new version; the old one lives until its last call returns.
type version struct {
	h     *Host
	info  ModuleInfo
	lim   Limits
	c     *compiledModule
	rt    wazero.Runtime
	cfg   wazero.ModuleConfig
	stats *stats
	entry map[string]int // entry point name -> index into instance.fns

	// idle holds instances between calls; slots holds a token for each
	// instance not yet made. Together with the calls in flight they always
	// add up to PoolSize, which bounds both instances and concurrency.
	// Idle instances are taken before a slot, so a quiet module reuses one.
	idle  chan *instance
	slots chan struct{}
	// hot is one idle instance kept out of idle: a call takes it and gives
	// it back with an atomic swap each, where idle costs a channel's lock
	// twice (about 90 ns a call). waiting counts the calls blocked on idle
	// or slots, for which put skips hot: see put.
	hot     atomic.Pointer[instance]
	waiting atomic.Int32
	// refs counts calls in flight, plus one while the version is
	// registered; the version closes when it reaches zero.
	refs atomicRefs
	// retired is set once the version is no longer registered, so that an
	// Entry that found it looks its name up again.
	retired atomic.Bool
}

func (h *Host) newVersion(info ModuleInfo, lim Limits, c *compiledModule, rt wazero.Runtime, st *stats) *version {
	out := &logWriter{log: h.log, module: info.Name, stream: "stdout"}
	errw := &logWriter{log: h.log, module: info.Name, stream: "stderr"}
	v := &version{
		h:     h,
		info:  info,
		lim:   lim,
		c:     c,
		rt:    rt,
		stats: st,
		entry: make(map[string]int, len(c.entry)),
		idle:  make(chan *instance, lim.PoolSize),
		slots: make(chan struct{}, lim.PoolSize),
		// No filesystem, environment or arguments; clocks and random work.
		cfg: wazero.NewModuleConfig().WithName("").WithStartFunctions().
			WithStdout(out).WithStderr(errw).
			WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader),
	}
	for i, n := range c.entry {
		v.entry[n] = i
	}
	for range lim.PoolSize {
		v.slots <- struct{}{}
	}
	v.refs.init()
	h.open.Add(1)
	return v
}

// acquire returns the version registered as name with a reference taken,
// or nil.
func (h *Host) acquire(name string) *version {
	for {
		v := (*h.modules.Load())[name]
		if v == nil {
			return nil
		}
		if v.refs.tryAcquire() {
			return v
		}
		// v was replaced and retired between the load and the reference:
		// the map already holds its successor, so load it again.
	}
}

func (v *version) release() {
	if v.refs.release() {
		v.close()
	}
}

// close closes every instance; no call is in flight, so all are idle.
func (v *version) close() {
	if inst := v.hot.Swap(nil); inst != nil {
		inst.close()
	}
	for len(v.idle) > 0 {
		(<-v.idle).close()
	}
	v.h.releaseCompiled(v.c)
	v.h.open.Add(-1)
}

// instance is one instantiation of a module. It runs one call at a time.
type instance struct {
	v     *version
	mod   api.Module
	mem   api.Memory
	fns   []api.Function // by entry index, made on first use
	stack []uint64
	calls int
	// startPages is the memory size when instantiated: an instance whose
	// memory grew to its ceiling is discarded after the call.
	startPages uint32
	cs         callState
	cc         *callCtx
}

// arm returns the context a call from ctx runs under: the instance's own,
// which the host's watchdog ends at the deadline, if the module has one,
// or when ctx ends. The host imports find the call's state through it. The
// caller disarms it with cc.end when the call returns.
func (i *instance) arm(ctx context.Context, start time.Time) context.Context {
	due := time.Duration(math.MaxInt64)
	if d := i.v.lim.Deadline; d > 0 {
		if start.IsZero() {
			due = i.v.h.wd.now() + d
		} else {
			due = start.Sub(i.v.h.wd.epoch) + d
		}
	}
	i.cc.begin(ctx, due)
	return i.cc
}

// fired reports whether the watchdog stopped the instance: it set the
// module's stop flag, during the call or just as it returned, so even an
// instance whose call succeeded cannot serve another.
func (i *instance) fired() bool { return i.cc.Err() != nil }

// instantiate makes an instance and runs its start function and
// _initialize, if the module has them.
func (v *version) instantiate(ctx context.Context) (*instance, error) {
	mod, err := v.rt.InstantiateModule(ctx, v.c.cm, v.cfg)
	if err != nil {
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	mem := mod.ExportedMemory("memory")
	inst := &instance{
		v:     v,
		mod:   mod,
		mem:   mem,
		fns:   make([]api.Function, len(v.c.entry)),
		stack: make([]uint64, 1),
	}
	inst.cc = newCallCtx(&inst.cs)
	if v.c.key.stoppable {
		g, ok := mod.ExportedGlobal(stopExport).(api.MutableGlobal)
		if !ok {
			_ = mod.Close(context.Background())
			return nil, fmt.Errorf("instantiate: the stop flag %q is missing", stopExport)
		}
		inst.cc.stop = g
	}
	inst.cs.v = v
	v.h.insts.Store(mod, inst)
	// The start function, which the stoppable copy exports instead of
	// running it from wazero's instantiation, runs as it would have: before
	// _initialize, and outside any call (its imports fail). _initialize runs
	// like a call whose request has every field empty and which has no
	// flow, so a guest may log or read the clock from it.
	if start := mod.ExportedFunction(startExport); start != nil && v.c.key.stoppable {
		err = inst.setUp(ctx, "start function", start, nil)
	}
	if err == nil && v.c.init {
		err = inst.setUp(ctx, "_initialize", mod.ExportedFunction("_initialize"), &Input{})
	}
	if err != nil {
		v.h.insts.Delete(mod)
		_ = mod.Close(context.Background())
		return nil, err
	}
	inst.startPages = mem.Size() / pageSize
	v.stats.live.Add(1)
	v.stats.instantiated.Add(1)
	return inst, nil
}

const pageSize = 65536

// setUp runs one of the module's own set-up functions under the deadline,
// as a call with input in, or outside any call if in is nil.
func (i *instance) setUp(ctx context.Context, what string, fn api.Function, in *Input) error {
	if in != nil {
		i.cs.begin(in)
		defer i.cs.end()
	}
	_, err := fn.Call(i.arm(ctx, time.Time{}))
	i.cc.end()
	if err == nil {
		return nil
	}
	if i.timedOut(err) {
		err = fmt.Errorf("deadline of %s passed: %w", i.v.lim.Deadline, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (i *instance) close() {
	i.v.h.insts.Delete(i.mod)
	_ = i.mod.Close(context.Background())
	i.v.stats.live.Add(-1)
}

// atCeiling reports whether memory grew to the most it may have: the sign
// that a guest ran out, after which its state is not worth keeping.
func (i *instance) atCeiling() bool {
	pages := i.mem.Size() / pageSize
	return pages >= i.v.c.maxPages && pages > i.startPages
}

// Call runs the entry point export of the module registered as module.
// It waits for a free instance while ctx allows. On error, the Output still
// reports Unavailable. Pass a context rooted in context.Background: a parent
// of another type (such as *fasthttp.RequestCtx) makes context.WithTimeout
// start a goroutine per call.
func (h *Host) Call(ctx context.Context, module, export string, in *Input) (Output, error) {
	r, err := h.resolve(module, export)
	if err != nil {
		return Output{}, err
	}
	return r.v.run(ctx, r.idx, export, in)
}

// Entry is the entry point export of the module registered as module,
// found once: its Call skips finding both by name on every call (two map
// lookups, one under a 71-byte content key for the engine's modules). It
// follows the name to the module registered under it now.
type Entry struct {
	h              *Host
	module, export string
	found          atomic.Pointer[entryRef]
}

// entryRef is an entry point found: idx is -1 when the module has no such
// export.
type entryRef struct {
	v   *version
	idx int
}

// Entry returns the entry point export of the module registered as module.
// Whether they exist is found when it is called, as Call finds it.
func (h *Host) Entry(module, export string) *Entry {
	return &Entry{h: h, module: module, export: export}
}

// Call runs the entry point, as Host.Call does.
func (e *Entry) Call(ctx context.Context, in *Input) (Output, error) {
	r := e.found.Load()
	if r == nil || r.v.retired.Load() || !r.v.refs.tryAcquire() {
		found, err := e.h.resolve(e.module, e.export)
		if err != nil {
			return Output{}, err
		}
		r = &found
		e.found.Store(r)
	}
	return r.v.run(ctx, r.idx, e.export, in)
}

// resolve finds the version registered as module, with a reference taken,
// and its entry point export.
func (h *Host) resolve(module, export string) (entryRef, error) {
	v := h.acquire(module)
	if v == nil {
		if h.shut.Load() {
			return entryRef{}, &Error{Kind: KindClosed, Module: module, Export: export, Err: ErrClosed}
		}
		return entryRef{}, &Error{Kind: KindNoModule, Module: module, Export: export, Err: ErrUnknownModule}
	}
	idx, ok := v.entry[export]
	if !ok {
		idx = -1
	}
	return entryRef{v, idx}, nil
}

// run calls entry point idx, named export, on one of v's instances, and
// releases the reference to v that its caller took.
func (v *version) run(ctx context.Context, idx int, export string, in *Input) (Output, error) {
	defer v.release()
	v.stats.calls.Add(1)
	if in == nil {
		in = &Input{}
	}
	if idx < 0 {
		return Output{}, v.fail(KindNoExport, export, fmt.Errorf("not an entry point (i32) -> i32 of this module; it has %s", strings.Join(v.c.entry, ", ")))
	}

	inst, err := v.take(ctx)
	if err != nil {
		return Output{}, v.fail(KindInstantiate, export, err)
	}
	if inst == nil {
		return Output{}, v.fail(KindCanceled, export, fmt.Errorf("waiting for an instance: %w", context.Cause(ctx)))
	}
	out, kind, err := inst.call(ctx, idx, in)
	if out.Unavailable {
		v.stats.unavailable.Add(1)
	}
	switch {
	case err != nil && kind != KindResponse:
		// A trap, timeout or memory overrun leaves the instance's state
		// undefined, and a timeout has closed it already.
		inst.close()
		v.stats.discarded.Add(1)
		inst = nil
	case inst.atCeiling(), inst.fired():
		inst.close()
		v.stats.discarded.Add(1)
		inst = nil
	case inst.calls >= v.lim.RecycleAfter:
		inst.close()
		v.stats.recycled.Add(1)
		inst = nil
	}
	v.put(inst)
	if err != nil {
		return out, v.fail(kind, export, err)
	}
	return out, nil
}

// take returns an idle instance, or makes one if a slot is free, or waits
// for either until ctx ends (nil, nil).
func (v *version) take(ctx context.Context) (*instance, error) {
	if inst := v.hot.Swap(nil); inst != nil {
		return inst, nil
	}
	select {
	case inst := <-v.idle:
		return inst, nil
	default:
	}
	v.waiting.Add(1)
	defer v.waiting.Add(-1)
	if inst := v.hot.Swap(nil); inst != nil { // put before waiting was seen
		return inst, nil
	}
	select {
	case inst := <-v.idle:
		return inst, nil
	case <-v.slots:
	case <-ctx.Done():
		return nil, nil
	}
	inst, err := v.instantiate(ctx)
	if err != nil {
		v.slots <- struct{}{}
		return nil, err
	}
	return inst, nil
}

// put returns inst to the pool, or its slot if inst is nil (discarded).
// A call that waits would not see an instance left in hot, so with one
// waiting the instance goes to idle; and one that began to wait after put
// looked sees hot filled when it looks again (both sides store, then
// load: one of them sees the other's store), or put takes it back here.
func (v *version) put(inst *instance) {
	switch {
	case inst == nil:
		v.slots <- struct{}{}
	case v.waiting.Load() == 0 && v.hot.CompareAndSwap(nil, inst):
		if v.waiting.Load() != 0 && v.hot.CompareAndSwap(inst, nil) {
			v.idle <- inst
		}
	default:
		v.idle <- inst
	}
}

func (v *version) fail(k Kind, export string, err error) error {
	v.stats.errors[k].Add(1)
	return &Error{Kind: k, Module: v.info.Name, Export: export, Err: err}
}

// call runs one call on i. The error's Kind is returned beside it.
func (i *instance) call(ctx context.Context, idx int, in *Input) (Output, Kind, error) {
	fn := i.fns[idx]
	if fn == nil {
		fn = i.mod.ExportedFunction(i.v.c.entry[idx])
		i.fns[idx] = fn
	}
	cs := &i.cs
	cs.begin(in)
	i.stack[0] = uint64(uint32(cs.reqLen))
	err := fn.CallWithStack(i.arm(ctx, in.Start), i.stack)
	i.cc.end()
	i.calls++
	out := Output{Unavailable: cs.unavailable, UnavailableErr: cs.unavailableErr}
	defer cs.end()
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return out, KindCanceled, fmt.Errorf("%w: %w", context.Cause(ctx), err)
		case errors.Is(i.cc.Err(), ErrClosed):
			return out, KindClosed, fmt.Errorf("stopped: %w", ErrClosed)
		case i.timedOut(err):
			return out, KindTimeout, fmt.Errorf("deadline of %s passed: %w", i.v.lim.Deadline, err)
		case i.atCeiling():
			return out, KindMemory, fmt.Errorf("memory grew to its limit of %d pages: %w", i.v.c.maxPages, err)
		}
		return out, KindTrap, err
	}
	out.Result = int32(uint32(i.stack[0]))
	switch {
	case cs.wrote:
		r, err := cs.decoded()
		if err != nil {
			return out, KindResponse, err
		}
		out.Response, out.Wrote = r, true
	case cs.tooLarge:
		return out, KindResponse, fmt.Errorf("response envelope over the limit of %d bytes", i.v.lim.MaxResponseBytes)
	}
	return out, 0, nil
}

// timedOut reports whether err is the guest's trap at the stop check after
// the watchdog raised the flag for the deadline: `unreachable`, which wazero
// exports no value for, only its text. A guest that failed otherwise, say by
// overflowing its stack, reports that instead, though it also ran too long.
func (i *instance) timedOut(err error) bool {
	return errors.Is(i.cc.Err(), context.DeadlineExceeded) &&
		strings.HasPrefix(err.Error(), "wasm error: unreachable")
}

// callState is an instance's per-call state, which the host imports reach
// through Host.bind.
type callState struct {
	v   *version
	in  *Input
	enc encoder
	// reqLen is the request envelope's length; req is the envelope, encoded
	// when the guest first reads it (nil until then).
	reqLen int
	req    []byte
	// resp holds the last response envelope written; wrote says whether
	// one was, tooLarge whether a write was refused for its size since.
	resp           []byte
	wrote          bool
	tooLarge       bool
	unavailable    bool
	unavailableErr error // the first flow failure, for the 503's message
	// last is the envelope decoded last, and lastResp what it decoded to
	// when lastOK (its body the instance's own, not in a caller's room).
	last     []byte
	lastResp Response
	lastOK   bool
	// headers is the header map decoded last, for a guest whose body
	// changes (a counter) but whose headers do not.
	headers headerMemo
}

// maxCachedResponse bounds the envelope an instance keeps decoded.
const maxCachedResponse = 4 << 10

// decoded returns the response the guest wrote, decoding it unless it is
// the envelope decoded last: a guest that answers the same bytes every call
// (rift.Static, a WAT data segment) then costs no decoding and no
// allocation. A body decoded afresh goes into the caller's room
// (Input.BodyRoom) when it lends one, so a guest whose body changes every
// call (a counter) allocates nothing either; an envelope seen twice in a
// row is decoded into a body of its own, which is kept and shared, so a
// Response handed out earlier never changes.
func (c *callState) decoded() (Response, error) {
	same := len(c.last) > 0 && string(c.resp) == string(c.last)
	if same && c.lastOK {
		return c.lastResp, nil
	}
	room := c.in.BodyRoom
	if same {
		room = nil
	}
	r, err := decodeResponse(c.resp, &c.headers, room)
	if err != nil {
		return Response{}, err
	}
	c.last, c.lastResp, c.lastOK = c.last[:0], Response{}, false
	if len(c.resp) <= maxCachedResponse {
		c.last = append(c.last, c.resp...)
		if room == nil {
			c.lastResp, c.lastOK = r, true
		}
	}
	return r, nil
}

func (c *callState) begin(in *Input) {
	c.in = in
	c.req = nil
	var ok bool
	if c.reqLen, ok = requestSize(in); !ok {
		c.reqLen = len(c.request())
	}
	c.wrote, c.tooLarge, c.unavailable, c.unavailableErr = false, false, false, nil
}

// request returns the call's request envelope, encoding it on first use.
func (c *callState) request() []byte {
	if c.req == nil {
		c.req = c.enc.encodeRequest(c.in)
	}
	return c.req
}

// end drops references to the caller's data, and buffers a huge call grew,
// so an idle instance pins neither.
func (c *callState) end() {
	c.in = nil
	const keep = 64 << 10
	if cap(c.resp) > keep {
		c.resp = nil
	}
	if cap(c.enc.buf) > keep {
		c.enc.buf = nil
	}
	c.req = nil
}

// logWriter sends a guest's stdout or stderr to the log at debug level.
type logWriter struct {
	log    *slog.Logger
	module string
	stream string
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.log.Debug("plugin output", "module", w.module, "stream", w.stream, "text", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
