package inject

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"testing"

	"github.com/riftgate/riftgate/gateway/behavior"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/predicate/mbtest"
)

// call is one request of a differential case.
type call struct {
	method, target, contentType, body string
}

func (c call) message() *message.Request {
	u, _ := url.Parse(c.target)
	r := &message.Request{Method: c.method, Path: u.Path, Query: message.ParseQuery(u.RawQuery), Body: []byte(c.body)}
	if c.contentType != "" {
		r.Headers = []message.KV{{Name: "Content-Type", Value: c.contentType}}
	}
	return r
}

func (c call) send(t *testing.T, mb *mbtest.MB, port int) (int, string) {
	t.Helper()
	hs := [][2]string{{"Host", "127.0.0.1"}, {"Content-Length", fmt.Sprint(len(c.body))}}
	if c.contentType != "" {
		hs = append(hs, [2]string{"Content-Type", c.contentType})
	}
	resp, body, err := mb.Send(port, c.method, c.target, hs, c.body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestAgainstMountebank runs mb's documented examples, and the call forms
// this package supports, on the real Mountebank 2.9.1 and here, on one
// flow per case, and compares status and body call by call.
func TestAgainstMountebank(t *testing.T) {
	if testing.Short() {
		t.Skip("differential test against mb skipped in -short mode")
	}
	mb, err := mbtest.Start(context.Background(), "../..", true)
	if errors.Is(err, mbtest.ErrNotInstalled) {
		t.Fatal("Mountebank is not installed under build/node: run `make node`")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Stop()
	e := newEngine(t, Options{})

	get := func(target string) call { return call{method: "GET", target: target} }
	xml := `function (config) {

    function hasXMLProlog () {
        return config.request.body.indexOf('<?xml') === 0;
    }

    if (config.request.headers['Content-Type'] === 'application/xml') {
        return !hasXMLProlog();
    }
    else {
        return hasXMLProlog();
    }
}`
	t.Run("predicate", func(t *testing.T) {
		port, err := mb.Imposter("[" + mbtest.Stub(`[{"inject":`+jsonString(xml)+`}]`, map[string]any{"is": map[string]any{"body": "match"}}) + "]")
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.Predicate(xml)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []call{
			{method: "POST", target: "/", contentType: "application/xml", body: "<?xml version='1.0'?><a/>"},
			{method: "POST", target: "/", contentType: "application/xml", body: "<a/>"},
			{method: "POST", target: "/", contentType: "text/plain", body: "<?xml?>"},
			{method: "POST", target: "/", body: "plain"},
		} {
			_, body := c.send(t, mb, port)
			got, err := p.Match(context.Background(), Env{Request: c.message(), FlowID: "i1:pred"})
			if err != nil {
				t.Fatal(err)
			}
			if want := body == "match"; got != want {
				t.Errorf("%+v: riftgate %v, mb %v", c, got, want)
			}
		}
	})

	responses := []struct {
		name, src string
		calls     []call
	}{
		{"documented counter over shared state", `function (config) {
    var count = config.state.requests ? Object.keys(config.state.requests).length : 0;
    config.state.requests = config.state.requests || {};
    config.state.requests[config.request.method + ' ' + config.request.path] = true;
    return {
        body: ` + "`There have been ${count} proxied calls`" + `
    };
}`, []call{get("/a"), get("/b"), get("/a"), get("/c")}},
		{"counter", `function (config) {
    config.state.count = (config.state.count || 0) + 1;
    return { statusCode: 200 + config.state.count, headers: { 'X-Count': String(config.state.count) }, body: 'n=' + config.state.count };
}`, []call{get("/"), get("/"), get("/")}},
		{"older positional form", `function (request, state, logger) {
    state.calls = (state.calls || 0) + 1;
    return { body: request.method + ' ' + request.path + ' ' + request.query.x + ' ' + state.calls };
}`, []call{get("/p?x=1"), {method: "PUT", target: "/q?x=2"}}},
		{"state as a plain object", `function (config) {
    const s = config.state;
    s.n = (s.n || 0) + 1;
    if (s.n === 1) { s['10'] = 'ten'; s['9'] = 'nine'; s.b = 'b'; s.a = { list: [1] }; }
    else { s.a.list.push(s.n); delete s['9']; s[s.n] = true; }
    return { body: [Object.keys(s).filter(function (k) { return /^[0-9]+$/.test(k); }).join(','), 'a' in s, s.hasOwnProperty('9'),
        JSON.stringify(s.a), Object.entries(s).length, typeof s.missing, Object.getOwnPropertyNames(s).length,
        JSON.stringify(Object.getOwnPropertyDescriptor(s, 'b')), Object.keys(Object.assign({}, s)).length].join('|') };
}`, []call{get("/"), get("/"), get("/")}},
		{"callback", `function (config) { config.callback({ statusCode: 418, body: config.request.body.toUpperCase() }); }`,
			[]call{{method: "POST", target: "/", body: "tea"}}},
		{"form", `function (config) { return { body: config.request.form.a + '|' + config.request.form.b }; }`,
			[]call{{method: "POST", target: "/", contentType: "application/x-www-form-urlencoded", body: "a=1&b=two%20words"}}},
		{"throws", `function () { throw new Error('boom'); }`, []call{get("/")}},
		{"throw after callback", `function (config) { config.callback({ body: 'kept' }); throw new Error('late'); }`, []call{get("/")}},
		{"async", `async function (config) { const n = await Promise.resolve(config.request.path.length); return { body: 'len ' + n }; }`, []call{get("/four")}},
		{"timer", `function (config) { setTimeout(function () { config.callback({ statusCode: 202, body: 'later' }); }, 10); }`, []call{get("/")}},
		{"undeclared variable", `function () { missing.x = 1; return {}; }`, []call{get("/")}},
		{"fields other than a response's are ignored", `function () { const o = { statusCode: 201, body: 'hi' }; o.self = o; o.big = 1n; return o; }`, []call{get("/")}},
	}
	for i, tt := range responses {
		t.Run(tt.name, func(t *testing.T) {
			port, err := mb.Imposter("[" + mbtest.Stub("", map[string]any{"inject": tt.src}) + "]")
			if err != nil {
				t.Fatal(err)
			}
			p, err := e.Response(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tt.calls {
				mbStatus, mbBody := c.send(t, mb, port)
				status, body := riftgateAnswer(t, p, c, fmt.Sprintf("i1:diff%d", i))
				if status != mbStatus || !sameBody(body, mbBody) {
					t.Errorf("%+v:\nriftgate %d %s\nmb       %d %s", c, status, body, mbStatus, mbBody)
				}
			}
		})
	}

	decorators := []struct{ name, src string }{
		{"mutate", `function (request, response) { response.body = response.body.replace('${WHO}', request.query.who); response.headers['X-D'] = 'yes'; }`},
		{"return with state", `function (config) {
    config.state.n = (config.state.n || 0) + 1;
    return { statusCode: 201, body: config.response.body + ' #' + config.state.n };
}`},
	}
	for i, tt := range decorators {
		t.Run("decorate "+tt.name, func(t *testing.T) {
			stub := map[string]any{"is": map[string]any{"body": "hello ${WHO}", "headers": map[string]any{"X-A": "1"}},
				"behaviors": []any{map[string]any{"decorate": tt.src}}}
			port, err := mb.Imposter("[" + mbtest.Stub("", stub) + "]")
			if err != nil {
				t.Fatal(err)
			}
			d, err := e.Decorate(tt.src, func(*message.Request) (string, flow.Policy) { return fmt.Sprintf("i1:dec%d", i), flow.Policy{} })
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				c := get("/?who=world")
				mbStatus, mbBody := c.send(t, mb, port)
				r := &behavior.Response{Response: &message.Response{Headers: []message.KV{{Name: "X-A", Value: "1"}}, Body: []byte("hello ${WHO}")}}
				if err := d.Decorate(context.Background(), c.message(), r); err != nil {
					t.Fatal(err)
				}
				status := r.StatusCode
				if status == 0 {
					status = 200
				}
				if status != mbStatus || string(r.Body) != mbBody {
					t.Errorf("riftgate %d %s, mb %d %s", status, r.Body, mbStatus, mbBody)
				}
			}
		})
	}
}

func TestShellTransformAgainstMountebank(t *testing.T) {
	if testing.Short() {
		t.Skip("differential test against mb skipped in -short mode")
	}
	mb, err := mbtest.Start(context.Background(), "../..", true)
	if errors.Is(err, mbtest.ErrNotInstalled) {
		t.Fatal("Mountebank is not installed under build/node: run `make node`")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Stop()
	e := newEngine(t, Options{})
	for _, body := range []string{
		// The response as mb hands it over, with one word changed.
		`printf '%s' "$MB_RESPONSE" | sed 's/hello/bye/'`,
		// The request's path, read from the first argument.
		`printf '{"statusCode": 299, "body": %s}' "$(printf '%s' "$1" | sed -n 's/.*"path":\("[^"]*"\).*/\1/p')"`,
	} {
		cmd := shellScript(t, body)
		stub := map[string]any{"is": map[string]any{"statusCode": 201, "body": "hello there", "headers": map[string]any{"X-A": "1"}},
			"behaviors": []any{map[string]any{"shellTransform": cmd}}}
		port, err := mb.Imposter("[" + mbtest.Stub("", stub) + "]")
		if err != nil {
			t.Fatal(err)
		}
		c := call{method: "GET", target: "/where"}
		mbStatus, mbBody := c.send(t, mb, port)
		d, _ := e.ShellTransform(cmd)
		r := &behavior.Response{Response: &message.Response{StatusCode: 201, Headers: []message.KV{{Name: "X-A", Value: "1"}}, Body: []byte("hello there")}}
		if err := d.Decorate(context.Background(), c.message(), r); err != nil {
			t.Fatal(err)
		}
		if r.StatusCode != mbStatus || string(r.Body) != mbBody {
			t.Errorf("%s: riftgate %d %q, mb %d %q", body, r.StatusCode, r.Body, mbStatus, mbBody)
		}
	}
}

// riftgateAnswer is what an imposter answers for a response injection: the
// object with mb's defaults (200, empty body), or mb's error body with 500.
func riftgateAnswer(t *testing.T, p *Program, c call, flowID string) (int, string) {
	t.Helper()
	out, err := p.Respond(context.Background(), Env{Request: c.message(), FlowID: flowID})
	if err != nil {
		var ie *Error
		if !errors.As(err, &ie) {
			t.Fatal(err)
		}
		return ie.MB.Status, errorsBody(ie)
	}
	r, _, err := out.Response(&message.ResponseFields{})
	if err != nil {
		t.Fatal(err)
	}
	return r.StatusCode, string(r.Body)
}

// errorsBody renders the error as mb's imposter does, with "data", which
// mberr's body does not carry yet.
func errorsBody(ie *Error) string {
	b, _ := json.Marshal(map[string]any{"errors": []any{map[string]any{
		"code": ie.MB.Code, "message": ie.MB.Message, "source": ie.MB.Source, "data": ie.Data,
	}}})
	return string(b)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// sameBody compares two bodies as JSON when both are JSON (mb's error
// bodies, without the Node "name" and "stack" of mb's errors), else as
// text.
func sameBody(riftgate, mb string) bool {
	var x, y any
	if json.Unmarshal([]byte(riftgate), &x) != nil || json.Unmarshal([]byte(mb), &y) != nil {
		return riftgate == mb
	}
	if m, ok := y.(map[string]any); ok {
		if errs, ok := m["errors"].([]any); ok {
			for _, e := range errs {
				if e, ok := e.(map[string]any); ok {
					delete(e, "name")
					delete(e, "stack")
				}
			}
		}
	}
	return reflect.DeepEqual(x, y)
}
