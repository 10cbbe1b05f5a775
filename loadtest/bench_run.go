package loadtest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// bench is one `riftload bench` run.
type bench struct {
	cfg   benchConfig
	log   *slog.Logger
	dir   string // scratch: server logs, pid files, riftgate's data dir
	cases []benchCase
	cells map[string]map[string]*cell // case id, system
	wrk   []wrkSeries
	info  []string
	start time.Time
	// rawTCP is the raw server's tcp address (tcp://host:port), the
	// reference for tcp cases.
	rawTCP string
	// rawWS is the raw WebSocket echo server's (ws://host:port).
	rawWS string
	// rawTLS is the raw server's https base URL.
	rawTLS string
	// rawGRPC is the raw grpc-go server's (grpc://host:port).
	rawGRPC string
	// rawProxy is the raw fasthttp reverse proxy's base URL (sysRawProxy),
	// forwarding to the raw server.
	rawProxy string
	// cluster is sysCluster's nodes (nil when no case wants it, or it did
	// not start); rpc and pauses are what was measured of it after the
	// rounds.
	cluster *clusterNodes
	rpc     []time.Duration // owner RPC p50, p99
	rpcN    uint64
	rpcNote string
	pauses  []pause
	// faults are the cluster-faults case's measurements, or faultsNote
	// why there are none.
	faults     []faultResult
	faultsNote string
	// inProcess is the -inprocess file's benchmarks (nil without one).
	inProcess *inProcess
	// servers are each system's server processes, whose CPU time a
	// measurement reads.
	servers map[string]func() []*process
	// profiled are the admin URLs of each system whose CPU profiles
	// -profile-dir asks for.
	profiled map[string][]string
	// soak is the soak's report (nil when it did not run).
	soak *soakReport
	// large is the large recording's report (nil when it did not run).
	large *largeReport
}

// section is this run's section of the part pt ("": it did not run).
func (b *bench) section(pt part) string {
	switch {
	case pt == soakPart && b.soak != nil:
		return b.soak.section(b.cfg.serverCPU)
	case pt == largePart && b.large != nil:
		return b.large.section(b.cfg.serverCPU)
	}
	return ""
}

// partsOnly reports whether parts are all this run measured.
func (b *bench) partsOnly() bool {
	return (b.soak != nil || b.large != nil) && len(b.cells) == 0 && len(b.wrk) == 0 && b.cluster == nil
}

// writePart writes this run's section of pt, or the last run's where this
// run did not write it.
func (b *bench) writePart(p func(string, ...any), pt part) {
	if section := b.section(pt); section != "" {
		p("\n%s", section)
	} else if b.cfg.out != "" {
		if prev := pt.previous(b.cfg.out); prev != "" {
			p("\n%s", prev) // not run this time: the last one stays, with its date
		}
	}
}

// cell is one (case, system) pair: where to send the load, and what each
// round measured.
type cell struct {
	target string
	// targets, when set, are the nodes of a cluster, loaded in turn.
	targets []string
	note    string // why it is not available, or failed its probe: not measured
	// errNote says why some measurements count as failed (too many
	// errors); they are still shown, but not used in ratios.
	errNote string
	runs    []measurement
}

type measurement struct {
	rps, p50, p99 float64
	requests      int64
	errors        int64
	rate          float64 // open loop only
	unsent        int64   // open loop: due but never sent
	round         int
	// cpu is the server processes' CPU time per request sent, in µs
	// (warm-up included, since its CPU is too); 0 when unknown.
	cpu float64
	// A recording case's rates in the first and last -record-window of
	// its run, the stubs its imposter held at the end (-1: not read), and
	// how long GET /imposters/:id took to read them.
	first, last float64
	recorded    int
	readIn      time.Duration
	// The server processes' CPU time a request in those two windows, in
	// µs (0: unknown): a rate says how much the server did, this what it
	// cost, which the windows' share of the core does not move.
	firstCPU, lastCPU float64
}

type wrkRound struct{ wrk, riftload float64 }

// wrkSeries is riftload against wrk over one protocol.
type wrkSeries struct {
	scheme string // http or https
	rounds []wrkRound
	note   string // why it stopped short, if it did
}

// maxErrorRate is the share of failed requests beyond which a measurement
// is reported as failed rather than as a number.
const maxErrorRate = 0.01

const benchTimeout = 15 * time.Second

