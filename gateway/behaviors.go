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
}

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
	var r struct {
		Is struct {
			StatusCode json.RawMessage `json:"statusCode"`
			Body       json.RawMessage `json:"body"`
		} `json:"is"`
	}
	_ = json.Unmarshal(response, &r)
	out := &behaviors{b: b, tcp: bd.Imposter.Spec().Protocol == "tcp"}
	var s string
	if json.Unmarshal(r.Is.StatusCode, &s) == nil {
		out.statusText = s
	}
	body := bytes.TrimSpace(r.Is.Body)
	out.jsonBody = len(body) > 0 && (body[0] == '{' || body[0] == '[')
	return out, nil
}

// Apply implements imposter.Behaviors.
func (b *behaviors) Apply(ctx context.Context, req *message.Request, resp *message.Response) error {
	br := &behavior.Response{Response: resp, StatusText: b.statusText, JSONBody: b.jsonBody, TCP: b.tcp}
	if err := b.b.Apply(ctx, req, br); err != nil {
		return err
	}
	if b.statusText != "" {
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
	out, err := d.c.call(ctx, d.imp, req, d.imp.FlowID(req), resp.Response)
	if err := pluginFailure(out, err, "decorate plugin"); err != nil {
		return err
	}
	if out.Result != 0 {
		return mberr.New(mberr.PluginError, "decorate plugin returned "+strconv.Itoa(int(out.Result)))
	}
	if out.Wrote {
		*resp.Response = *fromPlugin(&out.Response)
	}
	return nil
}
