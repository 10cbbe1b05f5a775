package gateway

import (
	"context"
	"maps"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/meter"
)

// meters holds every imposter's meters by label, for the life of the
// process, as Mountebank's registry does: a deleted imposter's series stay
// on GET /metrics, and an imposter created again under the same label (same
// protocol, port and name) adds to them.
type meters struct {
	mu     sync.Mutex
	byName map[string]*meter.Imposter
	order  []string // labels in the order first seen: mb prints series so
}

func newMeters() *meters { return &meters{byName: make(map[string]*meter.Imposter)} }

// forImposter returns the meters of the imposters labelled label.
func (m *meters) forImposter(label string) *meter.Imposter {
	m.mu.Lock()
	im, ok := m.byName[label]
	if !ok {
		im = meter.NewImposter()
		m.byName[label] = im
		m.order = append(m.order, label)
	}
	m.mu.Unlock()
	return im
}

type labelled struct {
	label string
	m     *meter.Imposter
}

// list returns every imposter's meters, in the order first seen.
func (m *meters) list() []labelled {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]labelled, len(m.order))
	for i, l := range m.order {
		out[i] = labelled{l, m.byName[l]}
	}
	return out
}

// metrics answers GET /metrics in Prometheus's text format: Mountebank's
// metrics under its names, labels, types and buckets (mb 2.9.1 registers
// its imposter families when the first imposter is created, and a series
// when that imposter is first called), then riftgate's own under riftgate_.
func (g *gateway) metrics(w http.ResponseWriter, r *http.Request) {
	p := &promWriter{}
	g.processMetrics(p)
	if all := g.engine.meters.list(); len(all) > 0 {
		imposterMetrics(p, all)
	}
	g.riftgateMetrics(r.Context(), p, g.engine.meters.list())
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(p.b.String()))
}

func imposterMetrics(p *promWriter, all []labelled) {
	// A series appears with its first count, as prom-client adds a label
	// set on its first inc or observe.
	histogram := func(name, help string, h func(*meter.Imposter) *meter.Histogram, bounds []time.Duration) {
		p.family(name, "histogram", help)
		for _, l := range all {
			p.histogram(name, h(l.m).Snapshot(), bounds, "imposter", l.label)
		}
	}
	counter := func(name, help string, c func(*meter.Imposter) *atomic.Uint64) {
		p.family(name, "counter", help)
		for _, l := range all {
			if n := c(l.m).Load(); n > 0 {
				p.sample(name, strconv.FormatUint(n, 10), "imposter", l.label)
			}
		}
	}
	histogram("mb_predicate_match_duration_seconds", "Time it takes to match the predicates and select a stub",
		func(m *meter.Imposter) *meter.Histogram { return m.Match }, meter.MatchBuckets)
	counter("mb_no_match_total", "Number of times no stub matched the request",
		func(m *meter.Imposter) *atomic.Uint64 { return &m.NoMatch })
	counter("mb_request_total", "Number of requests to the imposter",
		func(m *meter.Imposter) *atomic.Uint64 { return &m.Requests })
	histogram("mb_response_generation_duration_seconds", "Time it takes to generate the response from a stub",
		func(m *meter.Imposter) *meter.Histogram { return m.Response }, meter.ResponseBuckets)
	counter("mb_blocked_ip_total", "Number of times a connection was blocked from a non-whitelisted IP address",
		func(m *meter.Imposter) *atomic.Uint64 { return &m.Blocked })
}

// requestBuckets are the bounds riftgate_request_duration_seconds exports:
// 1, 2 and 5 times each power of ten from 10 µs to 10 s, all FineBuckets.
var requestBuckets = func() []time.Duration {
	var out []time.Duration
	for p := 10 * time.Microsecond; p <= 10*time.Second; p *= 10 {
		out = append(out, p, 2*p, 5*p)
	}
	return out[:len(out)-2]
}()

