package loadtest

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/riftgate/riftgate/internal/heaptest"
	"github.com/valyala/fasthttp"
)

// loopWorker is one virtual user of a scenario that uses every template
// variable, a header and a body, against a real server on 127.0.0.1.
func loopWorker(tb testing.TB, scenario string) *worker {
	tb.Helper()
	url := startServer(tb, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") })
	return loopWorkerOn(tb, scenario, Options{Targets: []string{url, url}})
}

// loopWorkerOn is loopWorker with o's targets and TLS.
func loopWorkerOn(tb testing.TB, scenario string, o Options) *worker {
	tb.Helper()
	sc, err := ParseScenario([]byte(scenario))
	if err != nil {
		tb.Fatal(err)
	}
	o.Connections, o.Duration, o.Scenario = 1, time.Hour, sc
	r, err := newRunner(o)
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

// Over https, the loop adds nothing to what crypto/tls allocates itself:
// one 24-byte reader per record read (Conn.readFromUntil, Go 1.26), on
// the client and on the in-process server alike, so two per request.
// Under -race, where pools drop what they are given, crypto/tls's output
// buffers and the fasthttp server's pooled ones are made again now and
// then (4 a request measured): there only a gross regression shows.
func TestHTTPSRequestLoopAllocatesOnlyInCryptoTLS(t *testing.T) {
	want := 2.0
	if heaptest.Race {
		want = 6
	}
	testWorkerAllocs(t, httpsLoopWorker(t), want)
}

func httpsLoopWorker(tb testing.TB) *worker {
	cert, err := selfSignedCert("127.0.0.1")
	if err != nil {
		tb.Fatal(err)
	}
	url := serveTLS(tb, &tls.Config{Certificates: []tls.Certificate{cert}}, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") })
	return loopWorkerOn(tb, loopScenarios["prebuilt"], Options{Targets: []string{url, url},
		TLS: &tls.Config{InsecureSkipVerify: true}})
}

func testLoopAllocs(t *testing.T, scenario string) {
	testWorkerAllocs(t, loopWorker(t, scenario), 0)
}

func testWorkerAllocs(t *testing.T, w *worker, want float64) {
	t.Helper()
	ctx := context.Background()
	for range 200 { // grow buffers, dial both connections
		w.once(ctx)
	}
	allocs := testing.AllocsPerRun(2000, func() { w.once(ctx) })
	// The in-process server shares the count; it is allocation-free too,
	// but allow a stray allocation from the runtime.
	if allocs > want+0.01 {
		t.Errorf("%.3f allocations per request, want %v", allocs, want)
	}
	if w.shard.requests < 2200 || w.shard.errs != [numErrKinds]int64{} {
		t.Errorf("requests %d, errors %v", w.shard.requests, w.shard.errs)
	}
}

func BenchmarkRequestLoop(b *testing.B) {
	for _, name := range []string{"templated", "prebuilt", "checked", "https"} {
		b.Run(name, func(b *testing.B) {
			var w *worker
			if name == "https" {
				w = httpsLoopWorker(b)
			} else {
				w = loopWorker(b, loopScenarios[name])
			}
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
