package loadtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// The harness end to end, with the raw server as a real child process and
// riftgate and mb absent: their rows must say why, and the run must finish.
func TestBenchReportsUnavailableSystems(t *testing.T) {
	t.Setenv("RIFTLOAD_TEST_AS_MAIN", "1")
	dir := t.TempDir()
	out := filepath.Join(dir, "docs", "benchmarks.md")
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"bench",
		"-riftgate", filepath.Join(dir, "no-riftgate"), "-mb", filepath.Join(dir, "no-mb"),
		"-wasm-dir", dir, "-wrk", "", "-server-cpu", "",
		"-rounds", "2", "-d", "300ms", "-warmup", "0", "-c", "4",
		"-only", "^(static-half|stubs50|wasm)$", "-out", out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	md := string(data)
	if md != stdout.String() {
		t.Error("stdout and the report file differ")
	}
	for _, want := range []string{
		"| static `is` stub | raw fasthttp | ",
		"| 50 stubs, only the last matching | raw fasthttp | ",
		"| static `is` stub | riftgate | - | - | - | - | 0 | not available: riftgate: stat ",
		"| static `is` stub | mb 2.9.1 | - | - | - | - | 0 | not available: mb: stat ",
		"| WASM counter (WAT, a flow per user) | riftgate | - |",
		"| static `is` stub | n/a | >= 0.9x: n/a | n/a | >= 12x: n/a |",
		"## p99 at 50% of peak (open loop)",
		"nproc: ", "kernel: ", "go: go1.", "CPU time stolen by the hypervisor during the run: ",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// Two rounds of the raw server on each of its cases, half-peak included.
	for _, id := range []string{"static", "stubs50", "static-half"} {
		row := "| " + id + " | raw fasthttp | "
		i := strings.Index(md, row)
		if i < 0 {
			t.Errorf("no per-round row for %s", id)
			continue
		}
		line := md[i+len(row):]
		line = line[:strings.IndexByte(line, '\n')]
		if n := strings.Count(line, ","); n != 1 {
			t.Errorf("%s: %q, want 2 rounds", id, line)
		}
	}
	if strings.Contains(md, "regex") {
		t.Error("-only did not filter the cases")
	}
	// The raw server is a real process: its CPU per request is read from
	// /proc (case | system | req/s | p50 | p99 | CPU | rounds | note).
	row := "| static `is` stub | raw fasthttp | "
	if i := strings.Index(md, row); i >= 0 {
		f := strings.Split(md[i:i+strings.IndexByte(md[i:], '\n')], "|")
		if cpu, err := strconv.ParseFloat(strings.TrimSpace(f[6]), 64); err != nil || cpu <= 0 {
			t.Errorf("raw server CPU per request %q, want a number above 0", f[6])
		}
	}
}

func TestMedianAndPairedRatio(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	// The load halves from round to round; each pair still says 2x.
	a := []measurement{{rps: 800, round: 0}, {rps: 400, round: 1}, {rps: 200, round: 2}}
	b := []measurement{{rps: 400, round: 0}, {rps: 200, round: 1}, {rps: 100, round: 2}}
	if got := pairedRatio(a, b); got != 2 {
		t.Errorf("paired ratio %v, want 2", got)
	}
	// Rounds with only one side measured do not pair.
	if got := pairedRatio(a, b[1:2]); got != 2 {
		t.Errorf("paired ratio over one round %v, want 2", got)
	}
	if got := pairedRatio(a, nil); got != 0 {
		t.Errorf("no pairs: %v, want 0", got)
	}
}

func TestGroupsInterleaveClosedLoopCases(t *testing.T) {
	sliced := &bench{cfg: benchConfig{slices: 5}}
	whole := &bench{cfg: benchConfig{slices: 1}}
	for _, tc := range []struct {
		b     *bench
		c     benchCase
		order []string
		want  string
	}{
		{sliced, benchCase{}, []string{sysMB, sysRaw, sysRift}, "[[mb 2.9.1 raw fasthttp riftgate]]"},
		{sliced, benchCase{}, []string{sysRift}, "[[riftgate]]"},
		{sliced, benchCase{halfOf: "static"}, []string{sysRift, sysRaw}, "[[riftgate] [raw fasthttp]]"},
		{whole, benchCase{}, []string{sysRift, sysRaw}, "[[riftgate] [raw fasthttp]]"},
	} {
		if got := fmt.Sprint(tc.b.groups(tc.c, tc.order)); got != tc.want {
			t.Errorf("slices %d, halfOf %q, %v: %s, want %s", tc.b.cfg.slices, tc.c.halfOf, tc.order, got, tc.want)
		}
	}
}

func TestMergeResultsSumsSlices(t *testing.T) {
	slice := func(reqs int64, secs float64, latUs int64, errs int64) *Result {
		h := newHist()
		for range reqs {
			_ = h.RecordValue(latUs)
		}
		return &Result{Mode: "closed", Requests: reqs, Errors: errs, DurationSeconds: secs,
			ErrorKinds: map[string]int64{"timeout": errs}, Statuses: map[string]int64{"200": reqs - errs}, hist: h}
	}
	m := mergeResults([]*Result{slice(300, 1, 1000, 0), slice(100, 1, 9000, 2)})
	if m.Requests != 400 || m.DurationSeconds != 2 || m.Throughput != 200 {
		t.Errorf("requests %d over %vs = %v req/s, want 400 over 2s = 200", m.Requests, m.DurationSeconds, m.Throughput)
	}
	if m.Errors != 2 || m.ErrorKinds["timeout"] != 2 || m.Statuses["200"] != 398 {
		t.Errorf("errors %d %v, statuses %v", m.Errors, m.ErrorKinds, m.Statuses)
	}
	// Three quarters of the requests took 1 ms: the median is theirs, the
	// p99 the slow slice's.
	if m.Latency.P50 < 0.99 || m.Latency.P50 > 1.01 || m.Latency.P99 < 8.9 || m.Latency.P99 > 9.1 {
		t.Errorf("p50 %v ms, p99 %v ms, want 1 and 9", m.Latency.P50, m.Latency.P99)
	}
}

// -profile-dir: riftgate runs with --pprof, and each of its measurements
// leaves a CPU profile of it (what make pgo merges into default.pgo).
func TestBenchProfilesRiftgate(t *testing.T) {
	t.Setenv("RIFTLOAD_TEST_AS_MAIN", "1")
	bin := gatewaytest.Binary(t)
	dir := t.TempDir()
	profiles := filepath.Join(dir, "pgo")
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"bench",
		"-riftgate", bin, "-mb", filepath.Join(dir, "no-mb"),
		"-wasm-dir", dir, "-wrk", "", "-server-cpu", "",
		"-rounds", "1", "-slices", "1", "-d", "1s", "-warmup", "0", "-c", "4",
		"-only", "^static$", "-profile-dir", profiles, "-out", ""}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got, err := filepath.Glob(filepath.Join(profiles, "*.pprof"))
	if err != nil || len(got) != 1 {
		t.Fatalf("profiles %v (%v), want one: %s", got, err, stderr.String())
	}
	if filepath.Base(got[0]) != "static-r0-s0-riftgate-1.pprof" {
		t.Errorf("profile named %s", filepath.Base(got[0]))
	}
	p, err := os.ReadFile(got[0])
	if err != nil {
		t.Fatal(err)
	}
	// A pprof profile is gzipped protobuf.
	if len(p) < 100 || p[0] != 0x1f || p[1] != 0x8b {
		t.Errorf("profile of %d bytes, not gzip: %q", len(p), p[:min(len(p), 40)])
	}
}

