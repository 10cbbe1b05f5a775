package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/riftgate/riftgate/gateway/cluster"
	"github.com/riftgate/riftgate/gateway/cluster/clustertest"
)

// The load of the real-fault tests (netfault_test.go): per-flow counters
// (an inject script's state, durability sync, one flow per X-Flow-Id)
// incremented through every node, and read back through the flow admin
// route, each operation recorded for porcupine (lin_test.go's model, op
// "inc"), timed against the request budget, and each 503's message kept.

// budget is one stateful request's budget (the product's default), and
// budgetSlack what this machine adds to it (2 cores shared with other
// builds): a request that takes longer answered late.
const (
	budget      = 2 * time.Second
	budgetSlack = time.Second
	// clientTimeout ends a request that has not answered: silence, which
	// is a late answer and an unknown outcome.
	clientTimeout = 10 * time.Second
)

// netArgs are the nodes' flags: injection, and a log of warnings and
// errors only (every admin request, at info, would be thousands of lines
// a minute, all shown when a test fails).
var netArgs = []string{"--allowInjection", "--loglevel", "warn"}

// counterScript counts a flow's requests in its state.
const counterScript = `function (config) {
	config.state.count = (config.state.count || 0) + 1;
	return { statusCode: 200, body: String(config.state.count) };
}`

// counterImposter is a counter per X-Flow-Id, written under sync.
func counterImposter(port int) map[string]any {
	return map[string]any{
		"protocol": "http", "port": port,
		"_rift": map[string]any{"flowState": map[string]any{"flowIdSource": "header:X-Flow-Id", "durability": "sync"}},
		"stubs": []any{map[string]any{"responses": []any{map[string]any{"inject": counterScript}}}},
	}
}

// flowsPerOwner returns n flow ids, named prefix<i>, owned by each of
// voters (at the membership of exactly those voters).
func flowsPerOwner(port int, voters []string, n int, prefix string) []string {
	var flows []string
	for _, want := range voters {
		for i, got := 0, 0; got < n; i++ {
			if f := prefix + strconv.Itoa(i); flowOwner(port, f, voters...) == want {
				flows = append(flows, f)
				got++
			}
		}
	}
	return flows
}

// causeRE is what a flow 503's message must name: why the flow could not
// be served, one of the causes of docs/cluster.md ("What a flow 503
// means": in parentheses in a stub's 503, first in the flow admin
// routes'), or a script's flow that changed under every run.
var causeRE = regexp.MustCompile(`(?i)\b(isolated|owner unreachable|fenced|not yet adopted|shed|deadline|no replica)\b|changed under every run|has no voters`)

// refusedRE is a 503 that says the operation was refused before it could
// take effect (nothing happened); any other failure of a write has an
// unknown outcome.
var refusedRE = regexp.MustCompile(`(?i)isolated|\bshed\b|fenced|adopt|does not own|refused|changed under every run`)

// The load has two sets of flows, each with flows owned by every node:
//   - lin flows, whose every operation is recorded and whose histories
//     porcupine checks. An increment with an unknown outcome is pending
//     for ever in a history, and porcupine's search grows exponentially
//     with them (20 in a flow check in a second here, 40 not in a
//     minute). So a lin flow has one increment in flight at a time (reads
//     are not limited), and after an unknown outcome it rests until a
//     read of it has answered and quarantine has passed: a flow whose
//     owner is out of reach collects a few unknown outcomes, not one per
//     client every 2 s (requests to a node queue behind the flow's
//     script, seconds each, when its owner does not answer).
//   - probe flows, incremented without rest and without a history: every
//     answer is timed against the budget, every 503's message kept, every
//     count answered checked for duplicates and, at the end, against the
//     final reads; a recovery is measured on them.
const quarantine = 10 * time.Second

// netLoad is the load and what it saw.
type netLoad struct {
	t          *testing.T
	c          *clustertest.Cluster
	port       int
	lin, probe []string // flow ids
	hc         *http.Client
	start      time.Time
	stop       chan struct{}
	wg         sync.WaitGroup
	vals       atomic.Int64

	mu       sync.Mutex
	targets  []*clustertest.Node
	inFlight map[*clustertest.Node]int
	history  []porcupine.Operation
	rest     map[string]time.Time // lin flow: resting until
	busy     map[string]bool      // lin flow: an increment in flight
	unread   map[string]bool      // lin flow: an unknown outcome since its last read
	acked    map[string]int       // flow: the highest count answered 200
	answered map[string]map[int]string
	dups     []string
	// late are requests that answered after budget+budgetSlack, or not
	// at all; lateN counts them all.
	late  []string
	lateN int
	// messages counts each 503's message (numbers masked); causeless
	// those that name no cause.
	messages  map[string]int
	causeless map[string]int
	counts    map[string]int // lin inc 200, probe inc 503 unknown outcome, ...
}

