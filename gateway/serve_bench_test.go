package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/valyala/fasthttp"
)

// BenchmarkServe measures the request path in process, from a parsed
// request to a written response, with the real engine (flow store and
// plugin host) and no socket: what riftgate adds to the kernel's share of
// a request, the part a load test over loopback cannot separate out. Run
// after make wasm; the plugin cases need the built examples.
func BenchmarkServe(b *testing.B) {
	dir := os.Getenv("RIFTGATE_WASM_DIR")
	if dir == "" {
		dir = filepath.Join("..", "build", "wasm")
	}
	module := func(name string) string {
		p, _ := filepath.Abs(filepath.Join(dir, "examples", name+".wasm"))
		return fmt.Sprintf(`{"wasm":{"module":%q}}`, p)
	}
	cases := []struct{ name, response string }{
		{"static", `{"is":{"headers":{"Content-Type":"text/plain","Connection":"keep-alive"},"body":"ok"}}`},
		{"flowbench", module("flowbench")},
		{"flowbench-wat", module("flowbench-wat")},
		// The bench's inject counter, on the imposter's one flow.
		{"inject", `{"inject":"function (config) { config.state.count = (config.state.count || 0) + 1; return { statusCode: 200, headers: { Connection: 'keep-alive', 'Content-Type': 'text/plain' }, body: String(config.state.count) }; }"}`},
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
			doc, err := m.imposter([]byte(`{"protocol":"http","host":"127.0.0.1","stubs":[{"responses":[` + c.response + `]}]}`))
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
			req.SetRequestURI("/flowbench")
			req.Header.SetHost("127.0.0.1")
			req.Header.Set("User-Agent", "riftload")
			var rc fasthttp.RequestCtx
			rc.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}, nil)
			serve(&rc)
			if string(rc.Response.Body()) != "ok" && c.name != "inject" || rc.Response.StatusCode() != 200 {
				b.Fatalf("answered %d %q", rc.Response.StatusCode(), rc.Response.Body())
			}
			b.ReportAllocs()
			for b.Loop() {
				rc.Response.Reset()
				serve(&rc)
			}
		})
	}
}
