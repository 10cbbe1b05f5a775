// Package inject runs Mountebank's JavaScript injection on goja: response
// "inject", predicate "inject", the "decorate" behavior, "wait" functions,
// the "shellTransform" behavior, and the "inject" predicate generators of
// proxies, with Mountebank 2.9.1's call forms and error messages.
//
// The `state` object a script sees is the request's flow (see
// gateway/flow): its top-level properties are the flow's keys and their
// values are the keys' JSON values. Changed properties are written back
// after the script returns, and removed ones deleted, all at once and only
// if the flow did not change meanwhile: else the script runs again on the
// flow as it is (state.go). So a script's updates are never lost or mixed
// with another's, as in Mountebank's single-threaded Node, whichever node
// owns the flow.
//
// Each script runs on a pooled goja runtime under a deadline. A runtime
// that was interrupted or panicked is thrown away, so a script that loops
// forever, throws or returns garbage costs its own request an error and
// nothing else. The deadline is enforced with goja's Interrupt, which only
// stops JavaScript code: a single built-in call (a huge String.repeat, say)
// runs to its end, and there is no memory limit.
//
// goja has no event loop. A script may answer by returning a value, by
// calling the callback before it returns, by returning a Promise (an async
// function), or from a setTimeout callback: this package runs Promise jobs
// and a minimal timer queue until the script answers or its deadline
// passes. Node's require, process and Buffer do not exist.
//
// Runtimes are reused, but each run has a global object of its own: what a
// script writes to globalThis is gone for the next request. A change to a
// built-in object (a prototype, Math) stays on its runtime. Keep state in
// `state`, which is per flow and survives restarts.
//
// Mountebank's endOfRequestResolver is used by tcp imposters only; http
// imposters never call it, so this package does not implement it.
package inject

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"
	"github.com/riftgate/riftgate/gateway/flow"
)

// ErrTimeout is wrapped by the error of a script that ran past its deadline.
var ErrTimeout = errors.New("inject: script deadline exceeded")

// ErrClosed is returned by calls on a closed Engine.
var ErrClosed = errors.New("inject: engine closed")

const (
	defaultTimeout = time.Second
	// maxPrograms bounds the compile cache; stubs that come and go would
	// otherwise grow it forever. Past it, one entry is dropped at random.
	maxPrograms = 4096
	// maxCallStack turns runaway recursion into a RangeError instead of
	// growing the runtime's stack until the deadline.
	maxCallStack = 4096
)

// Options configure an Engine.
type Options struct {
	// Timeout bounds one script run, timers included, and one shell
	// command. Zero means 1s.
	Timeout time.Duration
	// Logger receives the scripts' logger calls and injection errors.
	// slog.Default() when nil.
	Logger *slog.Logger
	// Flows holds the state scripts see. When nil, or when a call's
	// FlowID is empty, state is an empty object that is not kept.
	Flows flow.Store
	// Runtimes bounds the pool of goja runtimes (how many scripts run at
	// once). Zero means 2×GOMAXPROCS.
	Runtimes int
}

// Engine compiles and runs injected JavaScript. It is safe for concurrent
// use.
type Engine struct {
	timeout time.Duration
	log     *slog.Logger
	flows   flow.Store

	progMu   sync.Mutex
	programs map[string]*goja.Program
	compiles atomic.Int64 // goja.Compile calls, for tests and metrics

	slots  chan struct{} // one token per runtime that may exist
	idleMu sync.Mutex
	idle   []*vm
	closed atomic.Bool

	locks *flow.Locks // scripts on one flow take turns (withState)
	wd    watchdog
}

// New returns an Engine.
func New(o Options) *Engine {
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Runtimes <= 0 {
		o.Runtimes = 2 * runtime.GOMAXPROCS(0)
	}
	e := &Engine{
		timeout:  o.Timeout,
		log:      o.Logger,
		flows:    o.Flows,
		programs: make(map[string]*goja.Program),
		slots:    make(chan struct{}, o.Runtimes),
		locks:    flow.NewLocks(),
	}
	return e
}

// Close drops the idle runtimes and stops the scripts still running (they
// fail with ErrClosed). Calls after Close fail with ErrClosed.
func (e *Engine) Close() {
	e.closed.Store(true)
	e.idleMu.Lock()
	idle := e.idle
	e.idle = nil
	e.idleMu.Unlock()
	for _, v := range idle {
		e.wd.remove(&v.w)
	}
	e.wd.close(ErrClosed)
}

// Compiles reports how many distinct sources have been compiled.
func (e *Engine) Compiles() int64 { return e.compiles.Load() }

// compile returns the program that evaluates src (a function expression)
// to a function, compiling each distinct source once.
func (e *Engine) compile(src string) (*goja.Program, error) {
	e.progMu.Lock()
	p, ok := e.programs[src]
	e.progMu.Unlock()
	if ok {
		return p, nil
	}
	// The newline keeps a trailing // comment from swallowing the ")".
	p, err := goja.Compile("inject", "("+src+"\n)", true)
	if err != nil {
		return nil, err
	}
	e.compiles.Add(1)
	e.progMu.Lock()
	if len(e.programs) >= maxPrograms {
		for k := range e.programs {
			delete(e.programs, k)
			break
		}
	}
	e.programs[src] = p
	e.progMu.Unlock()
	return p, nil
}

// lockFlow serializes scripts on one flow: it returns the flow's lock,
// taken, for unlockFlow (nil when there is no flow to lock). A request
// gives its place up once it can no longer answer within its budget.
func (e *Engine) lockFlow(ctx context.Context, flowID string) (*flow.Lock, error) {
	if flowID == "" || e.flows == nil {
		return nil, nil
	}
	return e.locks.Lock(ctx, flowID)
}

func (e *Engine) unlockFlow(flowID string, l *flow.Lock) {
	if l != nil {
		e.locks.Unlock(flowID, l)
	}
}

// acquire takes a runtime from the pool, creating one while fewer than
// Runtimes exist, and waiting otherwise.
func (e *Engine) acquire(ctx context.Context) (*vm, error) {
	if e.closed.Load() {
		return nil, ErrClosed
	}
	if err := flow.Acquire(ctx, e.slots); err != nil {
		return nil, err
	}
	e.idleMu.Lock()
	if n := len(e.idle); n > 0 {
		v := e.idle[n-1]
		e.idle = e.idle[:n-1]
		e.idleMu.Unlock()
		return v, nil
	}
	e.idleMu.Unlock()
	v := newVM(e.log)
	e.wd.add(&v.w)
	return v, nil
}

// release returns v to the pool, or throws it away when its state cannot
// be trusted (interrupted, panicked) or the engine is closed.
func (e *Engine) release(v *vm, discard bool) {
	if !discard && !e.closed.Load() {
		e.idleMu.Lock()
		e.idle = append(e.idle, v)
		e.idleMu.Unlock()
	} else {
		e.wd.remove(&v.w)
	}
	<-e.slots
}
