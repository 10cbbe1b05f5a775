package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The soak (`-only soak`, `-soak DURATION`): riftgate alone for a long
// run at the highest rate the machine gives it, with every request
// recorded (--mock), a flow written per request with `sync` durability,
// and a proxyOnce recording, watched for what a long load test needs:
// memory that stays flat, collector pauses, and a p99 at the end like the
// one at the start. Its section of docs/benchmarks.md sits between
// soakPart's markers, so that a run of the soak alone replaces only it.

const soakID = "soak"

// soakImposter is the soak's imposter: /flow moves a scenario of the
// virtual user's flow (a sync write per request), /proxy/ records one
// stub per path from the raw server then replays it, anything else is a
// static answer; --mock records all of it.
func soakImposter(port int, upstream string) string {
	ka := `"headers":{"Connection":"keep-alive"}`
	return fmt.Sprintf(`{"protocol":"http","port":%d,"name":"soak",
 "_rift":{"flowState":{"flowIdSource":"header:X-Flow-Id","durability":"sync"}},
 "stubs":[
  {"predicates":[{"equals":{"path":"/flow"}}],"scenarioName":"cart","requiredScenarioState":"Started","newScenarioState":"added","responses":[{"is":{"body":"added",%s}}]},
  {"predicates":[{"equals":{"path":"/flow"}}],"scenarioName":"cart","requiredScenarioState":"added","newScenarioState":"Started","responses":[{"is":{"body":"emptied",%s}}]},
  {"predicates":[{"startsWith":{"path":"/proxy/"}}],"responses":[{"proxy":{"to":%q,"mode":"proxyOnce","predicateGenerators":[{"matches":{"method":true,"path":true}}]}}]},
  {"responses":[{"is":{"body":"static",%s}}]}]}`, port, ka, ka, upstream, ka)
}

// soakScenario: each virtual user a new flow per iteration (so flows come
// and go, up to the flow store's cap), and one proxied path per user.
const soakScenario = `{"name":"soak","flowPerIteration":true,"steps":[
 {"path":"/static?vu={{vu}}"},{"path":"/flow"},{"path":"/proxy/{{vu}}"}]}`

// soakSample is what the sampler read at one moment.
type soakSample struct {
	at       time.Duration // since the load started (warm-up included)
	rss      int64
	scraped  bool // GET /metrics answered: the gc fields are read
	gcCount  uint64
	gcSum    float64           // seconds
	gcBucket map[string]uint64 // le -> cumulative count
	cpu      time.Duration     // the server's CPU time so far
	pressure float64           // the machine's CPU pressure (/proc/pressure/cpu, some avg10), %
}

// soakInterval is one interval of the timeline, with what the sampler
// saw during it.
type soakInterval struct {
	end                  time.Duration // since measuring started
	endAt                time.Duration // since the load started, as samples are
	rps, p50, p99        float64
	errors               int64
	rssMax               int64
	pauses               uint64
	pauseTime, pauseMaxS float64 // the longest pause's bucket bound, seconds
	unscraped            int     // samples whose GET /metrics did not answer
	cpu                  time.Duration
	pressure             float64 // the highest seen
}

type soakReport struct {
	start     time.Time
	dur       time.Duration
	interval  time.Duration
	conns     int
	intervals []soakInterval
	requests  int64
	errors    int64
	sent      int64 // every request the imposter was sent, probes and warm-up included
	counted   int64 // its numberOfRequests
	kept      int64 // requests in the answer to GET /imposters/:id
	getBytes  int64
	getTime   time.Duration
	getRise   int64 // RSS peak during that GET, over RSS before it
	disk      int64
	rssMin    int64 // over the last 80% of the run
	rssMax    int64
	rssStart  int64
	p99Start  float64
	p99End    float64
	note      string
}