func (b *bench) run(ctx context.Context) (string, error) {
	b.start = time.Now().UTC()
	b.info = machineInfo()
	if b.cfg.inProcess != "" {
		f, err := os.Open(b.cfg.inProcess)
		if err != nil {
			return "", fmt.Errorf("bench: %w", err)
		}
		b.inProcess, err = readInProcess(f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("bench: %w", err)
		}
	}
	total0, steal0, ticksOK := cpuTicks()
	dir, err := os.MkdirTemp("", "riftload-bench-")
	if err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	b.dir = dir

	raw, rawURL, err := b.startHello(ctx)
	if err != nil {
		return "", fmt.Errorf("bench: the raw server is needed as the reference: %w", err)
	}
	defer raw.stop()
	b.servers = map[string]func() []*process{sysRaw: func() []*process { return []*process{raw} },
		sysRawProxy: func() []*process { return []*process{raw} }}
	admins := map[string]string{}
	down := map[string]string{}
	rgArgs := []string{"--datadir", dir + "/riftgate-data"}
	if b.cfg.profileDir != "" {
		rgArgs = append(rgArgs, "--pprof")
		if err := os.MkdirAll(b.cfg.profileDir, 0o755); err != nil {
			return "", fmt.Errorf("bench: %w", err)
		}
	}
	b.profiled = map[string][]string{}
	b.cases = benchCases(b.cfg.wasmDir, rawURL)
	// The gRPC case's types: one proto file, for riftgate's imposter and
	// the load generator alike.
	protoPath, err := writeBenchProto(dir)
	if err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	for _, c := range b.cases {
		if c.grpc != nil {
			c.grpc.ProtoFiles = []string{protoPath}
		}
	}
	// The soak starts its own riftgate: a run of it alone starts no other.
	anyCase := false
	for _, c := range b.cases {
		anyCase = anyCase || b.needed(c.id)
	}
	var (
		rg, mb *process
		admin  string
	)
	if anyCase {
		rg, admin, err = b.startMountebankLike(ctx, "riftgate", b.cfg.riftgate, rgArgs...)
	} else {
		err = errors.New("no case needs it")
	}
	if err != nil {
		down[sysRift] = err.Error()
		down[sysRiftDurable] = err.Error()
	} else {
		defer rg.stop()
		admins[sysRift], admins[sysRiftDurable] = admin, admin
		b.profiled[sysRift], b.profiled[sysRiftDurable] = []string{admin}, []string{admin}
		b.servers[sysRift] = func() []*process { return []*process{rg} }
		b.servers[sysRiftDurable] = b.servers[sysRift]
	}
	// The recording cases compare riftgate with mb, which keeps what it
	// records in memory: riftgate runs them in memory too (a process of
	// its own, without --datadir), and on --datadir beside it.
	// memRG is started here to learn whether it can run at all, and again
	// for each recording case.
	var memRG *process
	var memArgs []string
	if b.cfg.profileDir != "" {
		memArgs = append(memArgs, "--pprof")
	}
	if b.wantsLong() && rg != nil {
		if memRG, _, err = b.startMountebankLike(ctx, "riftgate-memory", b.cfg.riftgate, memArgs...); err != nil {
			down[sysRift] = err.Error()
		} else {
			defer func() { memRG.stop() }()
		}
	}
	if anyCase {
		mb, admin, err = b.startMountebankLike(ctx, "mb", b.cfg.mb, "--localOnly")
	}
	if err != nil {
		down[sysMB] = err.Error()
	} else {
		defer mb.stop()
		admins[sysMB] = admin
		b.servers[sysMB] = func() []*process { return []*process{mb} }
	}
	if b.wantsCluster() {
		if b.cluster, err = b.startCluster(ctx); err != nil {
			down[sysCluster] = err.Error()
		} else {
			defer b.cluster.stop()
			b.servers[sysCluster] = func() []*process { return b.cluster.procs }
			b.profiled[sysCluster] = b.cluster.admins
		}
	}
	for sys, why := range down {
		if anyCase {
			b.log.Warn("system not available", "system", sys, "err", why)
		}
	}

	b.cells = map[string]map[string]*cell{}
	for _, c := range b.cases {
		if !b.needed(c.id) {
			continue
		}
		b.cells[c.id] = map[string]*cell{}
		for _, sys := range c.systems {
			b.cells[c.id][sys] = b.availability(c, sys, down)
		}
	}

	if b.cfg.wrk != "" {
		for _, w := range []struct{ id, url string }{{"wrk", rawURL}, {"wrk-https", b.rawTLS}} {
			if b.cfg.wanted(w.id) {
				b.wrk = append(b.wrk, b.compareWrk(ctx, w.url))
			}
		}
	}
	for round := range b.cfg.rounds {
		for _, c := range b.cases {
			cells, ok := b.cells[c.id]
			if !ok {
				continue
			}
			// A/B/A/B: the order of the systems rotates every round, so no
			// system always runs first (cold) or last (after a long load).
			order := slices.Clone(c.systems)
			for range round % len(order) {
				order = append(order[1:], order[0])
			}
			for _, group := range b.groups(c, order) {
				if ctx.Err() != nil {
					return "", ctx.Err()
				}
				adm, restore := admins, func() {}
				if c.long && memRG != nil {
					// Each recording case gets a fresh process: what the
					// one before recorded (hundreds of MB, freed by the
					// collector at its own pace) must not weigh on it.
					memRG.stop()
					var memAdmin string
					if memRG, memAdmin, err = b.startMountebankLike(ctx, "riftgate-memory", b.cfg.riftgate, memArgs...); err != nil {
						return "", fmt.Errorf("restart the in-memory riftgate: %w", err)
					}
					adm, restore = b.inMemory(admins, memRG, memAdmin)
				}
				var removes []func()
				for _, sys := range group {
					removes = append(removes, b.deploy(c, sys, cells[sys], rawURL, adm))
				}
				b.measure(ctx, c, group, cells, round)
				if c.recordedTarget > 0 {
					for _, sys := range group {
						b.countRecorded(c, sys, cells[sys], adm, round)
					}
				}
				for _, remove := range removes {
					remove()
				}
				restore()
				if c.long {
					// A recording case leaves work behind: riftgate on
					// --datadir writes and removes a file or three per
					// recording in the background, for minutes after a
					// proxyOnce run. The next measurement waits for it,
					// or it would share the servers' core with it.
					b.quiesce(ctx, group)
				}
			}
		}
	}
	if b.cluster != nil {
		if b.rpc, b.rpcN, err = b.cluster.rpcQuantiles(0.5, 0.99); err != nil {
			b.rpcNote = err.Error()
		}
		if b.cfg.wanted("cluster-pause") {
			b.pauses = b.measurePauses(ctx, b.cluster, b.caseByID("flow-async"))
		}
	}
	if b.cfg.wanted("cluster-faults") {
		b.faults, b.faultsNote = b.measureFaults(ctx)
	}
	if b.cfg.large > 0 && b.cfg.wanted(largeID) {
		b.log.Info("large recording", "stubs", b.cfg.large)
		b.large = b.runLarge(ctx)
		if b.large.note != "" {
			b.log.Warn("large recording not measured", "why", b.large.note)
		}
	}
	if b.cfg.soak > 0 && b.cfg.wanted(soakID) {
		b.log.Info("soak", "duration", b.cfg.soak)
		b.soak = b.runSoak(ctx, rawURL)
		if b.soak.note != "" {
			b.log.Warn("soak not measured", "why", b.soak.note)
		}
	}
	b.info = append(b.info, "load average at end: "+strings.TrimSpace(readFile("/proc/loadavg")))
	if total1, steal1, ok := cpuTicks(); ok && ticksOK && total1 > total0 {
		b.info = append(b.info, fmt.Sprintf("CPU time stolen by the hypervisor during the run: %.1f%%", 100*float64(steal1-steal0)/float64(total1-total0)))
	}
	return b.report(), nil
}

