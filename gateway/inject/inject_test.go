package inject

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riftgate/riftgate/flowshard"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/flowlocal"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newStore opens an in-memory flowshard behind the flow seam.
func newStore(t testing.TB) flow.Store {
	t.Helper()
	shard, err := flowshard.Open("", flowshard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := shard.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return flowlocal.Store{Shard: shard}
}

func newEngine(t testing.TB, o Options) *Engine {
	t.Helper()
	if o.Flows == nil {
		o.Flows = newStore(t)
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second // generous: the machine is shared
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e := New(o)
	t.Cleanup(e.Close)
	return e
}

func testRequest() *message.Request {
	r := &message.Request{
		Method:  "POST",
		Path:    "/orders",
		Query:   []message.KV{{Name: "q", Value: "1"}},
		Headers: []message.KV{{Name: "Content-Type", Value: "application/json"}},
		Body:    []byte(`{"id":7}`),
	}
	r.SetRemote("127.0.0.1:5555", "127.0.0.1")
	return r
}

func respond(t *testing.T, e *Engine, src string, env Env) map[string]any {
	t.Helper()
	p, err := e.Response(src)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Respond(context.Background(), env)
	if err != nil {
		t.Fatalf("Respond: %v", err)
	}
	return fieldsMap(t, out)
}

// fieldsMap shows a response's fields as the answer's JSON has them.
func fieldsMap(t *testing.T, f message.ResponseFields) map[string]any {
	t.Helper()
	m := map[string]any{}
	if f.HasStatus {
		m["statusCode"] = float64(f.Status)
	}
	if f.HasHeaders {
		var b bytes.Buffer
		message.WriteMultiMap(&b, f.Headers)
		var h any
		if err := json.Unmarshal(b.Bytes(), &h); err != nil {
			t.Fatal(err)
		}
		m["headers"] = h
	}
	if f.HasBody {
		m["body"] = string(f.Body)
		if f.BodyJSON {
			var b any
			if err := json.Unmarshal(f.Body, &b); err != nil {
				t.Fatal(err)
			}
			m["body"] = b
		}
	}
	return m
}

func TestResponseCallForms(t *testing.T) {
	e := newEngine(t, Options{})
	env := Env{Request: testRequest(), FlowID: "i1:forms"}
	tests := []struct {
		name, src string
		want      map[string]any
	}{
		{"config return", `function (config) { return { statusCode: 201, body: config.request.method + ' ' + config.request.path }; }`,
			map[string]any{"statusCode": 201.0, "body": "POST /orders"}},
		{"config callback", `function (config) { config.callback({ body: config.request.query.q }); }`,
			map[string]any{"body": "1"}},
		{"positional", `function (request, state, logger, callback) { logger.info('path %s', request.path); callback({ body: request.body }); }`,
			map[string]any{"body": `{"id":7}`}},
		{"positional imposterState", `function (request, state, logger, callback, imposterState) { return { body: String(state === imposterState) }; }`,
			map[string]any{"body": "true"}},
		{"throw after callback", `function (config) { config.callback({ body: 'kept' }); throw new Error('late'); }`,
			map[string]any{"body": "kept"}},
		{"callback wins over return", `function (config) { config.callback({ body: 'cb' }); return { body: 'ret' }; }`,
			map[string]any{"body": "cb"}},
		{"object body", `function (config) { return { headers: { 'X-A': ['1', '2'] }, body: { ok: true } }; }`,
			map[string]any{"headers": map[string]any{"X-A": []any{"1", "2"}}, "body": map[string]any{"ok": true}}},
		{"async function", `async function (config) { const x = await Promise.resolve(3); return { body: 'n' + x }; }`,
			map[string]any{"body": "n3"}},
		{"setTimeout callback", `function (config) { setTimeout(function () { config.callback({ body: 'late' }); }, 20); }`,
			map[string]any{"body": "late"}},
		{"promise resolved by timer", `function (config) { return new Promise(function (resolve) { setTimeout(function () { resolve({ body: 'p' }); }, 10); }); }`,
			map[string]any{"body": "p"}},
		{"arrow", `(config) => ({ body: config.request.headers['Content-Type'] })`,
			map[string]any{"body": "application/json"}},
		{"trailing line comment", "function (config) { return { body: 'c' }; } // done",
			map[string]any{"body": "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := respond(t, e, tt.src, env)
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(tt.want)
			if string(gb) != string(wb) {
				t.Errorf("got %s, want %s", gb, wb)
			}
		})
	}
}

func TestResponseFormRequest(t *testing.T) {
	e := newEngine(t, Options{})
	r := &message.Request{Method: "POST", Path: "/f", Headers: []message.KV{{Name: "Content-Type", Value: "application/x-www-form-urlencoded"}}, Body: []byte("a=1&b=two")}
	got := respond(t, e, `function (config) { return { body: config.request.form.b + config.request.body }; }`, Env{Request: r})
	if got["body"] != "twoa=1&b=two" {
		t.Errorf("body = %v", got["body"])
	}
}

func TestCounterStatePersistsAsFlowKey(t *testing.T) {
	store := newStore(t)
	e := newEngine(t, Options{Flows: store})
	src := `function (config) {
		config.state.count = (config.state.count || 0) + 1;
		config.state.last = { path: config.request.path };
		return { body: String(config.state.count) };
	}`
	env := Env{Request: testRequest(), FlowID: "i1:counter", Policy: flow.Policy{TTL: time.Minute}}
	for i := 1; i <= 3; i++ {
		if got := respond(t, e, src, env); got["body"] != fmt.Sprint(i) {
			t.Fatalf("call %d: body %v", i, got["body"])
		}
	}
	ctx := context.Background()
	ent, err := store.Get(ctx, "i1:counter", "count", nil)
	if err != nil || string(ent.Value) != "3" {
		t.Fatalf("count = %q, %v", ent.Value, err)
	}
	ent, err = store.Get(ctx, "i1:counter", "last", nil)
	if err != nil || string(ent.Value) != `{"path":"/orders"}` {
		t.Fatalf("last = %q, %v", ent.Value, err)
	}
	// Another flow starts from nothing.
	if got := respond(t, e, src, Env{Request: testRequest(), FlowID: "i1:other"}); got["body"] != "1" {
		t.Errorf("other flow body %v", got["body"])
	}
}

func TestStateLoadAndDelete(t *testing.T) {
	store := newStore(t)
	e := newEngine(t, Options{Flows: store})
	ctx := context.Background()
	const id = "i1:load"
	for k, v := range map[string]string{"json": `{"a":[1,2]}`, "text": "plain words", "gone": "1", "same": `"s"`} {
		if _, err := store.Put(ctx, id, k, []byte(v), flow.Policy{}); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := store.Get(ctx, id, "same", nil)
	got := respond(t, e, `function (config) {
		const s = config.state;
		const out = typeof s.json.a + ':' + s.json.a[1] + ':' + s.text;
		delete s.gone;
		s.fn = function () {};
		return { body: out };
	}`, Env{Request: testRequest(), FlowID: id})
	if got["body"] != "object:2:plain words" {
		t.Errorf("body %v", got["body"])
	}
	snap, err := store.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, en := range snap {
		keys = append(keys, en.Key)
	}
	if strings.Join(sortedCopy(keys), ",") != "json,same,text" {
		t.Errorf("keys %v", keys)
	}
	// Unchanged values are not rewritten: the version stays.
	after, _ := store.Get(ctx, id, "same", nil)
	if after.Version != before.Version {
		t.Errorf("unchanged key rewritten: %v -> %v", before.Version, after.Version)
	}
	// A non-JSON value read and left alone stays as it was.
	if ent, _ := store.Get(ctx, id, "text", nil); string(ent.Value) != "plain words" {
		t.Errorf("text = %q", ent.Value)
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c
}

func TestPerFlowSerialization(t *testing.T) {
	store := newStore(t)
	e := newEngine(t, Options{Flows: store, Runtimes: 4})
	p, err := e.Response(`function (config) {
		const n = config.state.n || 0;
		// Spin a little so that interleaving scripts would lose updates.
		let x = 0; for (let i = 0; i < 2000; i++) { x += i; }
		config.state.n = n + 1;
		return { body: String(x) };
	}`)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			if _, err := p.Respond(context.Background(), Env{Request: testRequest(), FlowID: "i1:race"}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ent, err := store.Get(context.Background(), "i1:race", "n", nil)
	if err != nil || string(ent.Value) != fmt.Sprint(n) {
		t.Fatalf("n = %q, %v; want %d", ent.Value, err, n)
	}
}

func TestInfiniteLoopInterrupted(t *testing.T) {
	e := newEngine(t, Options{Timeout: 100 * time.Millisecond, Runtimes: 1})
	p, err := e.Response(`function (config) { config.state.touched = true; while (true) {} }`)
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Request: testRequest(), FlowID: "i1:loop"}
	start := time.Now()
	_, err = p.Respond(context.Background(), env)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	d := time.Since(start)
	if d > 3*time.Second {
		t.Errorf("took %v", d)
	}
	t.Logf("a 100ms deadline stopped the loop after %v", d)
	if mb := mberr.As(err); mb.Code != mberr.InvalidInjection || mb.Message != "invalid response injection" || mb.Status != http.StatusInternalServerError {
		t.Errorf("mb error %+v", mb)
	}
	// The runtime was discarded and the pool (of one) still serves.
	got := respond(t, e, `function (config) { return { body: 'ok ' + (config.state.touched === undefined) }; }`, env)
	if got["body"] != "ok true" {
		t.Errorf("body %v (state of a timed-out script must not be saved)", got["body"])
	}
}

func TestContextCancelInterrupts(t *testing.T) {
	e := newEngine(t, Options{Timeout: 10 * time.Second})
	p, err := e.Response(`function () { for (;;) {} }`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = p.Respond(ctx, Env{Request: testRequest()})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestScriptFailures(t *testing.T) {
	e := newEngine(t, Options{})
	tests := []struct{ name, src, cause string }{
		{"throws", `function () { throw new Error('boom'); }`, "boom"},
		{"reference error", `function () { return { body: missing }; }`, "missing is not defined"},
		{"number", `function () { return 42; }`, "not a response object"},
		{"undefined", `function () { }`, "neither returned"},
		{"null", `function () { return null; }`, "null, not a response object"},
		{"array", `function () { return [1]; }`, "not a response object"},
		{"cyclic body", `function () { const b = {}; b.self = b; return { body: b }; }`, "circular"},
		{"not a function", `42`, "is not a function"},
		{"rejected promise", `async function () { throw new Error('nope'); }`, "nope"},
		{"pending promise", `function () { return new Promise(function () {}); }`, "never settled"},
		{"deep recursion", `function f() { return f(); }`, "call stack"},
		{"strict mode", `function () { undeclared = 1; return {}; }`, "undeclared is not defined"},
		{"cyclic state", `function (config) { config.state.me = config.state; return {}; }`, "state.me"},
		{"state value too large", `function (config) { config.state.big = 'x'.repeat(70000); return {}; }`, "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := e.Response(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Respond(context.Background(), Env{Request: testRequest(), FlowID: "i1:fail"})
			var ie *Error
			if !errors.As(err, &ie) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if tt.name == "throws" && ie.Data != "boom" {
				t.Errorf("data %q, want mb's error.message", ie.Data)
			}
			if !strings.Contains(strings.ToLower(ie.Cause.Error()), strings.ToLower(tt.cause)) {
				t.Errorf("cause %q, want it to mention %q", ie.Cause, tt.cause)
			}
			mb := mberr.As(err)
			if mb.Status != 500 || mb.Message != "invalid response injection" || mb.Source != "("+tt.src+")(config, injectState, logger, done, imposterState);" {
				t.Errorf("mb error %+v", mb)
			}
		})
	}
	// The engine is still healthy.
	if got := respond(t, e, `function () { return { body: 'fine' }; }`, Env{Request: testRequest()}); got["body"] != "fine" {
		t.Errorf("body %v", got["body"])
	}
}

func TestThrowKeepsEarlierStateChanges(t *testing.T) {
	store := newStore(t)
	e := newEngine(t, Options{Flows: store})
	p, _ := e.Response(`function (config) { config.state.x = 1; throw new Error('after'); }`)
	if _, err := p.Respond(context.Background(), Env{Request: testRequest(), FlowID: "i1:t"}); err == nil {
		t.Fatal("no error")
	}
	if ent, err := store.Get(context.Background(), "i1:t", "x", nil); err != nil || string(ent.Value) != "1" {
		t.Errorf("x = %q, %v", ent.Value, err)
	}
}

func TestCompileRefused(t *testing.T) {
	e := newEngine(t, Options{})
	src := `function (config) { return {`
	_, err := e.Response(src)
	mb := mberr.As(err)
	if mb.Code != mberr.InvalidInjection || mb.Message != "invalid response injection" || mb.Status != 400 {
		t.Fatalf("err %+v", mb)
	}
	if _, err := e.Predicate(src); mberr.As(err).Message != "invalid predicate injection" {
		t.Errorf("predicate: %v", err)
	}
	if _, err := e.Decorate(src, nil); mberr.As(err).Message != "invalid decorator injection" {
		t.Errorf("decorate: %v", err)
	}
	if _, err := e.Wait(src); mberr.As(err).Message != "invalid wait injection" {
		t.Errorf("wait: %v", err)
	}
}

func TestProgramCache(t *testing.T) {
	e := newEngine(t, Options{})
	src := `function () { return { body: 'x' }; }`
	for range 5 {
		respond(t, e, src, Env{Request: testRequest()})
	}
	if _, err := e.Predicate(src); err != nil {
		t.Fatal(err)
	}
	if n := e.Compiles(); n != 1 {
		t.Errorf("compiles = %d, want 1", n)
	}
	respond(t, e, src+" ", Env{Request: testRequest()})
	if n := e.Compiles(); n != 2 {
		t.Errorf("compiles = %d, want 2", n)
	}
}

func TestFlowUnavailable(t *testing.T) {
	shard, err := flowshard.Open("", flowshard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := shard.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A closed shard stands in for an owner that cannot be reached: wrap
	// its errors as the cluster runtime does.
	e := newEngine(t, Options{Flows: unavailable{flowlocal.Store{Shard: shard}}})
	p, _ := e.Response(`function () { return {}; }`)
	_, err = p.Respond(context.Background(), Env{Request: testRequest(), FlowID: "i1:x"})
	if !errors.Is(err, flow.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	var ie *Error
	if errors.As(err, &ie) {
		t.Errorf("a store failure is not the script's: %v", err)
	}
}

// unavailable reports every failure of the store beneath as
// flow.ErrUnavailable, as the cluster runtime reports an unreachable owner.
type unavailable struct{ flow.Store }

func (u unavailable) Load(ctx context.Context, id string) (flow.Snapshot, error) {
	s, err := u.Store.Load(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", flow.ErrUnavailable, err)
	}
	return s, nil
}

func TestLoggerWritesSlog(t *testing.T) {
	var b gatewaytest.LockedBuffer
	e := newEngine(t, Options{Logger: slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	respond(t, e, `function (config) {
		config.logger.debug('d %s', 1); config.logger.info('i'); config.logger.warn({a: 1}); config.logger.error('e', 'x');
		console.log('c');
		return {};
	}`, Env{Request: testRequest()})
	out := b.String()
	for _, want := range []string{`level=DEBUG msg="d 1"`, "level=INFO msg=i", `level=WARN msg="{\"a\":1}"`, `level=ERROR msg="e x"`, "level=INFO msg=c"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

func TestClosedEngine(t *testing.T) {
	e := newEngine(t, Options{})
	p, _ := e.Response(`function () { return {}; }`)
	e.Close()
	if _, err := p.Respond(context.Background(), Env{Request: testRequest()}); !errors.Is(err, ErrClosed) {
		t.Errorf("err = %v", err)
	}
}

func TestTimers(t *testing.T) {
	e := newEngine(t, Options{Timeout: 300 * time.Millisecond})
	env := Env{Request: testRequest()}
	got := respond(t, e, `function (config) {
		const a = setTimeout(function () { config.callback({ body: 'cleared' }); }, 1);
		clearTimeout(a);
		setTimeout(function (x) { config.callback({ body: x }); }, 5, 'second');
	}`, env)
	if got["body"] != "second" {
		t.Errorf("body %v", got["body"])
	}
	// A timer due after the deadline costs the deadline, not the timer.
	p, _ := e.Response(`function (config) { setTimeout(function () { config.callback({}); }, 60000); }`)
	start := time.Now()
	if _, err := p.Respond(context.Background(), env); !errors.Is(err, ErrTimeout) {
		t.Errorf("err = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestPoolBound(t *testing.T) {
	// Registered first, so it runs after the engine's and store's cleanups.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	e := newEngine(t, Options{Runtimes: 1, Timeout: 2 * time.Second})
	slow, _ := e.Response(`function (config) { setTimeout(function () { config.callback({ body: 'slow' }); }, 300); }`)
	fast, _ := e.Response(`function () { return { body: 'fast' }; }`)
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(started)
		_, err := slow.Respond(context.Background(), Env{Request: testRequest(), FlowID: "i1:a"})
		done <- err
	}()
	<-started
	time.Sleep(50 * time.Millisecond)
	// The only runtime is busy: a caller that cannot wait gets its
	// context's error, not a script error.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := fast.Respond(ctx, Env{Request: testRequest(), FlowID: "i1:b"})
	var ie *Error
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ie) {
		t.Errorf("err = %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Timeouts discard runtimes without leaking them or goroutines.
	loop, _ := e.Response(`function () { for (;;) {} }`)
	e.timeout = 50 * time.Millisecond
	for range 3 {
		if _, err := loop.Respond(context.Background(), Env{Request: testRequest()}); !errors.Is(err, ErrTimeout) {
			t.Fatal(err)
		}
	}
	if got := respond(t, e, `function () { return { body: 'ok' }; }`, Env{Request: testRequest()}); got["body"] != "ok" {
		t.Errorf("body %v", got["body"])
	}
}

// TestGlobalsDoNotLeak: on one runtime, what a script writes to the global
// object is gone for the next request, however it got there, and the
// built-ins are still there.
func TestGlobalsDoNotLeak(t *testing.T) {
	e := newEngine(t, Options{Runtimes: 1})
	write := `function () {
		globalThis.leak = 'direct';
		Function('return this')().sloppy = 'this of a sloppy function';
		(0, eval)('var declared = "indirect eval"');
		globalThis.JSON = 'shadowed';
		const same = [globalThis === Function('return this')(), globalThis.globalThis === globalThis];
		Function('globalThis = "replaced"')();
		return { body: [typeof leak, typeof sloppy, typeof declared, typeof JSON, typeof globalThis].concat(same).join(',') };
	}`
	read := `function () {
		return { body: [typeof leak, typeof sloppy, typeof declared, typeof JSON.parse, typeof globalThis.Math,
			globalThis === Function('return this')()].join(',') };
	}`
	for range 3 {
		if got := respond(t, e, write, Env{Request: testRequest()}); got["body"] != "string,string,string,string,string,true,true" {
			t.Fatalf("within the run: %v", got["body"])
		}
		if got := respond(t, e, read, Env{Request: testRequest()}); got["body"] != "undefined,undefined,undefined,function,object,true" {
			t.Fatalf("the next request sees %v", got["body"])
		}
	}
}

// TestCloseStopsRunningScripts: closing the engine stops a script still
// running, and leaves no goroutine behind (TestMain's leak check).
func TestCloseStopsRunningScripts(t *testing.T) {
	e := newEngine(t, Options{Timeout: time.Minute})
	p, _ := e.Response(`function () { for (;;) {} }`)
	done := make(chan error, 1)
	go func() {
		_, err := p.Respond(context.Background(), Env{Request: testRequest()})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	e.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("err = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not stop the script")
	}
}