// The comparison with wrk, over http and https, with a stand-in for wrk
// that records how it was called and reports a fixed rate; riftload's
// side loads the real raw server, whose https port must answer it.
func TestBenchComparesWithWrk(t *testing.T) {
	t.Setenv("RIFTLOAD_TEST_AS_MAIN", "1")
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	fake := filepath.Join(dir, "wrk")
	script := "#!/bin/sh\necho \"$@\" >> " + calls + "\necho 'Requests/sec:   1000.00'\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"bench",
		"-riftgate", filepath.Join(dir, "no-riftgate"), "-mb", filepath.Join(dir, "no-mb"),
		"-wasm-dir", dir, "-wrk", fake, "-server-cpu", "",
		"-rounds", "2", "-slices", "1", "-d", "300ms", "-warmup", "0", "-c", "4",
		"-only", "^wrk", "-out", ""}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	md := stdout.String()
	for _, want := range []string{"## The load generator against wrk", "### http\n", "### https\n",
		"Median of the per-round riftload/wrk ratios over http: **", "Median of the per-round riftload/wrk ratios over https: **"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "Stopped after") {
		t.Errorf("a comparison stopped short:\n%s", md)
	}
	// Two rounds of each: rows "| 1 | 1000 | <riftload> | <ratio> |".
	if n := strings.Count(md, "| 1000 | "); n != 4 {
		t.Errorf("%d rounds reported, want 2 per protocol:\n%s", n, md)
	}
	data, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 4 {
		t.Fatalf("wrk called %d times, want 4: %q", len(lines), lines)
	}
	for i, l := range lines {
		scheme := "http://"
		if i >= 2 {
			scheme = "https://"
		}
		if !strings.HasPrefix(l, "-t1 -c4 -d1s "+scheme+"127.0.0.1:") || !strings.HasSuffix(l, "/hello") {
			t.Errorf("wrk call %d: %q, want -t1 -c4 -d1s %s.../hello", i, l, scheme)
		}
	}
}

