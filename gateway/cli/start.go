package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/riftgate/riftgate/examples/demo"
	"github.com/riftgate/riftgate/gateway"
	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/nodehost"
)

// start runs the server in the foreground until SIGINT or SIGTERM (exit 0)
// or until the engine fails (exit 1). Like mb it writes the pidfile once
// every listener is up and removes it on shutdown. The engine logs the
// shutdown ("Adios"); the CLI logs what depends on its options.
func start(ctx context.Context, s *settings, stdout, stderr io.Writer) int {
	defer runtime.KeepAlive(gcFloorFor())
	opts, err := engineOptions(ctx, s)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	copts, clustered, err := clusterOptions(s)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	lc, err := logConfigFrom(s)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	sink := &logSink{now: time.Now}
	if lc.console {
		sink.dests = append(sink.dests, logDest{w: stdout, format: lc.consoleFormat})
	}
	if lc.filePath != "" {
		f, err := openLogfile(lc.filePath)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer f.Close()
		sink.dests = append(sink.dests, logDest{w: f, format: lc.fileFormat})
	}
	logger := slog.New(newLineHandler(sink, lc.level, fmt.Sprintf("[riftgate:%d] ", opts.Port)))
	opts.Logger = logger
	opts.LogLevel = s.str("loglevel")
	loadProtofile(s.str("protofile"), logger)
	if r := s.str("impostersRepository"); r != "" {
		repo, err := openRepository(s, r, logger, stderr)
		if err != nil {
			logger.Error(err.Error())
			if !lc.console {
				fmt.Fprintln(stderr, err)
			}
			return 1
		}
		if repo != nil {
			defer repo.Close()
			opts.Repository = repo
		}
	}
	opts.Config, opts.NoLogfile = publicOptions(s, lc), lc.filePath == ""
	opts.LogFile, opts.LogFileJSON = lc.filePath, lc.fileFormat == "json"

	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	baseURL := fmt.Sprintf("http://%s:%d", hostOrLocalhost(s.str("host")), opts.Port)
	if opts.AllowInjection {
		logger.Warn("Running with --allowInjection set. See " + baseURL + "/docs/security for security info")
	}
	if clustered {
		c, stopCluster, err := startCluster(ctx, copts, s.integer("maxFlows"), time.Duration(s.integer("flowBudget"))*time.Millisecond, logger)
		if err != nil {
			logger.Error(err.Error())
			if !lc.console {
				fmt.Fprintln(stderr, err)
			}
			return 1
		}
		defer stopCluster()
		opts.Cluster = c
	}
	pidfile := s.str("pidfile")
	pid := strconv.Itoa(os.Getpid())
	var wrotePidfile atomic.Bool
	opts.Ready = func(string) {
		if err := os.WriteFile(pidfile, []byte(pid), 0o644); err != nil {
			cancel(fmt.Errorf("write pidfile: %w", err))
			return
		}
		wrotePidfile.Store(true)
		logger.Info("riftgate v" + gateway.Version + " now taking orders - point your browser to " + baseURL + "/ for help")
	}
	err = gateway.Run(ctx, opts)
	if wrotePidfile.Load() {
		removePidfile(pidfile, pid)
	}
	if cause := context.Cause(ctx); err == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	if err != nil {
		logger.Error(err.Error())
		if !lc.console {
			fmt.Fprintln(stderr, err)
		}
		return 1
	}
	return 0
}

