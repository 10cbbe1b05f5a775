package inject

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"time"

	"github.com/dop251/goja"
	"github.com/riftgate/riftgate/gateway/message"
)

// maxFunctions bounds a runtime's cache of evaluated functions; past it the
// cache starts over.
const maxFunctions = 1024

// vm is one goja runtime and what it keeps between scripts. One script at a
// time: goja runtimes are not goroutine-safe.
type vm struct {
	rt        *goja.Runtime
	fns       map[*goja.Program]goja.Callable
	parse     goja.Callable
	stringify goja.Callable
	logger    *goja.Object
	callback  goja.Value
	bufferFn  goja.Callable // tcp.go's Buffer shim, made on first use
	// global is the runtime's own global object. Each run gets a fresh one
	// in front of it, scope (see run), so that what a script writes to
	// globalThis is gone for the next.
	global, scopeObj *goja.Object
	// The views of the current run's config and request.
	req    requestView
	cfg    configView
	st     stateView
	reqObj *goja.Object
	cfgObj *goja.Object
	stObj  *goja.Object

	w watch // the watchdog's hold on the runtime

	// Per run.
	ctx      context.Context
	answered bool
	answer   goja.Value
	timers   []timer
	seq      int
	conns    []net.Conn // the net module's sockets (netmod.go)
}

type timer struct {
	due  time.Time
	seq  int
	fn   goja.Callable
	args []goja.Value
}