func readFile(p string) string {
	data, err := os.ReadFile(p)
	if err != nil {
		return "unknown"
	}
	return string(data)
}

// wantsLong reports whether a recording case (a long one) is to run.
func (b *bench) wantsLong() bool {
	for _, c := range b.cases {
		if c.long && b.needed(c.id) {
			return true
		}
	}
	return false
}

// inMemory makes sysRift the in-memory riftgate for one recording case,
// and returns the admin addresses to use and what puts sysRift back.
func (b *bench) inMemory(admins map[string]string, rg *process, admin string) (map[string]string, func()) {
	adm := maps.Clone(admins)
	adm[sysRift] = admin
	servers, profiled := b.servers[sysRift], b.profiled[sysRift]
	b.servers[sysRift] = func() []*process { return []*process{rg} }
	b.profiled[sysRift] = []string{admin}
	return adm, func() { b.servers[sysRift], b.profiled[sysRift] = servers, profiled }
}

// availability says, before any load, why a (case, system) pair cannot be
// measured at all; such a cell keeps its note and is skipped.
func (b *bench) availability(c benchCase, sys string, down map[string]string) *cell {
	if why, ok := down[sys]; ok {
		return &cell{note: "not available: " + why}
	}
	if c.wasm == "" && c.id == "wasm" && sys != sysRaw {
		return &cell{note: "not available: no counter module in " + b.cfg.wasmDir + " (make wasm)"}
	}
	return &cell{}
}

// deploy posts a fresh copy of the case's imposter (a half-peak case, its
// peak case's) and probes it, so that each measurement starts from a clean
// slate: no other case's imposters, flows or plugins are alive beside it.
// The returned func deletes it again. A failed probe marks the cell, which
// is then no longer measured.
func (b *bench) deploy(c benchCase, sys string, cl *cell, rawURL string, admins map[string]string) (remove func()) {
	remove = func() {}
	if cl == nil || cl.note != "" {
		return remove
	}
	if c.halfOf != "" {
		c = b.caseByID(c.halfOf)
	}
	if sys == sysCluster {
		return b.deployCluster(c, cl, b.cluster)
	}
	if sys == sysRawProxy {
		cl.target = b.rawProxy
		if err := probe(cl.target, c.probe, true); err != nil {
			cl.note = "failed: " + err.Error()
		}
		return remove
	}
	if sys == sysRaw {
		cl.target = rawURL
		err := error(nil)
		switch {
		case c.tcp != nil:
			cl.target = b.rawTCP
			err = probeTCP(cl.target, c.tcp)
		case c.ws != nil:
			cl.target = b.rawWS
			err = probeWS(cl.target, c.ws)
		case c.grpc != nil:
			cl.target = b.rawGRPC
			err = probeGRPC(context.Background(), cl.target, c.grpc, c.grpcWant)
		default:
			err = probe(rawURL, c.probe, false)
		}
		if err != nil {
			cl.note = "failed: " + err.Error()
		}
		return remove
	}
	cl.target = ""
	port, err := freePort()
	if err != nil {
		cl.note = "not available: " + err.Error()
		return remove
	}
	imp := c.imposter(port)
	if c.grpc != nil {
		// The imposter names the proto file by path, in the bench's folder.
		imp = strings.ReplaceAll(imp, benchProtoDirToken, b.dir)
	}
	if err := postImposter(admins[sys], imp); err != nil {
		cl.note = "not available: " + err.Error()
		return remove
	}
	remove = func() {
		if err := deleteImposter(admins[sys], port); err != nil {
			b.log.Warn("could not delete a case's imposter", "case", c.id, "system", sys, "err", err)
		}
	}
	cl.target = fmt.Sprintf("http://127.0.0.1:%d", port)
	switch {
	case c.tcp != nil:
		cl.target = fmt.Sprintf("tcp://127.0.0.1:%d", port)
		err = probeTCP(cl.target, c.tcp)
	case c.ws != nil:
		cl.target = fmt.Sprintf("ws://127.0.0.1:%d", port)
		err = probeWS(cl.target, c.ws)
	case c.grpc != nil:
		cl.target = fmt.Sprintf("grpc://127.0.0.1:%d", port)
		err = probeGRPC(context.Background(), cl.target, c.grpc, c.grpcWant)
	case c.h2:
		err = probeH2(cl.target, c.probe[0])
	default:
		err = probe(cl.target, c.probe, true)
	}
	if err != nil {
		cl.note = "failed: " + err.Error()
	}
	return remove
}

// groups splits a round's systems, in order, into what is measured
// together. In the closed loop, every system takes turns in short slices
// (ABC CBA ...), so that the machine's drift, which on this shared host
// swings a back-to-back pair by 20%, falls on all alike. An open-loop case
// runs each system at its own rate, one after another.
func (b *bench) groups(c benchCase, order []string) [][]string {
	if c.halfOf == "" && !c.long && b.cfg.slices > 1 {
		return [][]string{order}
	}
	var gs [][]string
	for _, sys := range order {
		gs = append(gs, []string{sys})
	}
	return gs
}

