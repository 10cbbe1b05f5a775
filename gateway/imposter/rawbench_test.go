package imposter

import (
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// BenchmarkRawHello is the floor the static path is compared with: a
// fasthttp handler that writes a fixed body.
func BenchmarkRawHello(b *testing.B) {
	var req fasthttp.Request
	req.SetRequestURI("/api/v1/resources/0/items")
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}, nil)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ctx.Response.Reset()
		ctx.SetBodyString("ok")
	}
}