// processMetrics are the process metrics mb's Prometheus client exports
// with its mb_ prefix, read from /proc where Linux has them. mb's
// mb_nodejs_* metrics describe Node's runtime, which riftgate has not; Go's
// runtime has riftgate_go_* instead.
func (g *gateway) processMetrics(p *promWriter) {
	st := readProcStat()
	if st.ok {
		p.gauge("mb_process_cpu_user_seconds_total", "counter", "Total user CPU time spent in seconds.", formatFloat(st.user))
		p.gauge("mb_process_cpu_system_seconds_total", "counter", "Total system CPU time spent in seconds.", formatFloat(st.system))
		p.gauge("mb_process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", formatFloat(st.user+st.system))
	}
	p.gauge("mb_process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.", strconv.FormatInt(g.started.Unix(), 10))
	if st.ok {
		p.gauge("mb_process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", strconv.FormatUint(st.rss, 10))
		p.gauge("mb_process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", strconv.FormatUint(st.vsize, 10))
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p.gauge("mb_process_heap_bytes", "gauge", "Process heap size in bytes.", strconv.FormatUint(ms.HeapSys, 10))
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		p.gauge("mb_process_open_fds", "gauge", "Number of open file descriptors.", strconv.Itoa(len(fds)))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		p.gauge("mb_process_max_fds", "gauge", "Maximum number of open file descriptors.", strconv.FormatUint(lim.Cur, 10))
	}
	p.gauge("riftgate_go_heap_alloc_bytes", "gauge", "Bytes of allocated heap objects, the collector's 64 MiB floor included when it is set", strconv.FormatUint(ms.HeapAlloc, 10))
	p.gauge("riftgate_go_heap_goal_bytes", "gauge", "Heap size at which the next garbage collection starts", strconv.FormatUint(ms.NextGC, 10))
	p.gauge("riftgate_go_gc_cycles_total", "counter", "Garbage collections completed", strconv.FormatUint(uint64(ms.NumGC), 10))
	gcPauses(p, time.Duration(ms.PauseTotalNs))
}

// gcPauseBuckets are the bounds riftgate_go_gc_pause_seconds exports.
var gcPauseBuckets = []time.Duration{
	10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond,
	250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond,
	5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, time.Second,
}

// gcPauses writes the collector's stop-the-world pauses as a histogram:
// the runtime's own histogram (runtime/metrics) folded into fixed
// buckets, each runtime bucket counted under the first bound at or above
// its upper edge; the sum is the runtime's total pause time.
func gcPauses(p *promWriter, total time.Duration) {
	sample := []metrics.Sample{{Name: "/sched/pauses/total/gc:seconds"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return
	}
	h := sample[0].Value.Float64Histogram()
	cum := make([]uint64, len(gcPauseBuckets))
	var count uint64
	for i, n := range h.Counts {
		count += n
		upper := h.Buckets[i+1]
		for j, b := range gcPauseBuckets {
			if upper <= b.Seconds() {
				cum[j] += n
			}
		}
	}
	const name = "riftgate_go_gc_pause_seconds"
	p.family(name, "histogram", "Stop-the-world pauses of the garbage collector")
	for j, b := range gcPauseBuckets {
		p.sample(name+"_bucket", strconv.FormatUint(cum[j], 10), "le", formatFloat(b.Seconds()))
	}
	p.sample(name+"_bucket", strconv.FormatUint(count, 10), "le", "+Inf")
	p.sample(name+"_sum", formatFloat(total.Seconds()))
	p.sample(name+"_count", strconv.FormatUint(count, 10))
}

type procStat struct {
	ok           bool
	user, system float64 // seconds
	vsize, rss   uint64  // bytes
}

// readProcStat reads /proc/self/stat (proc(5)): utime and stime in clock
// ticks (fields 14 and 15), vsize in bytes (23), rss in pages (24).
func readProcStat() procStat {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return procStat{}
	}
	s := string(b)
	// The command name (field 2) is in parentheses and may hold spaces.
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s) // f[0] is field 3
	if len(f) < 22 {
		return procStat{}
	}
	num := func(field int) uint64 { n, _ := strconv.ParseUint(f[field-3], 10, 64); return n }
	const ticks = 100 // USER_HZ, 100 on every Linux architecture Go supports
	return procStat{
		ok:     true,
		user:   float64(num(14)) / ticks,
		system: float64(num(15)) / ticks,
		vsize:  num(23),
		rss:    num(24) * uint64(os.Getpagesize()),
	}
}