// measure loads each system of group and records what it measured: one
// run for a system alone, or b.cfg.slices alternating slices, merged, for
// systems measured together.
func (b *bench) measure(ctx context.Context, c benchCase, group []string, cells map[string]*cell, round int) {
	opts := map[string]*Options{}
	var live []string
	for _, sys := range group {
		if o := b.options(c, sys, cells[sys], round); o != nil {
			opts[sys] = o
			live = append(live, sys)
		}
	}
	n := 1
	if len(live) > 1 {
		n = b.cfg.slices
	}
	parts := map[string][]*Result{}
	cpu := map[string]time.Duration{}
	cpuOK := map[string]bool{}
	winCPU := map[string]windowCPU{}
	for _, sys := range live {
		cpuOK[sys] = true
	}
	for k := range n {
		seq := slices.Clone(live)
		if k%2 == 1 {
			slices.Reverse(seq)
		}
		for _, sys := range seq {
			o := *opts[sys]
			o.Duration /= time.Duration(n)
			if k > 0 {
				o.Warmup = 0
			}
			cpu0, ok0 := b.serverCPU(sys)
			profiled := b.profile(ctx, sys, o.Warmup+o.Duration, fmt.Sprintf("%s-r%d-s%d", c.id, round, k))
			var windows func() windowCPU
			if c.long && n == 1 {
				windows = sampleWindows(func() (time.Duration, bool) { return b.serverCPU(sys) }, o.Warmup, o.Duration, b.cfg.recordWindow)
			}
			res, err := Run(ctx, o)
			profiled()
			if windows != nil {
				winCPU[sys] = windows()
			}
			if err != nil {
				cells[sys].errNote = "failed: " + err.Error()
				return
			}
			cpu1, ok1 := b.serverCPU(sys)
			cpu[sys] += cpu1 - cpu0
			cpuOK[sys] = cpuOK[sys] && ok0 && ok1
			parts[sys] = append(parts[sys], res)
		}
	}
	for _, sys := range live {
		res := parts[sys][0]
		if len(parts[sys]) > 1 {
			res = mergeResults(parts[sys]) // without the timeline
		}
		perReq := 0.0
		if sent := res.Requests + res.WarmupRequests; cpuOK[sys] && sent > 0 {
			perReq = float64(cpu[sys].Microseconds()) / float64(sent)
		}
		b.record(c, sys, cells[sys], round, opts[sys].Rate, res, perReq)
		if w := winCPU[sys]; w.ok {
			m := &cells[sys].runs[len(cells[sys].runs)-1]
			m.firstCPU, m.lastCPU = perRequest(w.first, m.first, b.cfg.recordWindow), perRequest(w.last, m.last, b.cfg.recordWindow)
		}
	}
}

// windowCPU is the server's CPU time in a run's first and last window; ok
// false when it is not known.
type windowCPU struct {
	first, last time.Duration
	ok          bool
}

// perRequest is cpu spent over a window of w at rps, in µs a request.
func perRequest(cpu time.Duration, rps float64, w time.Duration) float64 {
	if rps <= 0 {
		return 0
	}
	return float64(cpu.Microseconds()) / (rps * w.Seconds())
}

// sampleWindows reads cpu at the edges of the first and last window of a
// run that starts now, warms up for warmup and is measured for d; the
// returned func waits for the last reading (taken at once if the run ended
// first) and gives the two windows' CPU times, not ok when a reading failed
// or was missed.
func sampleWindows(cpu func() (time.Duration, bool), warmup, d, window time.Duration) func() windowCPU {
	start := time.Now()
	edges := []time.Duration{warmup, warmup + window, warmup + d - window, warmup + d}
	readings := make([]time.Duration, len(edges))
	stop := make(chan struct{})
	done := make(chan bool, 1)
	go func() {
		ok := true
		for i, at := range edges {
			t := time.NewTimer(time.Until(start.Add(at)))
			select {
			case <-t.C:
			case <-stop:
				t.Stop()
				// The run ended: a last edge still due is read now, as
				// the end of the run; an earlier one is missing.
				if i < len(edges)-1 {
					done <- false
					return
				}
			}
			v, good := cpu()
			ok = ok && good
			readings[i] = v
		}
		done <- ok
	}()
	return func() windowCPU {
		close(stop)
		if !<-done {
			return windowCPU{}
		}
		return windowCPU{first: readings[1] - readings[0], last: readings[3] - readings[2], ok: true}
	}
}

// profile starts CPU profiles, for d, of sys's processes when -profile-dir
// asks for them; the returned func waits for them and writes them there as
// name-<system>-<node>.pprof. A profile that fails is logged and left out:
// the measurement does not depend on it. A server that does not answer is
// given up on 10 s after its profile should have ended.
func (b *bench) profile(ctx context.Context, sys string, d time.Duration, name string) (wait func()) {
	admins := b.profiled[sys]
	if b.cfg.profileDir == "" || len(admins) == 0 {
		return func() {}
	}
	secs := max(1, int((d+time.Second-1)/time.Second))
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+10*time.Second)
	slug := strings.NewReplacer(", ", "-", " ", "").Replace(sys) // "riftgate-3nodes"
	var wg sync.WaitGroup
	for i, admin := range admins {
		file := filepath.Join(b.cfg.profileDir, fmt.Sprintf("%s-%s-%d.pprof", name, slug, i+1))
		wg.Go(func() {
			if err := fetchProfile(ctx, admin, secs, file); err != nil {
				b.log.Warn("profile not taken", "system", sys, "err", err)
			}
		})
	}
	return func() { wg.Wait(); cancel() }
}

func fetchProfile(ctx context.Context, admin string, secs int, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", admin, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", admin, resp.Status, oneLine(string(body)))
	}
	return os.WriteFile(file, body, 0o644)
}

// serverCPU is the CPU time sys's server processes have used so far.
func (b *bench) serverCPU(sys string) (time.Duration, bool) {
	procs := b.servers[sys]
	if procs == nil {
		return 0, false
	}
	var sum time.Duration
	for _, p := range procs() {
		d, ok := p.cpuTime()
		if !ok {
			return 0, false
		}
		sum += d
	}
	return sum, true
}

// options is the load for one measurement of (c, sys), or nil when there
// is nothing to measure.
func (b *bench) options(c benchCase, sys string, cl *cell, round int) *Options {
	if cl == nil || cl.target == "" || cl.note != "" {
		return nil
	}
	targets := cl.targets
	if targets == nil {
		targets = []string{cl.target}
	}
	o := &Options{
		Targets: targets, Connections: b.cfg.conns,
		Duration: b.cfg.duration, Warmup: b.cfg.warmup, Scenario: c.scenario, TCP: c.tcp, WS: c.ws, HTTP2: c.h2, GRPC: c.grpc,
		// mb answers some cases in seconds on a busy machine: slow is a
		// number to report, not an error.
		Timeout: benchTimeout,
	}
	if c.long {
		o.Duration = b.cfg.recordDuration
		// The windows are whole intervals of the timeline.
		o.Interval = min(time.Second, b.cfg.recordWindow/5)
	}
	if c.halfOf != "" {
		peak := b.cells[c.halfOf][sys]
		if peak == nil || len(peak.runs) == 0 || peak.runs[len(peak.runs)-1].round != round {
			return nil
		}
		o.Rate = peak.runs[len(peak.runs)-1].rps / 2
		o.Scenario = b.caseByID(c.halfOf).scenario
		if o.Rate < 1 {
			return nil
		}
	}
	return o
}

