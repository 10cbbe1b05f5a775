package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/intern"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/plugins"
)

// wasmSpec is riftgate's `{"wasm": {...}}`, as a response, a predicate or
// a decorate behavior.
type wasmSpec struct {
	// Module names a module registered through PUT /plugins/:name, or a
	// path to a .wasm file (relative to the working directory), read when
	// the stub is made.
	Module string          `json:"module"`
	Export string          `json:"export"`
	Config json.RawMessage `json:"config"`
	// Base64 carries the module inline, so an imposter file is
	// self-contained; Module is then only its name.
	Base64 string `json:"base64"`
	// Limits, with a path or base64, are the module's limits; a module
	// registered by name has the limits its PUT gave.
	Limits *config.Limits `json:"limits,omitempty"`
}

func parseWasm(raw json.RawMessage) (wasmSpec, error) {
	var s wasmSpec
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&s); err != nil {
		return s, mberr.New(mberr.BadData, "invalid wasm: "+err.Error()).WithSource(raw)
	}
	if s.Module == "" {
		return s, mberr.New(mberr.BadData, "wasm needs a 'module'").WithSource(raw)
	}
	if s.Limits != nil && s.Base64 == "" && !looksLikePath(s.Module) {
		return s, mberr.New(mberr.BadData, fmt.Sprintf("plugin %q is registered by name: give its limits to PUT /plugins/%s?memoryPages=...", s.Module, s.Module)).WithSource(raw)
	}
	if _, err := pluginLimits(s.Limits); err != nil {
		return s, mberr.As(err).WithSource(raw)
	}
	return s, nil
}

// inline reports whether the spec brings its module (a file or base64)
// rather than naming a registered plugin.
func (s wasmSpec) inline() bool { return s.Base64 != "" || looksLikePath(s.Module) }

func looksLikePath(s string) bool {
	return strings.ContainsRune(s, '/') || strings.HasSuffix(s, ".wasm")
}

