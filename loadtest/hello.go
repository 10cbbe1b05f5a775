package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// helloBody is what the raw server answers: the smallest useful response,
// so that it measures the HTTP stack and nothing else.
var helloBody = []byte("hello")

func helloHandler(ctx *fasthttp.RequestCtx) {
	// Stated explicitly so that a recorded copy (proxyOnce) keeps the
	// connection open too.
	ctx.Response.Header.SetBytesKV([]byte("Connection"), []byte("keep-alive"))
	ctx.Response.Header.SetContentTypeBytes([]byte("text/plain"))
	ctx.SetBody(helloBody)
}

// ServeHello serves the raw fasthttp "hello" server on ln until ctx is
// cancelled: the upper bound any fasthttp-based gateway can reach here.
func ServeHello(ctx context.Context, ln net.Listener) error {
	srv := &fasthttp.Server{
		Handler: helloHandler, Name: "riftload-hello", CloseOnShutdown: true,
		// Bounds how long the worker-pool cleaner outlives Shutdown.
		MaxIdleWorkerDuration: 100 * time.Millisecond,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("hello server: %w", err)
	case <-ctx.Done():
	}
	if err := srv.Shutdown(); err != nil {
		return fmt.Errorf("hello server: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("hello server: %w", err)
	}
	return nil
}
