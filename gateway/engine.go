package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/riftgate/riftgate/flowshard"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/flowlocal"
	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/inject"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/predicate"
	"github.com/riftgate/riftgate/gateway/proxy"
	"github.com/riftgate/riftgate/gateway/reqlog"
	"github.com/riftgate/riftgate/plugins"
)

// engine holds what every imposter shares: the compiler that turns stub JSON
// into predicates, behaviors and responders, and the services behind them:
// the flow store and the plugin host.
type engine struct {
	g        *gateway
	compiler *imposter.Compiler
	shard    *flowshard.Store // the single node's flows; nil in a cluster, whose runtime has its own
	flows    flow.Store
	cycles   imposter.Cycles   // nil on a single node: each stub counts its own
	matches  imposter.MatchLog // nil but on a single node's --datadir under --debug
	plugins  *plugins.Host
	proxies  *proxy.Factory
	recorder *recorder
	inject   *inject.Engine  // nil without --allowInjection
	tmpDir   string          // the plugin cache when there is no --datadir
	requests *reqlog.Manager // every imposter's recorded requests
	// localClaims are the single node's proxyOnce claims (a cluster's
	// runtime keeps its own).
	localClaims *proxy.LocalClaims
	meters      *meters // every imposter's meters, for GET /metrics and the UI
	// streamsDone closes when the admin server shuts down, which ends the
	// event streams that would otherwise keep it waiting.
	streamsDone chan struct{}
	stopOnce    sync.Once
}

// stopStreams ends every event stream (GET /logs, GET /stats).
func (e *engine) stopStreams() { e.stopOnce.Do(func() { close(e.streamsDone) }) }

// countBlocked counts a connection the access filter refused on port
// against the imposter there (mb_blocked_ip_total).
func (e *engine) countBlocked(port int) {
	if imp, ok := e.g.get(port); ok {
		imp.Meters().Blocked.Add(1)
	}
}

func newEngine(ctx context.Context, opts Options, g *gateway) (*engine, error) {
	e := &engine{g: g, meters: newMeters(), streamsDone: make(chan struct{})}
	g.access.onBlocked = e.countBlocked
	dbPath, cacheDir, reqDir := "", "", ""
	if opts.DataDir != "" {
		// As mb makes its --datadir; bbolt makes only the files in it.
		if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
		dbPath = filepath.Join(opts.DataDir, "flow.db")
		cacheDir = filepath.Join(opts.DataDir, "wasm-cache")
		reqDir = filepath.Join(opts.DataDir, "requests")
	} else {
		dir, err := tempDir(opts.Logger)
		if err != nil {
			return nil, fmt.Errorf("temporary folder: %w", err)
		}
		e.tmpDir = dir
		cacheDir, reqDir = filepath.Join(dir, "wasm-cache"), filepath.Join(dir, "requests")
	}
	var err error
	// Recorded requests outlive the process only under --datadir, as
	// mb's do.
	if e.requests, err = reqlog.Open(reqlog.Options{Dir: reqDir, Keep: opts.DataDir != "", MemoryBytes: opts.RecordedMemory, Logger: opts.Logger}); err != nil {
		e.close(ctx)
		return nil, fmt.Errorf("recorded requests: %w", err)
	}
	e.localClaims = proxy.NewLocalClaims()
	claims := proxy.Claims(e.localClaims)
	if c := opts.Cluster; c != nil && c.Flows != nil {
		// The cluster runtime owns this node's flowshard, beneath its
		// owner RPC.
		e.flows = c.Flows
		if c.Claims != nil {
			claims = c.Claims
		}
		e.cycles = c.Cycles
	} else {
		shard, err := flowshard.Open(dbPath, flowshard.Options{Logger: opts.Logger, MaxFlows: opts.MaxFlows})
		if err != nil {
			e.close(ctx)
			return nil, fmt.Errorf("flow store: %w", err)
		}
		e.shard, e.flows = shard, flowlocal.Store{Shard: shard}
	}
	if e.plugins, err = plugins.NewHost(ctx, plugins.Config{CacheDir: cacheDir, Logger: opts.Logger}); err != nil {
		e.close(ctx)
		return nil, fmt.Errorf("plugin host: %w", err)
	}
	e.recorder = &recorder{g: g}
	e.proxies = &proxy.Factory{Claims: claims, Recorder: e.recorder}
	if opts.AllowInjection {
		e.inject = inject.New(inject.Options{Logger: opts.Logger, Flows: e.flows})
		e.proxies.Inject = e.inject.Generate
	}
	e.compiler = &imposter.Compiler{
		AllowInjection: opts.AllowInjection,
		Predicates:     e.compilePredicates,
		Behaviors:      e.compileBehaviors,
		PathKeys: func(m imposter.Matcher) []message.PathKey {
			return predicate.PathKeys(m.(predicate.Predicate))
		},
		Responders: map[string]func(json.RawMessage, imposter.Build) (imposter.Responder, error){
			"wasm":  e.wasmResponder,
			"proxy": e.proxies.New,
		},
	}
	if e.inject != nil {
		e.compiler.Responders["inject"] = e.injectResponder
		e.compiler.EndOfRequest = func(src string, binary bool, _ *imposter.Imposter) (imposter.EndOfRequest, error) {
			return e.inject.EndOfRequest(src, binary)
		}
	}
	return e, nil
}

