package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/riftgate/riftgate/internal/netfault"
)

// The cluster-faults case: three riftgate processes, each in a network
// namespace of its own (internal/netfault), under real network faults: a
// partition drops packets silently (no RST, no closed connection), a
// pause is SIGSTOP, a crash SIGKILL. Every flow is incremented through
// every node in a loop, and each fault is measured by what the (flow,
// node) pairs answered: how long after the fault ended every pair
// answered 200 again, and how long the flows the fault did not take down
// paused.

// faultResult is one fault's measurement.
type faultResult struct {
	fault  string
	length time.Duration
	// down are the flows that answered nowhere from 3 s into the fault to
	// its end (the faulted node's); pairs counts (flow, node) pairs.
	down, flows, pairs int
	// back is, over the pairs, how long after the fault ended each first
	// answered 200 (median and slowest); never counts those that did not
	// within faultRecoveryLimit.
	backMedian, backMax time.Duration
	never               int
	// pause is, over the pairs of the flows that stayed up through the
	// nodes not faulted, the longest time between two 200s from just
	// before the fault to 5 s after it ended (median pair and slowest).
	pauseMedian, pauseMax time.Duration
	// pauseAt is when the longest pause began, from the fault's start.
	pauseAt time.Duration
	note    string
}

const (
	faultNodes          = 3
	faultFlows          = 24
	faultRecoveryLimit  = 60 * time.Second
	faultRequestTimeout = 5 * time.Second
)

// faultCluster is the case's cluster.
type faultCluster struct {
	b       *bench
	net     *netfault.Net
	names   []string
	hosts   []string
	argv    [][]string
	procs   []*process
	admins  []string
	port    int
	hc      *http.Client
	imposts int // the counter imposter's port
}

// measureFaults runs the case; nil results and a note when it cannot run.
func (b *bench) measureFaults(ctx context.Context) ([]faultResult, string) {
	if err := netfault.Available(); err != nil {
		return nil, "not available: " + err.Error()
	}
	fc, err := b.startFaultCluster(ctx)
	if fc != nil {
		defer fc.close()
	}
	if err != nil {
		return nil, "not available: " + err.Error()
	}
	var out []faultResult
	leaderCut := func(d time.Duration) faultResult {
		l, err := fc.leader()
		if err != nil {
			return faultResult{fault: "leader cut off", length: d, note: err.Error()}
		}
		return fc.around(ctx, "leader cut off (silent partition)", d, l, false,
			func() error { return fc.net.Isolate(fc.names[l]) }, func() error { return fc.net.Heal() })
	}
	for _, d := range []time.Duration{10 * time.Second, 30 * time.Second, 60 * time.Second} {
		out = append(out, leaderCut(d))
	}
	const d = 10 * time.Second
	if f, err := fc.follower(); err != nil {
		out = append(out, faultResult{fault: "follower cut off", length: d, note: err.Error()})
	} else {
		out = append(out, fc.around(ctx, "follower cut off (silent partition)", d, f, false,
			func() error { return fc.net.Isolate(fc.names[f]) }, func() error { return fc.net.Heal() }))
	}
	if f, err := fc.follower(); err != nil {
		out = append(out, faultResult{fault: "owner paused", length: d, note: err.Error()})
	} else {
		p := fc.procs[f]
		out = append(out, fc.around(ctx, "owner paused (SIGSTOP, then SIGCONT)", d, f, true,
			func() error { return p.cmd.Process.Signal(syscall.SIGSTOP) }, func() error { return p.cmd.Process.Signal(syscall.SIGCONT) }))
	}
	if f, err := fc.follower(); err != nil {
		out = append(out, faultResult{fault: "owner killed", length: d, note: err.Error()})
	} else {
		out = append(out, fc.around(ctx, "owner killed (SIGKILL, restarted after the length)", d, f, true,
			func() error { fc.procs[f].end(syscall.SIGKILL); return nil }, func() error { return fc.start(ctx, f) }))
	}
	return out, ""
}

