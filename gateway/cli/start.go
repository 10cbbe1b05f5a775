package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/riftgate/riftgate/examples/demo"
	"github.com/riftgate/riftgate/gateway"
)

// start runs the server in the foreground until SIGINT or SIGTERM (exit 0)
// or until the engine fails (exit 1). Like mb it writes the pidfile once
// every listener is up and removes it on shutdown. The engine logs the
// shutdown ("Adios"); the CLI logs what depends on its options.
func start(ctx context.Context, s *settings, stdout, stderr io.Writer) int {
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

	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	baseURL := fmt.Sprintf("http://%s:%d", hostOrLocalhost(s.str("host")), opts.Port)
	if opts.AllowInjection {
		logger.Warn("Running with --allowInjection set. See " + baseURL + "/docs/security for security info")
	}
	if clustered {
		c, stopCluster, err := startCluster(ctx, copts, logger)
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
		Pprof:          s.boolean("pprof"),
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
	if err != nil || pid <= 0 {
		fmt.Fprintf(stderr, "pidfile %s does not hold a process id: %q\n", pidfile, b)
		return 1
	}
	if !processAlive(pid) {
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
