package inject

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"

	"github.com/dop251/goja"
	"github.com/riftgate/riftgate/gateway/behavior"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
)

// Error is a script's failure: Mountebank's error for the client (code
// "invalid injection", mb's message and source) and the error behind it.
type Error struct {
	MB    *mberr.Error
	Cause error
	// Data is what mb puts in the error's "data" field: the JavaScript
	// error's message ("boom" for `throw new Error('boom')`).
	Data string
}

func (e *Error) Error() string { return e.MB.Error() + ": " + e.Cause.Error() }

// Unwrap exposes both the mberr.Error (so that mberr.As finds it) and the
// cause to errors.As and errors.Is.
func (e *Error) Unwrap() []error { return []error{e.MB, e.Cause} }

// scriptErr marks an error as the script's fault, as opposed to the flow
// store's or the caller's context.
type scriptErr struct{ err error }

func (s scriptErr) Error() string { return s.err.Error() }
func (s scriptErr) Unwrap() error { return s.err }

// script marks err as the script's fault. A JavaScript exception keeps its
// value's text ("Error: boom"), which is what mb reports, without goja's
// stack trace.
func script(err error) error {
	var ex *goja.Exception
	var so *goja.StackOverflowError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ex):
		j := jsError{text: ex.Value().String(), err: err}
		j.message = j.text
		if o, ok := ex.Value().(*goja.Object); ok {
			if m := o.Get("message"); m != nil && !goja.IsUndefined(m) {
				j.message = m.String()
			}
		}
		return scriptErr{j}
	case errors.As(err, &so):
		return scriptErr{jsError{"RangeError: Maximum call stack size exceeded", "Maximum call stack size exceeded", err}}
	}
	return scriptErr{err}
}

// isException reports whether err is a JavaScript exception.
func isException(err error) bool {
	var ex *goja.Exception
	return errors.As(err, &ex)
}

// jsError is a JavaScript error's text and message, keeping goja's error
// beneath it.
type jsError struct {
	text, message string
	err           error
}

func (j jsError) Error() string { return j.text }
func (j jsError) Unwrap() error { return j.err }

// fail turns a script's failure into mb's error, answered with 500 as mb's
// imposters answer any error while resolving a request. Flow-store and
// context errors pass through, so that ErrUnavailable still reaches the
// engine (which answers 503).
func (e *Engine) fail(msg, source string, err error) error {
	var se scriptErr
	if err == nil || (!errors.As(err, &se) && !errors.Is(err, ErrTimeout)) {
		return err
	}
	e.log.Error("injection X=> "+err.Error(), "message", msg, "source", source)
	mb := mberr.New(mberr.InvalidInjection, msg).WithSource(source)
	mb.Status = http.StatusInternalServerError
	data := err.Error()
	var j jsError
	if errors.As(err, &j) {
		data = j.message
	}
	return &Error{MB: mb, Cause: err, Data: data}
}

// refuse is the error for source that does not compile, when a stub is
// added.
func refuse(msg, source string, err error) error {
	return &Error{MB: mberr.New(mberr.InvalidInjection, msg).WithSource(source), Cause: err, Data: err.Error()}
}

// Program is a compiled response injection.
type Program struct {
	e      *Engine
	prog   *goja.Program
	source string
}

// Response compiles a response "inject" function. Source that does not
// compile is refused with mb's error.
func (e *Engine) Response(src string) (*Program, error) {
	source := "(" + src + ")(config, injectState, logger, done, imposterState);"
	p, err := e.compile(src)
	if err != nil {
		return nil, refuse("invalid response injection", source, err)
	}
	return &Program{e: e, prog: p, source: source}, nil
}

// Respond runs the injection and returns the fields of the response object
// it answered with, for the engine to complete with the imposter's
// defaultResponse.
//
// mb calls fn(config, injectState, logger, callback, imposterState); here
// injectState and imposterState are both the flow's state. The answer is
// the first value given to the callback, else the returned value when it
// is not undefined; a Promise answer is awaited.
func (p *Program) Respond(ctx context.Context, env Env) (message.ResponseFields, error) {
	out, _, err := p.RespondShown(ctx, env, false)
	return out, err
}

