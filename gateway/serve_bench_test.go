package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/valyala/fasthttp"
)

// The body predicate cases of make bench: ten stubs, the last matching, a
// POST of a 120-byte body.
const (
	benchJSON = `{"user":{"name":"user9","role":"admin","email":"user9@example.com"},"order":{"id":12345,"items":["a1","b2"]}}`
	benchXML  = `<order><user><name>user9</name><role>admin</role><email>u9@example.com</email></user><id>12345</id></order>`
)

// tenStubs is ten stubs with pred, stub i's having i for %d, answering ok.
func tenStubs(pred string) string {
	var stubs []string
	for i := range 10 {
		stubs = append(stubs, `{"predicates":[`+strings.ReplaceAll(pred, "%d", fmt.Sprint(i))+`],"responses":[{"is":{"statusCode":200,"body":"ok"}}]}`)
	}
	return strings.Join(stubs, ",")
}

// BenchmarkServe measures the request path in process, from a parsed
// request to a written response, with the real engine (flow store, plugin
// host, JavaScript) and no socket: what riftgate adds to the kernel's share
// of a request, the part a load test over loopback cannot separate out.
// The cases are make bench's. Run after make wasm; the plugin cases need
// the built examples.
func BenchmarkServe(b *testing.B) {
	dir := os.Getenv("RIFTGATE_WASM_DIR")
	if dir == "" {
		dir = filepath.Join("..", "build", "wasm")
	}
	module := func(name string) string {
		p, _ := filepath.Abs(filepath.Join(dir, "examples", name+".wasm"))
		return fmt.Sprintf(`{"responses":[{"wasm":{"module":%q}}]}`, p)
	}
	cases := []struct {
		name, stubs, method, path, contentType, body, want string
		// flows > 0 keys flows on X-Flow-Id, the requests taking turns
		// over that many, as make bench's virtual users do.
		flows int
	}{
		{"static", `{"responses":[{"is":{"statusCode":200,"headers":{"Content-Type":"text/plain","Connection":"keep-alive"},"body":"ok"}}]}`, "GET", "/", "", "", "ok", 0},
		// Two responses: the stub's cycle position advances per request.
		{"cycle", `{"responses":[{"is":{"statusCode":200,"headers":{"Connection":"keep-alive"},"body":"ok"}},{"is":{"statusCode":200,"headers":{"Connection":"keep-alive"},"body":"ok"}}]}`, "GET", "/", "", "", "ok", 0},
		{"flowbench", module("flowbench"), "GET", "/", "", "", "ok", 0},
		{"flowbench-wat", module("flowbench-wat"), "GET", "/", "", "", "ok", 0},
		// make bench's WAT counter: a flow per virtual user, 64 of them.
		{"counter-wat", module("counter-wat"), "GET", "/", "", "", "", 64},
		// The bench's inject counter, on the imposter's one flow.
		{"inject", `{"responses":[{"inject":"function (config) { config.state.count = (config.state.count || 0) + 1; return { statusCode: 200, headers: { Connection: 'keep-alive', 'Content-Type': 'text/plain' }, body: String(config.state.count) }; }"}]}`, "GET", "/", "", "", "", 0},
		{"json-equals", tenStubs(`{"equals":{"body":{"user":{"name":"user%d","role":"admin"}}}}`), "POST", "/body", "application/json", benchJSON, "ok", 0},
		{"jsonpath", tenStubs(`{"equals":{"body":"user%d"},"jsonpath":{"selector":"$.user.name"}}`), "POST", "/body", "application/json", benchJSON, "ok", 0},
		{"xpath", tenStubs(`{"equals":{"body":"user%d"},"xpath":{"selector":"//user/name"}}`), "POST", "/body", "application/xml", benchXML, "ok", 0},
		{"nested", tenStubs(`{"and":[{"equals":{"method":"POST"}},{"or":[{"equals":{"path":"/n/%d"}},{"startsWith":{"path":"/nested/%d/"}}]},{"not":{"contains":{"body":"forbidden"}}}]}`), "POST", "/nested/9/x", "application/json", benchJSON, "ok", 0},
		// The same, but an alternative on a header: the or gives no path
		// keys, so all ten stubs are evaluated.
		{"nested-unindexed", tenStubs(`{"and":[{"equals":{"method":"POST"}},{"or":[{"equals":{"headers":{"X-Stub":"%d"}}},{"startsWith":{"path":"/nested/%d/"}}]},{"not":{"contains":{"body":"forbidden"}}}]}`), "POST", "/nested/9/x", "application/json", benchJSON, "ok", 0},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			opts := Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), AllowInjection: true}
			g, err := newGateway(ctx, opts, newLogRing(10))
			if err != nil {
				b.Fatal(err)
			}
			defer g.close()
			m := g.maker()
			flowState := ""
			if c.flows > 0 {
				flowState = `"_rift":{"flowState":{"flowIdSource":"header:X-Flow-Id"}},`
			}
			doc, err := m.imposter([]byte(`{"protocol":"http","host":"127.0.0.1",` + flowState + `"defaultResponse":{"statusCode":404},"stubs":[` + c.stubs + `]}`))
			if err == nil {
				_, err = g.submit(ctx, m.command(&config.Command{Op: config.OpCreateImposter, Imposters: []config.ImposterDoc{doc}}))
			}
			m.done()
			if err != nil {
				b.Skipf("%v (run make wasm)", err)
			}
			imp, _ := g.get(doc.Port)
			serve := imp.Handler()
			var req fasthttp.Request
			req.Header.SetMethod(c.method)
			req.SetRequestURI(c.path)
			req.Header.SetHost("127.0.0.1")
			req.Header.Set("User-Agent", "riftload")
			if c.body != "" {
				req.Header.SetContentType(c.contentType)
				req.SetBodyString(c.body)
			}
			var rc fasthttp.RequestCtx
			rc.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}, nil)
			serve(&rc)
			if rc.Response.StatusCode() != 200 || c.want != "" && string(rc.Response.Body()) != c.want {
				b.Fatalf("answered %d %q", rc.Response.StatusCode(), rc.Response.Body())
			}
			ids := make([]string, c.flows)
			for i := range ids {
				ids[i] = fmt.Sprintf("vu-%d", i)
			}
			// The setup's garbage (a gateway, a plugin host, compiled
			// modules) is collected before, not during, the measurement.
			runtime.GC()
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if c.flows > 0 {
					req.Header.Set("X-Flow-Id", ids[n%c.flows])
					n++
				}
				rc.Response.Reset()
				serve(&rc)
			}
		})
	}
}