// loadClients are how many clients of each kind the load runs.
type loadClients struct{ linIncs, linReads, probes int }

// startLoad runs the load's clients against targets until stopLoad.
func startLoad(t *testing.T, c *clustertest.Cluster, port int, lin, probe []string, targets []*clustertest.Node, k loadClients) *netLoad {
	l := &netLoad{t: t, c: c, port: port, lin: lin, probe: probe, hc: c.Client(clientTimeout, 4),
		start: time.Now(), stop: make(chan struct{}), targets: slices.Clone(targets),
		inFlight: map[*clustertest.Node]int{}, rest: map[string]time.Time{}, busy: map[string]bool{}, unread: map[string]bool{},
		acked: map[string]int{}, answered: map[string]map[int]string{},
		messages: map[string]int{}, causeless: map[string]int{}, counts: map[string]int{}}
	for id := range k.linIncs {
		l.wg.Go(func() { l.linIncs(id) })
	}
	for r := range k.linReads {
		l.wg.Go(func() { l.linReads(k.linIncs + r) })
	}
	for p := range k.probes {
		l.wg.Go(func() { l.probes(k.linIncs+k.linReads+p, p) })
	}
	return l
}

// now is the time since the load started, the histories' clock.
func (l *netLoad) now() time.Duration { return time.Since(l.start) }

// setTargets changes the nodes the clients send to.
func (l *netLoad) setTargets(nodes ...*clustertest.Node) {
	l.mu.Lock()
	l.targets = slices.Clone(nodes)
	l.mu.Unlock()
}

// without removes n from the targets and waits (bounded) until no
// request to it is in flight: a test pauses or stops n only then, so that
// no request is held by what the test, not the product, does.
func (l *netLoad) without(n *clustertest.Node) {
	l.t.Helper()
	l.mu.Lock()
	l.targets = slices.DeleteFunc(l.targets, func(x *clustertest.Node) bool { return x == n })
	l.mu.Unlock()
	clustertest.Eventually(l.t, clientTimeout+5*time.Second, "no request in flight to "+n.Name, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.inFlight[n] == 0
	})
}

// with adds n back to the targets.
func (l *netLoad) with(n *clustertest.Node) {
	l.mu.Lock()
	if !slices.Contains(l.targets, n) {
		l.targets = append(l.targets, n)
	}
	l.mu.Unlock()
}

// target is the node for a client's i-th request: slot, or slot+i/50,
// among the targets.
func (l *netLoad) target(slot int) *clustertest.Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.targets) == 0 {
		return nil
	}
	return l.targets[slot%len(l.targets)]
}

func (l *netLoad) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// pause sleeps after an answer: briefly after a 200, longer after any
// other, so that a refused flow is not hammered.
func pause(code int) {
	if code == http.StatusOK {
		time.Sleep(5 * time.Millisecond)
	} else {
		time.Sleep(100 * time.Millisecond)
	}
}

func (l *netLoad) linIncs(id int) {
	for i := 0; !l.stopped(); i++ {
		n := l.target(id + i/50)
		if n == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		flow := l.takeFlow(id*7 + i)
		if flow == "" {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		code, _ := l.inc(id, n, flow, true)
		l.mu.Lock()
		delete(l.busy, flow)
		l.mu.Unlock()
		pause(code)
	}
}

// takeFlow returns the first lin flow from the k-th on that is neither
// resting nor busy, marked busy, or "".
func (l *netLoad) takeFlow(k int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for j := range l.lin {
		f := l.lin[(k+j)%len(l.lin)]
		if !l.busy[f] && !l.unread[f] && now.After(l.rest[f]) {
			l.busy[f] = true
			return f
		}
	}
	return ""
}

func (l *netLoad) linReads(id int) {
	for i := 0; !l.stopped(); i++ {
		n := l.target(id + i/50)
		if n == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		code, _ := l.read(id, n, l.lin[(id*5+i)%len(l.lin)], true)
		pause(code)
	}
}

// probes increments probe flows, each client on its own node.
func (l *netLoad) probes(id, slot int) {
	for i := 0; !l.stopped(); i++ {
		n := l.target(slot)
		if n == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		code, _ := l.inc(id, n, l.probe[(id*7+i)%len(l.probe)], false)
		pause(code)
	}
}

// do sends one request to n, counting it in flight, and returns the
// status (-1: no answer) and the body, and how long it took.
func (l *netLoad) do(n *clustertest.Node, req *http.Request) (int, string, time.Duration, error) {
	l.mu.Lock()
	l.inFlight[n]++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.inFlight[n]--
		l.mu.Unlock()
	}()
	t0 := time.Now()
	resp, err := l.hc.Do(req)
	if err != nil {
		return -1, err.Error(), time.Since(t0), err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return -1, err.Error(), time.Since(t0), err
	}
	return resp.StatusCode, string(b), time.Since(t0), nil
}