// pluginLimits converts the API's limits; the host checks the rest when
// the module loads. Zero keeps the default; deadlineMs -1 turns the
// deadline off (then nothing stops a guest that never returns).
func pluginLimits(l *config.Limits) (plugins.Limits, error) {
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
func limitsFromQuery(q url.Values) (config.Limits, error) {
	obj := make(map[string]json.Number, len(q))
	for name, vs := range q {
		obj[name] = json.Number(vs[len(vs)-1])
	}
	raw, err := json.Marshal(obj)
	var l config.Limits
	if err == nil {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		err = d.Decode(&l)
	}
	if err != nil {
		return l, mberr.New(mberr.BadData, "invalid limits in the query (memoryPages, deadlineMs, maxResponseBytes, poolSize, recycleAfter): "+err.Error())
	}
	_, err = pluginLimits(&l)
	return l, err
}

// moduleKey names a module in the plugin host by its content and limits,
// so that loading it twice is a no-op and never replaces another: loading
// has no effect anyone else can see.
func moduleKey(hash string, lim config.Limits) string {
	if lim == (config.Limits{}) {
		return "sha256:" + hash
	}
	return fmt.Sprintf("sha256:%s?memoryPages=%d&deadlineMs=%d&maxResponseBytes=%d&poolSize=%d&recycleAfter=%d",
		hash, lim.MemoryPages, lim.DeadlineMs, lim.MaxResponseBytes, lim.PoolSize, lim.RecycleAfter)
}

// load makes the module with this hash and limits callable, under its
// moduleKey, from the bytes cfg holds. A module that does not load (bad
// bytes, a start function that traps or loops) is an error here, when the
// stub or plugin is made, and not at its first request.
func (e *engine) load(cfg *config.State, hash string, lim config.Limits) (string, plugins.ModuleInfo, error) {
	key := moduleKey(hash, lim)
	if info, ok := e.plugins.Module(key); ok {
		return key, info, nil
	}
	var wasm []byte
	if cfg != nil {
		wasm = cfg.Modules[hash]
	}
	if wasm == nil {
		return "", plugins.ModuleInfo{}, mberr.New(mberr.BadData, "the configuration lacks module "+hash)
	}
	pl, err := pluginLimits(&lim)
	if err != nil {
		return "", plugins.ModuleInfo{}, err
	}
	info, err := e.plugins.Register(context.Background(), key, wasm, pl)
	if err != nil {
		return "", info, mberr.New(mberr.BadData, "invalid plugin: "+err.Error())
	}
	return key, info, nil
}

// unloadUnused unloads every module the configuration cfg no longer names:
// the modules of deleted stubs and replaced plugins.
func (e *engine) unloadUnused(cfg *config.State) {
	used := map[string]bool{}
	for _, p := range cfg.Plugins {
		used[moduleKey(p.Hash, p.Limits)] = true
	}
	for _, imp := range cfg.Imposters {
		imp.Each(func(st *config.Stub) bool {
			for _, m := range st.Refs.Modules {
				used[moduleKey(m.Hash, m.Limits)] = true
			}
			return true
		})
	}
	for _, m := range e.plugins.Modules() {
		if !used[m.Name] {
			_ = e.plugins.Unregister(context.Background(), m.Name)
		}
	}
}

// wasmCall is one compiled use of a plugin.
type wasmCall struct {
	e      *engine
	entry  *plugins.Entry // under the module's moduleKey
	name   string         // as the stub spells it, for messages
	export string
	config []byte
	// last is the plugin's last response, and head the response built for
	// its status and headers, with the header rendered, once they came
	// twice in a row.
	mu   sync.Mutex
	last plugins.Response
	head *message.Response
	// keys are the flow keys the plugin named last, as strings: a plugin
	// names the same few keys (in its memory) on every call.
	keys *intern.Cache
}

// Keys kept per plugin use, and the longest kept.
const keptKeys, maxKeptKey = 8, 64

// compileWasm compiles a `{"wasm": ...}` value of the stub b builds,
// finding its module in the configuration b compiles against: by the hash
// the stub's refs recorded for a path or an inline module, or under the
// name a plugin was registered with.
func (e *engine) compileWasm(raw json.RawMessage, defaultExport string, b imposter.Build) (*wasmCall, error) {
	s, err := parseWasm(raw)
	if err != nil {
		return nil, err
	}
	if s.Export == "" {
		s.Export = defaultExport
	}
	var hash string
	var lim config.Limits
	if s.inline() {
		var want config.Limits
		if s.Limits != nil {
			want = *s.Limits
		}
		ref, ok := b.Stub.Refs.Module(s.Module, want)
		if !ok {
			return nil, mberr.New(mberr.BadData, fmt.Sprintf("wasm module %q was not read when the stub was made", s.Module)).WithSource(raw)
		}
		hash, lim = ref.Hash, ref.Limits
	} else {
		var p config.Plugin
		ok := b.Config != nil
		if ok {
			p, ok = b.Config.Plugins[s.Module]
		}
		if !ok {
			return nil, mberr.New(mberr.BadData, fmt.Sprintf("no plugin named %q: PUT it to /plugins/%s first", s.Module, s.Module)).WithSource(raw)
		}
		hash, lim = p.Hash, p.Limits
	}
	key, info, err := e.load(b.Config, hash, lim)
	if err != nil {
		return nil, mberr.As(err).WithSource(raw)
	}
	if !slices.Contains(info.Entry, s.Export) {
		return nil, mberr.New(mberr.BadData, fmt.Sprintf("plugin %q has no entry point %q (it has %v)", s.Module, s.Export, info.Entry)).WithSource(raw)
	}
	cfg := []byte("null")
	if len(s.Config) > 0 {
		cfg = bytes.Clone(s.Config)
	}
	return &wasmCall{e: e, entry: e.plugins.Entry(key, s.Export), name: s.Module, export: s.Export, config: cfg,
		keys: intern.New(keptKeys, maxKeptKey)}, nil
}

func (e *engine) wasmResponder(raw json.RawMessage, b imposter.Build) (imposter.Responder, error) {
	return e.compileWasm(raw, "handle", b)
}

// Respond runs the plugin as a response.
func (w *wasmCall) Respond(ctx context.Context, call *imposter.Call) (*message.Response, error) {
	out, err := w.call(ctx, call.Imposter, call.Request, call.FlowID, nil, call)
	if err := pluginFailure(out, err, "plugin"); err != nil {
		return nil, err
	}
	if out.Result != 0 || !out.Wrote {
		return nil, mberr.New(mberr.PluginError, fmt.Sprintf("plugin %s.%s returned %d without a response", w.name, w.export, out.Result))
	}
	if call.Imposter.Spec().IsWS() {
		return wsPluginResponse(&out.Response), nil
	}
	if call.Imposter.Spec().IsGRPC() {
		// The body is the response object ({value, metadata, error}),
		// as an inject returns it.
		return &message.Response{Body: bytes.Clone(out.Response.Body)}, nil
	}
	return w.response(&out.Response, call.Scratch()), nil
}

// wsPluginResponse makes a plugin's answer to a WebSocket message a
// response object: its body is one message (none when empty), text when
// it is UTF-8 and binary otherwise, unless a header "type" says which.
func wsPluginResponse(p *plugins.Response) *message.Response {
	if len(p.Body) == 0 {
		return &message.Response{Body: []byte(`{}`)}
	}
	binary := !utf8.Valid(p.Body)
	for _, h := range p.Headers {
		if strings.EqualFold(h.Name, "type") {
			binary = h.Value == message.WSBinary
		}
	}
	b := []byte(`{"data":`)
	if binary {
		b = message.AppendJSONString(b, base64.StdEncoding.EncodeToString(p.Body))
		b = append(b, `,"type":"binary"}`...)
	} else {
		b = append(message.AppendJSONString(b, string(p.Body)), '}')
	}
	return &message.Response{Body: b}
}

// response converts a plugin's response. One with the status and headers
// of the previous answer shares them, rendered once for every request that
// gets them (message.Response.Rendered), as a static `is` does: one that
// repeats the previous answer whole is handed out again as it is, one with
// another body is a copy in scratch (the call's own). (A call that finds
// another converting does not wait: it converts its own.) p's body may be
// in the call's body room, so what is kept copies it.
func (w *wasmCall) response(p *plugins.Response, scratch *message.Response) *message.Response {
	if !w.mu.TryLock() {
		return keepAlive(fromPlugin(p))
	}
	defer w.mu.Unlock()
	if !sameHead(&w.last, p) {
		// The host's decoded status and headers never change: they may be
		// kept.
		w.last, w.head = *p, nil
		w.last.Body = nil
		return keepAlive(fromPlugin(p))
	}
	if w.head == nil {
		w.head = keepAlive(fromPlugin(p))
		w.head.Body = bytes.Clone(p.Body)
		w.head.Rendered = imposter.RenderHeader(w.head)
	}
	if string(w.head.Body) != string(p.Body) {
		*scratch = *w.head
		scratch.Body = p.Body
		return scratch
	}
	return w.head
}

// sameHead reports whether two plugin responses have one status and one
// list of headers.
func sameHead(a, b *plugins.Response) bool {
	return a.Status == b.Status && slices.Equal(a.Headers, b.Headers)
}

// keepAlive keeps the connection open after a plugin's response unless the
// plugin says otherwise: mb's `Connection: close` default exists for mb's
// own responses, and mb never had plugins.
func keepAlive(r *message.Response) *message.Response {
	if _, ok := r.Header("Connection"); !ok {
		r.Headers = append(r.Headers, message.KV{Name: "Connection", Value: "keep-alive"})
	}
	return r
}

// pluginFailure maps a failed call to the error the client sees: 503 when
// the flow store was unavailable, 500 otherwise.
func pluginFailure(out plugins.Output, err error, what string) error {
	if out.Unavailable && (err != nil || !out.Wrote) {
		return mberr.New(mberr.FlowUnavailable, flow.Describe(out.UnavailableErr))
	}
	if err != nil {
		return mberr.New(mberr.PluginError, what+": "+err.Error())
	}
	return nil
}

// callInput is one call's input. The host reads an input only during Call,
// so inputs are recycled: building one afresh cost five allocations a call.
type callInput struct {
	in   plugins.Input
	flow flowHandle
	resp plugins.Response
	// value is the room flow reads copy a value into: the host copies it
	// into the guest's memory at once, so one buffer serves every read.
	value []byte
}

// maxKeptValue bounds the read room an idle input keeps.
const maxKeptValue = 4 << 10

var inputPool = sync.Pool{New: func() any { return new(callInput) }}

// call runs the plugin on request r in flow flowID (none if imp is nil or
// flowID empty), and on resp too for a decorate call.
// A call made to answer (call not nil) lends it its body room (see
// plugins.Input.BodyRoom) and counts its deadline from when the request was
// matched.
func (w *wasmCall) call(ctx context.Context, imp *imposter.Imposter, r *message.Request, flowID string, resp *message.Response, call *imposter.Call) (plugins.Output, error) {
	c := inputPool.Get().(*callInput)
	method, body := r.Method, r.Body
	if r.Kind == message.GRPC {
		// A gRPC call is an HTTP/2 POST to the method's path, with the
		// metadata as headers; its message is the body, as JSON.
		method = "POST"
	}
	if r.Kind == message.WS {
		// A message's type is its method, and its data its body, as
		// bytes.
		method = r.MessageType
		if method == message.WSBinary {
			body = message.DecodeBase64(string(body))
		}
	}
	c.in = plugins.Input{
		Method:      method,
		Path:        r.Path,
		Query:       pairs(r.Query),
		Headers:     pairs(r.Headers),
		Body:        body,
		FlowID:      flowID,
		RequestFrom: remote{r},
		Config:      w.config,
	}
	if call != nil {
		c.in.Start, c.in.BodyRoom = call.Matched(), call.BodyRoom()
	}
	if imp != nil && flowID != "" {
		c.flow = flowHandle{w.e.flows, flowID, imp.Spec().Flow.Policy, w.keys, &c.value}
		c.in.Flow = &c.flow
	}
	if resp != nil {
		c.resp = plugins.Response{Status: resp.StatusCode, Headers: pairs(resp.Headers), Body: resp.Body}
		c.in.Response = &c.resp
	}
	out, err := w.entry.Call(ctx, &c.in)
	value := c.value[:0]
	if cap(value) > maxKeptValue {
		value = nil
	}
	*c = callInput{value: value} // drop every reference to this request
	inputPool.Put(c)
	return out, err
}

// remote is the request's client address as the plugin host reads it:
// rendered only if the guest reads the request.
type remote struct{ r *message.Request }

func (a remote) Len() int       { return a.r.RequestFromLen() }
func (a remote) String() string { return a.r.RequestFrom() }

// A message.KV is a plugins.Pair (this conversion compiles only while the
// two have the same fields), so pairs views one as the other instead of
// copying: the host only reads an input, and only during the call.
var _ = plugins.Pair(message.KV{})

func pairs(kvs []message.KV) []plugins.Pair {
	return unsafe.Slice((*plugins.Pair)(unsafe.Pointer(unsafe.SliceData(kvs))), len(kvs))
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
	keys   *intern.Cache
	room   *[]byte // the call's read room (callInput.value)
}

// Get reads into the call's room, which the next Get reuses: the host
// copies a value into guest memory before the guest can read again.
func (f flowHandle) Get(ctx context.Context, key []byte) ([]byte, uint64, error) {
	e, err := f.store.Get(ctx, f.id, f.keys.Bytes("", key), *f.room)
	if e.Value != nil {
		*f.room = e.Value
	}
	return e.Value, e.Version.V, pluginErr(err)
}

func (f flowHandle) Put(ctx context.Context, key, value []byte) error {
	_, err := f.store.Put(ctx, f.id, f.keys.Bytes("", key), value, f.policy)
	return pluginErr(err)
}

func (f flowHandle) CAS(ctx context.Context, key []byte, expect uint64, value []byte) error {
	_, err := f.store.CAS(ctx, f.id, f.keys.Bytes("", key), expect, value, f.policy)
	return pluginErr(err)
}

func (f flowHandle) Delete(ctx context.Context, key []byte) error {
	return pluginErr(f.store.Delete(ctx, f.id, f.keys.Bytes("", key), f.policy))
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
// PUT and DELETE are configuration commands; the GETs read the state and
// the plugin host's counters.
func (e *engine) pluginRoutes(mux *http.ServeMux) {
	g := e.g
	mux.HandleFunc("GET /plugins", func(w http.ResponseWriter, r *http.Request) {
		cfg := g.config.State()
		list := []map[string]any{}
		for _, name := range slices.Sorted(maps.Keys(cfg.Plugins)) {
			list = append(list, e.pluginJSON(name, cfg.Plugins[name]))
		}
		// Then the modules stubs bring themselves, under the name they
		// give them, once each.
		seen := map[config.ModuleRef]bool{}
		for _, port := range cfg.Ports() {
			for _, st := range cfg.Imposters[port].Stubs() {
				for _, m := range st.Refs.Modules {
					if !seen[m] {
						seen[m] = true
						list = append(list, e.pluginJSON(m.Module, config.Plugin{Hash: m.Hash, Limits: m.Limits}))
					}
				}
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"plugins": list})
	})
	mux.HandleFunc("GET /plugins/{name}", func(w http.ResponseWriter, r *http.Request) {
		p, ok := g.config.State().Plugins[r.PathValue("name")]
		if !ok {
			writeErr(w, mberr.New(mberr.NoSuchResource, "no plugin named "+r.PathValue("name")))
			return
		}
		writeJSON(w, http.StatusOK, e.pluginJSON(r.PathValue("name"), p))
	})
	mux.HandleFunc("PUT /plugins/{name}", func(w http.ResponseWriter, r *http.Request) {
		wasm, ok := readBody(w, r)
		if !ok {
			return
		}
		lim, err := limitsFromQuery(r.URL.Query())
		if err != nil {
			writeErr(w, err)
			return
		}
		name, hash := r.PathValue("name"), contentHash(wasm)
		_, err = g.submit(r.Context(), &config.Command{
			Op: config.OpPutPlugin, Name: name, Plugin: &config.Plugin{Hash: hash, Limits: lim},
			Modules: map[string][]byte{hash: wasm},
		})
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, e.pluginJSON(name, g.config.State().Plugins[name]))
	})
	mux.HandleFunc("DELETE /plugins/{name}", func(w http.ResponseWriter, r *http.Request) {
		if _, err := g.submit(r.Context(), &config.Command{Op: config.OpDeletePlugin, Name: r.PathValue("name")}); err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{})
	})
}