// RespondShown is Respond that, when show is set, also returns the object
// the script answered with as JSON: what mb holds, and --debug's match
// shows (the fields as the script gave them, defaults not filled in).
func (p *Program) RespondShown(ctx context.Context, env Env, show bool) (out message.ResponseFields, shown json.RawMessage, err error) {
	err = p.respond(ctx, env, func(v *vm, o *goja.Object) (err error) {
		if out, err = v.answerFields(o); err != nil || !show {
			return err
		}
		if text, err := v.stringify(goja.Undefined(), o); err == nil {
			shown = json.RawMessage(text.String())
		}
		return nil
	})
	return out, shown, err
}

// RespondJSON is Respond for the protocols whose responses are not http's
// (a tcp response's data): the response object as JSON.
func (p *Program) RespondJSON(ctx context.Context, env Env) (json.RawMessage, error) {
	var out json.RawMessage
	err := p.respond(ctx, env, func(v *vm, o *goja.Object) error {
		text, err := v.stringify(goja.Undefined(), o)
		if err != nil {
			return script(err)
		}
		out = json.RawMessage(text.String())
		return nil
	})
	return out, err
}

// respond runs the injection and hands the object it answered with to
// read, on the runtime.
func (p *Program) respond(ctx context.Context, env Env, read func(v *vm, o *goja.Object) error) error {
	err := p.e.withState(ctx, env, func(v *vm, state *goja.Object) error {
		fn, err := v.function(p.prog)
		if err != nil {
			return script(err)
		}
		config := v.config(env.Request, state, v.callback, nil)
		ret, err := fn(goja.Undefined(), config, state, v.logger, v.callback, state)
		if err != nil && !(v.answered && isException(err)) {
			// A throw after the callback answered does not undo the
			// answer, as a Promise resolved before it is rejected.
			return script(err)
		}
		if !v.answered && !goja.IsUndefined(ret) {
			v.answered, v.answer = true, ret
		}
		if err := v.runTimers(func() bool { return v.answered }); err != nil {
			return script(err)
		}
		if !v.answered {
			return script(errors.New("the injection neither returned a response nor called callback (riftgate runs no event loop beyond setTimeout)"))
		}
		ans, err := v.settle(v.answer)
		if err != nil {
			return script(err)
		}
		o, ok := ans.(*goja.Object)
		if _, isFn := goja.AssertFunction(ans); !ok || isFn || o.ClassName() == "Array" {
			return script(fmt.Errorf("the injection answered %s, not a response object", describe(ans)))
		}
		return read(v, o)
	})
	if err != nil {
		return p.e.fail("invalid response injection", p.source, err)
	}
	return nil
}

// describe names a value for an error message.
func describe(x goja.Value) string {
	switch {
	case x == nil || goja.IsUndefined(x):
		return "undefined"
	case goja.IsNull(x):
		return "null"
	}
	if o, ok := x.(*goja.Object); ok {
		if _, isFn := goja.AssertFunction(o); isFn {
			return "a function"
		}
		return "an " + o.ClassName()
	}
	return fmt.Sprintf("%s %s", x.ExportType(), x.String())
}

// FlowOf names the flow and write policy of a request, for the hooks
// (decorate, predicate adapters) that get only the request.
type FlowOf func(*message.Request) (flowID string, p flow.Policy)

// Predicate is a compiled predicate "inject" function.
type Predicate struct {
	e      *Engine
	prog   *goja.Program
	source string
}

// Predicate compiles a predicate "inject" function.
func (e *Engine) Predicate(src string) (*Predicate, error) {
	source := "(" + src + ")(config, logger, imposterState);"
	p, err := e.compile(src)
	if err != nil {
		return nil, refuse("invalid predicate injection", source, err)
	}
	return &Predicate{e: e, prog: p, source: source}, nil
}

