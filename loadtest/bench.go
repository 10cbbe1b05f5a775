package loadtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// benchConfig is `riftload bench`'s command line.
type benchConfig struct {
	riftgate, mb, wasmDir, wrk string
	out                        string
	rounds, conns, slices      int
	duration, warmup           time.Duration
	// recordDuration is how long each system is loaded in a recording
	// case (benchCase.long), recordWindow the windows at its start and
	// end whose rates are compared.
	recordDuration, recordWindow time.Duration
	serverCPU                    string
	// inProcess names a file of `go test -bench` output to report beside
	// the load ("" for none).
	inProcess string
	// profileDir, when set, starts riftgate with --pprof and writes there
	// a CPU profile of its processes over each of its measurements: the
	// input of make pgo.
	profileDir string
	only       *regexp.Regexp
	// soak is how long the soak runs (0: not at all).
	soak time.Duration
	// large is how many stubs the large recording records (0: none).
	large int
	// helloCmd starts the raw server; it is this very program, `hello`.
	helloCmd []string
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func mainBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("riftload bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c benchConfig
	fs.StringVar(&c.riftgate, "riftgate", envOr("RIFTGATE_BIN", "bin/riftgate"), "riftgate binary")
	fs.StringVar(&c.mb, "mb", envOr("RIFTGATE_MB", "build/node/node_modules/.bin/mb"), "Mountebank 2.9.1's mb")
	fs.StringVar(&c.wasmDir, "wasm-dir", envOr("RIFTGATE_WASM_DIR", "build/wasm"), "built WASM modules")
	fs.StringVar(&c.wrk, "wrk", "/usr/bin/wrk", "wrk, for the load generator's own yardstick (\"\" to skip)")
	fs.StringVar(&c.out, "out", "docs/benchmarks.md", "Markdown report to write (\"\" for stdout only)")
	fs.IntVar(&c.rounds, "rounds", 5, "interleaved rounds; the report gives medians (5: this machine swings by 20% between measurements)")
	fs.IntVar(&c.conns, "c", 64, "connections per closed-loop measurement")
	fs.DurationVar(&c.duration, "d", 5*time.Second, "measured time per measurement")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "warm-up before each measurement")
	fs.DurationVar(&c.recordDuration, "record-d", 60*time.Second, "measured time per system in a recording case (record-*), alone, on a fresh imposter")
	fs.DurationVar(&c.recordWindow, "record-window", 10*time.Second, "recording cases: the rates of the first and last window of this length are compared (at most a third of -record-d)")
	fs.IntVar(&c.slices, "slices", 5, "closed loop: the systems take turns in this many slices of -d each (1: one after another)")
	fs.StringVar(&c.serverCPU, "server-cpu", "0", "CPU list the servers are pinned to with taskset (\"\" not to pin); run the bench itself on another")
	fs.StringVar(&c.inProcess, "inprocess", "", "a file of `go test -bench -benchmem` output (BenchmarkServe) to report beside the load")
	fs.StringVar(&c.profileDir, "profile-dir", "", "write CPU profiles of riftgate's processes over each measurement to this folder (riftgate runs with --pprof; make pgo merges them)")
	fs.DurationVar(&c.soak, "soak", 10*time.Minute, "how long the soak runs (case id \"soak\": riftgate alone with --mock, sync flows and a proxy recording, watched for memory, GC pauses and p99 over time; -only '^soak$' runs it alone and replaces only its section of -out); 0 skips it")
	fs.IntVar(&c.large, "large", 100_000, "how many stubs the large recording records (case id \""+largeID+"\": riftgate on --datadir records them with proxyOnce, then reading them back, save, a restart and replay are timed, beside mb given the same recording; -only '^"+largeID+"$' runs it alone and replaces only its section of -out); 0 skips it")
	only := fs.String("only", "", "regexp: run only the cases whose id matches (\"wrk\", \"soak\" and \""+largeID+"\" are cases too)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 || c.rounds < 1 || c.conns < 1 || c.duration <= 0 || c.slices < 1 || c.recordDuration <= 0 || c.recordWindow <= 0 || c.soak < 0 || c.large < 0 {
		return usageError{errors.New("bench: bad arguments")}
	}
	c.recordWindow = min(c.recordWindow, c.recordDuration/3)
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return usageError{fmt.Errorf("-only: %w", err)}
		}
		c.only = re
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	c.helloCmd = []string{self, "hello"}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	b := &bench{cfg: c, log: log}
	report, err := b.run(ctx)
	if err != nil {
		return err
	}
	if c.out != "" && b.partsOnly() {
		// Parts alone: the rest of the report stays as it was.
		old, _ := os.ReadFile(c.out)
		report = string(old)
		for _, pt := range parts {
			if section := b.section(pt); section != "" {
				report = pt.splice(report, section)
			}
		}
	}
	if c.out != "" {
		if err := os.MkdirAll(filepath.Dir(c.out), 0o755); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if err := os.WriteFile(c.out, []byte(report), 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		log.Info("report written", "file", c.out)
	}
	_, err = io.WriteString(stdout, report)
	return err
}