func (b *bench) record(c benchCase, sys string, cl *cell, round int, rate float64, res *Result, cpu float64) {
	m := measurement{rps: res.Throughput, p50: res.Latency.P50, p99: res.Latency.P99,
		requests: res.Requests, errors: res.Errors, rate: rate, unsent: res.Unsent, round: round, cpu: cpu, recorded: -1}
	if c.long {
		m.first, m.last = windowRates(res.Timeline, b.cfg.recordWindow, res.DurationSeconds)
		b.log.Info("recording windows", "case", c.id, "system", sys, "first", int(m.first), "last", int(m.last))
	}
	cl.runs = append(cl.runs, m)
	b.log.Info("measured", "round", round+1, "case", c.id, "system", sys,
		"rps", int(m.rps), "p50ms", m.p50, "p99ms", m.p99, "errors", m.errors, "cpuUsPerReq", m.cpu)
	if res.Requests == 0 || float64(res.Errors) > maxErrorRate*float64(res.Requests) {
		ex := ""
		for k, v := range res.ErrorExamples {
			ex += " " + k + ": " + v
		}
		cl.errNote = fmt.Sprintf("failed in round %d: %d of %d requests failed (%v)%s", round+1, res.Errors, res.Requests, res.ErrorKinds, ex)
	}
}

// windowRates are the rates in the first and last window of a timeline of
// a run of total seconds: the requests of the intervals ending within
// window of its start, and of those starting within window of its end,
// over the time they cover.
func windowRates(tl []TimePoint, window time.Duration, total float64) (first, last float64) {
	w := window.Seconds()
	var nf, nl int64
	var tf, tl0 float64
	prev := 0.0
	for _, p := range tl {
		if p.Second <= w+1e-6 {
			nf += p.Requests
			tf = p.Second
		}
		if prev >= total-w-1e-6 {
			nl += p.Requests
			tl0 += p.Second - prev
		}
		prev = p.Second
	}
	if tf > 0 {
		first = float64(nf) / tf
	}
	if tl0 > 0 {
		last = float64(nl) / tl0
	}
	return first, last
}

// countRecorded reads back how many stubs sys's imposter of case c holds
// after its measurement, into the round's run.
func (b *bench) countRecorded(c benchCase, sys string, cl *cell, admins map[string]string, round int) {
	if cl == nil || len(cl.runs) == 0 || cl.runs[len(cl.runs)-1].round != round || admins[sys] == "" {
		return
	}
	var port int
	if _, err := fmt.Sscanf(cl.target, "http://127.0.0.1:%d", &port); err != nil {
		return
	}
	start := time.Now()
	n, _, err := readStubs(context.Background(), admins[sys], port, "")
	if err != nil {
		b.log.Warn("could not count the recorded stubs", "case", c.id, "system", sys, "err", err)
		return
	}
	took := time.Since(start)
	b.log.Info("recorded", "case", c.id, "system", sys, "stubs", n, "read in", took.Round(time.Millisecond))
	cl.runs[len(cl.runs)-1].recorded, cl.runs[len(cl.runs)-1].readIn = n, took
}

// needed reports whether case id runs: it is wanted, or a wanted case
// derives its rate from it or compares with it.
func (b *bench) needed(id string) bool {
	if b.cfg.wanted(id) {
		return true
	}
	for _, c := range b.cases {
		if (c.halfOf == id || (c.staticTarget > 0 || c.vsStatic) && id == "static" || c.relTo == id) && b.cfg.wanted(c.id) {
			return true
		}
	}
	return false
}

func (b *bench) caseByID(id string) benchCase {
	for _, c := range b.cases {
		if c.id == id {
			return c
		}
	}
	return benchCase{}
}

var wrkRPS = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