// numbers masks node ids (16 hex digits) and numbers in messages.
var numbers = regexp.MustCompile(`\b[0-9a-f]{16}\b|[0-9]+`)

// note records the answer's timing and, for a 503, its message.
func (l *netLoad) note(what string, n *clustertest.Node, flow string, code int, body string, took time.Duration, at time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if took > budget+budgetSlack {
		l.lateN++
		if len(l.late) < 40 {
			l.late = append(l.late, fmt.Sprintf("%s %s on %s at %.1fs: %d after %v: %.160s", what, flow, n.Name, at.Seconds(), code, took.Round(time.Millisecond), body))
		}
	}
	if code == http.StatusServiceUnavailable {
		msg := body
		var e struct {
			Errors []struct {
				Message string `json:"message"`
			} `json:"errors"`
		}
		if json.Unmarshal([]byte(body), &e) == nil && len(e.Errors) > 0 {
			msg = e.Errors[0].Message
		}
		msg = numbers.ReplaceAllString(msg, "#")
		l.messages[msg]++
		if !causeRE.MatchString(msg) {
			l.causeless[msg]++
		}
	}
}

// inc increments flow's counter on n, and records it in the history when
// record is set.
func (l *netLoad) inc(id int, n *clustertest.Node, flow string, record bool) (int, int) {
	req, _ := http.NewRequest(http.MethodPost, imposterURL(n, l.port, "/inc"), nil)
	req.Header.Set("X-Flow-Id", flow)
	in := cluster.LinIn{Flow: flow, Op: "inc", Val: int(l.vals.Add(1))}
	call := l.now()
	code, body, took, err := l.do(n, req)
	ret := l.now()
	l.note("inc", n, flow, code, body, took, call)
	set := map[bool]string{true: "lin ", false: "probe "}[record]
	out := cluster.LinOut{}
	kind := ""
	switch {
	case code == http.StatusOK:
		v, perr := strconv.Atoi(strings.TrimSpace(body))
		if perr != nil {
			l.t.Errorf("inc %s on %s answered 200 %q: not a count", flow, n.Name, body)
			return code, 0
		}
		out.OK, out.Val = true, v
		kind = "inc 200"
		l.mu.Lock()
		l.acked[flow] = max(l.acked[flow], v)
		if !record {
			if l.answered[flow] == nil {
				l.answered[flow] = map[int]string{}
			}
			if prev, dup := l.answered[flow][v]; dup {
				l.dups = append(l.dups, fmt.Sprintf("%s = %d answered by %s and by %s at %.1fs", flow, v, prev, n.Name, call.Seconds()))
			} else {
				l.answered[flow][v] = fmt.Sprintf("%s at %.1fs", n.Name, call.Seconds())
			}
		}
		l.mu.Unlock()
	case code == http.StatusServiceUnavailable && refusedRE.MatchString(body):
		l.count(set + "inc 503 refused")
		return code, 0 // nothing happened
	case code == -1 && errors.Is(err, syscall.ECONNREFUSED):
		l.count(set + "inc connection refused")
		return code, 0 // nothing was sent
	default:
		kind = "inc " + strconv.Itoa(code) + " unknown outcome"
		out, ret = cluster.LinOut{Unknown: true}, math.MaxInt64
		if record {
			l.mu.Lock()
			l.rest[flow] = time.Now().Add(quarantine)
			l.unread[flow] = true
			l.mu.Unlock()
		}
	}
	l.count(set + kind)
	if record {
		l.record(id, in, call, out, ret)
	}
	return code, out.Val
}

