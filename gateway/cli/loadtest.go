package cli

import (
	"context"
	"io"

	"github.com/riftgate/riftgate/loadtest"
)

// runLoadtest hands `riftgate loadtest ...` to the bundled load generator.
func runLoadtest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return loadtest.Main(ctx, args, stdout, stderr)
}
