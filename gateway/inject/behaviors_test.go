package inject

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/behavior"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/predicate"
	"github.com/riftgate/riftgate/gateway/proxy"
)

func TestPredicateMatch(t *testing.T) {
	store := newStore(t)
	e := newEngine(t, Options{Flows: store})
	ctx := context.Background()
	tests := []struct {
		name, src string
		want      bool
	}{
		{"config", `function (config) { return config.request.path === '/orders'; }`, true},
		{"older form", `function (request, logger) { return request.method === 'GET'; }`, false},
		{"truthy", `function (config) { return config.request.query.q; }`, true},
		{"falsy", `function () { return 0; }`, false},
		{"imposterState", `function (config, logger, state) { return state === config.state; }`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := e.Predicate(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Match(ctx, Env{Request: testRequest(), FlowID: "i1:p"})
			if err != nil || got != tt.want {
				t.Errorf("Match = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	// State is the flow: a predicate that counts lets two calls through.
	p, _ := e.Predicate(`function (config) { config.state.seen = (config.state.seen || 0) + 1; return config.state.seen <= 2; }`)
	var got []bool
	for range 3 {
		ok, err := p.Match(ctx, Env{Request: testRequest(), FlowID: "i1:seen"})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ok)
	}
	if g, _ := json.Marshal(got); string(g) != "[true,true,false]" {
		t.Errorf("matches %s", g)
	}
	p, _ = e.Predicate(`function () { throw new Error('bad'); }`)
	_, err := p.Match(ctx, Env{Request: testRequest()})
	if mb := mberr.As(err); mb.Message != "invalid predicate injection" || mb.Status != 500 {
		t.Errorf("error %+v", mb)
	}
	// The adapter for gateway/predicate reads the flow from the request.
	m := p.Matcher(nil)
	if m.Match(testRequest()) {
		t.Error("a failing predicate matched")
	}
	p, _ = e.Predicate(`function (config) { return config.state.seen === 3; }`)
	m = p.Matcher(func(*message.Request) (string, flow.Policy) { return "i1:seen", flow.Policy{} })
	if !m.Match(testRequest()) {
		t.Error("matcher did not see the flow")
	}
}

func decorated(t *testing.T, e *Engine, src string, resp *behavior.Response) *behavior.Response {
	t.Helper()
	d, err := e.Decorate(src, func(*message.Request) (string, flow.Policy) { return "i1:dec", flow.Policy{} })
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Decorate(context.Background(), testRequest(), resp); err != nil {
		t.Fatalf("Decorate: %v", err)
	}
	return resp
}

func TestDecorate(t *testing.T) {
	e := newEngine(t, Options{})
	text := func() *behavior.Response {
		return &behavior.Response{Response: &message.Response{StatusCode: 200,
			Headers: []message.KV{{Name: "X-A", Value: "1"}}, Body: []byte("hello x")}}
	}
	t.Run("mutate, older form", func(t *testing.T) {
		r := decorated(t, e, `function (request, response, logger) {
			response.body = response.body.replace('x', request.path);
			response.headers['X-B'] = 'b';
		}`, text())
		if string(r.Body) != "hello /orders" || r.JSONBody || r.StatusCode != 200 {
			t.Errorf("got %+v %q", r, r.Body)
		}
		if v, _ := r.Header("X-B"); v != "b" {
			t.Errorf("headers %v", r.Headers)
		}
		if v, _ := r.Header("X-A"); v != "1" {
			t.Errorf("headers %v", r.Headers)
		}
	})
	t.Run("return a new object", func(t *testing.T) {
		r := decorated(t, e, `function (config) {
			config.state.n = (config.state.n || 0) + 1;
			return { statusCode: 202, body: { n: config.state.n, was: config.response.body } };
		}`, text())
		want := "{\n    \"n\": 1,\n    \"was\": \"hello x\"\n}"
		if r.StatusCode != 202 || string(r.Body) != want || !r.JSONBody || r.Headers != nil {
			t.Errorf("got %d %q json=%v headers=%v", r.StatusCode, r.Body, r.JSONBody, r.Headers)
		}
	})
	t.Run("JSON body is an object", func(t *testing.T) {
		r := decorated(t, e, `function (config) { config.response.body.a += 1; config.response.statusCode = '${code}'; }`,
			&behavior.Response{Response: &message.Response{Body: []byte(`{"a": 1}`)}, JSONBody: true})
		if string(r.Body) != "{\n    \"a\": 2\n}" || !r.JSONBody || r.StatusText != "${code}" {
			t.Errorf("got %q %v %q", r.Body, r.JSONBody, r.StatusText)
		}
	})
	t.Run("binary", func(t *testing.T) {
		r := decorated(t, e, `function (config) { config.response.body = 'AAEC'; }`,
			&behavior.Response{Response: &message.Response{Body: []byte{0xff}, Binary: true}})
		if string(r.Body) != "\x00\x01\x02" || !r.Binary {
			t.Errorf("got %q %v", r.Body, r.Binary)
		}
	})
	t.Run("state of the decorator's flow", func(t *testing.T) {
		r := decorated(t, e, `function (config) { config.response.body = 'n=' + config.state.n; }`, text())
		if string(r.Body) != "n=1" {
			t.Errorf("got %q", r.Body)
		}
	})
}

func TestDecorateFailures(t *testing.T) {
	e := newEngine(t, Options{Timeout: 200 * time.Millisecond})
	for _, src := range []string{
		`function () { throw new Error('x'); }`,
		`function () { for (;;) {} }`,
		`function () { return function () {}; }`,
	} {
		d, err := e.Decorate(src, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = d.Decorate(context.Background(), testRequest(), &behavior.Response{Response: &message.Response{Body: []byte("b")}})
		if mb := mberr.As(err); mb.Message != "invalid decorator injection" || mb.Status != 500 {
			t.Errorf("%s: %v", src, err)
		}
	}
}

// A decorator's binary body is decoded as mb's server decodes it,
// leniently: mb 2.9.1 sends these bytes for 'not base64!'.
func TestDecorateBinaryBodyDecodesLeniently(t *testing.T) {
	e := newEngine(t, Options{})
	d, err := e.Decorate(`function (config) { config.response.body = 'not base64!'; config.response._mode = 'binary'; }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &behavior.Response{Response: &message.Response{Body: []byte("b")}}
	if err := d.Decorate(context.Background(), testRequest(), r); err != nil {
		t.Fatal(err)
	}
	if want := "\x9e\x8b[j\xc7\xba"; string(r.Body) != want || !r.Binary || r.BinaryText != "not base64!" {
		t.Errorf("body %q (binary %v, text %q), want %q", r.Body, r.Binary, r.BinaryText, want)
	}
}

func TestWait(t *testing.T) {
	e := newEngine(t, Options{Timeout: 200 * time.Millisecond})
	ctx := context.Background()
	for _, tt := range []struct {
		src  string
		want int
	}{
		{`function () { return 25 + 5; }`, 30},
		{`() => 12.9`, 12},
		{`function () { return 'abc'; }`, 0},
		{`function () { return -4; }`, 0},
		{`function () { return '40'; }`, 40},
	} {
		w, err := e.Wait(tt.src)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := w.WaitMillis(ctx, testRequest()); err != nil || got != tt.want {
			t.Errorf("%s: %d, %v; want %d", tt.src, got, err, tt.want)
		}
	}
	for _, src := range []string{`function () { throw new Error('w'); }`, `function () { while (1) {} }`} {
		w, _ := e.Wait(src)
		_, err := w.WaitMillis(ctx, testRequest())
		if mb := mberr.As(err); mb.Message != "invalid wait injection" || mb.Source != src {
			t.Errorf("%s: %+v", src, mb)
		}
	}
}

func TestGenerate(t *testing.T) {
	e := newEngine(t, Options{})
	// gateway/proxy's hook takes the engine's method as it is.
	var _ proxy.InjectGenerator = e.Generate
	req := map[string]any{"method": "GET", "path": "/x", "query": map[string]any{"a": "1"}}
	got, err := e.Generate(`function (config) {
		config.logger.info('generating');
		return [{ equals: { path: config.request.path } }, { exists: { query: { a: true } } }];
	}`, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got[0]) != `{"equals":{"path":"/x"}}` || string(got[1]) != `{"exists":{"query":{"a":true}}}` {
		t.Errorf("got %s", got)
	}
	for _, src := range []string{`function () { return 5; }`, `function () { throw new Error('g'); }`, `function (`} {
		_, err := e.Generate(src, req)
		if mb := mberr.As(err); mb.Message != "invalid predicateGenerator injection" || mb.Source != "("+src+")(config);" {
			t.Errorf("%s: %+v", src, mb)
		}
	}
}

func shellScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "transform.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestShellTransform(t *testing.T) {
	e := newEngine(t, Options{Timeout: 2 * time.Second})
	ctx := context.Background()
	resp := func() *behavior.Response {
		return &behavior.Response{Response: &message.Response{StatusCode: 200, Body: []byte("hello it's me")}}
	}
	t.Run("environment", func(t *testing.T) {
		d, _ := e.ShellTransform(shellScript(t, `printf '%s' "$MB_RESPONSE" | sed 's/hello/bye/'`))
		r := resp()
		if err := d.Decorate(ctx, testRequest(), r); err != nil {
			t.Fatal(err)
		}
		if string(r.Body) != "bye it's me" || r.StatusCode != 200 {
			t.Errorf("got %d %q", r.StatusCode, r.Body)
		}
	})
	t.Run("arguments", func(t *testing.T) {
		// mb passes the request and response as two arguments too; the
		// quoting survives a single quote in the body.
		d, _ := e.ShellTransform(shellScript(t, `[ "$2" = "$MB_RESPONSE" ] || exit 3; printf '{"body": %s}' "$(printf '%s' "$1" | sed -n 's/.*"path":\("[^"]*"\).*/\1/p')"`))
		r := resp()
		if err := d.Decorate(ctx, testRequest(), r); err != nil {
			t.Fatal(err)
		}
		if string(r.Body) != "/orders" || r.StatusCode != 0 {
			t.Errorf("got %d %q", r.StatusCode, r.Body)
		}
	})
	t.Run("chatty stderr", func(t *testing.T) {
		d, _ := e.ShellTransform(shellScript(t, `head -c 200000 /dev/zero >&2; printf '{"body": "quiet"}'`))
		r := resp()
		if err := d.Decorate(ctx, testRequest(), r); err != nil || string(r.Body) != "quiet" {
			t.Errorf("got %q, %v", r.Body, err)
		}
	})
	for _, tt := range []struct {
		name, body, msg string
		timeout         bool
	}{
		{"exit status", `echo oops >&2; exit 1`, "Command failed: ", false},
		{"invalid JSON", `echo not json`, "Shell command returned invalid JSON: 'not json\n'", false},
		{"too much output", `yes | head -c 2000000`, "Command failed: ", false},
		{"timeout", `sleep 10 & wait`, "Command failed: ", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := shellScript(t, tt.body)
			d, _ := e.ShellTransform(cmd)
			start := time.Now()
			err := d.Decorate(ctx, testRequest(), resp())
			mb := mberr.As(err)
			if !strings.HasPrefix(mb.Message, tt.msg) || mb.Status != 500 {
				t.Errorf("err %v", err)
			}
			if tt.timeout && !errors.Is(err, ErrTimeout) {
				t.Errorf("err %v, want ErrTimeout", err)
			}
			if d := time.Since(start); d > 8*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestBehaviorHooks wires the engine into gateway/behavior as the engine
// does, and runs a stub's decorate, wait function and shellTransform in
// order.
func TestBehaviorHooks(t *testing.T) {
	e := newEngine(t, Options{})
	hooks := behavior.InjectHooks{
		Decorate: func(src string) (behavior.Decorator, error) {
			return e.Decorate(src, func(*message.Request) (string, flow.Policy) { return "i1:hooks", flow.Policy{} })
		},
		ShellTransform: e.ShellTransform,
		Wait:           e.Wait,
	}
	cmd := shellScript(t, `printf '%s' "$MB_RESPONSE" | sed 's/decorated/transformed/'`)
	stub, _ := json.Marshal(map[string]any{
		"is": map[string]any{"body": "plain"},
		"behaviors": []any{
			map[string]any{"decorate": "function (config) { config.state.hits = (config.state.hits || 0) + 1; config.response.body = 'decorated ' + config.state.hits; }"},
			map[string]any{"wait": "function () { return 40; }"},
			map[string]any{"shellTransform": cmd},
		},
	})
	b, err := behavior.Compile(stub, behavior.Options{Inject: hooks})
	if err != nil {
		t.Fatal(err)
	}
	r := &behavior.Response{Response: &message.Response{Body: []byte("plain")}}
	wait, err := b.ApplyDeferred(context.Background(), testRequest(), r)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Body) != "transformed 1" || wait != 40*time.Millisecond {
		t.Errorf("body %q, wait %v", r.Body, wait)
	}
}

// TestPredicateHook wires the engine into gateway/predicate as the engine
// does.
func TestPredicateHook(t *testing.T) {
	e := newEngine(t, Options{})
	opts := predicate.Options{Inject: func(src string) (predicate.Predicate, error) {
		p, err := e.Predicate(src)
		if err != nil {
			return nil, err
		}
		return p.Matcher(func(*message.Request) (string, flow.Policy) { return "i1:hook", flow.Policy{} }), nil
	}}
	p, err := predicate.Compile(json.RawMessage(`{"inject": "function (config) { return config.request.path === '/orders'; }"}`), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Match(testRequest()) || p.Match(&message.Request{Method: "GET", Path: "/other"}) {
		t.Error("inject predicate through gateway/predicate")
	}
	if _, err := predicate.Compile(json.RawMessage(`{"inject": "function ("}`), opts); mberr.As(err).Message != "invalid predicate injection" {
		t.Errorf("err %v", err)
	}
}