// publicOptions is the options object GET /config shows, as mb shows its
// parsed command line: every start option with a value (given, from the
// rcfile, or mb's default), ipWhitelist split, the log settings as one
// `log` object in place of loglevel, logfile and nologfile, and riftgate's
// own options only when given.
func publicOptions(s *settings, lc logConfig) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	add := func(k string, v any) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(k)
		val, _ := json.Marshal(v)
		b.Write(key)
		b.WriteByte(':')
		b.Write(val)
	}
	str := func(name string) any {
		if v, ok := s.values[name]; ok && v != "" {
			return v
		}
		return nil
	}
	add("port", s.integer("port"))
	add("pidfile", s.str("pidfile"))
	add("allowInjection", s.boolean("allowInjection"))
	add("apikey", str("apikey"))
	add("localOnly", s.boolean("localOnly"))
	if s.boolean("mock") {
		add("mock", true) // mb drops it when false: it is deprecated
	}
	for _, name := range []string{"host", "configfile", "datadir", "rcfile", "impostersRepository"} {
		if v := str(name); v != nil {
			add(name, v)
		}
	}
	add("noParse", s.boolean("noParse"))
	add("formatter", s.str("formatter"))
	add("ipWhitelist", strings.Split(s.str("ipWhitelist"), "|"))
	add("debug", s.boolean("debug"))
	add("protofile", s.str("protofile"))
	if o := str("origin"); o != nil {
		add("origin", o)
	} else {
		add("origin", false)
	}
	if raw := s.str("log"); raw != "" && json.Valid([]byte(raw)) {
		b.WriteString(`,"log":` + raw)
	} else {
		transports := map[string]any{}
		if lc.console {
			transports["console"] = map[string]any{"colorize": true, "format": lc.consoleFormat}
		}
		if lc.filePath != "" {
			transports["file"] = map[string]any{"path": lc.filePath, "format": lc.fileFormat}
		}
		add("log", map[string]any{"level": s.str("loglevel"), "transports": transports})
	}
	for _, name := range []string{"demo", "maxFlows", "flowBudget", "maxRecordedRequests", "recordedRequestsMemory", "pprof"} {
		if s.onCLI[name] {
			add(name, json.RawMessage(jsonValue(s, name)))
		}
	}
	for _, e := range s.extras {
		add(e[0], json.RawMessage(e[1]))
	}
	b.WriteByte('}')
	return b.Bytes()
}

// jsonValue is an option's value as JSON: a number, a boolean or a string.
func jsonValue(s *settings, name string) string {
	switch lookup(name).kind {
	case kInt, kBool:
		return s.str(name)
	}
	v, _ := json.Marshal(s.str(name))
	return string(v)
}

// engineOptions maps the parsed options onto the engine's.
func engineOptions(ctx context.Context, s *settings) (gateway.Options, error) {
	opts := gateway.Options{
		Port:           s.integer("port"),
		Host:           s.str("host"),
		DataDir:        s.str("datadir"),
		AllowInjection: s.boolean("allowInjection"),
		LocalOnly:      s.boolean("localOnly"),
		Origin:         s.str("origin"),
		APIKey:         s.str("apikey"),
		Mock:           s.boolean("mock"),
		Debug:          s.boolean("debug"),
		MaxFlows:       s.integer("maxFlows"),
		FlowBudget:     time.Duration(s.integer("flowBudget")) * time.Millisecond,
		MaxRecorded:    int64(s.integer("maxRecordedRequests")),
		RecordedMemory: int64(s.integer("recordedRequestsMemory")) << 20,
		Pprof:          s.boolean("pprof"),
	}
	if opts.FlowBudget <= 0 {
		return opts, fmt.Errorf("--flowBudget %d: want a positive number of milliseconds", s.integer("flowBudget"))
	}
	if wl := s.str("ipWhitelist"); wl != "" && wl != "*" {
		opts.IPWhitelist = strings.Split(wl, "|")
	}
	if ah := s.str("allowedHosts"); ah != "" {
		opts.AllowedHosts = strings.Split(ah, "|")
	}
	switch cf := s.str("configfile"); {
	case cf != "" && s.boolean("demo"):
		return opts, usageErrorf("--demo and --configfile cannot be combined")
	case cf != "" && s.customFormatter():
		// mb hands the configfile to the formatter's load and PUTs what it
		// answers as /imposters' body.
		imposters, err := runFormatter(ctx, s, "load", os.Stderr, s.formatterOptions())
		if err != nil {
			return opts, fmt.Errorf("formatter %s: %w", s.str("formatter"), err)
		}
		opts.Imposters = imposters
	case cf != "":
		imposters, err := LoadConfigFile(ctx, cf, s.boolean("noParse"))
		if err != nil {
			return opts, err
		}
		opts.Imposters = imposters
	case s.boolean("demo"):
		opts.Imposters = demo.Imposters
	}
	return opts, nil
}

