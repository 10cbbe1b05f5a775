// Package e2e_test drives the real riftgate binary over HTTP, as a user of
// Mountebank would, and compares it with Mountebank itself where that is
// installed.
package e2e_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