func newVM(log *slog.Logger) *vm {
	rt := goja.New()
	rt.SetMaxCallStackSize(maxCallStack)
	v := &vm{rt: rt, fns: make(map[*goja.Program]goja.Callable)}
	v.w.rt, v.w.expired = rt, make(chan struct{})
	j := rt.Get("JSON").ToObject(rt)
	v.parse, _ = goja.AssertFunction(j.Get("parse"))
	v.stringify, _ = goja.AssertFunction(j.Get("stringify"))

	v.logger = rt.NewObject()
	for name, level := range map[string]slog.Level{
		"debug": slog.LevelDebug, "info": slog.LevelInfo,
		"warn": slog.LevelWarn, "error": slog.LevelError,
	} {
		_ = v.logger.Set(name, func(c goja.FunctionCall) goja.Value {
			log.Log(v.ctx, level, v.format(c.Arguments), "source", "inject")
			return goja.Undefined()
		})
	}
	// Node scripts often log with console.log; it goes to the same logger.
	console := rt.NewObject()
	for _, name := range []string{"info", "warn", "error", "debug"} {
		_ = console.Set(name, v.logger.Get(name))
	}
	_ = console.Set("log", v.logger.Get("info"))
	_ = rt.Set("console", console)

	v.callback = rt.ToValue(func(c goja.FunctionCall) goja.Value {
		// The first answer wins, as with a Promise's resolve.
		if !v.answered {
			v.answered, v.answer = true, c.Argument(0)
		}
		return goja.Undefined()
	})
	_ = rt.Set("setTimeout", v.setTimeout)
	_ = rt.Set("clearTimeout", v.clearTimeout)
	_ = rt.Set("setImmediate", func(c goja.FunctionCall) goja.Value {
		return v.setTimeout(goja.FunctionCall{This: c.This, Arguments: append([]goja.Value{c.Argument(0), v.rt.ToValue(0)}, c.Arguments[min(1, len(c.Arguments)):]...)})
	})
	v.global = rt.GlobalObject()
	v.scopeObj = v.global
	// globalThis is the run's scope, found through an accessor on the
	// runtime's global, so that a scope needs no property of its own: a
	// goja object with one costs a map, most of what a scope cost. Setting
	// it gives the scope its own, as Node's writable globalThis does.
	_ = v.global.DefineAccessorProperty("globalThis",
		rt.ToValue(func(goja.FunctionCall) goja.Value { return v.scopeObj }),
		rt.ToValue(func(c goja.FunctionCall) goja.Value {
			_ = v.scopeObj.DefineDataProperty("globalThis", c.Argument(0), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
			return goja.Undefined()
		}),
		goja.FLAG_TRUE, goja.FLAG_FALSE)
	v.reqObj = rt.NewDynamicObject(&v.req)
	v.req.self = v.reqObj
	v.cfgObj = rt.NewDynamicObject(&v.cfg)
	installNode(v)
	v.stObj = rt.NewDynamicObject(&v.st)
	return v
}

// config returns the run's config object over req, as mb builds it:
// {request, state, logger} with callback or response when given, and the
// request's fields (views; see view.go). The objects are the runtime's own,
// made once: a script that keeps one past its run sees the next run's.
func (v *vm) config(req *message.Request, state, callback, response goja.Value) *goja.Object {
	ro := v.request(req)
	v.cfg.reset(ro, &v.req, state, v.logger, callback, response)
	return v.cfgObj
}

// request returns the run's request object over r: a view of an http
// request, or the object mb saves a tcp or smtp request as.
func (v *vm) request(r *message.Request) *goja.Object {
	if r == nil {
		r = &message.Request{}
	}
	if r.Kind != message.HTTP {
		return v.otherRequest(r)
	}
	v.req.reset(v, r)
	return v.reqObj
}

// scope gives the run a global object of its own: an empty object whose
// prototype is the runtime's global, so that scripts read every built-in
// through it while what they write to globalThis (or to `this` of a
// sloppy function, or with an indirect eval's var) lands on it and is
// dropped with it. Built-in objects themselves (Math, JSON, Array.prototype)
// are shared, as they are in mb's one Node process.
func (v *vm) scope() {
	v.scopeObj = v.rt.CreateObject(v.global)
	v.rt.SetGlobalObject(v.scopeObj)
}

// unscope puts the runtime's own global object back.
func (v *vm) unscope() {
	v.scopeObj = v.global
	v.rt.SetGlobalObject(v.global)
}

// setTimeout queues fn; timers run, in due order, after the script's
// function returns and only until the script answers.
func (v *vm) setTimeout(c goja.FunctionCall) goja.Value {
	fn, ok := goja.AssertFunction(c.Argument(0))
	if !ok {
		panic(v.rt.NewTypeError("setTimeout: callback is not a function"))
	}
	ms := c.Argument(1).ToFloat()
	if !(ms > 0) { // NaN too, as in Node
		ms = 0
	}
	v.seq++
	var args []goja.Value
	if len(c.Arguments) > 2 {
		args = append(args, c.Arguments[2:]...)
	}
	v.timers = append(v.timers, timer{
		due: time.Now().Add(time.Duration(ms * float64(time.Millisecond))),
		seq: v.seq, fn: fn, args: args,
	})
	return v.rt.ToValue(v.seq)
}

func (v *vm) clearTimeout(c goja.FunctionCall) goja.Value {
	id := c.Argument(0).ToInteger()
	for i, t := range v.timers {
		if int64(t.seq) == id {
			v.timers = append(v.timers[:i], v.timers[i+1:]...)
			break
		}
	}
	return goja.Undefined()
}

// format renders a logger call's arguments the way Node's util.format does
// for the common cases: %s, %d, %i and %j in a leading string, the rest
// appended with spaces.
func (v *vm) format(args []goja.Value) string {
	var b strings.Builder
	i := 0
	if len(args) > 0 {
		if s, ok := args[0].Export().(string); ok {
			i = 1
			for j := 0; j < len(s); j++ {
				if s[j] != '%' || j+1 == len(s) {
					b.WriteByte(s[j])
					continue
				}
				switch s[j+1] {
				case 's', 'd', 'i', 'j', 'o', 'O':
					if i < len(args) {
						if s[j+1] == 'j' || s[j+1] == 'o' || s[j+1] == 'O' {
							b.WriteString(v.show(args[i]))
						} else {
							b.WriteString(args[i].String())
						}
						i++
					} else {
						b.WriteString(s[j : j+2])
					}
					j++
				case '%':
					b.WriteByte('%')
					j++
				default:
					b.WriteByte('%')
				}
			}
		}
	}
	for ; i < len(args); i++ {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(v.show(args[i]))
	}
	return b.String()
}

// show renders a value for a log line: objects as JSON, the rest as text.
func (v *vm) show(x goja.Value) string {
	if o, ok := x.(*goja.Object); ok {
		if _, isFn := goja.AssertFunction(o); !isFn {
			if s, ok := v.toJSON(o); ok {
				return s
			}
		}
	}
	return x.String()
}

// toJSON is JSON.stringify(x); ok is false when the result is undefined or
// stringify throws.
func (v *vm) toJSON(x goja.Value) (string, bool) {
	s, err := v.stringify(goja.Undefined(), x)
	if err != nil || goja.IsUndefined(s) {
		return "", false
	}
	return s.String(), true
}

// fromJSON is JSON.parse(text).
func (v *vm) fromJSON(text string) (goja.Value, error) {
	return v.parse(goja.Undefined(), v.rt.ToValue(text))
}

// function returns the function a program evaluates to on this runtime.
// Evaluating it again per call would only repeat the same work.
func (v *vm) function(p *goja.Program) (goja.Callable, error) {
	if f, ok := v.fns[p]; ok {
		return f, nil
	}
	val, err := v.rt.RunProgram(p)
	if err != nil {
		return nil, err
	}
	f, ok := goja.AssertFunction(val)
	if !ok {
		return nil, fmt.Errorf("TypeError: %s is not a function", val.String())
	}
	if len(v.fns) >= maxFunctions {
		clear(v.fns)
	}
	v.fns[p] = f
	return f, nil
}

// runTimers runs queued timers in due order until done reports true or the
// queue is empty, sleeping until each is due.
func (v *vm) runTimers(done func() bool) error {
	for !done() && len(v.timers) > 0 {
		next := 0
		for i, t := range v.timers {
			if t.due.Before(v.timers[next].due) {
				next = i
			}
		}
		t := v.timers[next]
		v.timers = append(v.timers[:next], v.timers[next+1:]...)
		if d := time.Until(t.due); d > 0 {
			sleep := time.NewTimer(d)
			select {
			case <-sleep.C:
			case <-v.w.expired:
				sleep.Stop()
				return v.w.why()
			}
		}
		if _, err := t.fn(goja.Undefined(), t.args...); err != nil {
			return err
		}
	}
	return nil
}

// settle unwraps a Promise answer, running timers while it is pending.
func (v *vm) settle(x goja.Value) (goja.Value, error) {
	for {
		o, ok := x.(*goja.Object)
		if !ok || o.ExportType() != promiseType {
			return x, nil
		}
		p, ok := o.Export().(*goja.Promise)
		if !ok {
			return x, nil
		}
		switch p.State() {
		case goja.PromiseStateFulfilled:
			x = p.Result()
		case goja.PromiseStateRejected:
			return nil, &rejection{p.Result().String()}
		default:
			if len(v.timers) == 0 {
				return nil, errors.New("the promise never settled (riftgate runs no event loop beyond setTimeout)")
			}
			if err := v.runTimers(func() bool { return p.State() != goja.PromiseStatePending }); err != nil {
				return nil, err
			}
		}
	}
}

var promiseType = reflect.TypeFor[*goja.Promise]()

type rejection struct{ reason string }

func (r *rejection) Error() string { return r.reason }

// run runs body on a pooled runtime, which the watchdog interrupts when
// the engine's timeout passes or ctx ends. A runtime that was interrupted
// or panicked is discarded.
func (e *Engine) run(ctx context.Context, body func(v *vm) error) (err error) {
	v, err := e.acquire(ctx)
	if err != nil {
		return err
	}
	v.ctx, v.answered, v.answer, v.timers = ctx, false, nil, v.timers[:0]
	v.scope()
	v.w.begin(ctx, time.Now().Add(e.timeout))
	discard := true
	defer func() {
		if v.w.end() {
			discard = true // interrupted, perhaps just as it returned
		}
		v.closeConns()
		v.ctx, v.answer, v.timers = nil, nil, v.timers[:0]
		v.unscope()
		v.req.drop()
		v.cfg.drop()
		v.st.drop()
		e.release(v, discard)
	}()
	defer func() {
		if p := recover(); p != nil {
			err = script(fmt.Errorf("runtime panic: %v", p))
		}
	}()
	if err = body(v); err == nil {
		discard = false
		return nil
	}
	if ie := interrupted(err); ie != nil {
		if r, ok := ie.Value().(error); ok {
			return r
		}
		return ErrTimeout
	}
	// An uncatchable stack overflow leaves a runtime nobody vouches for.
	var so *goja.StackOverflowError
	discard = errors.As(err, &so)
	return err
}

// interrupted returns the interruption err is, or nil. (Declared only once
// there is an error, the target of errors.As costs no allocation on the
// way of a script that succeeds.)
func interrupted(err error) *goja.InterruptedError {
	if err == nil {
		return nil
	}
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		return ie
	}
	return nil
}
