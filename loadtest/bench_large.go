package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The large recording (`-only record-large`, `-large N`): what a user
// does with a recording once it is big (issue 34's "large recordings
// stay usable"). riftgate on --datadir records N stubs with the
// record-once-new case's proxyOnce imposter, then each operation a user
// runs on it is timed, with the server's peak RSS while it runs: reading
// it back, saving it, a stop and a start on the folder, and a replay.
// mb, in memory, is given the same recording (riftgate's save of it) and
// timed on the operations it has. Its section of the report sits between
// largePart's markers, so that a run of it alone replaces only it.

const largeID = "record-large"

// largeOpTimeout bounds each operation: a server that takes longer is
// reported as not done, not waited for.
const largeOpTimeout = 5 * time.Minute

// largeStep is one timed operation on the recording.
type largeStep struct {
	what string
	took time.Duration
	// peak and anon are the server's highest RSS while it ran, in all and
	// of anonymous memory (0: unknown).
	peak, anon int64
	stubs      int    // stubs the imposter held after it (-1: not read)
	want       int    // stubs it must hold (0: any)
	size       int64  // bytes it read or wrote (0: none)
	err        string // why it failed
}

type largeReport struct {
	start    time.Time
	n, conns int
	// recordRate is the recordings a second of the recording step.
	recordRate float64
	rift, mb   []largeStep
	mbNote     string // why mb was not measured
	note       string // why nothing was
}

// runLarge records b.cfg.large stubs into a riftgate of its own and times
// what is done with them, then does the same on an mb of its own.
func (b *bench) runLarge(ctx context.Context) *largeReport {
	rep := &largeReport{start: time.Now().UTC(), n: b.cfg.large, conns: b.cfg.conns}
	c := b.caseByID("record-once-new")
	data := filepath.Join(b.dir, "large-data")
	rg, admin, err := b.startAdmin(ctx, "riftgate-large", b.cfg.riftgate, 30*time.Second, "--datadir", data)
	if err != nil {
		rep.note = err.Error()
		return rep
	}
	defer func() { rg.stop() }()
	port, err := freePort()
	if err != nil {
		rep.note = err.Error()
		return rep
	}
	if err := postImposter(admin, c.imposter(port)); err != nil {
		rep.note = err.Error()
		return rep
	}
	target := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := probe(target, c.probe, true); err != nil {
		rep.note = "probe: " + err.Error()
		return rep
	}
	saved := filepath.Join(b.dir, "large-saved.json")
	// The server's pid, read by the RSS watcher as a start changes it.
	var pid atomic.Int64
	pid.Store(int64(rg.cmd.Process.Pid))
	t := &largeTimer{log: b.log, sys: "riftgate", pid: func() int { return int(pid.Load()) }}
	ops := largeOps{ctx: ctx, bin: b.cfg.riftgate, admin: admin, port: port}
	t.step(largeStep{what: fmt.Sprintf("record %d stubs (proxyOnce, a new path a request, %d connections)", rep.n, rep.conns)}, func(s *largeStep) error {
		res, err := Run(ctx, Options{Targets: []string{target}, Connections: b.cfg.conns, Requests: int64(rep.n),
			Scenario: c.scenario, Timeout: benchTimeout})
		if err != nil {
			return err
		}
		if res.Errors > 0 {
			return fmt.Errorf("%d of %d requests failed", res.Errors, res.Requests)
		}
		rep.recordRate = res.Throughput
		return nil
	})
	quiet := func(*largeStep) error {
		b.quiesceProcs(ctx, []*process{rg})
		return nil
	}
	t.step(largeStep{what: "the folder written: until the server is quiet"}, quiet)
	// Every recording and the probe's, and the proxy stub.
	t.step(largeStep{what: "`GET /imposters/:id`", want: rep.n + 2}, ops.get(""))
	read := t.last().stubs
	t.step(largeStep{what: "`GET /imposters/:id?replayable=true&removeProxies=true`", want: read - 1}, ops.get(replayableQuery))
	replayable := t.last().stubs
	t.step(largeStep{what: "`save --removeProxies`"}, ops.save(saved))
	t.step(largeStep{what: "stop (SIGTERM) until the process exits"}, func(*largeStep) error {
		rg.stop()
		return nil
	})
	t.step(largeStep{what: "start on the folder until `GET /imposters/:id` has read every stub", want: read}, func(s *largeStep) error {
		var err error
		if rg, ops.admin, err = b.startAdmin(ctx, "riftgate-large", b.cfg.riftgate, largeOpTimeout, "--datadir", data); err != nil {
			return err
		}
		pid.Store(int64(rg.cmd.Process.Pid))
		return ops.get("")(s)
	})
	if t.last().err != "" {
		rep.rift = t.steps // no server to go on with
		return rep
	}
	t.step(largeStep{what: "`replay` (every proxy removed, the recording kept)", want: replayable}, ops.replay())
	t.step(largeStep{what: "the folder rewritten after the replay: until the server is quiet"}, quiet)
	rg.stop()
	rep.rift = t.steps
	rep.mb, rep.mbNote = b.largeOnMB(ctx, saved, port, replayable)
	return rep
}