// wsMetrics are the WebSocket imposters' connection counters (their
// messages are their requests): a series for each imposter that speaks
// WebSocket, or has upgraded a request to it.
func wsMetrics(p *promWriter, all []labelled) {
	var ws []labelled
	for _, l := range all {
		m := &l.m.WS
		if strings.HasPrefix(l.label, "[ws:") || strings.HasPrefix(l.label, "[wss:") || m.Opened.Load() > 0 || m.Refused.Load() > 0 {
			ws = append(ws, l)
		}
	}
	if len(ws) == 0 {
		return
	}
	family := func(name, kind, help string, v func(*meter.WS) string) {
		p.family(name, kind, help)
		for _, l := range ws {
			p.sample(name, v(&l.m.WS), "imposter", l.label)
		}
	}
	u := func(n uint64) string { return strconv.FormatUint(n, 10) }
	family("riftgate_ws_connections", "gauge", "WebSocket connections open now", func(m *meter.WS) string { return strconv.FormatInt(m.Open.Load(), 10) })
	family("riftgate_ws_connections_total", "counter", "WebSocket connections accepted", func(m *meter.WS) string { return u(m.Opened.Load()) })
	family("riftgate_ws_handshakes_refused_total", "counter", "WebSocket handshakes refused (by a stub, or not being one)", func(m *meter.WS) string { return u(m.Refused.Load()) })
	family("riftgate_ws_messages_sent_total", "counter", "WebSocket messages sent (those received are mb_request_total)", func(m *meter.WS) string { return u(m.Sent.Load()) })
	p.family("riftgate_ws_limit_closes_total", "counter", "WebSocket connections a limit closed, by limit")
	for _, l := range ws {
		for i, name := range meter.WSLimitNames {
			p.sample("riftgate_ws_limit_closes_total", u(l.m.WS.Limited[i].Load()), "imposter", l.label, "limit", name)
		}
	}
}

// riftgateMetrics are riftgate's own: request durations in buckets fine
// enough for microseconds, the process, flows and plugins.
func (g *gateway) riftgateMetrics(ctx context.Context, p *promWriter, all []labelled) {
	p.family("riftgate_request_duration_seconds", "histogram", "Time from a request's arrival to its written response, by imposter")
	for _, l := range all {
		p.histogram("riftgate_request_duration_seconds", l.m.Total.Snapshot(), requestBuckets, "imposter", l.label)
	}
	wsMetrics(p, all)
	p.gauge("riftgate_imposters", "gauge", "Number of imposters", strconv.Itoa(len(g.snapshot())))
	var recording []*imposter.Imposter
	for _, imp := range g.snapshot() {
		if imp.RecordedLog() != nil {
			recording = append(recording, imp)
		}
	}
	if len(recording) > 0 {
		p.family("riftgate_recorded_requests", "gauge", "Recorded requests an imposter holds (memory and disk)")
		for _, imp := range recording {
			p.sample("riftgate_recorded_requests", strconv.FormatInt(imp.Recorded().Kept, 10), "imposter", imp.MetricLabel())
		}
		p.family("riftgate_recorded_requests_dropped_total", "counter", "Recorded requests an imposter's cap dropped, oldest first, since it started or was cleared")
		for _, imp := range recording {
			p.sample("riftgate_recorded_requests_dropped_total", strconv.FormatInt(imp.Recorded().Dropped, 10), "imposter", imp.MetricLabel())
		}
	}
	p.gauge("riftgate_go_goroutines", "gauge", "Number of goroutines", strconv.Itoa(runtime.NumGoroutine()))
	p.gauge("riftgate_uptime_seconds", "gauge", "Seconds since the process started", strconv.FormatFloat(time.Since(g.started).Seconds(), 'f', 3, 64))
	e := g.engine
	p.gauge("riftgate_proxy_recordings_total", "counter", "Proxy recordings submitted to the configuration (proxyOnce stubs, proxyAlways responses)", strconv.FormatUint(e.recorder.recordings.Load(), 10))
	p.gauge("riftgate_proxy_recording_batches_total", "counter", "Configuration commands the proxy recordings went in (a batch holds the recordings made while the one before it was written)", strconv.FormatUint(e.recorder.batches.Load(), 10))
	if st, err := e.flows.Stats(ctx); err == nil {
		p.gauge("riftgate_flows", "gauge", "Flows held by this node's flow store", strconv.FormatInt(st.Flows, 10))
		p.gauge("riftgate_flow_entries", "gauge", "Flow entries held by this node's flow store", strconv.FormatInt(st.Entries, 10))
		p.gauge("riftgate_flow_bytes", "gauge", "Bytes of keys and values held by this node's flow store", strconv.FormatInt(st.Bytes, 10))
		p.family("riftgate_flow_writes_total", "counter", "Flow writes by durability mode")
		for i, mode := range []string{"memory", "async", "sync"} {
			p.sample("riftgate_flow_writes_total", strconv.FormatUint(st.Writes[i], 10), "durability", mode)
		}
		p.gauge("riftgate_flow_batches_total", "counter", "bbolt transactions committed by the flow writer", strconv.FormatUint(st.Batches, 10))
		p.family("riftgate_flow_evictions_total", "counter", "Whole flows removed, by reason")
		p.sample("riftgate_flow_evictions_total", strconv.FormatUint(st.EvictedLRU, 10), "reason", "lru")
		p.sample("riftgate_flow_evictions_total", strconv.FormatUint(st.Expired, 10), "reason", "ttl")
	}
	ms := e.plugins.Stats()
	p.family("riftgate_plugin_calls_total", "counter", "Plugin calls by module")
	for _, m := range ms {
		p.sample("riftgate_plugin_calls_total", strconv.FormatUint(m.Calls, 10), "module", m.Name)
	}
	p.family("riftgate_plugin_instances", "gauge", "Plugin instances open now, by module")
	for _, m := range ms {
		p.sample("riftgate_plugin_instances", strconv.FormatInt(m.InstancesLive, 10), "module", m.Name)
	}
	p.family("riftgate_plugin_instances_total", "counter", "Plugin instances made, recycled and discarded, by module")
	for _, m := range ms {
		p.sample("riftgate_plugin_instances_total", strconv.FormatUint(m.Instantiated, 10), "module", m.Name, "event", "instantiated")
		p.sample("riftgate_plugin_instances_total", strconv.FormatUint(m.Recycled, 10), "module", m.Name, "event", "recycled")
		p.sample("riftgate_plugin_instances_total", strconv.FormatUint(m.Discarded, 10), "module", m.Name, "event", "discarded")
	}
	p.family("riftgate_plugin_errors_total", "counter", "Failed plugin calls by module and kind")
	for _, m := range ms {
		for _, kind := range sortedKeys(m.Errors) {
			p.sample("riftgate_plugin_errors_total", strconv.FormatUint(m.Errors[kind], 10), "module", m.Name, "kind", kind)
		}
	}
	if c := g.opts.Cluster; c != nil && c.Metrics != nil {
		c.Metrics(&p.b) // the cluster runtime's families, each after a blank line as here
	}
}

