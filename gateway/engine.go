package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/riftgate/riftgate/flowshard"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/flowlocal"
	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/inject"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/predicate"
	"github.com/riftgate/riftgate/gateway/proxy"
	"github.com/riftgate/riftgate/plugins"
)

// engine holds what every imposter shares: the compiler that turns stub JSON
// into predicates, behaviors and responders, and the services behind them:
// the flow store and the plugin host.
type engine struct {
	g        *gateway
	compiler *imposter.Compiler
	shard    *flowshard.Store // the single node's flows; nil in a cluster, whose runtime has its own
	flows    flow.Store
	plugins  *plugins.Host
	proxies  *proxy.Factory
	inject   *inject.Engine // nil without --allowInjection
	tmpDir   string         // the plugin cache when there is no --datadir
}

func newEngine(ctx context.Context, opts Options, g *gateway) (*engine, error) {
	e := &engine{g: g}
	dbPath, cacheDir := "", ""
	if opts.DataDir != "" {
		dbPath = filepath.Join(opts.DataDir, "flow.db")
		cacheDir = filepath.Join(opts.DataDir, "wasm-cache")
	} else {
		dir, err := os.MkdirTemp("", "riftgate-wasm-cache-")
		if err != nil {
			return nil, fmt.Errorf("plugin cache: %w", err)
		}
		e.tmpDir, cacheDir = dir, dir
	}
	claims := proxy.Claims(proxy.NewLocalClaims())
	if c := opts.Cluster; c != nil {
		// The cluster runtime owns this node's flowshard, beneath its
		// owner RPC.
		e.flows, claims = c.Flows, c.Claims
	} else {
		shard, err := flowshard.Open(dbPath, flowshard.Options{Logger: opts.Logger, MaxFlows: opts.MaxFlows})
		if err != nil {
			e.close(ctx)
			return nil, fmt.Errorf("flow store: %w", err)
		}
		e.shard, e.flows = shard, flowlocal.Store{Shard: shard}
	}
	var err error
	if e.plugins, err = plugins.NewHost(ctx, plugins.Config{CacheDir: cacheDir, Logger: opts.Logger}); err != nil {
		e.close(ctx)
		return nil, fmt.Errorf("plugin host: %w", err)
	}
	e.proxies = &proxy.Factory{Claims: claims, Recorder: recorder{g}}
	if opts.AllowInjection {
		e.inject = inject.New(inject.Options{Logger: opts.Logger, Flows: e.flows})
		e.proxies.Inject = e.inject.Generate
	}
	e.compiler = &imposter.Compiler{
		Predicates: e.compilePredicates,
		Behaviors:  e.compileBehaviors,
		PathHint: func(m imposter.Matcher) (string, bool, bool) {
			return predicate.Hints(m.(predicate.Predicate)).PathIndex()
		},
		Responders: map[string]func(json.RawMessage, imposter.Build) (imposter.Responder, error){
			"wasm":  e.wasmResponder,
			"proxy": e.proxies.New,
		},
	}
	if e.inject != nil {
		e.compiler.Responders["inject"] = e.injectResponder
		e.compiler.EndOfRequest = func(src string, binary bool, _ *imposter.Imposter) (imposter.EndOfRequest, error) {
			return e.inject.EndOfRequest(src, binary)
		}
	}
	return e, nil
}

func (e *engine) imposterOptions() imposter.Options {
	return imposter.Options{
		Logger:        e.g.log,
		Compiler:      e.compiler,
		Listen:        e.g.access.listen,
		RecordAll:     e.g.opts.Mock,
		RecordMatches: e.g.opts.Debug,
		DefaultHost:   e.g.opts.Host,
		MaxBodyBytes:  maxImposterBody,
		Flows:         e,
		Store:         e.flows,
	}
}

// FlowID scopes a request's flow id as seed 000 §10 says: the header's value
// (or the port when the header is absent), prefixed by "i<port>:" or, with
// contextScope "fleet", by "f:".
func (e *engine) FlowID(spec *imposter.FlowSpec, port int, r *message.Request) string {
	id := ""
	if spec.Header != "" {
		id, _ = r.Header(spec.Header)
	}
	// Built in one buffer: one allocation per request, not three.
	var buf [64]byte
	b := flow.AppendScope(buf[:0], port, spec.Fleet)
	if id == "" {
		return string(strconv.AppendInt(b, int64(port), 10))
	}
	return string(append(b, id...))
}