// openRepository starts the --impostersRepository module on node with mb's
// options object. As in mb, a path that names no file is warned about and
// riftgate keeps imposters only in its own log.
func openRepository(s *settings, path string, logger *slog.Logger, stderr io.Writer) (*nodehost.Repository, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		logger.Warn("Imposters Respository " + abs + " does not exist. The default will be used")
		return nil, nil
	}
	repo, err := nodehost.OpenRepository(abs, s.formatterOptions(), stderr)
	if err != nil {
		return nil, fmt.Errorf("--impostersRepository: %w", err)
	}
	return repo, nil
}

// loadProtofile installs the custom protocols of --protofile, as mb's
// loadCustomProtocols: a missing file defines none; one that is not JSON
// is required on node, as mb requires it (a protofile in JavaScript), and
// one that node cannot read either is logged and defines none. A built-in
// protocol's name is not taken over (see docs/mountebank-differences.md).
func loadProtofile(path string, logger *slog.Logger) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var protos map[string]imposter.CustomProtocol
	if err := json.Unmarshal(b, &protos); err != nil {
		if protos, err = requireProtofile(path, logger); err != nil {
			logger.Error(path + " contains invalid JSON -- no custom protocols loaded")
			return
		}
	}
	for name := range protos {
		switch name {
		case "http", "https", "tcp", "smtp", "ws", "wss":
			logger.Warn("Ignoring the custom " + name + " protocol: riftgate keeps its built-in one")
			delete(protos, name)
		default:
			logger.Info("Loaded custom protocol " + name)
		}
	}
	imposter.SetCustomProtocols(protos)
}

// protofileTimeout bounds node's require of a protofile.
const protofileTimeout = 30 * time.Second

// requireProtofile reads a protofile that is not JSON as node's require
// does.
func requireProtofile(path string, logger *slog.Logger) (map[string]imposter.CustomProtocol, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), protofileTimeout)
	defer cancel()
	out, err := nodehost.Require(ctx, abs, io.Discard)
	if err != nil {
		logger.Error("--protofile "+path+": "+err.Error(), "err", err)
		return nil, err
	}
	var protos map[string]imposter.CustomProtocol
	if err := json.Unmarshal(out, &protos); err != nil {
		return nil, fmt.Errorf("protofile %s exports no object: %w", path, err)
	}
	return protos, nil
}

func hostOrLocalhost(host string) string {
	if host == "" {
		return "localhost"
	}
	return host
}

// removePidfile removes the pidfile unless another process has since
// written its own pid there (a restart racing with this shutdown).
func removePidfile(path, pid string) {
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == pid {
		_ = os.Remove(path) // already gone is fine
	}
}

// stopTimeout bounds how long stop waits for the process to go away. mb
// waits 1 s and then only removes the pidfile; riftgate waits longer so
// that a restart finds the ports free.
const stopTimeout = 10 * time.Second

// stop is `mb stop`: signal the process named in the pidfile and wait until
// it is gone (or has removed its pidfile). A missing pidfile or a process
// that is not running is success, as in mb.
func stop(ctx context.Context, s *settings, stderr io.Writer) int {
	pidfile := s.str("pidfile")
	b, err := os.ReadFile(pidfile)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "cannot read pidfile: %v\n", err)
		return 1
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	// A pidfile that names no running process is stale (mb's
	// process.kill(pid, 0) throws on one that names no process at all).
	if err != nil || pid <= 0 || !processAlive(pid) {
		_ = os.Remove(pidfile) // stale either way
		return 0
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		fmt.Fprintf(stderr, "cannot stop process %d: %v\n", pid, err)
		return 1
	}
	deadline := time.NewTimer(stopTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if !processAlive(pid) {
			_ = os.Remove(pidfile) // the server usually removed it
			return 0
		}
		if _, err := os.Stat(pidfile); errors.Is(err, os.ErrNotExist) {
			// The server removed it after closing its listeners.
			return 0
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "stop interrupted: %v\n", ctx.Err())
			return 1
		case <-deadline.C:
			_ = os.Remove(pidfile) // as mb does on timeout
			fmt.Fprintf(stderr, "process %d still running %v after SIGTERM\n", pid, stopTimeout)
			return 1
		case <-tick.C:
		}
	}
}

// processAlive reports whether pid exists (signal 0, as mb's processExists).
// EPERM means it exists but belongs to someone else.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