// tempDir makes the process's temporary folder (the plugin cache and the
// recorded requests without --datadir), named for its pid, after removing
// those of processes that are gone: one killed (kill -9) never removed
// its own, and recorded requests can fill a disk.
func tempDir(log *slog.Logger) (string, error) {
	base := os.TempDir()
	if ents, err := os.ReadDir(base); err == nil {
		for _, e := range ents {
			pid, ok := tempDirPid(e.Name())
			if !ok || !e.IsDir() || pid == os.Getpid() || processAlive(pid) {
				continue
			}
			if err := os.RemoveAll(filepath.Join(base, e.Name())); err != nil {
				log.Warn("cannot remove the temporary folder of a process gone", "folder", e.Name(), "err", err)
			}
		}
	}
	return os.MkdirTemp(base, "riftgate-"+strconv.Itoa(os.Getpid())+"-")
}

// tempDirPid reads the pid of a temporary folder's name,
// riftgate-<pid>-<digits> as os.MkdirTemp makes it.
func tempDirPid(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "riftgate-")
	if !ok {
		return 0, false
	}
	p, suffix, ok := strings.Cut(rest, "-")
	if !ok || suffix == "" || strings.Trim(suffix, "0123456789") != "" {
		return 0, false
	}
	pid, err := strconv.Atoi(p)
	return pid, err == nil && pid > 0
}

// processAlive reports whether pid exists (signal 0); EPERM means it does,
// under another user.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func (e *engine) imposterOptions() imposter.Options {
	return imposter.Options{
		Logger:        e.g.log,
		Compiler:      e.compiler,
		Listen:        e.g.access.listen,
		RecordAll:     e.g.opts.Mock,
		RecordMatches: e.g.opts.Debug,
		DefaultHost:   e.g.opts.Host,
		MaxBodyBytes:  maxImposterBody,
		Budget:        e.g.opts.FlowBudget,
		Store:         e.flows,
		Meters:        e.meters.forImposter,
		Cycles:        e.cycles,
		Matches:       e.matches,
		Requests:      e.requests,
		MaxRecorded:   e.g.opts.MaxRecorded,

		CustomCallbackTemplate: fmt.Sprintf("http://%s:%d/imposters/:port/_requests", cmp.Or(e.g.opts.Host, "localhost"), e.g.opts.Port),
		CustomLogLevel:         cmp.Or(e.g.opts.LogLevel, "info"),
	}
}

// routes adds the engine's own admin routes (plugins, flows).
func (e *engine) routes(mux *http.ServeMux) {
	e.pluginRoutes(mux)
	e.flowRoutes(mux)
	e.uiRoutes(mux)
}

func (e *engine) close(ctx context.Context) {
	if e.inject != nil {
		e.inject.Close()
	}
	if e.proxies != nil {
		e.proxies.Close()
	}
	if e.plugins != nil {
		_ = e.plugins.Close(ctx)
	}
	if e.shard != nil {
		if err := e.shard.Close(ctx); err != nil {
			e.g.log.Error("closing the flow store", "err", err)
		}
	}
	if e.requests != nil {
		if err := e.requests.Close(); err != nil {
			e.g.log.Error("closing the recorded requests", "err", err)
		}
	}
	if e.tmpDir != "" {
		os.RemoveAll(e.tmpDir)
	}
}

// compilePredicates compiles a stub's predicates for imp; wasm predicates
// run against imp's flows.
func (e *engine) compilePredicates(raws []json.RawMessage, b imposter.Build) (imposter.Matcher, error) {
	spec := b.Imposter.Spec()
	return predicate.CompileAll(raws, predicate.Options{
		Protocol: spec.Protocol,
		Custom:   spec.Custom != nil,
		Binary:   spec.Mode == "binary",
		Inject:   e.injectPredicate(b.Imposter),
		Wasm: func(spec json.RawMessage) (predicate.Predicate, error) {
			c, err := e.compileWasm(spec, "matches", b)
			if err != nil {
				return nil, err
			}
			return wasmPredicate{c, b.Imposter}, nil
		},
	})
}
