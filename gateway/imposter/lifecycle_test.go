package imposter

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// An imposter stopped as soon as it is served, before its server loop has
// taken the listener, stops: fasthttp's shutdown closes only the listeners
// Serve has registered, and a Stop that waited on the loop once hung the
// process (FACTS.md, "fasthttp shutdown race"). Each round is bounded.
func TestStartThenStopAtOnce(t *testing.T) {
	for proto, def := range map[string]string{
		"http":  `{"protocol":"http","stubs":[{"responses":[{"is":{"body":"x"}}]}]}`,
		"https": `{"protocol":"https","stubs":[{"responses":[{"is":{"body":"x"}}]}]}`,
		"tcp":   `{"protocol":"tcp","stubs":[{"responses":[{"is":{"data":"x"}}]}]}`,
		"smtp":  `{"protocol":"smtp"}`,
		"ws":    `{"protocol":"ws","stubs":[{"responses":[{"is":{"data":"x"}}]}]}`,
		"wss":   `{"protocol":"wss","stubs":[{"responses":[{"is":{"data":"x"}}]}]}`,
	} {
		t.Run(proto, func(t *testing.T) {
			for i := 0; i < 200; i++ {
				spec, err := ParseSpec([]byte(def))
				if err != nil {
					t.Fatal(err)
				}
				opts := Options{DefaultHost: "127.0.0.1"}
				imp, err := New(spec, opts, nil)
				if err != nil {
					t.Fatal(err)
				}
				ln, err := Listen(spec, opts)
				if err != nil {
					t.Fatal(err)
				}
				if err := imp.Serve(ln); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					done <- imp.Stop(ctx)
				}()
				select {
				case <-done:
				case <-time.After(20 * time.Second):
					t.Fatalf("round %d: Stop right after Serve did not return", i)
				}
			}
		})
	}
	// fasthttp's worker-pool cleaner sleeps its MaxIdleWorkerDuration (10 s
	// by default) before it sees the server stopped: wait for those to end,
	// so that the package's leak check sees what this test left.
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && strings.Contains(stacks(), "fasthttp.(*workerPool).Start") {
		time.Sleep(100 * time.Millisecond)
	}
}

func stacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
