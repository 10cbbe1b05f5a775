package loadtest

import (
	"context"
	"errors"
	"io"
)

func mainBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("bench: not implemented yet")
}