// promWriter writes Prometheus's text exposition format (0.0.4) as mb's
// client lays it out: families apart by a blank line, `le` first.
type promWriter struct {
	b strings.Builder
}

func (p *promWriter) family(name, kind, help string) {
	if p.b.Len() > 0 {
		p.b.WriteByte('\n')
	}
	p.b.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + kind + "\n")
}

// gauge writes a family with one unlabelled sample.
func (p *promWriter) gauge(name, kind, help, value string) {
	p.family(name, kind, help)
	p.sample(name, value)
}

// sample writes one sample; labels are name, value pairs.
func (p *promWriter) sample(name, value string, labels ...string) {
	p.b.WriteString(name)
	if len(labels) > 0 {
		p.b.WriteByte('{')
		for i := 0; i < len(labels); i += 2 {
			if i > 0 {
				p.b.WriteByte(',')
			}
			p.b.WriteString(labels[i] + `="`)
			escapeLabel(&p.b, labels[i+1])
			p.b.WriteByte('"')
		}
		p.b.WriteByte('}')
	}
	p.b.WriteString(" " + value + "\n")
}

// histogram writes one labelled series of a histogram family at bounds,
// which must be among s.Bounds; nothing when s has no observations.
func (p *promWriter) histogram(name string, s meter.Snapshot, bounds []time.Duration, labels ...string) {
	count := s.Count()
	if count == 0 {
		return
	}
	for i, n := range s.Cumulative(bounds) {
		p.sample(name+"_bucket", strconv.FormatUint(n, 10), append([]string{"le", formatFloat(bounds[i].Seconds())}, labels...)...)
	}
	p.sample(name+"_bucket", strconv.FormatUint(count, 10), append([]string{"le", "+Inf"}, labels...)...)
	p.sample(name+"_sum", formatFloat(s.Sum.Seconds()), labels...)
	p.sample(name+"_count", strconv.FormatUint(count, 10), labels...)
}

// escapeLabel escapes a label value as the text format says: backslash,
// double quote and line feed; everything else is written as it is.
func escapeLabel(b *strings.Builder, v string) {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteByte(c)
		}
	}
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
