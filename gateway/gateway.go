// Package gateway is riftgate's engine: the Mountebank-compatible admin API,
// imposters and their listeners, stub matching, the response pipeline and
// behaviors. Run starts it; cmd/riftgate only parses flags and calls Run.
package gateway

import (
	"context"
	"errors"
	"log/slog"
)

// Options are the settings of one riftgate process, as mb's `start` takes them.
type Options struct {
	Port           int          // admin API port (mb: --port, default 2525)
	Host           string       // admin bind address; "" means loopback (safe default), "0.0.0.0" all
	DataDir        string       // persistence root (imposters, flow.db, plugin cache); "" keeps all in memory
	AllowInjection bool         // enables JavaScript inject, decorate, shellTransform...
	LocalOnly      bool         // only accept requests from loopback addresses (admin and imposters)
	IPWhitelist    []string     // allowed remote IPs (mb --ipWhitelist, split on "|"); empty or "*" allows all
	Origin         string       // CORS allowed origin for the admin API ("" none)
	APIKey         string       // when set, admin requests need the header `x-api-key` with this value
	Mock           bool         // mb --mock: record requests on every imposter
	Debug          bool         // mb --debug: include matches in stub JSON
	Imposters      []byte       // initial imposters, JSON `{"imposters":[...]}` (configfile after templating)
	Logger         *slog.Logger // where logs go (stdout, --logfile); Run also keeps recent entries for GET /logs

	// Ready, when set, is called once every listener is bound, with the admin API's address.
	Ready func(adminAddr string)
}

// Run serves until ctx is cancelled, then shuts every listener down and
// returns. It returns an error if the admin port or an initial imposter
// cannot be bound.
func Run(ctx context.Context, opts Options) error {
	return errors.New("gateway: not implemented yet")
}