// largeOnMB loads riftgate's save of the recording into an mb of its own
// (in memory, as the recording cases run it) and times the operations
// mb has on it, up to the first that fails.
func (b *bench) largeOnMB(ctx context.Context, saved string, port, stubs int) ([]largeStep, string) {
	body, err := os.ReadFile(saved)
	if err != nil {
		return nil, "no save to load: " + err.Error()
	}
	mb, admin, err := b.startAdmin(ctx, "mb-large", b.cfg.mb, 30*time.Second, "--localOnly")
	if err != nil {
		return nil, err.Error()
	}
	defer mb.stop()
	t := &largeTimer{log: b.log, sys: "mb", pid: func() int { return mb.cmd.Process.Pid }, stopOnFail: true}
	ops := largeOps{ctx: ctx, bin: b.cfg.mb, admin: admin, port: port}
	t.step(largeStep{what: "`PUT /imposters` with the save", size: int64(len(body))}, func(*largeStep) error {
		return putImposters(ctx, admin, body)
	})
	t.step(largeStep{what: "`GET /imposters/:id`", want: stubs}, ops.get(""))
	t.step(largeStep{what: "`GET /imposters/:id?replayable=true&removeProxies=true`", want: stubs}, ops.get(replayableQuery))
	t.step(largeStep{what: "`save --removeProxies`"}, ops.save(filepath.Join(b.dir, "large-mb-saved.json")))
	t.step(largeStep{what: "`replay` (every proxy removed, the recording kept)", want: stubs}, ops.replay())
	return t.steps, ""
}

// largeTimer times one system's steps, each with the server's peak RSS.
type largeTimer struct {
	log *slog.Logger
	sys string
	// pid is the server's process, read as the step runs (a step may
	// start it anew).
	pid func() int
	// stopOnFail: after a step fails, the others are not run.
	stopOnFail, failed bool
	steps              []largeStep
}

func (t *largeTimer) step(s largeStep, run func(*largeStep) error) {
	if t.failed && t.stopOnFail {
		return
	}
	s.stubs = -1
	start := time.Now()
	s.peak, s.anon = watchRSS(t.pid, func() {
		if err := run(&s); err != nil {
			s.err = err.Error()
		}
	})
	s.took = time.Since(start)
	t.failed = t.failed || s.err != ""
	t.log.Info("large recording", "system", t.sys, "step", s.what, "took", s.took.Round(time.Millisecond), "stubs", s.stubs, "err", s.err)
	t.steps = append(t.steps, s)
}

// last is the step timed last.
func (t *largeTimer) last() largeStep { return t.steps[len(t.steps)-1] }

const replayableQuery = "?replayable=true&removeProxies=true"

// largeOps are the operations both systems are timed on, through one
// admin API and one binary's command line.
type largeOps struct {
	ctx        context.Context
	bin, admin string
	port       int
}

// get reads the imposter, query appended, and counts its stubs.
func (o *largeOps) get(query string) func(*largeStep) error {
	return func(s *largeStep) (err error) {
		s.stubs, s.size, err = readStubs(o.ctx, o.admin, o.port, query)
		return err
	}
}

// save runs `save --removeProxies` into file, and notes its size.
func (o *largeOps) save(file string) func(*largeStep) error {
	return func(s *largeStep) error {
		if err := cli(o.ctx, o.bin, "save", "--port", portOf(o.admin), "--host", "127.0.0.1", "--savefile", file, "--removeProxies"); err != nil {
			return err
		}
		fi, err := os.Stat(file)
		if err != nil {
			return err
		}
		s.size = fi.Size()
		return nil
	}
}

// replay runs `replay`, then reads the imposter back.
func (o *largeOps) replay() func(*largeStep) error {
	return func(s *largeStep) error {
		if err := cli(o.ctx, o.bin, "replay", "--port", portOf(o.admin), "--host", "127.0.0.1"); err != nil {
			return err
		}
		return o.get("")(s)
	}
}