// compareWrk measures the load generator against wrk on the raw server
// at base (http or https), with the same connection count and time, in
// alternating slices as riftgate and raw fasthttp are, which goes first
// alternating by round. Both rates are over the whole run, connecting (and
// handshaking) included: wrk counts its time from before it connects.
func (b *bench) compareWrk(ctx context.Context, base string) wrkSeries {
	ws := wrkSeries{scheme: base[:strings.Index(base, ":")]}
	n := b.cfg.slices
	slice := b.cfg.duration / time.Duration(n)
	runWrk := func() (float64, error) {
		// wrk takes whole seconds.
		secs := max(1, int(slice.Seconds()+0.5))
		out, err := exec.CommandContext(ctx, b.cfg.wrk, "-t1", "-c"+strconv.Itoa(b.cfg.conns),
			"-d"+strconv.Itoa(secs)+"s", base+"/hello").CombinedOutput()
		m := wrkRPS.FindSubmatch(out)
		if err != nil || m == nil {
			return 0, fmt.Errorf("wrk failed: %v: %s", err, oneLine(string(out)))
		}
		rps, _ := strconv.ParseFloat(string(m[1]), 64)
		return rps, nil
	}
	o := Options{Targets: []string{base}, Connections: b.cfg.conns, Duration: slice, Scenario: get("/hello"),
		// wrk does not verify certificates either.
		TLS: &tls.Config{InsecureSkipVerify: true}}
	runOwn := func() (float64, error) {
		start := time.Now()
		res, err := Run(ctx, o)
		if err != nil {
			return 0, fmt.Errorf("riftload failed: %w", err)
		}
		if res.Errors > 0 {
			return 0, fmt.Errorf("riftload: %d errors %v %v", res.Errors, res.ErrorKinds, res.ErrorExamples)
		}
		return float64(res.Requests) / time.Since(start).Seconds(), nil
	}
	for round := range b.cfg.rounds {
		var r wrkRound
		for k := range n {
			wrkFirst := (round+k)%2 == 0
			for _, isWrk := range []bool{wrkFirst, !wrkFirst} {
				run, sum := runOwn, &r.riftload
				if isWrk {
					run, sum = runWrk, &r.wrk
				}
				rps, err := run()
				if err != nil {
					b.log.Warn("wrk comparison stopped", "scheme", ws.scheme, "err", err)
					ws.note = err.Error()
					return ws
				}
				*sum += rps / float64(n)
			}
		}
		b.log.Info("wrk vs riftload", "scheme", ws.scheme, "round", round+1, "wrk", int(r.wrk), "riftload", int(r.riftload))
		ws.rounds = append(ws.rounds, r)
	}
	return ws
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (cl *cell) medians() (rps, p50, p99 float64) {
	var a, b, c []float64
	for _, m := range cl.runs {
		a, b, c = append(a, m.rps), append(b, m.p50), append(c, m.p99)
	}
	return median(a), median(b), median(c)
}

// cpu is the median of the rounds' server CPU per request, in µs, and
// "-" when a round could not read it.
func (cl *cell) cpu() string {
	var a []float64
	for _, m := range cl.runs {
		if m.cpu <= 0 {
			return "-"
		}
		a = append(a, m.cpu)
	}
	if len(a) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", median(a))
}

// ok reports whether the cell has numbers to show.
func (cl *cell) ok() bool { return cl != nil && len(cl.runs) > 0 && cl.note == "" && cl.errNote == "" }

func mark(pass bool) string {
	if pass {
		return "PASS"
	}
	return "**FAIL**"
}

func (b *bench) report() string {
	var w strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&w, format, a...) }
	p("# Benchmarks\n\n")
	p("Generated by `make bench` (`loadtest/bench/run.sh`, which runs `riftload bench`). Do not edit by hand: rerun it.\n\n")
	p("## Machine\n\n")
	p("- date: %s\n", b.start.Format("2006-01-02 15:04 UTC"))
	for _, l := range b.info {
		p("- %s\n", l)
	}
	p("- go: %s\n", runtime.Version())
	p("- **The machine is shared**: other engineers were compiling and testing on it during the run, so every number is noisy; compare the ratios (measured side by side, interleaved), not the absolute values, and rerun before drawing conclusions.\n\n")
	p("## Method\n\n")
	p("- Closed loop: %d connections, %v measured after a %v warm-up per measurement.\n", b.cfg.conns, b.cfg.duration, b.cfg.warmup)
	p("- %d rounds. In each round every case runs on every system, the order of the systems rotating each round (A/B/A/B). The tables give the median of the rounds; a ratio is the median of the per-round ratios, so that drift in the machine's load between rounds cancels.\n", b.cfg.rounds)
	if b.cfg.slices > 1 {
		p("- Within a round, a closed-loop case's systems take turns in %d slices of %v each (ABC CBA ...), each system's first slice after its warm-up, and each system's slices are summed: a drift in the machine's load falls on all alike. A slice counts the requests in flight at its end, so a slow system (mb answers some cases in over a second) is not cut short.\n", b.cfg.slices, b.cfg.duration/time.Duration(b.cfg.slices))
	}
	if b.cfg.serverCPU != "" {
		p("- Servers pinned to CPU %s with taskset; `run.sh` pins the load generator (and wrk) to the other core.\n", b.cfg.serverCPU)
	}
	p("- Every stub response on riftgate and mb sets `Connection: keep-alive` (mb closes connections by default). Unmatched requests get 404, and every case is probed for the right answer before it is measured: a system that answers wrongly is reported as failed, not measured.\n")
	p("- Each measurement posts a fresh copy of its case's imposter and deletes it afterwards, so no other case's imposters, flows or connections are alive beside it.\n")
	p("- Latencies are from the load generator: HDR histograms; in the open loop, from each request's intended send time (corrected for coordinated omission).\n\n")

	if len(b.wrk) > 0 {
		p("## The load generator against wrk\n\n")
		p("Raw fasthttp server, %d connections, %v each, in %d alternating slices per round, which goes first alternating by slice and round (wrk `-t1`, on the same core as riftload); a round's req/s is the mean over its slices. Both count their requests over their whole run, connecting included, as wrk does. Over https the raw server has a self-signed ECDSA P-256 certificate, which neither verifies (wrk cannot), and each connection makes one handshake: what is measured is TLS records on keep-alive connections.\n\n", b.cfg.conns, b.cfg.duration, b.cfg.slices)
		for _, ws := range b.wrk {
			p("### %s\n\n", ws.scheme)
			if len(ws.rounds) > 0 {
				p("| round | wrk req/s | riftload req/s | riftload/wrk |\n|---|---|---|---|\n")
			}
			var rs []float64
			for i, r := range ws.rounds {
				p("| %d | %.0f | %.0f | %.2f |\n", i+1, r.wrk, r.riftload, r.riftload/r.wrk)
				rs = append(rs, r.riftload/r.wrk)
			}
			if ws.note != "" {
				p("\nStopped after %d rounds: %s\n", len(ws.rounds), mdEscape(ws.note))
			}
			if len(rs) > 0 {
				ratio := median(rs)
				p("\nMedian of the per-round riftload/wrk ratios over %s: **%.2f** (target >= 0.90: %s)\n", ws.scheme, ratio, mark(ratio >= 0.9))
			}
			p("\n")
		}
	}

	p("## Throughput and latency (medians)\n\n")
	p("Server CPU is the user and system time of the system's server processes (`/proc/<pid>/stat`, the three nodes summed for the cluster) over the requests they were sent, warm-up included: what a request costs the servers' core, whatever the load generator or the machine's neighbours did to the throughput. A server that is not the bottleneck (raw fasthttp and the static stub, when the load generator is) spends it with idle time between requests, which makes each request dearer than at saturation.\n\n")
	p("| case | system | req/s | p50 ms | p99 ms | server CPU µs/req | rounds | note |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range b.cases {
		cells, ok := b.cells[c.id]
		if !ok || c.halfOf != "" {
			continue
		}
		for _, sys := range c.systems {
			cl := cells[sys]
			if len(cl.runs) > 0 {
				rps, p50, p99 := cl.medians()
				p("| %s | %s | %.0f | %.3f | %.3f | %s | %d | %s |\n", c.title, sys, rps, p50, p99, cl.cpu(), len(cl.runs), mdEscape(cl.errNote))
			} else {
				p("| %s | %s | - | - | - | - | %d | %s |\n", c.title, sys, len(cl.runs), mdEscape(noteOr(cl)))
			}
		}
	}

	p("\n## Ratios and targets\n\n")
	p("riftgate/static is riftgate's throughput on the case over its own on the static case in the same round.\n\n")
	p("| case | riftgate/raw | target | riftgate/mb | target | riftgate/static | target |\n|---|---|---|---|---|---|---|\n")
	for _, c := range b.cases {
		cells, ok := b.cells[c.id]
		if !ok || c.halfOf != "" || cells[sysRift] == nil {
			continue
		}
		static := "| "
		if c.staticTarget > 0 || c.vsStatic {
			static = b.ratioOf(cells[sysRift], b.cells["static"][sysRift], c.staticTarget)
		}
		p("| %s | %s | %s | %s |\n", c.title, b.ratio(cells, sysRaw, c.rawTarget), b.ratio(cells, sysMB, c.mbTarget), static)
	}
	if _, ok := b.cells["wasm-flowbench"]; ok {
		p("\nThe static case is the `is` stub answering what the Go plugin answers; plugins/README.md (\"Where a plugin request's time goes\") breaks the plugin's cost down.\n")
	}
	if _, ok := b.cells["inject"]; ok {
		p("\nThe inject and plugin cases give every virtual user a flow of its own (`X-Flow-Id`); mb, which ignores `_rift`, keeps one state per imposter. The inject counter is compared with riftgate's own static stub (riftgate/static) as well as with mb's inject; gateway/inject/README.md breaks its cost down.\n")
	}
	for _, id := range []string{"json-equals", "jsonpath", "xpath", "nested"} {
		if _, ok := b.cells[id]; ok {
			p("\nThe body predicate cases post a 120-byte JSON or XML body to ten stubs of which only the last matches. The JSON and XML stubs say nothing of the path, so every request is tried against all ten; the nested stubs' `or` names a path in each alternative, so riftgate's path index (an `or` is indexed under each alternative's path) tries only the tenth, as it would for any stubs told apart by path (mb tries all ten). `Serve/nested-unindexed` in the in-process table is the same case with an alternative on a header, which the index cannot use: its cost is that of evaluating all ten. `go test -bench TenStubs ./gateway/predicate/` and `go test -bench Serve ./gateway/` run the same cases in process.\n")
			break
		}
	}

	b.recordingReport(p)
	b.writePart(p, largePart)

	for _, c := range b.cases {
		cells, ok := b.cells[c.id]
		if !ok || c.halfOf == "" {
			continue
		}
		p("\n## p99 at 50%% of peak (open loop)\n\n")
		p("Each round, right after the static case, each system is driven at half the throughput it reached on it.\n\n")
		p("A high p50 here means the system (or the machine) could not keep up even half its peak at that moment: the open loop charges the queueing to every request; `unsent` counts requests that were due but found every connection busy until the end.\n\n")
		p("| system | rate req/s | p50 ms | p99 ms | unsent per round | target | note |\n|---|---|---|---|---|---|---|\n")
		for _, sys := range c.systems {
			cl := cells[sys]
			if len(cl.runs) == 0 {
				p("| %s | - | - | - | - | | %s |\n", sys, mdEscape(noteOr(cl)))
				continue
			}
			var rates []float64
			var unsent []string
			for _, m := range cl.runs {
				rates = append(rates, m.rate)
				unsent = append(unsent, strconv.FormatInt(m.unsent, 10))
			}
			_, p50, p99 := cl.medians()
			target := ""
			if sys == sysRift && c.p99Target > 0 {
				target = fmt.Sprintf("< %g ms: %s", c.p99Target, mark(p99 < c.p99Target && cl.ok()))
			}
			p("| %s | %.0f | %.3f | %.3f | %s | %s | %s |\n", sys, median(rates), p50, p99, strings.Join(unsent, ", "), target, mdEscape(cl.errNote))
		}
	}

	b.clusterReport(p)
	b.faultsReport(p)
	b.inProcess.report(p)
	b.writePart(p, soakPart)

	p("\n## Every round\n\n")
	p("| case | system | req/s per round |\n|---|---|---|\n")
	for _, c := range b.cases {
		cells, ok := b.cells[c.id]
		if !ok {
			continue
		}
		for _, sys := range c.systems {
			var xs []string
			for _, m := range cells[sys].runs {
				xs = append(xs, strconv.FormatFloat(m.rps, 'f', 0, 64))
			}
			if len(xs) > 0 {
				p("| %s | %s | %s |\n", c.id, sys, strings.Join(xs, ", "))
			}
		}
	}
	return w.String()
}