// Match runs the function as mb does, fn(config, logger, imposterState)
// with config {request, state, logger}, and reports whether its result is
// truthy.
func (p *Predicate) Match(ctx context.Context, env Env) (bool, error) {
	var match bool
	err := p.e.withState(ctx, env, func(v *vm, state *goja.Object) error {
		fn, err := v.function(p.prog)
		if err != nil {
			return script(err)
		}
		config := v.config(env.Request, state, nil, nil)
		ret, err := fn(goja.Undefined(), config, v.logger, state)
		if err != nil {
			return script(err)
		}
		match = ret.ToBoolean()
		return nil
	})
	if err != nil {
		return false, p.e.fail("invalid predicate injection", p.source, err)
	}
	return match, nil
}

// Matcher adapts p to gateway/predicate's Match(*message.Request) bool,
// which has no way to report an error: a failing script is logged and does
// not match. Each call is bounded by the engine's timeout.
func (p *Predicate) Matcher(flowOf FlowOf) interface{ Match(*message.Request) bool } {
	return matcher{p, flowOf}
}

type matcher struct {
	p      *Predicate
	flowOf FlowOf
}

func (m matcher) Match(r *message.Request) bool {
	env := Env{Request: r}
	if m.flowOf != nil {
		env.FlowID, env.Policy = m.flowOf(r)
	}
	ok, err := m.p.Match(context.Background(), env)
	if err != nil {
		m.p.e.log.Error("predicate injection failed", "err", err)
	}
	return ok
}

// waiter is a compiled "wait" function.
type waiter struct {
	e    *Engine
	prog *goja.Program
	src  string
}

// Wait compiles a "wait" behavior's function.
func (e *Engine) Wait(src string) (behavior.Waiter, error) {
	p, err := e.compile(src)
	if err != nil {
		return nil, refuse("invalid wait injection", src, err)
	}
	return &waiter{e: e, prog: p, src: src}, nil
}

// WaitMillis calls the function with no arguments, as mb does, and returns
// its result as whole milliseconds (NaN and negatives are 0).
func (w *waiter) WaitMillis(ctx context.Context, _ *message.Request) (int, error) {
	var ms int
	err := w.e.run(ctx, func(v *vm) error {
		fn, err := v.function(w.prog)
		if err != nil {
			return script(err)
		}
		ret, err := fn(goja.Undefined())
		if err != nil {
			return script(err)
		}
		f := ret.ToFloat()
		switch {
		case !(f > 0):
			ms = 0
		case f >= math.MaxInt32:
			ms = math.MaxInt32
		default:
			ms = int(f)
		}
		return nil
	})
	if err != nil {
		return 0, w.e.fail("invalid wait injection", w.src, err)
	}
	return ms, nil
}

// Generate runs a proxy's predicate generator "inject" function, (fn)(config)
// with config {request, logger}, and returns the predicates it lists. It
// has gateway/proxy's InjectGenerator signature; the engine's timeout
// bounds it.
func (e *Engine) Generate(src string, request map[string]any) ([]json.RawMessage, error) {
	ctx := context.Background()
	source := "(" + src + ")(config);"
	const msg = "invalid predicateGenerator injection"
	p, err := e.compile(src)
	if err != nil {
		return nil, e.fail(msg, source, script(err))
	}
	reqJSON, err := json.Marshal(request)
	if err != nil {
		return nil, fmt.Errorf("inject: generator request: %w", err)
	}
	var preds []json.RawMessage
	err = e.run(ctx, func(v *vm) error {
		fn, err := v.function(p)
		if err != nil {
			return script(err)
		}
		r, err := v.fromJSON(string(reqJSON))
		if err != nil {
			return err
		}
		config := v.rt.NewObject()
		_ = config.Set("request", r)
		_ = config.Set("logger", v.logger)
		ret, err := fn(goja.Undefined(), config)
		if err != nil {
			return script(err)
		}
		if o, ok := ret.(*goja.Object); !ok || o.ClassName() != "Array" {
			return script(fmt.Errorf("TypeError: %s is not iterable", describe(ret)))
		}
		text, err := v.stringify(goja.Undefined(), ret)
		if err != nil {
			return script(err)
		}
		return json.Unmarshal([]byte(text.String()), &preds)
	})
	if err != nil {
		return nil, e.fail(msg, source, err)
	}
	return preds, nil
}