// startFaultCluster starts n1 with --cluster-bootstrap and the others
// with --cluster-join, each in its namespace and pinned to the servers'
// CPU, and posts the counter imposter.
func (b *bench) startFaultCluster(ctx context.Context) (*faultCluster, error) {
	nt, err := netfault.New()
	if err != nil {
		return nil, err
	}
	fc := &faultCluster{b: b, net: nt, port: 2525}
	tr := &http.Transport{DialContext: nt.DialContext, MaxIdleConnsPerHost: 64}
	fc.hc = &http.Client{Timeout: faultRequestTimeout, Transport: tr}
	secret := filepath.Join(b.dir, "faults-secret")
	if err := os.WriteFile(secret, []byte("riftload-bench-faults-secret"), 0o600); err != nil {
		return fc, err
	}
	const peerPort = 7070 // every namespace has all its ports free
	for i := range faultNodes {
		name := "n" + strconv.Itoa(i+1)
		host, err := nt.Add(name)
		if err != nil {
			return fc, err
		}
		wrap, err := nt.Wrap(name)
		if err != nil {
			return fc, err
		}
		argv := append(wrap, b.cfg.riftgate, "start", "--port", strconv.Itoa(fc.port), "--host", host,
			"--allowInjection", "--nologfile", "--loglevel", "warn", "--pidfile", filepath.Join(b.dir, "faults-"+name+".pid"),
			"--datadir", filepath.Join(b.dir, "faults-"+name),
			"--cluster-node-name", name, "--cluster-listen", net.JoinHostPort(host, strconv.Itoa(peerPort)),
			"--cluster-secret-file", secret)
		if i == 0 {
			argv = append(argv, "--cluster-bootstrap")
		} else {
			argv = append(argv, "--cluster-join", "http://"+net.JoinHostPort(fc.hosts[0], strconv.Itoa(peerPort)))
		}
		fc.names = append(fc.names, name)
		fc.hosts = append(fc.hosts, host)
		fc.argv = append(fc.argv, b.cfg.pinned(argv))
		fc.admins = append(fc.admins, "http://"+net.JoinHostPort(host, strconv.Itoa(fc.port)))
		fc.procs = append(fc.procs, nil)
		if err := fc.start(ctx, i); err != nil {
			return fc, err
		}
	}
	if err := fc.waitVoters(ctx, 60*time.Second); err != nil {
		return fc, err
	}
	fc.imposts = 4545
	imp := fmt.Sprintf(`{"protocol":"http","port":%d,"_rift":{"flowState":{"flowIdSource":"header:X-Flow-Id","durability":"sync"}},
		"stubs":[{"responses":[{"inject":"function (config) { config.state.count = (config.state.count || 0) + 1; return { statusCode: 200, body: String(config.state.count) }; }"}]}]}`, fc.imposts)
	resp, err := fc.hc.Post(fc.admins[0]+"/imposters", "application/json", strings.NewReader(imp))
	if err != nil {
		return fc, fmt.Errorf("POST /imposters: %w", err)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fc, fmt.Errorf("POST /imposters: %s: %s", resp.Status, oneLine(string(msg)))
	}
	// Every pair answers before the first fault.
	deadline := time.Now().Add(30 * time.Second)
	for i := range faultNodes {
		for f := range faultFlows {
			for {
				if ok, _ := fc.inc(i, f); ok {
					break
				}
				if time.Now().After(deadline) {
					return fc, fmt.Errorf("flow %d on %s never answered before any fault", f, fc.names[i])
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	return fc, nil
}

// start runs node i and waits for its admin API.
func (fc *faultCluster) start(ctx context.Context, i int) error {
	p, err := startProcess("faults-"+fc.names[i], fc.argv[i], fc.b.dir)
	if err != nil {
		return err
	}
	fc.procs[i] = p
	return p.waitReady(ctx, 60*time.Second, func() error {
		resp, err := fc.hc.Get(fc.admins[i] + "/imposters")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	})
}

func (fc *faultCluster) close() {
	var wg sync.WaitGroup
	for _, p := range fc.procs {
		if p != nil {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			wg.Go(func() { p.end(syscall.SIGKILL) })
		}
	}
	wg.Wait()
	if err := fc.net.Close(); err != nil {
		fc.b.log.Warn("removing the fault case's namespaces", "err", err)
	}
}

func (fc *faultCluster) status(i int) (clusterStatus, error) { return getStatus(fc.hc, fc.admins[i]) }

// waitVoters waits until every node sees every node a voter and one
// leader.
func (fc *faultCluster) waitVoters(ctx context.Context, timeout time.Duration) error {
	return waitAgreed(ctx, fc.hc, fc.admins, faultNodes, timeout)
}

func (fc *faultCluster) leader() (int, error) {
	if err := fc.waitVoters(context.Background(), 60*time.Second); err != nil {
		return 0, err
	}
	st, err := fc.status(0)
	if err != nil || st.Leader == nil {
		return 0, fmt.Errorf("no leader known: %v", err)
	}
	i := slices.Index(fc.names, *st.Leader)
	if i < 0 {
		return 0, fmt.Errorf("leader %q is not a bench node", *st.Leader)
	}
	return i, nil
}

func (fc *faultCluster) follower() (int, error) {
	l, err := fc.leader()
	if err != nil {
		return 0, err
	}
	return (l + 1) % faultNodes, nil
}

// inc increments flow f through node i: whether it answered 200, and
// what went wrong when it did not (the error, or the status and body).
func (fc *faultCluster) inc(i, f int) (bool, error) {
	req, _ := http.NewRequest(http.MethodPost, "http://"+net.JoinHostPort(fc.hosts[i], strconv.Itoa(fc.imposts))+"/inc", nil)
	req.Header.Set("X-Flow-Id", "fault-"+strconv.Itoa(f))
	resp, err := fc.hc.Do(req)
	if err != nil {
		return false, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("%d %s", resp.StatusCode, body)
	}
	return true, nil
}

// faultNumbers masks node ids, addresses and numbers in what a failed
// request said, so that alike failures count together.
var faultNumbers = regexp.MustCompile(`\b[0-9a-f]{16}\b|[0-9]+`)

// around loads every (flow, node) pair, starts the fault on node faulted,
// ends it after length, and measures. A node that is down (paused or
// killed) takes no requests from the fault's start until the fault ends;
// a node cut off takes them all (the load reaches it from the hub).
func (fc *faultCluster) around(ctx context.Context, name string, length time.Duration, faulted int, down bool, start, end func() error) faultResult {
	r := faultResult{fault: name, length: length, flows: faultFlows, pairs: faultNodes * faultFlows}
	t0 := time.Now()
	var mu sync.Mutex
	var faultAt, endAt time.Duration
	downNow := false
	oks := make([][]time.Duration, r.pairs) // answer times of each pair's 200s
	failed := map[string]int{}              // entry node and what it answered, masked: how often
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range faultNodes {
		for f := range faultFlows {
			wg.Go(func() {
				k := i*faultFlows + f
				for {
					select {
					case <-stop:
						return
					default:
					}
					mu.Lock()
					skip := down && downNow && i == faulted
					mu.Unlock()
					if skip {
						time.Sleep(20 * time.Millisecond)
						continue
					}
					ok, err := fc.inc(i, f)
					if ok {
						mu.Lock()
						oks[k] = append(oks[k], time.Since(t0))
						mu.Unlock()
						time.Sleep(20 * time.Millisecond)
					} else {
						mu.Lock()
						failed[fc.names[i]+": "+faultNumbers.ReplaceAllString(err.Error(), "#")]++
						mu.Unlock()
						time.Sleep(100 * time.Millisecond)
					}
				}
			})
		}
	}
	time.Sleep(2 * time.Second)
	mu.Lock()
	faultAt, downNow = time.Since(t0), true
	mu.Unlock()
	fc.b.log.Info("fault", "fault", name, "length", length)
	if err := start(); err != nil {
		r.note = "the fault could not be made: " + err.Error()
	}
	time.Sleep(length)
	mu.Lock()
	endAt = time.Since(t0)
	mu.Unlock()
	if err := end(); err != nil {
		r.note += " the fault could not be ended: " + err.Error()
	}
	mu.Lock()
	downNow = false
	mu.Unlock()
	// Until every pair has answered after the end, or the limit.
	deadline := time.Now().Add(faultRecoveryLimit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		mu.Lock()
		all := true
		for _, as := range oks {
			if len(as) == 0 || as[len(as)-1] < endAt {
				all = false
				break
			}
		}
		mu.Unlock()
		if all {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(5 * time.Second) // the pause window's end
	close(stop)
	wg.Wait()
	if err := fc.waitVoters(ctx, 60*time.Second); err != nil {
		r.note += " " + err.Error()
	}

	var backs, pauses []time.Duration
	longest := ""
	downFlow := make([]bool, faultFlows)
	for f := range faultFlows {
		downFlow[f] = true
		for i := range faultNodes {
			for _, a := range oks[i*faultFlows+f] {
				if a >= faultAt+3*time.Second && a < endAt {
					downFlow[f] = false
				}
			}
		}
		if downFlow[f] {
			r.down++
		}
	}
	for i := range faultNodes {
		for f := range faultFlows {
			as := oks[i*faultFlows+f]
			j := slices.IndexFunc(as, func(a time.Duration) bool { return a >= endAt })
			if j < 0 {
				r.never++
			} else {
				backs = append(backs, as[j]-endAt)
			}
			if !downFlow[f] && i != faulted {
				g, at := gapAt(as, faultAt-500*time.Millisecond, endAt+5*time.Second)
				pauses = append(pauses, g)
				if g > r.pauseMax {
					r.pauseMax, r.pauseAt = g, at-faultAt
					longest = fmt.Sprintf("flow %d through %s", f, fc.names[i])
				}
			}
		}
	}
	slices.Sort(backs)
	slices.Sort(pauses)
	if len(backs) > 0 {
		r.backMedian, r.backMax = backs[len(backs)/2], backs[len(backs)-1]
	}
	if len(pauses) > 0 {
		r.pauseMedian = pauses[len(pauses)/2]
	}
	fc.b.log.Info("measured", "fault", name, "length", length, "faulted", fc.names[faulted], "down", r.down, "backMedian", r.backMedian, "backMax", r.backMax, "never", r.never, "pauseMax", r.pauseMax, "pauseAt", r.pauseAt, "longest", longest, "note", r.note)
	type count struct {
		what string
		n    int
	}
	var fs []count
	for w, n := range failed {
		fs = append(fs, count{w, n})
	}
	slices.SortFunc(fs, func(a, b count) int { return b.n - a.n })
	for _, c := range fs[:min(len(fs), 12)] {
		fc.b.log.Info("failed requests", "fault", name, "length", length, "count", c.n, "what", c.what)
	}
	return r
}

// gapAt is the longest time between two answers (as, sorted) that
// overlaps the window from..to, and when it began.
func gapAt(as []time.Duration, from, to time.Duration) (g, at time.Duration) {
	for i := 1; i < len(as); i++ {
		if as[i] > from && as[i-1] < to && as[i]-as[i-1] > g {
			g, at = as[i]-as[i-1], as[i-1]
		}
	}
	return g, at
}

// faultsReport writes the case's section of the report.
func (b *bench) faultsReport(p func(string, ...any)) {
	if len(b.faults) == 0 && b.faultsNote == "" {
		return
	}
	p("\n## Cluster under real network faults\n\n")
	if b.faultsNote != "" {
		p("%s\n", mdEscape(b.faultsNote))
		return
	}
	p("Three riftgate processes, each in a network namespace of its own with a veth into a bridge, pinned to the servers' CPU (`internal/netfault`, as `make test`'s fault tests run them). A partition drops the peers' packets silently (policy-routing blackhole rules: no RST, no closed connection, as on a real network); a pause is SIGSTOP then SIGCONT; a crash is SIGKILL, the node started again after the fault's length. %d flows of an inject counter (`sync`, one flow per `X-Flow-Id`) are each incremented through each of the three nodes in a loop (%d (flow, node) pairs; a request times out after %v). *Back after the fault* is, over the pairs, how long after the fault ended (the heal, SIGCONT, or the restart begun) each first answered 200 again: the issue's promise is within 5 s whatever the fault's length. *Flows down* are those that answered on no node from 3 s into the fault until its end (the faulted node's); *other flows' pause* is, over the pairs of the flows that stayed up, the longest time between two 200s from 0.5 s before the fault to 5 s after its end, through the nodes that were not faulted (through a node cut off no flow can answer), and when the longest began, from the fault's start.\n\n",
		faultFlows, faultNodes*faultFlows, faultRequestTimeout)
	p("| fault | length | flows down | back after the fault: median, slowest pair | pairs not back in %v | other flows' pause: median, longest (from) | note |\n|---|---|---|---|---|---|---|\n", faultRecoveryLimit)
	for _, r := range b.faults {
		p("| %s | %v | %d of %d | %.1f s, %.1f s | %d | %.2f s, %.2f s (%+.1f s) | %s |\n", r.fault, r.length, r.down, r.flows,
			r.backMedian.Seconds(), r.backMax.Seconds(), r.never, r.pauseMedian.Seconds(), r.pauseMax.Seconds(), r.pauseAt.Seconds(), mdEscape(strings.TrimSpace(r.note)))
	}
}
