package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/riftgate/riftgate/gateway/imposter"
)

// engine holds what every imposter shares: the compiler that turns stub JSON
// into predicates, behaviors and responders, and the services behind them.
type engine struct {
	g        *gateway
	compiler *imposter.Compiler
}

func newEngine(_ context.Context, opts Options, g *gateway) (*engine, error) {
	e := &engine{g: g}
	e.compiler = &imposter.Compiler{
		Responders: map[string]func(json.RawMessage, *imposter.Imposter) (imposter.Responder, error){},
	}
	return e, nil
}

func (e *engine) imposterOptions() imposter.Options {
	return imposter.Options{
		Logger:       e.g.log,
		Compiler:     e.compiler,
		Listen:       e.g.access.listen,
		RecordAll:    e.g.opts.Mock,
		DefaultHost:  e.g.opts.Host,
		MaxBodyBytes: maxImposterBody,
	}
}

// routes adds the engine's own admin routes (plugins, flows).
func (e *engine) routes(*http.ServeMux) {}

// metrics appends the engine's metrics (plugins, flows) to GET /metrics.
func (e *engine) metrics(*strings.Builder, func(name, kind, help string)) {}

// forget releases what the engine keeps for a deleted imposter.
func (e *engine) forget(context.Context, *imposter.Imposter) {}

func (e *engine) close(context.Context) {}