// readStubs reads GET /imposters/:port+query as a client would, and
// counts the stubs in it.
func readStubs(ctx context.Context, admin string, port int, query string) (stubs int, size int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, largeOpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/imposters/%d%s", admin, port, query), nil)
	if err != nil {
		return -1, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1, 0, fmt.Errorf("GET /imposters/%d: %w", port, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1, 0, fmt.Errorf("GET /imposters/%d: %s", port, resp.Status)
	}
	cr := &countingReader{r: resp.Body}
	var imp struct {
		Stubs []struct{} `json:"stubs"`
	}
	if err := json.NewDecoder(bufio.NewReaderSize(cr, 1<<16)).Decode(&imp); err != nil {
		return -1, cr.n, fmt.Errorf("GET /imposters/%d: %w", port, err)
	}
	_, _ = io.Copy(io.Discard, cr)
	return len(imp.Stubs), cr.n, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// putImposters replaces every imposter with those of a saved file.
func putImposters(ctx context.Context, admin string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, largeOpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, admin+"/imposters", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("PUT /imposters: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT /imposters: %s: %s", resp.Status, msg)
	}
	return nil
}

// cli runs one of bin's commands, bounded by largeOpTimeout.
func cli(ctx context.Context, bin string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, largeOpTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), args[0], err, strings.TrimSpace(lastLine(string(out))))
	}
	return nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// portOf is the port of an http://host:port admin URL.
func portOf(admin string) string { return admin[strings.LastIndexByte(admin, ':')+1:] }

// watchRSS runs run while it reads pid's RSS every 20 ms, and returns the
// highest it read, in all and of anonymous memory (the heap, where the
// rest is mapped files: the configuration log's pages, the binary).
func watchRSS(pid func() int, run func()) (rss, anon int64) {
	read := func() {
		m := readStatus(pid(), "VmRSS:", "RssAnon:")
		rss, anon = max(rss, m[0]), max(anon, m[1])
	}
	read()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	})
	run()
	close(done)
	wg.Wait()
	read()
	return rss, anon
}

// section renders the large recording's section of the report.
func (r *largeReport) section(serverCPU string) string {
	var w strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&w, format, a...) }
	p("%s\n## A large recording, used (issue 34)\n\n", largePart.begin)
	p("Run %s. riftgate on `--datadir` (pinned to CPU %s when pinned; the load generator on the other core) records %d stubs with the `record-once-new` case's imposter (`proxyOnce` from the raw server, a new path a request, %d connections); then each operation a user runs on the recording is timed, with the server's highest RSS while it runs (`/proc/<pid>/status`, every 20 ms), in all and of anonymous memory (the heap; the rest is mapped files, such as the configuration log's pages). mb 2.9.1 (in memory, as in the recording cases; a recording of this size takes it hours to make) is given riftgate's save of the same recording and timed on the operations it has. Every operation is bounded at %v.\n\n",
		r.start.Format("2006-01-02 15:04 UTC"), orNone(serverCPU), r.n, r.conns, largeOpTimeout)
	p("Run it alone with `make build && go build -o bin/riftload ./cmd/riftload && taskset -c 1 bin/riftload bench -only '^%s$' -large %d -out FILE`, FILE being this report (it replaces only this section).\n\n", largeID, r.n)
	if r.note != "" {
		p("**Not measured**: %s\n%s\n", mdEscape(r.note), largePart.end)
		return w.String()
	}
	row := func(sys string, s largeStep) {
		stubs, size := "-", "-"
		if s.stubs >= 0 {
			stubs = strconv.Itoa(s.stubs)
		}
		if s.size > 0 {
			size = fmt.Sprintf("%.1f", mb(s.size))
		}
		result := "ok"
		switch {
		case s.err != "":
			result = "**failed**: " + mdEscape(s.err)
		case s.want != 0 && s.stubs != s.want:
			result = fmt.Sprintf("**failed**: %d stubs, want %d", s.stubs, s.want)
		}
		p("| %s | %s | %.2f | %.0f (%.0f) | %s | %s | %s |\n", sys, s.what, s.took.Seconds(), mb(s.peak), mb(s.anon), stubs, size, result)
	}
	p("| system | operation | seconds | peak RSS MB (anonymous) | stubs after | MB read or written | result |\n|---|---|---|---|---|---|---|\n")
	for _, s := range r.rift {
		row("riftgate, --datadir", s)
	}
	for _, s := range r.mb {
		row("mb 2.9.1", s)
	}
	p("\n- riftgate recorded at %.0f req/s.\n", r.recordRate)
	if r.mbNote != "" {
		p("- mb not measured: %s\n", mdEscape(r.mbNote))
	}
	kept := len(r.rift) > 0
	for _, s := range r.rift {
		kept = kept && s.err == "" && (s.want == 0 || s.stubs == s.want)
	}
	p("- Every operation of riftgate's succeeded, and every read found every stub (the %d recorded, the probe's and the proxy stub; the proxy stub is left out where proxies are removed): %s.\n%s\n", r.n, mark(kept), largePart.end)
	return w.String()
}