func noteOr(cl *cell) string {
	switch {
	case cl == nil:
		return "not run"
	case cl.note != "":
		return cl.note
	case cl.errNote != "":
		return cl.errNote
	default:
		return "no measurement"
	}
}

// ratio renders "x.xx | target" for riftgate against another system.
func (b *bench) ratio(cells map[string]*cell, other string, target float64) string {
	return b.ratioOf(cells[sysRift], cells[other], target)
}

// ratioOf renders "x.xx | target" for cell rg against cell ot.
func (b *bench) ratioOf(rg, ot *cell, target float64) string {
	t := ""
	if target > 0 {
		t = fmt.Sprintf(">= %gx", target)
	}
	if !rg.ok() || !ot.ok() {
		if target > 0 {
			t += ": n/a"
		}
		return "n/a | " + t
	}
	r := pairedRatio(rg.runs, ot.runs)
	if r == 0 {
		return "n/a | " + t
	}
	if target > 0 {
		t += ": " + mark(r >= target)
	}
	return fmt.Sprintf("%.2fx | %s", r, t)
}

// pairedRatio is the median over rounds of a/b, each round's two
// measurements taken back to back: on a shared machine whose load drifts
// from round to round, pairs cancel the drift that a ratio of medians keeps.
func pairedRatio(a, b []measurement) float64 {
	var rs []float64
	for _, x := range a {
		for _, y := range b {
			if x.round == y.round && y.rps > 0 {
				rs = append(rs, x.rps/y.rps)
			}
		}
	}
	return median(rs)
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(oneLine(s), "\n", " ")
}

