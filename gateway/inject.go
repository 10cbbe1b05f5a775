package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"github.com/riftgate/riftgate/gateway/behavior"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/inject"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/predicate"
)

// flowOf tells injection which flow a request's `state` is.
func flowOf(imp *imposter.Imposter) inject.FlowOf {
	return func(r *message.Request) (string, flow.Policy) {
		return imp.FlowID(r), imp.Spec().Flow.Policy
	}
}

// injectResponder is a response `inject`.
type injectResponder struct {
	p        *inject.Program
	imp      *imposter.Imposter
	defaults message.ResponseFields // the imposter's defaultResponse
	heads    heads
}

// Scripts that do not compile are taken, as mb takes them, and fail each
// request that runs them with the error mb gives then.
func (e *engine) injectResponder(raw json.RawMessage, b imposter.Build) (imposter.Responder, error) {
	p, err := e.inject.Response(scriptSource(raw))
	if err != nil {
		return failing{injectError(err)}, nil
	}
	r := &injectResponder{p: p, imp: b.Imposter}
	if r.imp.Spec().IsHTTP() {
		// Checked when the imposter was made, so it parses.
		r.defaults, _ = message.ParseResponseFields(r.imp.Spec().DefaultResponse)
	}
	return r, nil
}

// scriptSource is what mb evaluates for a script field: String(value).
func scriptSource(raw json.RawMessage) string {
	var src string
	if json.Unmarshal(raw, &src) == nil {
		return src
	}
	return string(raw)
}

// failing answers every request with an error found when it was compiled.
type failing struct{ err error }

func (f failing) Respond(context.Context, *imposter.Call) (*message.Response, error) {
	return nil, f.err
}

func (f failing) Decorate(context.Context, *message.Request, *behavior.Response) error { return f.err }

func (f failing) WaitMillis(context.Context, *message.Request) (int, error) { return 0, f.err }

func (f failing) Match(*message.Request) bool { return false }

func (r *injectResponder) Respond(ctx context.Context, call *imposter.Call) (*message.Response, error) {
	env := inject.Env{Request: call.Request, FlowID: call.FlowID, Policy: r.imp.Spec().Flow.Policy}
	if !r.imp.Spec().IsHTTP() {
		out, err := r.p.RespondJSON(ctx, env)
		if err != nil {
			return nil, injectError(err)
		}
		return r.imp.BuildResponse(out)
	}
	f, shown, err := r.p.RespondShown(ctx, env, call.ShowsResponse())
	if err != nil {
		return nil, injectError(err)
	}
	resp, _, err := f.ResponseInto(&r.defaults, call.Scratch())
	if err != nil {
		return nil, mberr.New(mberr.BadData, "invalid response: "+err.Error())
	}
	resp.MB = shown
	return r.heads.share(resp), nil
}

// heads renders the status and headers of a responder's answers once they
// repeat: an answer with the status, headers and mode of the one before
// shares its rendered header (message.Response.Rendered), and is written
// as a static `is` is, without setting each header again (which fasthttp
// validates). A script's counter answers the same head with a new body
// every time. (A call that finds another sharing does not wait.)
type heads struct {
	mu   sync.Mutex
	last *message.Response // the previous answer's head, without its body
}

func (h *heads) share(r *message.Response) *message.Response {
	if !h.mu.TryLock() {
		return r
	}
	defer h.mu.Unlock()
	if l := h.last; l != nil && l.StatusCode == r.StatusCode && l.Binary == r.Binary && slices.Equal(l.Headers, r.Headers) {
		if l.Rendered == nil {
			l.Rendered = imposter.RenderHeader(l)
		}
		r.Rendered = l.Rendered
		return r
	}
	h.last = &message.Response{StatusCode: r.StatusCode, Binary: r.Binary, Headers: slices.Clone(r.Headers)}
	return r
}

// injectError turns a flow store outage inside a script into the 503 every
// stateful stub gives.
func injectError(err error) error {
	switch {
	case errors.Is(err, inject.ErrContended):
		return mberr.New(mberr.FlowUnavailable, err.Error())
	case errors.Is(err, flow.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return mberr.New(mberr.FlowUnavailable, flow.Describe(err))
	case errors.Is(err, inject.ErrBadResponse):
		return mberr.New(mberr.BadData, "invalid response: "+err.Error())
	}
	var ie *inject.Error
	if errors.As(err, &ie) && ie.MB != nil {
		e := *ie.MB
		e.Data = ie.Data
		return &e
	}
	return err
}

// injectPredicate compiles a predicate `inject` for imp, or refuses it when
// injection is off.
func (e *engine) injectPredicate(imp *imposter.Imposter) func(string) (predicate.Predicate, error) {
	if e.inject == nil {
		return nil
	}
	return func(src string) (predicate.Predicate, error) {
		p, err := e.inject.Predicate(src)
		if err != nil {
			// mb answers 500 where riftgate's predicates, which cannot
			// fail, do not match (docs/mountebank-differences.md).
			e.g.log.Warn("predicate injection does not compile; it matches nothing", "err", err)
			return failing{err}, nil
		}
		return p.Matcher(flowOf(imp)), nil
	}
}

// injectHooks wires JavaScript behaviors when --allowInjection is on; off,
// every hook is nil and the behavior package refuses them as mb does.
func (e *engine) injectHooks(imp *imposter.Imposter) behavior.InjectHooks {
	if e.inject == nil {
		return behavior.InjectHooks{}
	}
	return behavior.InjectHooks{
		Decorate: func(src string) (behavior.Decorator, error) {
			d, err := e.inject.Decorate(src, flowOf(imp))
			if err != nil {
				return failing{injectError(err)}, nil
			}
			return d, nil
		},
		ShellTransform: e.inject.ShellTransform,
		Wait: func(src string) (behavior.Waiter, error) {
			w, err := e.inject.Wait(src)
			if err != nil {
				return failing{injectError(err)}, nil
			}
			return w, nil
		},
	}
}
