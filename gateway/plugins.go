package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/plugins"
)

// wasmSpec is riftgate's `{"wasm": {...}}`, as a response, a predicate or
// a decorate behavior.
type wasmSpec struct {
	// Module names a module registered through PUT /plugins/:name, or a
	// path to a .wasm file (relative to the working directory).
	Module string          `json:"module"`
	Export string          `json:"export"`
	Config json.RawMessage `json:"config"`
	// Base64 carries the module inline, so an imposter file is self-contained;
	// it is registered under Module.
	Base64 string `json:"base64"`
	// Limits, with a path or base64, are the module's limits; a module
	// registered by name has the limits its PUT gave.
	Limits *wasmLimits `json:"limits,omitempty"`
}

// wasmLimits are a module's limits as the API spells them, in imposter JSON,
// in PUT /plugins/:name's query and in GET /plugins. Zero keeps the default;
// deadlineMs -1 turns the deadline off (then nothing stops a guest that
// never returns).
type wasmLimits struct {
	MemoryPages      uint32 `json:"memoryPages,omitempty"`
	DeadlineMs       int64  `json:"deadlineMs,omitempty"`
	MaxResponseBytes int    `json:"maxResponseBytes,omitempty"`
	PoolSize         int    `json:"poolSize,omitempty"`
	RecycleAfter     int    `json:"recycleAfter,omitempty"`
}

// limits converts l; the host checks the rest when the module registers.
func (l *wasmLimits) limits() (plugins.Limits, error) {
	if l == nil {
		return plugins.Limits{}, nil
	}
	if l.DeadlineMs < -1 {
		return plugins.Limits{}, mberr.New(mberr.BadData, "limits.deadlineMs must be -1 (off), 0 (default) or a positive number of milliseconds")
	}
	d := time.Duration(l.DeadlineMs) * time.Millisecond
	if l.DeadlineMs == -1 {
		d = -1
	}
	return plugins.Limits{MemoryPages: l.MemoryPages, Deadline: d, MaxResponseBytes: l.MaxResponseBytes,
		PoolSize: l.PoolSize, RecycleAfter: l.RecycleAfter}, nil
}

// limitsFromQuery reads PUT /plugins/:name's query, whose parameters are
// the limits' JSON names, through the same strict decoding as a stub's
// `limits`.
func limitsFromQuery(q url.Values) (*wasmLimits, error) {
	obj := make(map[string]json.Number, len(q))
	for name, vs := range q {
		obj[name] = json.Number(vs[len(vs)-1])
	}
	raw, err := json.Marshal(obj)
	l := &wasmLimits{}
	if err == nil {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		err = d.Decode(l)
	}
	if err != nil {
		return nil, mberr.New(mberr.BadData, "invalid limits in the query (memoryPages, deadlineMs, maxResponseBytes, poolSize, recycleAfter): "+err.Error())
	}
	return l, nil
}

// wasmCall is one compiled use of a plugin.
type wasmCall struct {
	e      *engine
	module string
	export string
	config []byte
}

// compileWasm validates a `{"wasm": ...}` value and makes sure its module is
// registered, so that a bad module is refused with the stub, not at the
// first request.
func (e *engine) compileWasm(raw json.RawMessage, defaultExport string) (*wasmCall, error) {
	var s wasmSpec
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&s); err != nil {
		return nil, mberr.New(mberr.BadData, "invalid wasm: "+err.Error()).WithSource(raw)
	}
	if s.Module == "" {
		return nil, mberr.New(mberr.BadData, "wasm needs a 'module'").WithSource(raw)
	}
	if s.Export == "" {
		s.Export = defaultExport
	}
	cfg := []byte("null")
	if len(s.Config) > 0 {
		cfg = bytes.Clone(s.Config)
	}
	lim, err := s.Limits.limits()
	if err != nil {
		return nil, err
	}
	var info plugins.ModuleInfo
	switch {
	case s.Base64 != "":
		var wasm []byte
		if wasm, err = base64.StdEncoding.DecodeString(s.Base64); err != nil {
			return nil, mberr.New(mberr.BadData, "wasm.base64 is not valid base64").WithSource(raw)
		}
		info, err = e.register(s.Module, wasm, lim)
	case looksLikePath(s.Module):
		var wasm []byte
		if wasm, err = os.ReadFile(s.Module); err != nil {
			return nil, mberr.New(mberr.BadData, "cannot read wasm module: "+err.Error()).WithSource(raw)
		}
		info, err = e.register(s.Module, wasm, lim)
	case s.Limits != nil:
		err = mberr.New(mberr.BadData, fmt.Sprintf("plugin %q is registered by name: give its limits to PUT /plugins/%s?memoryPages=...", s.Module, s.Module))
	default:
		var ok bool
		if info, ok = e.plugins.Module(s.Module); !ok {
			err = mberr.New(mberr.BadData, fmt.Sprintf("no plugin named %q: PUT it to /plugins/%s first", s.Module, s.Module))
		}
	}
	if err != nil {
		return nil, mberr.As(err).WithSource(raw)
	}
	found := false
	for _, x := range info.Entry {
		found = found || x == s.Export
	}
	if !found {
		return nil, mberr.New(mberr.BadData, fmt.Sprintf("plugin %q has no entry point %q (it has %v)", s.Module, s.Export, info.Entry)).WithSource(raw)
	}
	return &wasmCall{e: e, module: s.Module, export: s.Export, config: cfg}, nil
}

