package inject

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/dop251/goja"
	"github.com/riftgate/riftgate/gateway/message"
	"pgregory.net/rapid"
)

// requestAgrees checks that the request object built field by field is the
// object JSON.parse makes of message.Request's JSON, key order included.
func requestAgrees(t interface {
	Helper()
	Fatalf(string, ...any)
}, v *vm, r *message.Request) {
	t.Helper()
	raw, err := r.MarshalJSON()
	if err != nil {
		t.Fatalf("MarshalJSON: %v", err)
	}
	parsed, err := v.fromJSON(string(raw))
	if err != nil {
		t.Fatalf("parse %s: %v", raw, err)
	}
	want, _ := v.toJSON(parsed)
	got, _ := v.toJSON(v.request(r))
	if got != want {
		t.Fatalf("request object\n got %s\nwant %s", got, want)
	}
}

func TestRequestObject(t *testing.T) {
	v := newVM(slog.New(slog.NewTextHandler(io.Discard, nil)))
	form := &message.Request{Method: "POST", Path: "/f",
		Headers: []message.KV{{Name: "Content-Type", Value: "application/x-www-form-urlencoded"}, {Name: "X", Value: "1"}, {Name: "x", Value: "2"}, {Name: "X", Value: "3"}},
		Body:    []byte("a=1&a=2&b=%C3%A9"), Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)}
	form.SetRemote("127.0.0.1:1", "127.0.0.1")
	for _, r := range []*message.Request{
		{},
		testRequest(),
		form,
		{Method: "GET", Path: "/é", Query: []message.KV{{Name: "__proto__", Value: "p"}, {Name: "q", Value: "\xff"}}, Body: []byte("\u2028<&>")},
	} {
		requestAgrees(t, v, r)
	}
	// The script sees __proto__ as a plain key, as JSON.parse would give it.
	o := v.request(&message.Request{Query: []message.KV{{Name: "__proto__", Value: "p"}}})
	if got := o.Get("query").(*goja.Object).Get("__proto__").String(); got != "p" {
		t.Errorf("__proto__ = %q", got)
	}
}

func TestRequestObjectProperty(t *testing.T) {
	v := newVM(slog.New(slog.NewTextHandler(io.Discard, nil)))
	kvs := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) message.KV {
		return message.KV{
			Name:  rapid.SampledFrom([]string{"a", "A", "b", "__proto__", "content-type", "x y"}).Draw(t, "name"),
			Value: rapid.String().Draw(t, "value"),
		}
	}), 0, 6)
	rapid.Check(t, func(rt *rapid.T) {
		r := &message.Request{
			Method:  rapid.SampledFrom([]string{"GET", "POST", ""}).Draw(rt, "method"),
			Path:    rapid.String().Draw(rt, "path"),
			Query:   kvs.Draw(rt, "query"),
			Headers: kvs.Draw(rt, "headers"),
			Body:    []byte(rapid.String().Draw(rt, "body")),
		}
		requestAgrees(rt, v, r)
	})
}

// TestViewsBehaveAsObjects: config and the request object read, change,
// enumerate and stringify as the plain objects mb makes them.
func TestViewsBehaveAsObjects(t *testing.T) {
	e := newEngine(t, Options{})
	got := respond(t, e, `function (config) {
		const r = config.request, out = [];
		out.push(Object.keys(config).join(','));
		out.push(config.query === r.query, config.method === r.method, 'form' in r, 'timestamp' in r);
		r.path = '/changed'; r.extra = 1; delete r.ip; delete r.nope;
		out.push(Object.keys(r).join(','), JSON.stringify(r.query), r.path, r.extra, r.ip === undefined);
		config.mine = 'x'; delete config.logger;
		out.push(Object.keys(config).slice(-2).join(','), 'logger' in config, config.hasOwnProperty('mine'));
		const copy = Object.assign({}, r);
		out.push(JSON.stringify(copy) === JSON.stringify(r));
		return { body: out.join('|') };
	}`, Env{Request: testRequest()})
	want := "request,state,logger,callback,requestFrom,method,path,query,headers,body,ip" +
		"|true|true|false|false" +
		`|requestFrom,method,path,query,headers,body,extra|{"q":"1"}|/changed|1|true` +
		"|ip,mine|false|true|true"
	if got["body"] != want {
		t.Errorf("got  %v\nwant %s", got["body"], want)
	}
}
