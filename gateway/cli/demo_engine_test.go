//go:build enginewip

package cli_test

import (
	"testing"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

func TestDemoOnRiftgate(t *testing.T) {
	path, ports := demoOnFreePorts(t)
	gatewaytest.Start(t, "--configfile", path, "--allowInjection")
	checkDemo(t, ports)
}
