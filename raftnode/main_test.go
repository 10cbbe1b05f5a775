package raftnode

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		// Re-executed by a multi-process test: be one member, not a test run.
		os.Exit(runChild())
	}
	goleak.VerifyTestMain(m)
}
