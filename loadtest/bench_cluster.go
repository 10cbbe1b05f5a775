package loadtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// sysCluster is riftgate as a cluster of three processes on 127.0.0.1-3,
// started with the cluster flags a user gives, pinned like every server to
// the servers' CPU, and loaded over all three nodes in turn, so that two
// of every three flow operations have their owner on another node.
const sysCluster = "riftgate, 3 nodes"

// clusterNodes are the bench's cluster.
type clusterNodes struct {
	b      *bench
	procs  []*process
	argv   [][]string
	hosts  []string
	admins []string
	port   int // the admin port every node binds on its own host
}

const clusterSize = 3

// startCluster starts n1 with --cluster-bootstrap and the others with
// --cluster-join, and returns once every node sees three voters.
func (b *bench) startCluster(ctx context.Context) (*clusterNodes, error) {
	if _, err := os.Stat(b.cfg.riftgate); err != nil {
		return nil, err
	}
	c := &clusterNodes{b: b}
	for i := range clusterSize {
		c.hosts = append(c.hosts, "127.0.0."+strconv.Itoa(i+1))
	}
	adminPort, err := freePortOn(c.hosts)
	if err != nil {
		return nil, err
	}
	peerPort, err := freePortOn(c.hosts)
	if err != nil {
		return nil, err
	}
	c.port = adminPort
	secret := filepath.Join(b.dir, "cluster-secret")
	if err := os.WriteFile(secret, []byte("riftload-bench-cluster-secret"), 0o600); err != nil {
		return nil, err
	}
	for i, host := range c.hosts {
		name := "n" + strconv.Itoa(i+1)
		argv := []string{b.cfg.riftgate, "start", "--port", strconv.Itoa(adminPort), "--host", host,
			"--allowInjection", "--nologfile", "--pidfile", filepath.Join(b.dir, name+".pid"),
			"--datadir", filepath.Join(b.dir, "cluster-"+name),
			"--cluster-node-name", name, "--cluster-listen", net.JoinHostPort(host, strconv.Itoa(peerPort)),
			"--cluster-secret-file", secret}
		if b.cfg.profileDir != "" {
			argv = append(argv, "--pprof")
		}
		if i == 0 {
			argv = append(argv, "--cluster-bootstrap")
		} else {
			argv = append(argv, "--cluster-join", "http://"+net.JoinHostPort(c.hosts[0], strconv.Itoa(peerPort)))
		}
		c.argv = append(c.argv, b.cfg.pinned(argv))
		c.admins = append(c.admins, "http://"+net.JoinHostPort(host, strconv.Itoa(adminPort)))
		c.procs = append(c.procs, nil)
		if err := c.start(ctx, i); err != nil {
			c.stop()
			return nil, err
		}
	}
	if err := c.waitVoters(ctx, clusterSize, 60*time.Second); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// start runs node i with its command line and waits for its admin API.
func (c *clusterNodes) start(ctx context.Context, i int) error {
	p, err := startProcess("cluster-n"+strconv.Itoa(i+1), c.argv[i], c.b.dir)
	if err != nil {
		return err
	}
	c.procs[i] = p
	return p.waitReady(ctx, 60*time.Second, getOK(c.admins[i]+"/imposters"))
}

func (c *clusterNodes) stop() {
	var wg sync.WaitGroup
	for _, p := range c.procs {
		wg.Go(func() { p.stop() })
	}
	wg.Wait()
}

// clusterStatus is the part of GET /cluster the bench reads.
type clusterStatus struct {
	Self    string  `json:"self"`
	Leader  *string `json:"leader"`
	Members []struct {
		Name string `json:"name"`
		Role string `json:"role"`
	} `json:"members"`
}

func (c *clusterNodes) status(i int) (clusterStatus, error) { return getStatus(httpc, c.admins[i]) }

// waitVoters waits until every running node sees voters voters and one
// leader.
func (c *clusterNodes) waitVoters(ctx context.Context, voters int, timeout time.Duration) error {
	return waitAgreed(ctx, httpc, c.admins, voters, timeout)
}

// getStatus is GET /cluster of the node whose admin API is at admin.
func getStatus(hc *http.Client, admin string) (clusterStatus, error) {
	var st clusterStatus
	resp, err := hc.Get(admin + "/cluster")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /cluster: %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// waitAgreed waits until every node at admins sees voters voters and the
// same leader.
func waitAgreed(ctx context.Context, hc *http.Client, admins []string, voters int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if last = agreed(hc, admins, voters); last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("cluster: %d voters and one leader not seen: %w", voters, last)
}

// agreed says why the nodes at admins do not yet all see voters voters
// and the same leader (nil once they do).
func agreed(hc *http.Client, admins []string, voters int) error {
	leader := ""
	for _, admin := range admins {
		st, err := getStatus(hc, admin)
		if err != nil {
			return err
		}
		n := 0
		for _, m := range st.Members {
			if m.Role == "voter" {
				n++
			}
		}
		switch {
		case st.Leader == nil:
			return fmt.Errorf("%s sees no leader", st.Self)
		case n != voters:
			return fmt.Errorf("%s sees %d voters", st.Self, n)
		case leader != "" && *st.Leader != leader:
			return errors.New("the nodes disagree on the leader")
		}
		leader = *st.Leader
	}
	return nil
}

// leader is the index of the node that leads.
func (c *clusterNodes) leader() (int, error) {
	st, err := c.status(0)
	if err != nil || st.Leader == nil {
		return 0, fmt.Errorf("no leader known: %v", err)
	}
	for i := range c.procs {
		if "n"+strconv.Itoa(i+1) == *st.Leader {
			return i, nil
		}
	}
	return 0, fmt.Errorf("leader %q is not a bench node", *st.Leader)
}

// freePortOn finds a port free on every host.
func freePortOn(hosts []string) (int, error) {
	for range 50 {
		port, err := freePort()
		if err != nil {
			return 0, err
		}
		ok := true
		for _, h := range hosts {
			ln, err := net.Listen("tcp", net.JoinHostPort(h, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			ln.Close()
		}
		if ok {
			return port, nil
		}
	}
	return 0, errors.New("no port free on every cluster host")
}

// deployCluster posts the case's imposter to n1, waits until every node
// serves it, and probes it with each step on the next node.
func (b *bench) deployCluster(c benchCase, cl *cell, cn *clusterNodes) (remove func()) {
	remove = func() {}
	port, err := freePortOn(cn.hosts)
	if err != nil {
		cl.note = "not available: " + err.Error()
		return remove
	}
	if err := postImposter(cn.admins[0], c.imposter(port)); err != nil {
		cl.note = "not available: " + err.Error()
		return remove
	}
	remove = func() {
		if err := deleteImposter(cn.admins[0], port); err != nil {
			b.log.Warn("could not delete a case's imposter", "case", c.id, "system", sysCluster, "err", err)
		}
	}
	cl.targets = nil
	for _, h := range cn.hosts {
		cl.targets = append(cl.targets, "http://"+net.JoinHostPort(h, strconv.Itoa(port)))
	}
	for _, t := range cl.targets {
		deadline := time.Now().Add(10 * time.Second)
		for dialCheck(strings.TrimPrefix(t, "http://"))() != nil {
			if time.Now().After(deadline) {
				cl.note = "failed: " + t + " never served the imposter"
				return remove
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := probeOn(cl.targets, c.probe); err != nil {
		cl.note = "failed: " + err.Error()
	}
	cl.target = cl.targets[0]
	return remove
}

// probeOn runs a probe with step i on targets[i % len(targets)].
func probeOn(targets []string, steps []probeStep) error {
	for i, s := range steps {
		if err := probe(targets[i%len(targets)], []probeStep{s}, true); err != nil {
			return fmt.Errorf("step %d on %s: %w", i, targets[i%len(targets)], err)
		}
	}
	return nil
}

// rpcQuantiles reads the owner RPC latency histogram from every node's
// GET /metrics and estimates quantiles as Prometheus's histogram_quantile
// does (linear within a bucket).
func (c *clusterNodes) rpcQuantiles(qs ...float64) ([]time.Duration, uint64, error) {
	buckets := map[float64]float64{}
	for i := range c.procs {
		resp, err := httpc.Get(c.admins[i] + "/metrics")
		if err != nil {
			return nil, 0, err
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			le, ok := strings.CutPrefix(line, `riftgate_cluster_owner_rpc_seconds_bucket{le="`)
			if !ok {
				continue
			}
			bound, rest, _ := strings.Cut(le, `"} `)
			n, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				continue
			}
			ub := math.Inf(1)
			if bound != "+Inf" {
				if ub, err = strconv.ParseFloat(bound, 64); err != nil {
					continue
				}
			}
			buckets[ub] += n
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if len(buckets) == 0 {
		return nil, 0, errors.New("no riftgate_cluster_owner_rpc_seconds in GET /metrics")
	}
	bounds := slices.Sorted(func(yield func(float64) bool) {
		for b := range buckets {
			if !yield(b) {
				return
			}
		}
	})
	total := buckets[bounds[len(bounds)-1]]
	out := make([]time.Duration, len(qs))
	for j, q := range qs {
		rank, lo, prev := q*total, 0.0, 0.0
		for _, ub := range bounds {
			if n := buckets[ub]; n >= rank {
				if math.IsInf(ub, 1) {
					out[j] = time.Duration(lo * 1e9)
				} else {
					out[j] = time.Duration((lo + (ub-lo)*(rank-prev)/math.Max(n-prev, 1)) * 1e9)
				}
				break
			} else {
				lo, prev = ub, n
			}
		}
	}
	return out, uint64(total), nil
}

// pause is how long owner operations stopped around an event, and in a
// window as long without one just before it (the control: on a loaded
// machine every process stalls now and then, event or not).
type pause struct {
	event               string
	max, median         time.Duration
	calmMax, calmMedian time.Duration
	flows, skipped      int
	note                string
}

// measurePauses measures how long flow operations pause while the leader
// hands over (SIGTERM: it transfers leadership, then exits, as in a
// rolling restart) and when it is killed (SIGKILL). Virtual users on the
// nodes that stay up log in and out of their own flows in a loop; a
// flow's pause is the longest gap between two of its answers around the
// event. Flows the stopped leader owned answer 503 until it returns and
// are left out (skipped): they are not paused, they are down.
func (b *bench) measurePauses(ctx context.Context, cn *clusterNodes, c benchCase) []pause {
	var out []pause
	for _, ev := range []struct {
		name string
		sig  syscall.Signal
	}{{"graceful leader handover (SIGTERM)", syscall.SIGTERM}, {"leader killed (SIGKILL)", syscall.SIGKILL}} {
		p := pause{event: ev.name}
		cl := &cell{}
		remove := b.deployCluster(c, cl, cn)
		l, err := cn.leader()
		switch {
		case cl.note != "":
			p.note = cl.note
		case err != nil:
			p.note = err.Error()
		default:
			var entries []string
			for i, t := range cl.targets {
				if i != l {
					entries = append(entries, t)
				}
			}
			p = b.pauseAround(ctx, entries, ev.name, func() { cn.procs[l].end(ev.sig) })
			if err := cn.start(ctx, l); err != nil {
				p.note += " (restart failed: " + err.Error() + ")"
			} else if err := cn.waitVoters(ctx, clusterSize, 60*time.Second); err != nil {
				p.note += " (" + err.Error() + ")"
			} else {
				// The others refuse calls to a member whose dial failed for
				// a moment (redialAfter, 250 ms), and it adopts its flows:
				// the next event's probe must not meet that.
				time.Sleep(time.Second)
			}
		}
		remove()
		b.log.Info("measured", "pause", ev.name, "max", p.max, "median", p.median, "controlMax", p.calmMax, "flows", p.flows, "skipped", p.skipped, "note", p.note)
		out = append(out, p)
	}
	return out
}

// Around an event, a flow's gaps are measured from pauseBefore before it
// to pauseAfter after it; the control window is as long and ends where
// that one starts.
const (
	pauseBefore = 500 * time.Millisecond
	pauseAfter  = 2 * time.Second
	pauseWarmup = 500 * time.Millisecond
)

// pauseAround runs login/logout loops on their own flows against entries,
// measures the gaps in a control window, then triggers event and
// measures them around it.
func (b *bench) pauseAround(ctx context.Context, entries []string, name string, event func()) pause {
	const users = 32
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: users}}
	defer hc.CloseIdleConnections()
	start := time.Now()
	var at time.Duration
	stop := make(chan struct{})
	answers := make([][]time.Duration, users)
	var wg sync.WaitGroup
	for u := range users {
		wg.Go(func() {
			flow := "pause-" + strconv.Itoa(u) + "-" + strconv.FormatInt(start.UnixNano(), 36)
			in := false
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				path := "/login"
				if in {
					path = "/logout"
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, entries[i%len(entries)]+path, nil)
				req.Header.Set("X-Flow-Id", flow)
				resp, err := hc.Do(req)
				if err != nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					in = !in
				case http.StatusNotFound: // the owner answered: the state was the other one
					in = !in
				default: // 503: not answered
					continue
				}
				answers[u] = append(answers[u], time.Since(start))
			}
		})
	}
	time.Sleep(pauseWarmup + (pauseBefore + pauseAfter) + pauseBefore) // warm-up, control window, then the event's
	at = time.Since(start)
	event()
	time.Sleep(pauseAfter + time.Second)
	close(stop)
	wg.Wait()
	p := pause{event: name}
	var gaps, calm []time.Duration
	for _, as := range answers {
		if len(as) == 0 || as[len(as)-1] < at+time.Second {
			p.skipped++ // its owner went down with the leader
			continue
		}
		gaps = append(gaps, longestGap(as, at-pauseBefore, at+pauseAfter))
		calm = append(calm, longestGap(as, at-pauseBefore-(pauseBefore+pauseAfter), at-pauseBefore))
	}
	p.flows = len(gaps)
	if len(gaps) == 0 {
		p.note = "no flow answered after the event"
		return p
	}
	slices.Sort(gaps)
	slices.Sort(calm)
	p.max, p.median = gaps[len(gaps)-1], gaps[len(gaps)/2]
	p.calmMax, p.calmMedian = calm[len(calm)-1], calm[len(calm)/2]
	return p
}

// longestGap is the longest time between two answers (as, sorted) that
// overlaps the window from..to.
func longestGap(as []time.Duration, from, to time.Duration) time.Duration {
	var g time.Duration
	for i := 1; i < len(as); i++ {
		if as[i] > from && as[i-1] < to {
			g = max(g, as[i]-as[i-1])
		}
	}
	return g
}

// wantsCluster reports whether a case to run is measured on the cluster.
func (b *bench) wantsCluster() bool {
	for _, c := range b.cases {
		if b.needed(c.id) && slices.Contains(c.systems, sysCluster) {
			return true
		}
	}
	return false
}

// clusterReport writes the cluster's section of the report.
func (b *bench) clusterReport(p func(string, ...any)) {
	var rows []benchCase
	for _, c := range b.cases {
		if _, ok := b.cells[c.id]; ok && slices.Contains(c.systems, sysCluster) {
			rows = append(rows, c)
		}
	}
	if len(rows) == 0 {
		return
	}
	p("\n## Cluster (3 nodes) against one node\n\n")
	p("Three riftgate processes on 127.0.0.1-3, started with the cluster flags and pinned with the single node to the servers' CPU, against the single node in the same rounds and slices. The load goes to the three nodes in turn, so two of every three flow operations reach their flow's owner over an owner RPC; each write is also pushed to the flow's two other nodes.\n\n")
	p("| case | 3 nodes req/s | one node req/s | 3 nodes / one node | target | server CPU µs/req, 3 nodes / one node |\n|---|---|---|---|---|---|\n")
	for _, c := range rows {
		cells := b.cells[c.id]
		cr, sr := cells[sysCluster], cells[sysRift]
		crps, srps := "-", "-"
		if cr.ok() {
			r, _, _ := cr.medians()
			crps = fmt.Sprintf("%.0f", r)
		}
		if sr.ok() {
			r, _, _ := sr.medians()
			srps = fmt.Sprintf("%.0f", r)
		}
		t := ""
		if c.clusterTarget > 0 {
			t = fmt.Sprintf(">= %gx", c.clusterTarget)
		}
		ratio := "n/a"
		if cr.ok() && sr.ok() {
			if r := pairedRatio(cr.runs, sr.runs); r > 0 {
				ratio = fmt.Sprintf("%.2fx", r)
				if c.clusterTarget > 0 {
					t += ": " + mark(r >= c.clusterTarget)
				}
			}
		} else if c.clusterTarget > 0 {
			t += ": n/a " + mdEscape(noteOr(cr))
		}
		p("| %s | %s | %s | %s | %s | %s / %s |\n", c.title, crps, srps, ratio, t, cr.cpu(), sr.cpu())
	}
	if len(b.rpc) == 2 {
		p("\nOwner RPC latency over every RPC of the run (GET /metrics `riftgate_cluster_owner_rpc_seconds` of the three nodes, %d RPCs, interpolated within its buckets): p50 **%.0f µs**, p99 **%.0f µs**.\n", b.rpcN, float64(b.rpc[0].Microseconds()), float64(b.rpc[1].Microseconds()))
	} else if b.rpcNote != "" {
		p("\nOwner RPC latency: not measured (%s).\n", mdEscape(b.rpcNote))
	}
	if len(b.pauses) > 0 {
		p("\n### Flow operations around a leader change\n\n")
		p("32 virtual users log in and out of their own flows (durability async) through the two nodes that stay up; the leader is then stopped. A flow's pause is the longest time between two of its answers from 0.5 s before the event to 2 s after it; flows the stopped node owned answer 503 until it returns and are counted apart. The control is the same measure over the 2.5 s just before, with no event: what the machine's own stalls cost (on a loaded machine every process stalls now and then, all flows at once). The target for the handover is 50 ms.\n\n")
		p("| event | longest pause | median flow's pause | control: longest, median | flows | flows of the stopped node | target | note |\n|---|---|---|---|---|---|---|---|\n")
		for _, ps := range b.pauses {
			t := ""
			if strings.Contains(ps.event, "SIGTERM") {
				t = "<= 50 ms: " + mark(ps.note == "" && ps.max <= 50*time.Millisecond)
			}
			p("| %s | %.1f ms | %.1f ms | %.1f ms, %.1f ms | %d | %d | %s | %s |\n", ps.event, ms(ps.max), ms(ps.median), ms(ps.calmMax), ms(ps.calmMedian), ps.flows, ps.skipped, t, mdEscape(ps.note))
		}
	}
}

// ms is d in milliseconds, for the report.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
