package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/message"
)

// customProxy is a custom protocol's proxy (mb's out-of-process proxy):
// riftgate calls no upstream, it hands the proxy object to the protocol's
// process, which proxies and posts the answer back; that answer is then
// run through the response's behaviors and recorded as an http proxy's
// is, through the same recorder.
type customProxy struct {
	*Responder
	cfg json.RawMessage // the proxy object the process gets
}

var _ imposter.CustomProxy = (*customProxy)(nil)

// newCustom compiles a custom protocol's proxy. mb's dry run calls no
// proxy for an out-of-process protocol, so it refuses nothing about `to`.
func (f *Factory) newCustom(raw json.RawMessage) (*customProxy, error) {
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(raw, &fields)
	var s spec
	parseFields(fields, &s)
	given := s.Mode
	p, err := f.responder(s, raw)
	if err != nil {
		return nil, err
	}
	cfg := bytes.TrimSpace(raw)
	if given != p.spec.Mode {
		// mb sets the mode it falls back to on the object it hands over.
		cfg = withMode(cfg, p.spec.Mode)
	}
	return &customProxy{Responder: p, cfg: cfg}, nil
}

// withMode returns the object raw with mode set, in place if it has one.
func withMode(raw json.RawMessage, mode string) json.RawMessage {
	fields, err := message.ObjectFields(raw)
	if err != nil {
		return raw
	}
	v, _ := json.Marshal(mode)
	set := false
	for i := range fields {
		if fields[i].Key == "mode" {
			fields[i].Value, set = v, true
		}
	}
	if !set {
		fields = append(fields, message.Field{Key: "mode", Value: v})
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(message.AppendJSONString(nil, f.Key))
		b.WriteByte(':')
		b.Write(bytes.TrimSpace(f.Value))
	}
	b.WriteByte('}')
	return b.Bytes()
}

// CustomConfig implements imposter.CustomProxy.
func (p *customProxy) CustomConfig() json.RawMessage { return p.cfg }

// Respond is never called for a custom protocol's proxy: the imposter
// hands it to the process instead (imposter.CustomProxy).
func (p *customProxy) Respond(context.Context, *imposter.Call) (*message.Response, error) {
	return nil, errors.New("a custom protocol's proxy is resolved by its process")
}

// ResolveCustom implements imposter.CustomProxy: behaviors first, then the
// recording, as mb's resolveProxy.
func (p *customProxy) ResolveCustom(ctx context.Context, call *imposter.Call, proxied json.RawMessage) (json.RawMessage, error) {
	resp := &message.Response{Body: proxied}
	if _, err := call.ApplyBehaviors(ctx, resp); err != nil {
		return nil, err
	}
	is := json.RawMessage(resp.Body)
	if p.spec.Mode == "proxyTransparent" {
		return is, nil
	}
	preds, err := generate(p.gens, call.Request, p.f.Inject)
	if err != nil {
		return nil, err
	}
	if err := p.record(ctx, call, preds, config.Signature(preds), is, p.spec.Mode == "proxyOnce"); err != nil {
		// The recorder said why; the process still gets its answer.
		slog.Debug("custom proxy recording not kept", "port", call.Imposter.Port(), "err", err)
	}
	return is, nil
}
