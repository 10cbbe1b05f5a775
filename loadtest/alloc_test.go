package loadtest

import (
	"context"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// loopWorker is one virtual user of a scenario that uses every template
// variable, a header and a body, against a real server on 127.0.0.1.
func loopWorker(tb testing.TB, scenario string) *worker {
	tb.Helper()
	url := startServer(tb, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") })
	sc, err := ParseScenario([]byte(scenario))
	if err != nil {
		tb.Fatal(err)
	}
	r, err := newRunner(Options{Targets: []string{url, url}, Connections: 1, Duration: time.Hour, Scenario: sc})
	if err != nil {
		tb.Fatal(err)
	}
	w := r.newWorker(0)
	tb.Cleanup(w.close)
	return w
}

// The request loop (render, send, read, record) allocates nothing once its
// buffers have grown: at tens of thousands of requests a second on two
// cores, garbage would show up as throughput.
// Requests rendered every iteration, and requests whose bytes are built once.
var loopScenarios = map[string]string{
	"templated": `{"flowPerIteration":true,"steps":[
		{"method":"POST","path":"/f/{{flowId}}?i={{iter}}","headers":{"X-Vu":"{{vu}}"},"body":"{\"f\":\"{{flowId}}\"}","expectStatus":200},
		{"path":"/static","expectStatus":200}]}`,
	"prebuilt": `{"steps":[{"method":"POST","path":"/f/{{flowId}}","body":"x","expectStatus":200},{"path":"/static"}]}`,
	// Checks on the status, a header and the body cost no allocation either
	// (a jsonpath check decodes the body, and does).
	"checked": `{"steps":[{"path":"/c","checks":["status == 200","header Content-Type contains text","body contains ok","body !matches ^no"]}]}`,
}

func TestRequestLoopDoesNotAllocate(t *testing.T) {
	for name, sc := range loopScenarios {
		t.Run(name, func(t *testing.T) { testLoopAllocs(t, sc) })
	}
}

func testLoopAllocs(t *testing.T, scenario string) {
	w := loopWorker(t, scenario)
	ctx := context.Background()
	for range 200 { // grow buffers, dial both connections
		w.once(ctx)
	}
	allocs := testing.AllocsPerRun(2000, func() { w.once(ctx) })
	// The in-process server shares the count; it is allocation-free too,
	// but allow a stray allocation from the runtime.
	if allocs > 0.01 {
		t.Errorf("%.3f allocations per request, want 0", allocs)
	}
	if w.shard.requests < 2200 || w.shard.errs != [numErrKinds]int64{} {
		t.Errorf("requests %d, errors %v", w.shard.requests, w.shard.errs)
	}
}

func BenchmarkRequestLoop(b *testing.B) {
	for _, name := range []string{"templated", "prebuilt", "checked"} {
		b.Run(name, func(b *testing.B) {
			w := loopWorker(b, loopScenarios[name])
			ctx := context.Background()
			for range 200 {
				w.once(ctx)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				w.once(ctx)
			}
		})
	}
}
