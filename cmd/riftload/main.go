// Command riftload is riftgate's bundled load generator; it is also reachable
// as `riftgate loadtest`. All the work is in package loadtest.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/riftgate/riftgate/loadtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := loadtest.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