// read reads flow's counter on n through the flow admin route, and
// records it in the history when record is set and it answered.
func (l *netLoad) read(id int, n *clustertest.Node, flow string, record bool) (int, cluster.LinOut) {
	req, _ := http.NewRequest(http.MethodGet, n.URL+"/imposters/"+strconv.Itoa(l.port)+"/flows/"+flow+"/count", nil)
	in := cluster.LinIn{Flow: flow, Op: "get"}
	call := l.now()
	code, body, took, _ := l.do(n, req)
	ret := l.now()
	l.note("read", n, flow, code, body, took, call)
	set := map[bool]string{true: "lin ", false: "probe "}[record]
	l.count(set + "read " + strconv.Itoa(code))
	out := cluster.LinOut{}
	switch code {
	case http.StatusOK:
		var v flowValue
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			l.t.Errorf("read %s on %s: %v: %s", flow, n.Name, err, body)
			return code, out
		}
		out.OK, out.V = true, v.Version
		out.Val, _ = strconv.Atoi(v.Value)
	case http.StatusNotFound:
	default:
		return code, out // a failed read tells nothing
	}
	if record {
		l.mu.Lock()
		delete(l.unread, flow)
		l.mu.Unlock()
		l.record(id, in, call, out, ret)
	}
	return code, out
}

func (l *netLoad) count(kind string) {
	l.mu.Lock()
	l.counts[kind]++
	l.mu.Unlock()
}

func (l *netLoad) record(id int, in cluster.LinIn, call time.Duration, out cluster.LinOut, ret time.Duration) {
	l.mu.Lock()
	l.history = append(l.history, porcupine.Operation{ClientId: id, Input: in, Call: call.Nanoseconds(), Output: out, Return: int64(ret)})
	l.mu.Unlock()
}

// recovery increments every probe flow on every node from the heal on,
// each (flow, node) pair until it answers 200 or limit passes, and
// returns how long after healAt each pair first answered 200 (-1: not
// within limit).
func (l *netLoad) recovery(nodes []*clustertest.Node, healAt time.Duration, limit time.Duration) map[string]time.Duration {
	var mu sync.Mutex
	got := map[string]time.Duration{}
	var wg sync.WaitGroup
	for ni, n := range nodes {
		for fi, f := range l.probe {
			wg.Go(func() {
				id := 1000 + fi*len(nodes) + ni
				for {
					code, _ := l.inc(id, n, f, false)
					if code == http.StatusOK {
						mu.Lock()
						got[f+"@"+n.Name] = l.now() - healAt
						mu.Unlock()
						return
					}
					if l.now()-healAt > limit {
						mu.Lock()
						got[f+"@"+n.Name] = -1
						mu.Unlock()
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			})
		}
	}
	wg.Wait()
	return got
}

// summary describes a recovery: the slowest pairs, the median, and the
// pairs that did not answer within limit.
func summary(rec map[string]time.Duration) (worst time.Duration, text string) {
	type pair struct {
		name string
		d    time.Duration
	}
	var ps []pair
	never := 0
	for k, d := range rec {
		if d < 0 {
			never++
			d = time.Duration(math.MaxInt64)
		}
		ps = append(ps, pair{k, d})
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].d > ps[j].d || ps[i].d == ps[j].d && ps[i].name < ps[j].name })
	if len(ps) == 0 {
		return 0, "no pairs"
	}
	worst = ps[0].d
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d pairs, median %v, ", len(ps), ps[len(ps)/2].d.Round(time.Millisecond))
	if never > 0 {
		fmt.Fprintf(&sb, "%d never answered 200; ", never)
	}
	sb.WriteString("slowest:")
	for _, p := range ps[:min(6, len(ps))] {
		if p.d == time.Duration(math.MaxInt64) {
			fmt.Fprintf(&sb, " %s never", p.name)
		} else {
			fmt.Fprintf(&sb, " %s %v", p.name, p.d.Round(time.Millisecond))
		}
	}
	return worst, sb.String()
}

