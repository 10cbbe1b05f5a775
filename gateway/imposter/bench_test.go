package imposter

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/predicate"
	"github.com/valyala/fasthttp"
)

// testCompiler is the engine's predicate wiring, without plugins.
var testCompiler = &Compiler{
	Predicates: func(raws []json.RawMessage, _ Build) (Matcher, error) {
		return predicate.CompileAll(raws, predicate.Options{})
	},
	PathKeys: func(m Matcher) []message.PathKey {
		return predicate.PathKeys(m.(predicate.Predicate))
	},
}

// stubsImposter returns an imposter whose n stubs each match one deep path,
// /api/v1/resources/<i>/items, and answer a keep-alive `is`.
func stubsImposter(tb testing.TB, n int) *Imposter {
	return predicateImposter(tb, n, `{"equals":{"method":"GET","path":"/api/v1/resources/%d/items"}}`)
}

// predicateImposter is stubsImposter with stub i's predicate pred with i
// in place of %d.
func predicateImposter(tb testing.TB, n int, pred string) *Imposter {
	tb.Helper()
	var stubs []string
	for i := 0; i < n; i++ {
		stubs = append(stubs, fmt.Sprintf(`{"predicates":[`+pred+`],
			"responses":[{"is":{"headers":{"Connection":"keep-alive","Content-Length":"2"},"body":"ok"}}]}`, i))
	}
	spec, err := ParseSpec([]byte(`{"protocol":"http","port":1,"stubs":[` + strings.Join(stubs, ",") + `]}`))
	if err != nil {
		tb.Fatal(err)
	}
	imp, err := New(spec, Options{Compiler: testCompiler}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return imp
}

func benchServe(b *testing.B, n int) {
	benchServeImposter(b, stubsImposter(b, n), n)
}

func benchServeImposter(b *testing.B, imp *Imposter, n int) {
	benchHandler(b, imp.serve, n)
}

// benchHandler is benchServeImposter through handler.
func benchHandler(b *testing.B, handler fasthttp.RequestHandler, n int) {
	var req fasthttp.Request
	req.SetRequestURI(fmt.Sprintf("/api/v1/resources/%d/items", n-1))
	req.Header.SetHost("x")
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}, nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctx.Response.Reset()
		handler(&ctx)
	}
	if string(ctx.Response.Body()) != "ok" {
		b.Fatalf("answered %q", ctx.Response.Body())
	}
}

// BenchmarkServeStatic measures the hot path from a parsed request to a
// written `is` response. It must report 0 allocs/op, and the 300-stub case
// must cost about what the 1-stub case does (the path index).
func BenchmarkServeStatic1(b *testing.B)   { benchServe(b, 1) }
func BenchmarkServeStatic50(b *testing.B)  { benchServe(b, 50) }
func BenchmarkServeStatic300(b *testing.B) { benchServe(b, 300) }

// BenchmarkServeStatic1Server is BenchmarkServeStatic1 through the handler
// fasthttp calls for a plaintext imposter, which first looks for an h2c
// upgrade: it must cost what BenchmarkServeStatic1 does.
func BenchmarkServeStatic1Server(b *testing.B) {
	imp := stubsImposter(b, 1)
	benchHandler(b, imp.newServer().(*httpServer).s.Handler, 1)
}

// BenchmarkServeRegex100 is the bench's regex case: 100 `matches` stubs,
// the last matching, each rejected before the regexp engine runs.
func BenchmarkServeRegex100(b *testing.B) {
	benchServeImposter(b, predicateImposter(b, 100, `{"matches":{"path":"^/api/v1/resources/%d/[a-z]+$"}}`), 100)
}

// TestStaticPathAllocatesNothing holds the benchmark's promise in a test
// that counts allocations, not time.
func TestStaticPathAllocatesNothing(t *testing.T) {
	for _, n := range []int{1, 300} {
		imp := stubsImposter(t, n)
		var req fasthttp.Request
		req.SetRequestURI(fmt.Sprintf("/api/v1/resources/%d/items?x=1", n-1))
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}, nil)
		// The handler fasthttp calls for a plaintext imposter, which
		// looks for an h2c upgrade first, and the imposter's own.
		for _, handler := range []fasthttp.RequestHandler{imp.newServer().(*httpServer).s.Handler, imp.serve} {
			handler(&ctx) // warm the pools
			allocs := testing.AllocsPerRun(200, func() {
				ctx.Response.Reset()
				handler(&ctx)
			})
			if allocs != 0 {
				t.Errorf("%d stubs: %.1f allocations per request, want 0", n, allocs)
			}
		}
	}
}