// recordingReport is the section of the recording cases (issue 34): the
// rates at the start and end of each long run, what riftgate recorded, and
// the targets.
func (b *bench) recordingReport(p func(string, ...any)) {
	var cases []benchCase
	for _, c := range b.cases {
		if _, ok := b.cells[c.id]; ok && c.long {
			cases = append(cases, c)
		}
	}
	if len(cases) == 0 {
		return
	}
	win := b.cfg.recordWindow
	p("\n## Recording (issue 34)\n\n")
	p("Each system is loaded alone for %v (%d connections, after a %v warm-up) on an imposter posted for that run, so that what it records grows over the whole run; the rates of the first and last %v of the run are compared (flatness), and so is the server processes' CPU time a request in those two windows (read from the processes as the run goes: what a request cost the server then, whether or not it had its core to itself). The proxies' upstream is the raw fasthttp server; the raw fasthttp proxy (`riftload hello -proxy-port`) forwards to it on pooled keep-alive connections, in the raw server's process. Stubs at the end are read back with `GET /imposters/:id` after the run, and how long that GET took to answer and be read is given beside them; each request of `record-once-new` has a new path, so proxyOnce records one stub per request. mb keeps what it records in memory, and so does `riftgate` here (a process of its own, without `--datadir`, started afresh for each of these cases); `riftgate, --datadir` makes every recording durable (fsynced configuration log) and writes mb's layout beside it, as an mb started with `--datadir` would (one folder and files per recorded stub). After each case the bench waits (up to 3 minutes) until the servers use under 5%% of a core, so that what `--datadir` still writes or removes in the background does not weigh on the next case. The targets compare `riftgate` with mb.\n\n", b.cfg.recordDuration, b.cfg.conns, b.cfg.warmup, win)
	p("| case | system | req/s | first %v req/s | last %v req/s | last/first | CPU µs a request, first → last %v | stubs at the end | note |\n|---|---|---|---|---|---|---|---|---|\n", win, win, win)
	for _, c := range cases {
		for _, sys := range c.systems {
			cl := b.cells[c.id][sys]
			if len(cl.runs) == 0 {
				p("| %s | %s | - | - | - | - | - | - | %s |\n", c.title, sys, mdEscape(noteOr(cl)))
				continue
			}
			var fs, ls, rs, fc, lc []float64
			var rec []string
			for _, m := range cl.runs {
				fs, ls = append(fs, m.first), append(ls, m.last)
				if m.firstCPU > 0 && m.lastCPU > 0 {
					fc, lc = append(fc, m.firstCPU), append(lc, m.lastCPU)
				}
				if m.first > 0 {
					rs = append(rs, m.last/m.first)
				}
				if m.recorded >= 0 {
					rec = append(rec, fmt.Sprintf("%d (GET in %.2f s)", m.recorded, m.readIn.Seconds()))
				}
			}
			rps, _, _ := cl.medians()
			recS := strings.Join(rec, ", ")
			if recS == "" {
				recS = "-"
			}
			cpuS := "-"
			if len(fc) > 0 {
				cpuS = fmt.Sprintf("%.1f → %.1f", median(fc), median(lc))
			}
			p("| %s | %s | %.0f | %.0f | %.0f | %.2f | %s | %s | %s |\n", c.title, sys, rps, median(fs), median(ls), median(rs), cpuS, recS, mdEscape(cl.errNote))
		}
	}
	p("\n| case | riftgate last/first | target | riftgate/proxyTransparent | target | riftgate/mb | target | riftgate/raw fasthttp proxy | target | stubs recorded | target |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range cases {
		cells := b.cells[c.id]
		rg := cells[sysRift]
		flat := "n/a | "
		if rg.ok() {
			var rs []float64
			for _, m := range rg.runs {
				if m.first > 0 {
					rs = append(rs, m.last/m.first)
				}
			}
			if len(rs) > 0 {
				flat = fmt.Sprintf("%.2f | ", median(rs))
			}
		}
		if c.flatTarget > 0 {
			r := -1.0
			if f, _, ok := strings.Cut(flat, " "); ok && f != "n/a" {
				r, _ = strconv.ParseFloat(f, 64)
			}
			if r < 0 {
				flat += fmt.Sprintf(">= %g: n/a", c.flatTarget)
			} else {
				flat += fmt.Sprintf(">= %g: %s", c.flatTarget, mark(r >= c.flatTarget))
			}
		}
		rel := "| "
		if c.relTo != "" {
			rel = b.ratioOf(rg, b.cells[c.relTo][sysRift], c.relTarget)
		}
		rec := "- | "
		if c.recordedTarget > 0 {
			least := -1
			if rg.ok() {
				for _, m := range rg.runs {
					if least < 0 || m.recorded < least {
						least = m.recorded
					}
				}
			}
			if least < 0 {
				rec = fmt.Sprintf("n/a | >= %d: n/a", c.recordedTarget)
			} else {
				rec = fmt.Sprintf("%d | >= %d: %s", least, c.recordedTarget, mark(least >= c.recordedTarget))
			}
		}
		p("| %s | %s | %s | %s | %s | %s |\n", c.title, flat, rel, b.ratio(cells, sysMB, c.mbTarget), b.ratio(cells, sysRawProxy, c.proxyTarget), rec)
	}
	p("\nStubs recorded is the fewest over the rounds. 100,000 signatures in %v take %.0f req/s sustained, warm-up included.\n", b.cfg.recordDuration, 100_000/(b.cfg.recordDuration+b.cfg.warmup).Seconds())
}
