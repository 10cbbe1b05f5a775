package raftnode

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		// Re-executed by a multi-process test: be one member, not a test run.
		os.Exit(runChild())
	}
	// Each storage property check opens a real bbolt file and fsyncs; 30
	// checks keep the package under its time budget on a shared machine.
	// An explicit -rapid.checks still wins.
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if f := flag.Lookup("rapid.checks"); f != nil && !set {
		_ = f.Value.Set("30")
	}
	goleak.VerifyTestMain(m)
}
