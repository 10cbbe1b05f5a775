package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// ResultVersion is the version of the JSON summary's layout. A reader
// checks it before trusting any other field.
const ResultVersion = 1

// Result is what a run measured. Latencies are in milliseconds. In the open
// loop, Latency is measured from each request's intended send time (corrected
// for coordinated omission) and Uncorrected from its actual send time.
type Result struct {
	Version         int       `json:"version"`
	Mode            string    `json:"mode"` // "closed" or "open"
	Targets         []string  `json:"targets"`
	Connections     int       `json:"connections"`
	Rate            float64   `json:"rate,omitempty"`
	Scenario        string    `json:"scenario,omitempty"`
	Started         time.Time `json:"started"`
	DurationSeconds float64   `json:"durationSeconds"`
	Requests        int64     `json:"requests"`
	Errors          int64     `json:"errors"`
	WarmupRequests  int64     `json:"warmupRequests"`
	// Unsent counts the requests the open-loop schedule had due in the
	// measured time but that were never sent, because every connection
	// was busy until the end: raise the connections, or the server is
	// saturated.
	Unsent        int64             `json:"unsent"`
	Throughput    float64           `json:"throughput"`
	Latency       Latency           `json:"latency"`
	Uncorrected   *Latency          `json:"uncorrectedLatency,omitempty"`
	ErrorKinds    map[string]int64  `json:"errorKinds"`
	ErrorExamples map[string]string `json:"errorExamples,omitempty"`
	Statuses      map[string]int64  `json:"statuses"`
	TLS           *TLSSummary       `json:"tls,omitempty"` // nil when no target is https
	Timeline      []TimePoint       `json:"timeline"`
	Percentiles   []PercentilePoint `json:"percentiles"`

	hist *hdrhistogram.Histogram // Latency's source, for merging runs
}

// Latency summarises a latency distribution, in milliseconds.
type Latency struct {
	P50  float64 `json:"p50Ms"`
	P90  float64 `json:"p90Ms"`
	P99  float64 `json:"p99Ms"`
	P999 float64 `json:"p999Ms"`
	Max  float64 `json:"maxMs"`
	Mean float64 `json:"meanMs"`
}

// TLSSummary counts the TLS handshakes of a run, successful ones only,
// the virtual users' first connections and the warm-up's included: with
// keep-alive, more handshakes than connections means reconnects, which
// resumption (on unless turned off) makes cheaper.
type TLSSummary struct {
	Handshakes int64 `json:"handshakes"`
	Resumed    int64 `json:"resumed"`
	// Resumption says whether resumption was on.
	Resumption bool `json:"resumption"`
}

// PercentilePoint is one point of the latency-by-percentile curve.
type PercentilePoint struct {
	Percentile float64 `json:"percentile"`
	Ms         float64 `json:"ms"`
}

func summarize(h *hdrhistogram.Histogram) Latency {
	return Latency{
		P50:  usToMs(h.ValueAtQuantile(50)),
		P90:  usToMs(h.ValueAtQuantile(90)),
		P99:  usToMs(h.ValueAtQuantile(99)),
		P999: usToMs(h.ValueAtQuantile(99.9)),
		Max:  usToMs(h.Max()),
		Mean: math.Round(h.Mean()) / 1000,
	}
}

// percentileCurve samples h at 0, 10, ... 90, then 4 points per "nine" up
// to 99.999, then 100: the usual log-scale latency-by-percentile plot.
func percentileCurve(h *hdrhistogram.Histogram) []PercentilePoint {
	if h.TotalCount() == 0 {
		return nil
	}
	var out []PercentilePoint
	for p := 0.0; p < 90; p += 10 {
		out = append(out, PercentilePoint{p, usToMs(h.ValueAtQuantile(p))})
	}
	for k := 4; k <= 20; k++ {
		p := 100 * (1 - math.Pow(10, -float64(k)/4))
		p = math.Round(p*10000) / 10000
		out = append(out, PercentilePoint{p, usToMs(h.ValueAtQuantile(p))})
	}
	return append(out, PercentilePoint{100, usToMs(h.Max())})
}

// mergeResults sums runs of one load on one system, measured apart (the
// slices of an interleaved comparison), into one Result: counts add up,
// throughput is over the summed measured time, and latencies come from the
// merged histograms. The timeline and curves are left out.
func mergeResults(rs []*Result) *Result {
	out := &Result{Version: ResultVersion, ErrorKinds: map[string]int64{}, ErrorExamples: map[string]string{},
		Statuses: map[string]int64{}, hist: newHist()}
	for _, r := range rs {
		if out.Mode == "" {
			out.Mode, out.Targets, out.Connections, out.Rate, out.Scenario, out.Started =
				r.Mode, r.Targets, r.Connections, r.Rate, r.Scenario, r.Started
		}
		out.DurationSeconds += r.DurationSeconds
		out.Requests += r.Requests
		out.Errors += r.Errors
		out.WarmupRequests += r.WarmupRequests
		out.Unsent += r.Unsent
		for k, n := range r.ErrorKinds {
			out.ErrorKinds[k] += n
		}
		for k, ex := range r.ErrorExamples {
			if _, ok := out.ErrorExamples[k]; !ok {
				out.ErrorExamples[k] = ex
			}
		}
		for k, n := range r.Statuses {
			out.Statuses[k] += n
		}
		if r.TLS != nil {
			if out.TLS == nil {
				out.TLS = &TLSSummary{Resumption: r.TLS.Resumption}
			}
			out.TLS.Handshakes += r.TLS.Handshakes
			out.TLS.Resumed += r.TLS.Resumed
		}
		if r.hist != nil {
			out.hist.Merge(r.hist)
		}
	}
	if out.DurationSeconds > 0 {
		out.Throughput = float64(out.Requests) / out.DurationSeconds
	}
	out.Latency = summarize(out.hist)
	return out
}