// runSoak runs the soak against a riftgate of its own and returns its
// report, or one with a note saying why it did not run.
func (b *bench) runSoak(ctx context.Context, rawURL string) *soakReport {
	rep := &soakReport{start: time.Now().UTC(), dur: b.cfg.soak, conns: b.cfg.conns}
	rep.interval = max(b.cfg.soak/10, time.Second)
	data := filepath.Join(b.dir, "soak-data")
	proc, admin, err := b.startMountebankLike(ctx, "riftgate-soak", b.cfg.riftgate, "--mock", "--datadir", data)
	if err != nil {
		rep.note = err.Error()
		return rep
	}
	defer proc.stop()
	pid := proc.cmd.Process.Pid // taskset execs riftgate in its own process
	port, err := freePort()
	if err != nil {
		rep.note = err.Error()
		return rep
	}
	if err := postImposter(admin, soakImposter(port, rawURL)); err != nil {
		rep.note = err.Error()
		return rep
	}
	target := fmt.Sprintf("http://127.0.0.1:%d", port)
	probes := []probeStep{
		{method: http.MethodGet, path: "/static", status: http.StatusOK, body: "static"},
		{method: http.MethodGet, path: "/flow", flow: "probe", status: http.StatusOK, body: "added"},
	}
	if err := probeOn([]string{target}, probes); err != nil {
		rep.note = "probe: " + err.Error()
		return rep
	}
	sc, err := ParseScenario([]byte(soakScenario))
	if err != nil {
		rep.note = err.Error()
		return rep
	}
	warmup := min(10*time.Second, rep.interval)
	opts := Options{
		Targets: []string{target}, Connections: b.cfg.conns, Duration: b.cfg.soak, Warmup: warmup,
		Scenario: sc, Interval: rep.interval, Timeout: benchTimeout,
	}
	samples := b.sampleWhile(ctx, pid, admin, rep.interval/6, func() {
		res, err := Run(ctx, opts)
		if err != nil {
			rep.note = "load: " + err.Error()
			return
		}
		rep.requests, rep.errors = res.Requests, res.Errors
		rep.sent = res.Requests + res.WarmupRequests + int64(len(probes))
		for _, tp := range res.Timeline {
			rep.intervals = append(rep.intervals, soakInterval{
				end: time.Duration(tp.Second * float64(time.Second)), rps: tp.RPS, p50: tp.P50, p99: tp.P99, errors: tp.Errors,
			})
		}
	})
	if rep.note != "" {
		return rep
	}
	rep.fold(samples, warmup)
	rep.readBack(ctx, admin, port, pid)
	rep.disk = dirBytes(filepath.Join(data, "requests"))
	return rep
}

// sampleWhile samples the process every tick while run runs.
func (b *bench) sampleWhile(ctx context.Context, pid int, admin string, tick time.Duration, run func()) []soakSample {
	tick = max(tick, 500*time.Millisecond)
	start := time.Now()
	var (
		mu  sync.Mutex
		out []soakSample
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			s := soakSample{at: time.Since(start), rss: readRSS(pid), pressure: cpuPressure()}
			s.cpu, _ = treeCPU(pid, 0)
			s.gcCount, s.gcSum, s.gcBucket, s.scraped = scrapePauses(ctx, admin)
			mu.Lock()
			out = append(out, s)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	run()
	close(stop)
	wg.Wait()
	return out
}

// fold gives each interval its samples, and works out the verdicts.
func (r *soakReport) fold(samples []soakSample, warmup time.Duration) {
	if len(samples) == 0 || len(r.intervals) == 0 {
		r.note = "no samples"
		return
	}
	r.rssStart = samples[0].rss
	// Pauses are differences between readings of GET /metrics; one that
	// did not answer (the server too busy for 10 s) is left out.
	prev, prevCPU := samples[0], samples[0].cpu
	j := 0
	for i := range r.intervals {
		iv := &r.intervals[i]
		last, lastCPU := prev, prevCPU
		iv.endAt = warmup + iv.end
		for ; j < len(samples) && samples[j].at <= iv.endAt; j++ {
			s := samples[j]
			iv.rssMax = max(iv.rssMax, s.rss)
			iv.pressure = max(iv.pressure, s.pressure)
			lastCPU = max(lastCPU, s.cpu)
			if !s.scraped {
				iv.unscraped++
				continue
			}
			last = s
		}
		iv.pauses = last.gcCount - prev.gcCount
		iv.pauseTime = last.gcSum - prev.gcSum
		iv.pauseMaxS = longestPause(prev.gcBucket, last.gcBucket)
		iv.cpu = lastCPU - prevCPU
		prev, prevCPU = last, lastCPU
	}
	// Flat over the last 80% (the last 8 minutes of 10).
	from := warmup + r.dur/5
	for _, s := range samples {
		if s.at < from || s.rss == 0 {
			continue
		}
		if r.rssMin == 0 || s.rss < r.rssMin {
			r.rssMin = s.rss
		}
		r.rssMax = max(r.rssMax, s.rss)
	}
	r.p99Start, r.p99End = r.intervals[0].p99, r.intervals[len(r.intervals)-1].p99
}

// readBack reads GET /imposters/:id as a client would, streamed, while
// the server's memory is watched, and counts what it holds.
func (r *soakReport) readBack(ctx context.Context, admin string, port, pid int) {
	before := readRSS(pid)
	start := time.Now()
	var err error
	peak, _ := watchRSS(func() int { return pid }, func() {
		req, rerr := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/imposters/%d", admin, port), nil)
		if err = rerr; err != nil {
			return
		}
		var resp *http.Response
		if resp, err = http.DefaultClient.Do(req); err != nil {
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			r.getBytes += int64(len(sc.Bytes())) + 1
			switch {
			case strings.HasPrefix(line, `"requestFrom":`):
				r.kept++
			case strings.HasPrefix(line, `"numberOfRequests":`):
				r.counted, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(line, `"numberOfRequests": `), ","), 10, 64)
			}
		}
		err = sc.Err()
	})
	r.getTime = time.Since(start)
	r.getRise = peak - before
	if err != nil {
		r.note = "GET /imposters: " + err.Error()
	}
}