// contentHash is a module's content hash: hex SHA-256, as the plugin host
// reports it.
func contentHash(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return hex.EncodeToString(sum[:])
}

// pluginJSON shows a registered plugin: its module, the limits it runs
// under (the host's defaults filled in) and its counters.
func (e *engine) pluginJSON(name string, p config.Plugin) map[string]any {
	out := map[string]any{"name": name, "sha256": p.Hash}
	if info, ok := e.plugins.Module(moduleKey(p.Hash, p.Limits)); ok {
		m := info.Limits
		out["size"], out["exports"] = info.Size, info.Entry
		out["limits"] = config.Limits{
			MemoryPages: m.MemoryPages, DeadlineMs: deadlineMs(m.Deadline),
			MaxResponseBytes: m.MaxResponseBytes, PoolSize: m.PoolSize, RecycleAfter: m.RecycleAfter,
		}
	}
	return out
}

func deadlineMs(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

// wasmPredicate is a `{"wasm": ...}` predicate: the plugin returns 1 to
// match. A failing plugin does not match, and is logged.
type wasmPredicate struct {
	c   *wasmCall
	imp *imposter.Imposter
}

func (p wasmPredicate) Match(r *message.Request) bool {
	out, err := p.c.call(context.Background(), p.imp, r, p.imp.FlowID(r), nil, nil)
	if err != nil {
		p.c.e.g.log.Warn("wasm predicate failed", "module", p.c.name, "err", err)
		return false
	}
	return out.Result == 1
}
