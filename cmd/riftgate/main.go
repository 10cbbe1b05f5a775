// Command riftgate is the gateway binary: a drop-in replacement for
// Mountebank's mb. All of its behaviour lives in package cli.
package main

import (
	"context"
	"os"

	"github.com/riftgate/riftgate/gateway/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
