// Package gateway is riftgate's engine: the Mountebank-compatible admin API,
// imposters and their listeners, stub matching, the response pipeline and
// behaviors. Run starts it; cmd/riftgate only parses flags and calls Run.
//
// A request to an imposter goes: listener (gateway/imposter) → stub table
// match (gateway/predicate) → the stub's next response (`is`, fault, or a
// Responder: proxy, inject, wasm) → behaviors (gateway/behavior) → write.
// Admin requests go: admin.go → registry (this package) → imposter.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/proxy"
	"github.com/riftgate/riftgate/gateway/reqlog"
)

// Version is riftgate's version, reported by GET /config and --version.
const Version = "0.1.0"

// Options are the settings of one riftgate process, as mb's `start` takes them.
type Options struct {
	Port           int      // admin API port (mb: --port, default 2525)
	Host           string   // admin bind address; "" means loopback (safe default), "0.0.0.0" all
	LogLevel       string   // told to custom protocols' processes (mb: log.level)
	DataDir        string   // persistence root (imposters, flow.db, plugin cache); "" keeps all in memory
	AllowInjection bool     // enables JavaScript inject, decorate, shellTransform...
	LocalOnly      bool     // only accept requests from loopback addresses (admin and imposters)
	IPWhitelist    []string // allowed remote IPs (mb --ipWhitelist, split on "|"); empty or "*" allows all
	Origin         string   // CORS allowed origin for the admin API ("" none); also the one foreign origin that may change state
	AllowedHosts   []string // Host names the admin API answers to besides Host and loopback (".x" takes subdomains)
	APIKey         string   // when set, admin requests need the header `x-api-key` with this value
	Mock           bool     // mb --mock: record requests on every imposter
	Debug          bool     // mb --debug: include matches in stub JSON
	Imposters      []byte   // initial imposters, JSON `{"imposters":[...]}` (configfile after templating)
	// Repository is mb's --impostersRepository: loaded at start (unless
	// Imposters is given), written through as the configuration changes.
	Repository     Repository
	MaxFlows       int           // flows this node keeps before shedding whole flows by LRU (0: 100k)
	FlowBudget     time.Duration // what a request may spend on its flows in all (0: imposter.DefaultBudget)
	MaxRecorded    int64         // requests each imposter keeps recorded, oldest dropped first (0: no cap); _rift.maxRecordedRequests overrides it
	RecordedMemory int64         // bytes of recorded requests kept in memory, the newest, all imposters together (0: 32 MiB); the rest is read from disk
	Pprof          bool          // serve Go's profiler under /debug/pprof/ on the admin API
	Logger         *slog.Logger  // where logs go (stdout, --logfile); Run also keeps recent entries for GET /logs
	// Config is the options object GET /config shows, as mb shows its
	// parsed command line; the CLI makes it.
	Config json.RawMessage
	// NoLogfile is mb's --nologfile: GET /logs then has no log to show,
	// as mb's has none. LogFile, when set, is the logfile GET /logs reads,
	// as mb's reads its own; LogFileJSON says its lines are JSON.
	NoLogfile   bool
	LogFile     string
	LogFileJSON bool

	// Ready, when set, is called once every listener is bound, with the admin API's address.
	Ready func(adminAddr string)

	// Cluster, when set, makes this process one member of a cluster: its
	// seams replace the single node's. The start command builds them
	// (gateway/cluster); the engine never imports the cluster runtime.
	Cluster *Cluster
}

// Cluster is what a cluster runtime lends the engine.
type Cluster struct {
	// Log makes the configuration log that drives the engine's
	// reconciler, on every node.
	Log func(config.Reconciler) (config.Log, error)
	// Flows is the flow store: the owner RPC, with this node's flowshard
	// beneath it.
	Flows flow.Store
	// Claims arbitrates proxyOnce across the cluster.
	Claims proxy.Claims
	// Cycles keeps the positions of response cycles, so that a stub cycles
	// through its responses once across every node.
	Cycles imposter.Cycles
	// Admin serves /cluster and what is under it on the admin API.
	Admin http.Handler
	// Consistent, when set, runs before an admin GET that asks
	// ?consistent=true: it returns once this node runs everything the
	// cluster had committed (a read barrier). Its error is the answer.
	Consistent func(ctx context.Context) error
	// Recordings, when set, makes an imposter's recorded requests the
	// cluster's: GET /imposters/:id shows every member's, merged by time
	// (?local=true shows this node's), and DELETE
	// /imposters/:id/savedRequests clears them everywhere.
	Recordings Recordings
	// Metrics, when set, appends the cluster runtime's metrics to GET
	// /metrics.
	Metrics func(w io.Writer)
}

// Recordings is what a cluster runtime lends the admin API to gather and
// clear the requests every member recorded.
type Recordings interface {
	// Serve lends the other members this node's own recordings. Run
	// calls it once, before the admin API serves.
	Serve(local reqlog.Source)
	// Gather returns the sum of the other members' numberOfRequests on
	// the imposter on port, a stream of each one's recorded requests, and
	// the names of those that did not answer. The caller closes the
	// streams.
	Gather(ctx context.Context, port int) (count int64, streams []reqlog.Stream, missing []string)
	// Clear makes every other member forget what it recorded on port; an
	// error names the members that could not be reached.
	Clear(ctx context.Context, port int) error
}

// Size caps on what the admin API and imposters accept.
const (
	maxAdminBody    = 16 << 20 // room for imposters with inline plugins (a Go module is ~5 MB in base64)
	maxImposterBody = 16 << 20
)

// Run serves until ctx is cancelled, then shuts every listener down and
// returns. It returns an error if the admin port or an initial imposter
// cannot be bound.
func Run(ctx context.Context, opts Options) error {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Port == 0 {
		opts.Port = 2525
	}
	logs := newLogRing(10000)
	opts.Logger = slog.New(teeHandler{opts.Logger.Handler(), logs})
	g, err := newGateway(ctx, opts, logs)
	if err != nil {
		return err
	}
	defer g.close()

	host := opts.Host
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := g.access.listen("tcp", net.JoinHostPort(host, strconv.Itoa(opts.Port)))
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	srv := &http.Server{
		Handler:           g.adminHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug),
	}
	srv.RegisterOnShutdown(g.engine.stopStreams)
	if c := opts.Cluster; c != nil && c.Recordings != nil {
		c.Recordings.Serve(localRecordings{g})
	}
	// Load saved and configured imposters before serving, so that a client
	// that sees the admin API answer also sees them.
	if err := g.loadInitial(ctx); err != nil {
		ln.Close()
		return err
	}
	// Ready before Serve: the listener is bound, so a client's request
	// waits in its backlog, and "now taking orders" is logged before any
	// request is, as mb logs them.
	if opts.Ready != nil {
		opts.Ready(ln.Addr().String())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	shutdown(srv)
	if serr := <-served; err == nil && !errors.Is(serr, http.ErrServerClosed) {
		err = serr
	}
	opts.Logger.Info("Adios - see you soon?")
	return err
}

func shutdown(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}
