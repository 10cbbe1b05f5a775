package inject

import (
	"context"
	"testing"

	"github.com/dop251/goja"
)

// BenchmarkCounterInject is one call of mb's documented counter inject on
// one flow: load the flow, run the script, write the counter back.
func BenchmarkCounterInject(b *testing.B) {
	e := newEngine(b, Options{})
	p, err := e.Response(`function (config) {
		config.state.count = (config.state.count || 0) + 1;
		return { statusCode: 200, body: 'call ' + config.state.count };
	}`)
	if err != nil {
		b.Fatal(err)
	}
	env := Env{Request: testRequest(), FlowID: "i1:bench"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Respond(ctx, env); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCounterInjectParallel spreads the counter over many flows, so
// that runtimes, not flow locks, are what callers share.
func BenchmarkCounterInjectParallel(b *testing.B) {
	e := newEngine(b, Options{})
	p, err := e.Response(`function (config) {
		config.state.count = (config.state.count || 0) + 1;
		return { body: String(config.state.count) };
	}`)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		env := Env{Request: testRequest()}
		for i := 0; pb.Next(); i++ {
			env.FlowID = "i1:par" + string(rune('a'+i%26))
			if _, err := p.Respond(ctx, env); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkScriptAlone is the floor under BenchmarkServe/inject: the bench's
// counter function called on one goja runtime, with a plain config and
// state made once, and nothing else (no flow, no views, no answer read):
// the script's own work, which no change to riftgate can take away.
func BenchmarkScriptAlone(b *testing.B) {
	rt := goja.New()
	v, err := rt.RunString(`(function (config) { config.state.count = (config.state.count || 0) + 1; return { statusCode: 200, headers: { Connection: 'keep-alive', 'Content-Type': 'text/plain' }, body: String(config.state.count) }; })`)
	if err != nil {
		b.Fatal(err)
	}
	fn, _ := goja.AssertFunction(v)
	config := rt.NewObject()
	_ = config.Set("state", rt.NewObject())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fn(goja.Undefined(), config); err != nil {
			b.Fatal(err)
		}
	}
}