// readRSS reads a process's resident memory (0 when it cannot).
func readRSS(pid int) int64 { return readStatus(pid, "VmRSS:")[0] }

// readStatus reads memory figures of /proc/<pid>/status, one per field,
// in bytes (0 where it cannot), in one read of the file.
func readStatus(pid int, fields ...string) []int64 {
	out := make([]int64, len(fields))
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		for i, field := range fields {
			if v, ok := strings.CutPrefix(line, field); ok {
				if f := strings.Fields(v); len(f) > 0 {
					kb, _ := strconv.ParseInt(f[0], 10, 64)
					out[i] = kb << 10
				}
			}
		}
	}
	return out
}

// cpuPressure reads how much of the last 10 s some task waited for a CPU
// on this machine (Linux's PSI), in percent: the neighbours' share of
// the noise; 0 where the kernel does not say.
func cpuPressure() float64 {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0
	}
	for _, f := range strings.Fields(strings.SplitN(string(b), "\n", 2)[0]) {
		if v, ok := strings.CutPrefix(f, "avg10="); ok {
			p, _ := strconv.ParseFloat(v, 64)
			return p
		}
	}
	return 0
}

// scrapePauses reads riftgate_go_gc_pause_seconds from GET /metrics; ok
// is false when the server did not answer.
func scrapePauses(ctx context.Context, admin string) (count uint64, sum float64, buckets map[string]uint64, ok bool) {
	buckets = map[string]uint64{}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/metrics", nil)
	if err != nil {
		return 0, 0, buckets, false
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, 0, buckets, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 8<<20))
	for sc.Scan() {
		line := sc.Text()
		name, value, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(name, "riftgate_go_gc_pause_seconds") {
			continue
		}
		switch {
		case strings.HasPrefix(name, "riftgate_go_gc_pause_seconds_bucket{le=\""):
			le := strings.TrimSuffix(strings.TrimPrefix(name, "riftgate_go_gc_pause_seconds_bucket{le=\""), "\"}")
			buckets[le], _ = strconv.ParseUint(value, 10, 64)
		case name == "riftgate_go_gc_pause_seconds_sum":
			sum, _ = strconv.ParseFloat(value, 64)
		case name == "riftgate_go_gc_pause_seconds_count":
			count, _ = strconv.ParseUint(value, 10, 64)
		}
	}
	return count, sum, buckets, sc.Err() == nil && resp.StatusCode == http.StatusOK && buckets["+Inf"] == count
}

// longestPause is the bound of the lowest bucket that holds every pause
// between two readings: the longest was at most that long (+Inf: over
// the last bound).
func longestPause(before, after map[string]uint64) float64 {
	total := after["+Inf"] - before["+Inf"]
	if total == 0 {
		return 0
	}
	best := -1.0
	for le, n := range after {
		if le == "+Inf" {
			continue
		}
		bound, err := strconv.ParseFloat(le, 64)
		if err == nil && n-before[le] == total && (best < 0 || bound < best) {
			best = bound
		}
	}
	return best // -1: only +Inf holds them all
}