// finalReads reads every flow on every node until it answers 200 (at
// most within), recording the lin flows' reads, and fails t if a count
// answered 200 before the read began is missing: a lost sync write. (The
// load still runs: what is answered while a read is in flight may or may
// not be in it.)
func (l *netLoad) finalReads(nodes []*clustertest.Node, within time.Duration) {
	l.t.Helper()
	for _, n := range nodes {
		for _, f := range append(slices.Clone(l.lin), l.probe...) {
			record := slices.Contains(l.lin, f)
			var code, acked int
			var last cluster.LinOut
			deadline := time.Now().Add(within)
			for {
				l.mu.Lock()
				acked = l.acked[f]
				l.mu.Unlock()
				if code, last = l.read(9000, n, f, record); code == http.StatusOK || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if code != http.StatusOK {
				l.t.Errorf("the final read of %s on %s: %d after %v", f, n.Name, code, within)
				continue
			}
			if last.Val < acked {
				l.t.Errorf("%s reads %d on %s, but an increment of it was answered %d before the read began: an acknowledged sync write is lost", f, last.Val, n.Name, acked)
			}
		}
	}
}

// stopLoad stops the clients, reports what they saw, fails t for
// duplicate counts, late answers and causeless 503s (the last two when
// budgets is set), and checks the lin flows' history with porcupine.
func (l *netLoad) stopLoad(budgets bool, minKnown int) {
	l.t.Helper()
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	var kinds []string
	for k, v := range l.counts {
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, v))
	}
	sort.Strings(kinds)
	l.t.Logf("answers: %s", strings.Join(kinds, ", "))
	var msgs []string
	for m, v := range l.messages {
		msgs = append(msgs, fmt.Sprintf("%dx %q", v, m))
	}
	sort.Strings(msgs)
	l.t.Logf("503 messages: %s", strings.Join(msgs, "; "))
	if len(l.dups) > 0 {
		l.t.Errorf("%d counts were answered twice: %s", len(l.dups), firstFew(l.dups))
	}
	fail := l.t.Logf
	if budgets {
		fail = l.t.Errorf
	}
	if l.lateN > 0 {
		fail("%d requests answered after the budget (%v + %v of slack) or not within %v; the first:\n\t%s", l.lateN, budget, budgetSlack, clientTimeout, strings.Join(l.late, "\n\t"))
	}
	if len(l.causeless) > 0 {
		var cl []string
		for m, v := range l.causeless {
			cl = append(cl, fmt.Sprintf("%dx %q", v, m))
		}
		sort.Strings(cl)
		fail("503s whose message names no cause (isolated, owner unreachable, fenced, not yet adopted, shed, deadline, no replica): %s", strings.Join(cl, "; "))
	}
	cluster.CheckLinearizable(l.t, l.history, minKnown)
}

// memberView is one member in one node's GET /cluster.
type memberView struct {
	at                 time.Duration
	observer, member   string
	reachable          bool
	hasLast, lastIsSet bool
	lastMs             float64
}

// clusterWatch polls GET /cluster on nodes until stopped.
type clusterWatch struct {
	l     *netLoad
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	views []memberView
	errs  map[string]int
	// sample is one raw GET /cluster of each observer, the last before
	// sampleAt.
	sample   map[string]string
	sampleAt time.Duration
}

func (l *netLoad) watchCluster(nodes []*clustertest.Node, sampleAt time.Duration) *clusterWatch {
	w := &clusterWatch{l: l, stop: make(chan struct{}), done: make(chan struct{}), errs: map[string]int{}, sample: map[string]string{}, sampleAt: sampleAt}
	hc := l.c.Client(3*time.Second, 1)
	go func() {
		defer close(w.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			var wg sync.WaitGroup
			for _, n := range nodes {
				wg.Go(func() { w.poll(hc, n) })
			}
			wg.Wait()
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *clusterWatch) poll(hc *http.Client, n *clustertest.Node) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/cluster", nil)
	at := w.l.now()
	resp, err := hc.Do(req)
	if err != nil {
		w.mu.Lock()
		w.errs[n.Name]++
		w.mu.Unlock()
		return
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var st struct {
		Members []struct {
			Name           string          `json:"name"`
			Reachable      bool            `json:"reachable"`
			LastExchangeMs json.RawMessage `json:"lastExchangeMs"`
		} `json:"members"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &st) != nil {
		w.mu.Lock()
		w.errs[n.Name]++
		w.mu.Unlock()
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if at <= w.sampleAt {
		var compact bytes.Buffer
		if json.Compact(&compact, b) == nil {
			w.sample[n.Name] = compact.String()
		}
	}
	for _, m := range st.Members {
		v := memberView{at: at, observer: n.Name, member: m.Name, reachable: m.Reachable, hasLast: m.LastExchangeMs != nil}
		if v.hasLast && string(m.LastExchangeMs) != "null" {
			v.lastIsSet = json.Unmarshal(m.LastExchangeMs, &v.lastMs) == nil
		}
		w.views = append(w.views, v)
	}
}

func (w *clusterWatch) end() []memberView {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.views
}

// netfaultPartitions are the partitions' lengths
// (RIFTGATE_NETFAULT_PARTITIONS, e.g. "5s,10s" while working on the
// tests; the 30 s and 60 s by default).
func netfaultPartitions(t *testing.T) []time.Duration {
	spec := os.Getenv("RIFTGATE_NETFAULT_PARTITIONS")
	if spec == "" {
		return []time.Duration{30 * time.Second, 60 * time.Second}
	}
	var out []time.Duration
	for _, s := range strings.Split(spec, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			t.Fatalf("RIFTGATE_NETFAULT_PARTITIONS: %v", err)
		}
		out = append(out, d)
	}
	t.Logf("RIFTGATE_NETFAULT_PARTITIONS: partitions of %v, not the issue's 30 s and 60 s", out)
	return out
}
