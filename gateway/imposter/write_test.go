package imposter

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestStaticHeaderWritesWhatWriteResponseWrites holds the pre-rendered
// header to the bytes the per-request path writes, on a response that
// carried another answer before (a reused RequestCtx, as on keep-alive).
func TestStaticHeaderWritesWhatWriteResponseWrites(t *testing.T) {
	for _, is := range []string{
		`{}`,
		`{"statusCode":201,"headers":{"Connection":"keep-alive","Content-Type":"text/plain"},"body":"hello"}`,
		`{"headers":{"connection":"Close","x-lower":"kept as given","X-Multi":["a","b"]},"body":{"a":1}}`,
		`{"statusCode":302,"headers":{"Location":"/x","Set-Cookie":["a=1","b=2"],"Content-Length":"99","Transfer-Encoding":"chunked"}}`,
		`{"statusCode":404,"headers":{"Server":"mine","Date":"yesterday","Content-Encoding":"gzip"},"body":"x"}`,
	} {
		r, _, err := buildIs(json.RawMessage(is), nil)
		if err != nil {
			t.Fatal(err)
		}
		dynamic := written(t, func(ctx *fasthttp.RequestCtx) { writeResponse(ctx, r) })
		static := written(t, func(ctx *fasthttp.RequestCtx) { writeStatic(ctx, r, RenderHeader(r)) })
		if !bytes.Equal(dynamic, static) {
			t.Errorf("%s:\nper request:\n%s\npre-rendered:\n%s", is, dynamic, static)
		}
	}
}

// written is the response write leaves on a RequestCtx set up as the
// imposter's server sets one up, after an earlier, different answer.
func written(t *testing.T, write func(*fasthttp.RequestCtx)) []byte {
	t.Helper()
	var ctx fasthttp.RequestCtx
	for _, answer := range []func(*fasthttp.RequestCtx){
		func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.Set("X-Earlier", "gone")
			ctx.SetContentType("application/earlier")
			ctx.SetBodyString("earlier")
		},
		write,
	} {
		ctx.Response.Reset()
		ctx.Response.Header.SetNoDefaultContentType(true)
		ctx.Response.Header.DisableNormalizing()
		answer(&ctx)
	}
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	if err := ctx.Response.Write(w); err != nil {
		t.Fatal(err)
	}
	_ = w.Flush()
	// Date is the clock's, not the response's: two writes may straddle a second.
	var kept [][]byte
	for _, line := range bytes.Split(out.Bytes(), []byte("\r\n")) {
		if !bytes.HasPrefix(line, []byte("Date: ")) {
			kept = append(kept, line)
		}
	}
	return bytes.Join(kept, []byte("\r\n"))
}
