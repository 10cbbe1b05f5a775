package gateway

import (
	"context"
	"encoding/json"
	"errors"

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
}

func (e *engine) injectResponder(raw json.RawMessage, b imposter.Build) (imposter.Responder, error) {
	var src string
	if err := json.Unmarshal(raw, &src); err != nil {
		return nil, mberr.New(mberr.BadData, "inject must be a function's source").WithSource(raw)
	}
	p, err := e.inject.Response(src)
	if err != nil {
		return nil, err
	}
	r := &injectResponder{p: p, imp: b.Imposter}
	if r.http() {
		// Checked when the imposter was made, so it parses.
		r.defaults, _ = message.ParseResponseFields(r.imp.Spec().DefaultResponse)
	}
	return r, nil
}

// http reports whether the imposter answers http: a tcp one answers data.
func (r *injectResponder) http() bool {
	p := r.imp.Spec().Protocol
	return p == "http" || p == "https"
}

func (r *injectResponder) Respond(ctx context.Context, call *imposter.Call) (*message.Response, error) {
	id, policy := flowOf(r.imp)(call.Request)
	env := inject.Env{Request: call.Request, FlowID: id, Policy: policy}
	if !r.http() {
		out, err := r.p.RespondJSON(ctx, env)
		if err != nil {
			return nil, injectError(err)
		}
		return r.imp.BuildResponse(out)
	}
	f, err := r.p.Respond(ctx, env)
	if err != nil {
		return nil, injectError(err)
	}
	resp, _, err := f.Response(&r.defaults)
	if err != nil {
		return nil, mberr.New(mberr.BadData, "invalid response: "+err.Error())
	}
	return resp, nil
}

// injectError turns a flow store outage inside a script into the 503 every
// stateful stub gives.
func injectError(err error) error {
	switch {
	case errors.Is(err, inject.ErrContended):
		return mberr.New(mberr.FlowUnavailable, err.Error())
	case errors.Is(err, flow.ErrUnavailable):
		return mberr.New(mberr.FlowUnavailable, "the flow's owner is unavailable")
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
			return nil, err
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
		Decorate:       func(src string) (behavior.Decorator, error) { return e.inject.Decorate(src, flowOf(imp)) },
		ShellTransform: e.inject.ShellTransform,
		Wait:           func(src string) (behavior.Waiter, error) { return e.inject.Wait(src) },
	}
}