func looksLikePath(s string) bool {
	return strings.ContainsRune(s, '/') || strings.HasSuffix(s, ".wasm")
}

// register registers wasm under name with lim; the same bytes with the
// same limits are already there and cost nothing.
func (e *engine) register(name string, wasm []byte, lim plugins.Limits) (plugins.ModuleInfo, error) {
	info, err := e.plugins.Register(context.Background(), name, wasm, lim)
	if err != nil {
		return info, mberr.New(mberr.BadData, "invalid plugin: "+err.Error())
	}
	return info, nil
}

func (e *engine) wasmResponder(raw json.RawMessage, _ *imposter.Imposter) (imposter.Responder, error) {
	return e.compileWasm(raw, "handle")
}

// Respond runs the plugin as a response.
func (w *wasmCall) Respond(ctx context.Context, call *imposter.Call) (*message.Response, error) {
	out, err := w.call(ctx, call.Imposter, call.Request, call.FlowID, nil)
	if err := pluginFailure(out, err, "plugin"); err != nil {
		return nil, err
	}
	if out.Result != 0 || !out.Wrote {
		return nil, mberr.New(mberr.PluginError, fmt.Sprintf("plugin %s.%s returned %d without a response", w.module, w.export, out.Result))
	}
	resp := fromPlugin(&out.Response)
	// mb's `Connection: close` default exists for mb's own responses; a
	// plugin response, which mb never had, keeps the connection unless the
	// plugin says otherwise.
	if _, ok := resp.Header("Connection"); !ok {
		resp.Headers = append(resp.Headers, message.KV{Name: "Connection", Value: "keep-alive"})
	}
	return resp, nil
}

// pluginFailure maps a failed call to the error the client sees: 503 when
// the flow store was unavailable, 500 otherwise.
func pluginFailure(out plugins.Output, err error, what string) error {
	if out.Unavailable && (err != nil || !out.Wrote) {
		return mberr.New(mberr.FlowUnavailable, "the flow's owner is unavailable")
	}
	if err != nil {
		return mberr.New(mberr.PluginError, what+": "+err.Error())
	}
	return nil
}

// callInput is one call's input with the room it is built in. The host
// reads an input only during Call, so inputs are recycled: building one
// afresh cost five allocations a call.
type callInput struct {
	in      plugins.Input
	query   []plugins.Pair
	headers []plugins.Pair
	flow    flowHandle
	resp    plugins.Response
}

var inputPool = sync.Pool{New: func() any { return new(callInput) }}

// call runs the plugin on request r in flow flowID (none if imp is nil or
// flowID empty), and on resp too for a decorate call.
func (w *wasmCall) call(ctx context.Context, imp *imposter.Imposter, r *message.Request, flowID string, resp *message.Response) (plugins.Output, error) {
	c := inputPool.Get().(*callInput)
	c.query = appendPairs(c.query, r.Query)
	c.headers = appendPairs(c.headers, r.Headers)
	c.in = plugins.Input{
		Method:      r.Method,
		Path:        r.Path,
		Query:       c.query,
		Headers:     c.headers,
		Body:        r.Body,
		FlowID:      flowID,
		RequestFrom: r.RequestFrom(),
		Config:      w.config,
	}
	if imp != nil && flowID != "" {
		c.flow = flowHandle{w.e.flows, flowID, imp.Spec().Flow.Policy}
		c.in.Flow = &c.flow
	}
	if resp != nil {
		c.resp = plugins.Response{Status: resp.StatusCode, Headers: appendPairs(nil, resp.Headers), Body: resp.Body}
		c.in.Response = &c.resp
	}
	out, err := w.e.plugins.Call(ctx, w.module, w.export, &c.in)
	// Keep the room, unless a request with hundreds of pairs grew it, and
	// drop every reference to this request.
	clear(c.query)
	clear(c.headers)
	*c = callInput{query: keep(c.query), headers: keep(c.headers)}
	inputPool.Put(c)
	return out, err
}

func keep(ps []plugins.Pair) []plugins.Pair {
	if cap(ps) > 64 {
		return nil
	}
	return ps[:0]
}

func appendPairs(dst []plugins.Pair, kvs []message.KV) []plugins.Pair {
	for _, kv := range kvs {
		dst = append(dst, plugins.Pair{Name: kv.Name, Value: kv.Value})
	}
	return dst
}