// pinned prefixes argv with taskset when servers are to be pinned and
// taskset exists, so the server and the load generator do not share a core.
func (c *benchConfig) pinned(argv []string) []string {
	if c.serverCPU == "" {
		return argv
	}
	ts, err := exec.LookPath("taskset")
	if err != nil {
		return argv
	}
	return append([]string{ts, "-c", c.serverCPU}, argv...)
}

// A part is a section of the report that one step writes between markers
// of its own (the soak, the large recording), so that a run of that step
// alone replaces only it, and a run without it keeps the last one.
type part struct{ begin, end string }

var (
	soakPart  = part{"<!-- soak:begin -->", "<!-- soak:end -->"}
	largePart = part{"<!-- " + largeID + ":begin -->", "<!-- " + largeID + ":end -->"}
	parts     = []part{soakPart, largePart}
)

// find returns where the part starts and ends in doc (ok false: it has
// none).
func (pt part) find(doc string) (i, j int, ok bool) {
	i, j = strings.Index(doc, pt.begin), strings.Index(doc, pt.end)
	return i, j + len(pt.end), i >= 0 && j >= i
}

// splice puts section in place of the part in doc (or at its end when
// doc has none).
func (pt part) splice(doc, section string) string {
	i, j, ok := pt.find(doc)
	if !ok {
		return strings.TrimRight(doc, "\n") + "\n\n" + section
	}
	return doc[:i] + strings.TrimSuffix(section, "\n") + doc[j:]
}

// previous returns the part of the report at path, if it has one.
func (pt part) previous(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	i, j, ok := pt.find(string(b))
	if !ok {
		return ""
	}
	return string(b[i:j]) + "\n"
}

func (c *benchConfig) wanted(id string) bool { return c.only == nil || c.only.MatchString(id) }

// machineInfo describes where the numbers were measured.
func machineInfo() []string {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return "unknown"
		}
		return strings.TrimSpace(string(b))
	}
	cpu, n := "unknown", 0
	for _, l := range strings.Split(read("/proc/cpuinfo"), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			switch strings.TrimSpace(k) {
			case "model name":
				cpu = strings.TrimSpace(v)
			case "processor":
				n++
			}
		}
	}
	return []string{
		fmt.Sprintf("nproc: %d", n),
		"CPU: " + cpu,
		"kernel: " + read("/proc/sys/kernel/osrelease"),
		"load average at start: " + read("/proc/loadavg"),
	}
}

// cpuTicks reads the machine's total and stolen CPU time from /proc/stat
// (ok false elsewhere). Steal is the time a virtual machine's CPUs were
// ready but the hypervisor ran someone else: on a shared host, the noise
// no measurement method here can cancel.
func cpuTicks() (total, steal uint64, ok bool) {
	line, _, _ := strings.Cut(readFile("/proc/stat"), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		if i < 8 { // guest time is already counted in user time
			total += n
		}
		if i == 7 {
			steal = n
		}
	}
	return total, steal, true
}