func (r *runner) result(c *collector) *Result {
	total, unc := newHist(), newHist()
	res := &Result{
		Version:       ResultVersion,
		Mode:          "closed",
		Targets:       r.opts.Targets,
		Connections:   r.opts.Connections,
		Rate:          r.opts.Rate,
		Scenario:      r.opts.Scenario.Name,
		Started:       r.base.UTC(),
		ErrorKinds:    map[string]int64{},
		ErrorExamples: map[string]string{},
		Statuses:      map[string]int64{},
		Timeline:      c.timeline,
	}
	for _, s := range r.shards {
		s.mu.Lock()
		total.Merge(s.total)
		unc.Merge(s.uncorrected)
		res.Requests += s.requests
		res.WarmupRequests += s.warmup
		for k, n := range s.errs {
			if n > 0 {
				res.ErrorKinds[errKind(k).String()] += n
				res.Errors += n
				if _, ok := res.ErrorExamples[errKind(k).String()]; !ok {
					res.ErrorExamples[errKind(k).String()] = s.firstErr[k]
				}
			}
		}
		for code, n := range s.status {
			if n > 0 {
				res.Statuses[strconv.Itoa(code)] += n
			}
		}
		s.mu.Unlock()
	}
	// The last completion ends the measured span: time-bounded runs finish
	// their in-flight requests just after r.end, and a cancelled run stops early.
	if span := r.lastDone.Load() - r.measureFrom; span > 0 {
		res.DurationSeconds = time.Duration(span).Seconds()
		res.Throughput = float64(res.Requests) / res.DurationSeconds
	}
	for _, t := range r.targets {
		if t.tls != nil {
			res.TLS = &TLSSummary{Handshakes: r.handshakes.Load(), Resumed: r.resumed.Load(),
				Resumption: !t.tls.SessionTicketsDisabled}
			break
		}
	}
	res.hist = total
	res.Latency = summarize(total)
	res.Percentiles = percentileCurve(total)
	if r.opts.Rate > 0 {
		if r.end > 0 {
			due := int64(math.Ceil(float64(r.end)/r.intervalNs) - math.Ceil(float64(r.measureFrom)/r.intervalNs))
			res.Unsent = max(due-res.Requests, 0)
		}
		res.Mode = "open"
		u := summarize(unc)
		res.Uncorrected = &u
	}
	return res
}

// WriteJSON writes res as indented JSON.
func (res *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return fmt.Errorf("loadtest: writing JSON summary: %w", err)
	}
	return nil
}

// WriteText writes a human-readable summary.
func (res *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s loop, %d connections", res.Mode, res.Connections)
	if res.Mode == "open" {
		fmt.Fprintf(&b, ", %.0f req/s scheduled", res.Rate)
	}
	if res.Scenario != "" {
		fmt.Fprintf(&b, ", scenario %q", res.Scenario)
	}
	fmt.Fprintf(&b, "\ntargets: %s\n", strings.Join(res.Targets, ", "))
	fmt.Fprintf(&b, "requests: %d in %.2fs (%d warm-up requests not counted)\n", res.Requests, res.DurationSeconds, res.WarmupRequests)
	fmt.Fprintf(&b, "throughput: %.1f req/s\n", res.Throughput)
	if res.Unsent > 0 {
		fmt.Fprintf(&b, "WARNING: %d scheduled requests were never sent: every connection was busy (add connections, or the server is saturated)\n", res.Unsent)
	}
	label := "latency"
	if res.Uncorrected != nil {
		label = "latency (from intended send time, corrected for coordinated omission)"
	}
	writeLatency(&b, label, res.Latency)
	if res.Uncorrected != nil {
		writeLatency(&b, "latency (from actual send time, uncorrected)", *res.Uncorrected)
	}
	fmt.Fprintf(&b, "errors: %d", res.Errors)
	for _, k := range slices.Sorted(maps.Keys(res.ErrorKinds)) {
		fmt.Fprintf(&b, "  %s=%d", k, res.ErrorKinds[k])
	}
	b.WriteString("\nstatus codes:")
	for _, k := range slices.Sorted(maps.Keys(res.Statuses)) {
		fmt.Fprintf(&b, "  %s=%d", k, res.Statuses[k])
	}
	b.WriteString("\n")
	for _, k := range slices.Sorted(maps.Keys(res.ErrorExamples)) {
		fmt.Fprintf(&b, "  e.g. %s: %s\n", k, res.ErrorExamples[k])
	}
	if t := res.TLS; t != nil {
		mode := "on"
		if !t.Resumption {
			mode = "off: full handshakes"
		}
		fmt.Fprintf(&b, "tls: %d handshakes, %d resumed (session resumption %s)\n", t.Handshakes, t.Resumed, mode)
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("loadtest: writing summary: %w", err)
	}
	return nil
}

func writeLatency(b *strings.Builder, label string, l Latency) {
	fmt.Fprintf(b, "%s:\n  p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  mean %s\n", label,
		fmtMs(l.P50), fmtMs(l.P90), fmtMs(l.P99), fmtMs(l.P999), fmtMs(l.Max), fmtMs(l.Mean))
}

func fmtMs(ms float64) string {
	switch {
	case ms < 1:
		return strconv.FormatFloat(ms*1000, 'f', 0, 64) + "µs"
	case ms < 1000:
		return strconv.FormatFloat(ms, 'f', 2, 64) + "ms"
	default:
		return strconv.FormatFloat(ms/1000, 'f', 2, 64) + "s"
	}
}