// The recording cases against a real riftgate (mb absent): each system is
// loaded alone for -record-d, the windows' rates are reported, proxyOnce's
// stubs are read back, and the keep-alive case is compared with the raw
// fasthttp proxy.
func TestBenchRecordingCases(t *testing.T) {
	t.Setenv("RIFTLOAD_TEST_AS_MAIN", "1")
	bin := gatewaytest.Binary(t)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"bench",
		"-riftgate", bin, "-mb", filepath.Join(dir, "no-mb"),
		"-wasm-dir", dir, "-wrk", "", "-server-cpu", "",
		"-rounds", "1", "-d", "300ms", "-record-d", "1500ms", "-record-window", "500ms", "-warmup", "0", "-c", "4",
		"-only", "^record-(once-new|transparent-keepalive)$", "-out", ""}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	md := stdout.String()
	for _, want := range []string{
		"## Recording (issue 34)",
		"| `proxyTransparent`, `_rift.proxyKeepAlive` | raw fasthttp proxy | ",
		"| `proxyOnce`, a new path (a new stub) per request | mb 2.9.1 | - | - | - | - | - | - | not available: mb: stat ",
		"| riftgate last/first | target | riftgate/proxyTransparent |",
		">= 100000: **FAIL**", // a second and a half records far fewer
		// riftgate in memory, as mb, and on --datadir beside it.
		"| `proxyOnce`, a new path (a new stub) per request | riftgate, --datadir | ",
		"without `--datadir`",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// riftgate recorded one stub per request (the probe's included): the
	// count read back is a number close to the requests sent.
	row := "| `proxyOnce`, a new path (a new stub) per request | riftgate | "
	sec := md[strings.Index(md, "## Recording (issue 34)"):]
	i := strings.Index(sec, row)
	if i < 0 {
		t.Fatalf("no riftgate row for record-once-new:\n%s", md)
	}
	f := strings.Split(sec[i:i+strings.IndexByte(sec[i:], '\n')], "|")
	rps, _ := strconv.ParseFloat(strings.TrimSpace(f[3]), 64)
	first, _ := strconv.ParseFloat(strings.TrimSpace(f[4]), 64)
	last, _ := strconv.ParseFloat(strings.TrimSpace(f[5]), 64)
	var stubs int
	var readIn, firstCPU, lastCPU float64
	_, err := fmt.Sscanf(strings.TrimSpace(f[8]), "%d (GET in %f s)", &stubs, &readIn)
	if rps <= 0 || first <= 0 || last <= 0 || err != nil || readIn < 0 {
		t.Fatalf("row %q: want rates, a stub count and the time its GET took (%v)", f, err)
	}
	// The server's CPU a request in the first and last window, read from
	// the real process while it ran.
	if _, err := fmt.Sscanf(strings.TrimSpace(f[7]), "%f → %f", &firstCPU, &lastCPU); err != nil || firstCPU <= 0 || lastCPU <= 0 {
		t.Errorf("row %q: want the CPU a request in the first and last window (%v)", f, err)
	}
	if sent := rps * 1.5; float64(stubs) < 0.9*sent || float64(stubs) > 1.1*sent+10 {
		t.Errorf("%d stubs recorded, want about the %.0f requests sent", stubs, sent)
	}
	// The keep-alive case has a ratio against the raw proxy with its target.
	if !regexp.MustCompile(`\| [0-9.]+x \| >= 0\.8x: (PASS|\*\*FAIL\*\*) \| - \|\s+\|`).MatchString(md) {
		t.Errorf("no riftgate/raw fasthttp proxy ratio with its target:\n%s", md)
	}
}

