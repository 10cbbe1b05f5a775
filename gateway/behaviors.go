package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/riftgate/riftgate/gateway/behavior"
	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
)

// behaviors adapts gateway/behavior to the imposter's Behaviors: it knows,
// from the response's JSON, what the behavior package needs besides the
// response itself (a tokenized status code, a JSON object body).
type behaviors struct {
	b          *behavior.Behaviors
	statusText string
	jsonBody   bool
	tcp        bool // a tcp imposter's: the body is its data
	object     bool // the body is the protocol's response object (WebSocket's, grpc's, a custom protocol's)
	// unset are the fields the stub's `is` left out, and defaults what
	// mb fills them with after the behaviors ran.
	unset    behavior.Fields
	defaults *message.Response
	reads    bool // b.ReadsResponse(), asked once
}

// ReadsResponse reports whether a decorator or a shellTransform sees the
// response object (imposter.Call.ShowsResponse).
func (b *behaviors) ReadsResponse() bool { return b.reads }

func (e *engine) compileBehaviors(response json.RawMessage, bd imposter.Build) (imposter.Behaviors, error) {
	b, err := behavior.Compile(response, behavior.Options{
		Inject: e.injectHooks(bd.Imposter),
		Wasm: func(spec json.RawMessage) (behavior.Decorator, error) {
			c, err := e.compileWasm(spec, "decorate", bd)
			if err != nil {
				return nil, err
			}
			return wasmDecorator{c, bd.Imposter}, nil
		},
	})
	if err != nil {
		return nil, err
	}
	for _, w := range b.Warnings() {
		e.g.log.Warn(w)
	}
	if b.Empty() {
		return nil, nil
	}
	var is []json.RawMessage // statusCode, headers, body; nil unless an object
	if m, err := message.Members(response, "is"); err == nil && !message.Falsy(m[0]) {
		is, _ = message.Members(m[0], "statusCode", "headers", "body")
	}
	out := &behaviors{b: b, tcp: bd.Imposter.Spec().Protocol == "tcp", object: bd.Imposter.Spec().IsWS() || bd.Imposter.Spec().IsGRPC() || bd.Imposter.IsCustom(), reads: b.ReadsResponse()}
	if out.object {
		// The body is the whole response object, JSON: tokens are
		// replaced in its strings, and nothing is left to defaults.
		out.jsonBody = true
		return out, nil
	}
	if is != nil && !out.tcp {
		// Only an `is` can leave fields out: proxied and injected
		// responses have them all.
		for _, f := range []struct {
			raw json.RawMessage
			bit behavior.Fields
		}{{is[0], behavior.StatusField}, {is[1], behavior.HeadersField}, {is[2], behavior.BodyField}} {
			if message.Falsy(f.raw) { // mb's `||`: the defaultResponse gives it
				out.unset |= f.bit
			}
		}
	} else {
		is = make([]json.RawMessage, 3)
	}
	if !out.tcp {
		// A decorator may leave out what the object it saw had (an
		// injection's answer, as mb holds it, has only what it gave).
		if out.defaults, err = bd.Imposter.BuildResponse(nil); err != nil {
			return nil, err
		}
	}
	var s string
	if json.Unmarshal(is[0], &s) == nil {
		out.statusText = s
	}
	body := bytes.TrimSpace(is[2])
	out.jsonBody = len(body) > 0 && (body[0] == '{' || body[0] == '[')
	return out, nil
}

// Apply implements imposter.Behaviors.
func (b *behaviors) Apply(ctx context.Context, req *message.Request, resp *message.Response) error {
	br := &behavior.Response{Response: resp, StatusText: b.statusText, JSONBody: b.jsonBody, TCP: b.tcp, Object: b.object, Unset: b.unset}
	if err := b.b.Apply(ctx, req, br); err != nil {
		return err
	}
	if d := b.defaults; d != nil {
		if br.Unset&behavior.StatusField != 0 {
			resp.StatusCode, br.StatusText = d.StatusCode, ""
		}
		if br.Unset&behavior.HeadersField != 0 {
			resp.Headers = d.Headers
		}
		if br.Unset&behavior.BodyField != 0 {
			resp.Body, resp.Binary = d.Body, d.Binary
		}
	}
	if br.StatusText != "" {
		code, err := strconv.Atoi(strings.TrimSpace(br.StatusText))
		if err != nil || code < 100 || code > 999 {
			return mberr.New(mberr.BadData, "statusCode after behaviors is not a status: "+br.StatusText)
		}
		resp.StatusCode = code
	}
	return nil
}

// wasmDecorator is riftgate's {"decorate": {"wasm": ...}} behavior; it runs
// against the request's flow like any plugin call.
type wasmDecorator struct {
	c   *wasmCall
	imp *imposter.Imposter
}

func (d wasmDecorator) Decorate(ctx context.Context, req *message.Request, resp *behavior.Response) error {
	out, err := d.c.call(ctx, d.imp, req, d.imp.FlowID(req), resp.Response, nil)
	if err := pluginFailure(out, err, "decorate plugin"); err != nil {
		return err
	}
	if out.Result != 0 {
		return mberr.New(mberr.PluginError, "decorate plugin returned "+strconv.Itoa(int(out.Result)))
	}
	if out.Wrote && d.imp.Spec().IsGRPC() {
		// The plugin saw the response object as its body, and writes
		// back the new one.
		*resp.Response = message.Response{Body: bytes.Clone(out.Response.Body)}
		return nil
	}
	if out.Wrote && d.imp.Spec().IsWS() {
		// The plugin saw the response object as its body: a JSON object
		// it writes back is the new one, anything else one message.
		if _, err := message.ObjectFields(out.Response.Body); err == nil {
			*resp.Response = message.Response{Body: bytes.Clone(out.Response.Body)}
		} else {
			*resp.Response = *wsPluginResponse(&out.Response)
		}
		return nil
	}
	if out.Wrote {
		*resp.Response = *fromPlugin(&out.Response)
	}
	return nil
}