// routes adds the engine's own admin routes (plugins, flows).
func (e *engine) routes(mux *http.ServeMux) {
	e.pluginRoutes(mux)
	e.flowRoutes(mux)
}

// metrics appends the engine's metrics (plugins, flows) to GET /metrics.
func (e *engine) metrics(ctx context.Context, b *strings.Builder, metric func(name, kind, help string)) {
	if st, err := e.flows.Stats(ctx); err == nil {
		metric("riftgate_flows", "gauge", "Flows held by this node's flow store")
		fmt.Fprintf(b, "riftgate_flows %d\n", st.Flows)
		metric("riftgate_flow_entries", "gauge", "Flow entries held by this node's flow store")
		fmt.Fprintf(b, "riftgate_flow_entries %d\n", st.Entries)
		metric("riftgate_flow_bytes", "gauge", "Bytes of keys and values held by this node's flow store")
		fmt.Fprintf(b, "riftgate_flow_bytes %d\n", st.Bytes)
		metric("riftgate_flow_writes_total", "counter", "Flow writes by durability mode")
		for i, mode := range []string{"memory", "async", "sync"} {
			fmt.Fprintf(b, "riftgate_flow_writes_total{durability=%q} %d\n", mode, st.Writes[i])
		}
		metric("riftgate_flow_batches_total", "counter", "bbolt transactions committed by the flow writer")
		fmt.Fprintf(b, "riftgate_flow_batches_total %d\n", st.Batches)
		metric("riftgate_flow_evictions_total", "counter", "Whole flows removed, by reason")
		fmt.Fprintf(b, "riftgate_flow_evictions_total{reason=\"lru\"} %d\n", st.EvictedLRU)
		fmt.Fprintf(b, "riftgate_flow_evictions_total{reason=\"ttl\"} %d\n", st.Expired)
	}
	metric("riftgate_plugin_calls_total", "counter", "Plugin calls by module")
	ms := e.plugins.Stats()
	for _, m := range ms {
		fmt.Fprintf(b, "riftgate_plugin_calls_total{module=%q} %d\n", m.Name, m.Calls)
	}
	metric("riftgate_plugin_instances_total", "counter", "Plugin instances made, recycled and discarded, by module")
	for _, m := range ms {
		fmt.Fprintf(b, "riftgate_plugin_instances_total{module=%q,event=\"instantiated\"} %d\n", m.Name, m.Instantiated)
		fmt.Fprintf(b, "riftgate_plugin_instances_total{module=%q,event=\"recycled\"} %d\n", m.Name, m.Recycled)
		fmt.Fprintf(b, "riftgate_plugin_instances_total{module=%q,event=\"discarded\"} %d\n", m.Name, m.Discarded)
	}
	metric("riftgate_plugin_errors_total", "counter", "Failed plugin calls by module and kind")
	for _, m := range ms {
		for kind, n := range m.Errors {
			fmt.Fprintf(b, "riftgate_plugin_errors_total{module=%q,kind=%q} %d\n", m.Name, kind, n)
		}
	}
}

func (e *engine) close(ctx context.Context) {
	if e.inject != nil {
		e.inject.Close()
	}
	if e.proxies != nil {
		e.proxies.Close()
	}
	if e.plugins != nil {
		_ = e.plugins.Close(ctx)
	}
	if e.shard != nil {
		if err := e.shard.Close(ctx); err != nil {
			e.g.log.Error("closing the flow store", "err", err)
		}
	}
	if e.tmpDir != "" {
		os.RemoveAll(e.tmpDir)
	}
}

// compilePredicates compiles a stub's predicates for imp; wasm predicates
// run against imp's flows.
func (e *engine) compilePredicates(raws []json.RawMessage, b imposter.Build) (imposter.Matcher, error) {
	spec := b.Imposter.Spec()
	return predicate.CompileAll(raws, predicate.Options{
		Protocol: spec.Protocol,
		Binary:   spec.Mode == "binary",
		Inject:   e.injectPredicate(b.Imposter),
		Wasm: func(spec json.RawMessage) (predicate.Predicate, error) {
			c, err := e.compileWasm(spec, "matches", b)
			if err != nil {
				return nil, err
			}
			return wasmPredicate{c, b.Imposter}, nil
		},
	})
}