func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// section renders the soak's section of the report, between its markers.
func (r *soakReport) section(serverCPU string) string {
	var w strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&w, format, a...) }
	p("%s\n## Soak: recording, sync flows and a proxy recording for %v\n\n", soakPart.begin, r.dur)
	p("Run %s. Only riftgate runs (pinned to CPU %s when pinned; the load generator on the other core): `riftgate start --mock --datadir D`, one imposter whose `/flow` moves a scenario of the virtual user's flow (`_rift.flowState` with `durability: sync`, one fsynced write per request, a new flow per iteration up to the flow store's cap), whose `/proxy/<user>` is a `proxyOnce` recording from the raw server (one recorded stub per user, replayed after), and whose other paths answer a static stub; `--mock` records every request. Closed loop, %d connections, as fast as the machine answers: each user sends `/static`, `/flow`, `/proxy/<user>` in turn, for %v after a %v warm-up. RSS is read from `/proc/<pid>/status` every %v, the collector's pauses from `riftgate_go_gc_pause_seconds` on GET /metrics; latencies per interval are the load generator's.\n\n",
		r.start.Format("2006-01-02 15:04 UTC"), orNone(serverCPU), r.conns, r.dur, min(10*time.Second, r.interval), max(r.interval/6, 500*time.Millisecond))
	p("Run it alone with `make build && go build -o bin/riftload ./cmd/riftload && taskset -c 1 bin/riftload bench -only '^soak$' -soak %v` (it replaces only this section).\n\n", r.dur)
	if r.note != "" {
		p("**Not measured**: %s\n%s\n", mdEscape(r.note), soakPart.end)
		return w.String()
	}
	p("Server CPU is the riftgate process's user and system time in the interval (at most the interval: it has one core); CPU pressure is the machine's (`/proc/pressure/cpu`, the share of the last 10 s some task waited for a core, highest seen in the interval): high pressure with little server CPU is the neighbours taking the core. A `/metrics` reading that did not come within 10 s is left out of the pauses and counted.\n\n")
	p("| until (s after the warm-up) | req/s | p50 ms | p99 ms | errors | RSS MB (max) | server CPU s | CPU pressure %% (max) | GC pauses | pause time ms | longest pause ms (≤) | /metrics unanswered |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, iv := range r.intervals {
		longest := "-"
		switch {
		case iv.pauseMaxS > 0:
			longest = strconv.FormatFloat(iv.pauseMaxS*1000, 'g', 4, 64)
		case iv.pauseMaxS < 0:
			longest = "> 1000"
		}
		p("| %v | %.0f | %.3f | %.3f | %d | %.0f | %.1f | %.0f | %d | %.1f | %s | %d |\n", iv.end.Round(time.Second).Seconds(), iv.rps, iv.p50, iv.p99, iv.errors, mb(iv.rssMax),
			iv.cpu.Seconds(), iv.pressure, iv.pauses, iv.pauseTime*1000, longest, iv.unscraped)
	}
	flat := r.rssMin > 0 && float64(r.rssMax) <= 1.2*float64(r.rssMin)
	p99ok := r.p99Start > 0 && r.p99End <= 1.5*r.p99Start
	exact := r.counted == r.sent
	p("\n- Requests: %d measured, %d failed; the imposter was sent %d in all (warm-up and probes included), and its `numberOfRequests` says %d: %s.\n", r.requests, r.errors, r.sent, r.counted, mark(exact))
	p("- RSS: %.0f MB before the load; over the last 80%% of the run between %.0f and %.0f MB, max/min %.2f (target <= 1.20): %s.\n", mb(r.rssStart), mb(r.rssMin), mb(r.rssMax), float64(r.rssMax)/float64(max(r.rssMin, 1)), mark(flat))
	p("- p99: %.3f ms in the first interval, %.3f ms in the last, end/start %.2f (target <= 1.50): %s.\n", r.p99Start, r.p99End, r.p99End/max(r.p99Start, 1e-9), mark(p99ok))
	p("- GET /imposters/:id afterwards (read as it streamed): %d recorded requests, %.0f MB, in %.1f s; the server's RSS rose by %.0f MB at most meanwhile.\n", r.kept, mb(r.getBytes), r.getTime.Seconds(), mb(r.getRise))
	p("- Recorded requests on disk (under `--datadir`): %.0f MB.\n%s\n", mb(r.disk), soakPart.end)
	return w.String()
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