// fromPlugin converts a plugin's response, with room for one more header.
func fromPlugin(p *plugins.Response) *message.Response {
	r := &message.Response{StatusCode: p.Status, Body: p.Body, Headers: make([]message.KV, len(p.Headers), len(p.Headers)+1)}
	if r.StatusCode == 0 {
		r.StatusCode = 200
	}
	for i, h := range p.Headers {
		r.Headers[i] = message.KV{Name: h.Name, Value: h.Value}
	}
	return r
}

// flowHandle is a plugin's view of its request's flow.
type flowHandle struct {
	store  flow.Store
	id     string
	policy flow.Policy
}

func (f flowHandle) Get(ctx context.Context, key []byte) ([]byte, uint64, error) {
	e, err := f.store.Get(ctx, f.id, string(key))
	return e.Value, e.Version.V, pluginErr(err)
}

func (f flowHandle) Put(ctx context.Context, key, value []byte) error {
	_, err := f.store.Put(ctx, f.id, string(key), value, f.policy)
	return pluginErr(err)
}

func (f flowHandle) CAS(ctx context.Context, key []byte, expect uint64, value []byte) error {
	_, err := f.store.CAS(ctx, f.id, string(key), expect, value, f.policy)
	return pluginErr(err)
}

func (f flowHandle) Delete(ctx context.Context, key []byte) error {
	return pluginErr(f.store.Delete(ctx, f.id, string(key), f.policy))
}

// pluginErr translates the flow seam's errors into the plugin host's.
func pluginErr(err error) error {
	var to error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flow.ErrNotFound):
		to = plugins.ErrFlowNotFound
	case errors.Is(err, flow.ErrVersionMismatch):
		to = plugins.ErrFlowMismatch
	case errors.Is(err, flow.ErrTooLarge), errors.Is(err, flow.ErrBadKey):
		to = plugins.ErrFlowTooLarge
	default:
		to = plugins.ErrFlowUnavailable
	}
	return fmt.Errorf("%w: %w", to, err)
}

// pluginRoutes serves PUT, GET and DELETE /plugins/:name, and GET /plugins.
func (e *engine) pluginRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /plugins", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"plugins": pluginsJSON(e.plugins.Modules())})
	})
	mux.HandleFunc("GET /plugins/{name}", func(w http.ResponseWriter, r *http.Request) {
		info, ok := e.plugins.Module(r.PathValue("name"))
		if !ok {
			writeErr(w, mberr.New(mberr.NoSuchResource, "no plugin named "+r.PathValue("name")))
			return
		}
		writeJSON(w, http.StatusOK, pluginJSON(info))
	})
	mux.HandleFunc("PUT /plugins/{name}", func(w http.ResponseWriter, r *http.Request) {
		wasm, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
		if err != nil {
			writeErr(w, mberr.New(mberr.PayloadTooLarge, "the module is over the size limit"))
			return
		}
		l, err := limitsFromQuery(r.URL.Query())
		if err != nil {
			writeErr(w, err)
			return
		}
		lim, err := l.limits()
		if err != nil {
			writeErr(w, err)
			return
		}
		info, err := e.register(r.PathValue("name"), wasm, lim)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, pluginJSON(info))
	})
	mux.HandleFunc("DELETE /plugins/{name}", func(w http.ResponseWriter, r *http.Request) {
		err := e.plugins.Unregister(r.Context(), r.PathValue("name"))
		if err != nil && !errors.Is(err, plugins.ErrUnknownModule) {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{})
	})
}

func pluginJSON(m plugins.ModuleInfo) map[string]any {
	return map[string]any{
		"name": m.Name, "sha256": m.Hash, "size": m.Size, "exports": m.Entry,
		"limits": wasmLimits{
			MemoryPages: m.Limits.MemoryPages, DeadlineMs: deadlineMs(m.Limits.Deadline),
			MaxResponseBytes: m.Limits.MaxResponseBytes, PoolSize: m.Limits.PoolSize,
			RecycleAfter: m.Limits.RecycleAfter,
		},
	}
}

func deadlineMs(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

func pluginsJSON(ms []plugins.ModuleInfo) []map[string]any {
	out := make([]map[string]any, len(ms))
	for i, m := range ms {
		out[i] = pluginJSON(m)
	}
	return out
}

// wasmPredicate is a `{"wasm": ...}` predicate: the plugin returns 1 to
// match. A failing plugin does not match, and is logged.
type wasmPredicate struct {
	c   *wasmCall
	imp *imposter.Imposter
}

func (p wasmPredicate) Match(r *message.Request) bool {
	out, err := p.c.call(context.Background(), p.imp, r, p.imp.FlowID(r), nil)
	if err != nil {
		p.c.e.g.log.Warn("wasm predicate failed", "module", p.c.module, "err", err)
		return false
	}
	return out.Result == 1
}