// sampleWindows reads the CPU at the edges of a run's first and last
// window, and a run that ends before its last edge is read at its end.
func TestSampleWindows(t *testing.T) {
	start := time.Now()
	elapsed := func() (time.Duration, bool) { return time.Since(start), true }
	w := sampleWindows(elapsed, 50*time.Millisecond, 400*time.Millisecond, 100*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	got := w()
	if !got.ok || got.first < 90*time.Millisecond || got.first > 150*time.Millisecond ||
		got.last < 90*time.Millisecond || got.last > 150*time.Millisecond {
		t.Errorf("windows of 100 ms read %+v", got)
	}
	// Ended early, before the last window began: not known.
	w = sampleWindows(elapsed, 0, time.Hour, 100*time.Millisecond)
	if got := w(); got.ok {
		t.Errorf("a run ended before its last window read %+v", got)
	}
	// Ended within its last window: read at once.
	w = sampleWindows(elapsed, 0, 200*time.Millisecond, 100*time.Millisecond)
	time.Sleep(150 * time.Millisecond)
	begun := time.Now()
	if got := w(); !got.ok || time.Since(begun) > 50*time.Millisecond {
		t.Errorf("a run ended in its last window: %+v after %v", got, time.Since(begun))
	}
	// A failed reading makes it unknown.
	w = sampleWindows(func() (time.Duration, bool) { return 0, false }, 0, 20*time.Millisecond, 10*time.Millisecond)
	time.Sleep(40 * time.Millisecond)
	if got := w(); got.ok {
		t.Errorf("failed readings gave %+v", got)
	}
}

func TestWindowRates(t *testing.T) {
	var tl []TimePoint
	for s := 1; s <= 6; s++ {
		tl = append(tl, TimePoint{Second: float64(s), Requests: int64(100 * s)})
	}
	// A partial last interval: 0.5 s.
	tl = append(tl, TimePoint{Second: 6.5, Requests: 400})
	first, last := windowRates(tl, 2*time.Second, 6.5)
	// First 2 s: 100+200 over 2 s; last 2 s: the intervals from 4.5 s on
	// (5-6 and 6-6.5): 600+400 over 1.5 s.
	if first != 150 || last != 1000/1.5 {
		t.Errorf("first %v last %v, want 150 and %v", first, last, 1000/1.5)
	}
}

// The grpc-unary case measures the raw grpc-go server (riftload hello
// -grpc-port, a real process) through the same run as any case, and a
// riftgate that cannot serve it is a note, not a crash.
func TestBenchGRPCUnaryCase(t *testing.T) {
	t.Setenv("RIFTLOAD_TEST_AS_MAIN", "1")
	dir := t.TempDir()
	out := filepath.Join(dir, "bench.md")
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"bench",
		"-riftgate", filepath.Join(dir, "no-riftgate"), "-mb", filepath.Join(dir, "no-mb"),
		"-wasm-dir", dir, "-wrk", "", "-server-cpu", "", "-soak", "0",
		"-rounds", "1", "-d", "300ms", "-warmup", "0", "-c", "4",
		"-only", "^grpc-unary$", "-out", out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	md := stdout.String()
	title := "| gRPC: a unary call, static `is` (raw: grpc-go answering the same message, encoded once) | "
	raw := strings.Index(md, title+"raw fasthttp | ")
	if raw < 0 {
		t.Fatalf("no raw grpc row:\n%s", md)
	}
	f := strings.Split(md[raw:raw+strings.IndexByte(md[raw:], '\n')], "|")
	if rps, err := strconv.ParseFloat(strings.TrimSpace(f[3]), 64); err != nil || rps <= 0 {
		t.Errorf("raw grpc-go req/s %q", f[3])
	}
	if strings.TrimSpace(f[8]) != "" {
		t.Errorf("raw grpc-go note %q", f[8])
	}
	if !strings.Contains(md, title+"riftgate | - | - | - | - | 0 | not available: riftgate: stat ") {
		t.Errorf("riftgate's row does not say why it is missing:\n%s", md)
	}
}
