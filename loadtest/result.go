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
// checks it before trusting any other field. Version 2 added the ramp and
// its stages, steps, checks, thresholds, the timeline's target and the
// tls object; a version 1 summary reads as a version 2 one without them
// (ReadResult).
const ResultVersion = 2

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
	// Ramp is the load profile, and Stages what each of its stages measured.
	Ramp   *Ramp         `json:"ramp,omitempty"`
	Stages []StageResult `json:"stages,omitempty"`
	// Steps break a scenario of more than one step down by step.
	Steps      []StepResult      `json:"steps,omitempty"`
	Checks     []CheckResult     `json:"checks,omitempty"`
	Thresholds []ThresholdResult `json:"thresholds,omitempty"`

	hist *hdrhistogram.Histogram // Latency's source, for merging runs
}

// StepResult is what one scenario step measured.
type StepResult struct {
	Name         string  `json:"name"`
	Requests     int64   `json:"requests"`
	Errors       int64   `json:"errors"`
	FailedChecks int64   `json:"failedChecks"`
	Throughput   float64 `json:"throughput"`
	Latency      Latency `json:"latency"`
}

// StageResult is what one ramp stage measured: the requests whose intended
// send time fell in it.
type StageResult struct {
	Name        string  `json:"name"`
	From        float64 `json:"from"` // the ramp's value at the stage's start
	To          float64 `json:"to"`
	StartSecond float64 `json:"startSecond"` // from the start of measuring
	EndSecond   float64 `json:"endSecond"`
	Requests    int64   `json:"requests"`
	Errors      int64   `json:"errors"`
	Throughput  float64 `json:"throughput"`
	Latency     Latency `json:"latency"`
}

// CheckResult counts one check's outcomes over the answered requests of
// its step, with what the first failure showed.
type CheckResult struct {
	Check   string `json:"check"`
	Step    string `json:"step"`
	Passes  int64  `json:"passes"`
	Fails   int64  `json:"fails"`
	Example string `json:"example,omitempty"`
}

// ThresholdsHeld reports whether every threshold held (true when none).
func (res *Result) ThresholdsHeld() bool {
	for _, t := range res.Thresholds {
		if !t.OK {
			return false
		}
	}
	return true
}

// ReadResult reads a JSON summary of this or an earlier version.
func ReadResult(rd io.Reader) (*Result, error) {
	var res Result
	if err := json.NewDecoder(rd).Decode(&res); err != nil {
		return nil, fmt.Errorf("loadtest: reading JSON summary: %w", err)
	}
	switch res.Version {
	case 1: // a subset of version 2
		res.Version = ResultVersion
	case ResultVersion:
	default:
		return nil, fmt.Errorf("loadtest: JSON summary version %d; this riftload reads 1 to %d", res.Version, ResultVersion)
	}
	return &res, nil
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
	r.breakDown(res)
	if r.rate != nil {
		if r.end > 0 {
			due := int64(math.Ceil(r.rate.due(r.end)) - math.Ceil(r.rate.due(r.measureFrom)))
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
	switch {
	case res.Ramp != nil:
		unit := "req/s"
		if res.Ramp.Unit == unitUsers {
			unit = "users"
		}
		fmt.Fprintf(&b, ", %s ramp %g", unit, res.Ramp.Start)
		for _, st := range res.Ramp.Stages {
			fmt.Fprintf(&b, " -> %g", st.Target)
		}
		fmt.Fprintf(&b, " over %v", res.Ramp.Total())
	case res.Mode == "open":
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
	if len(res.Stages) > 0 {
		fmt.Fprintf(&b, "stages (%s ramp):\n", res.Ramp.Unit)
		for _, st := range res.Stages {
			fmt.Fprintf(&b, "  %-12s %6.1fs-%6.1fs  %g -> %g  %d requests  %.1f req/s  %d errors  p50 %s  p99 %s\n",
				st.Name, st.StartSecond, st.EndSecond, st.From, st.To, st.Requests, st.Throughput, st.Errors,
				fmtMs(st.Latency.P50), fmtMs(st.Latency.P99))
		}
	}
	if len(res.Steps) > 0 {
		b.WriteString("steps:\n")
		for _, st := range res.Steps {
			fmt.Fprintf(&b, "  %-12s %d requests  %.1f req/s  %d errors  %d failed checks  p50 %s  p99 %s\n",
				st.Name, st.Requests, st.Throughput, st.Errors, st.FailedChecks, fmtMs(st.Latency.P50), fmtMs(st.Latency.P99))
		}
	}
	if len(res.Checks) > 0 {
		b.WriteString("checks:\n")
		for _, c := range res.Checks {
			mark := "ok  "
			if c.Fails > 0 {
				mark = "FAIL"
			}
			fmt.Fprintf(&b, "  %s %s: %s  %d passed, %d failed", mark, c.Step, c.Check, c.Passes, c.Fails)
			if c.Example != "" {
				fmt.Fprintf(&b, " (e.g. %s)", c.Example)
			}
			b.WriteString("\n")
		}
	}
	if len(res.Thresholds) > 0 {
		b.WriteString("thresholds:\n")
		for _, t := range res.Thresholds {
			mark := "ok  "
			if !t.OK {
				mark = "FAIL"
			}
			fmt.Fprintf(&b, "  %s %s: %s\n", mark, t.Threshold, t.Describe())
		}
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

// stepName is a step's name in reports: its own, or its number.
func stepName(steps []Step, i int) string {
	if n := steps[i].Name; n != "" {
		return n
	}
	return "step " + strconv.Itoa(i+1)
}

// breakDown fills res's steps, stages, checks and thresholds from the
// shards.
func (r *runner) breakDown(res *Result) {
	sc := r.opts.Scenario
	steps := make([]tally, len(r.steps))
	stages := make([]tally, len(r.shards[0].stages))
	checks := make([]checkTally, r.nChecks)
	for _, s := range r.shards {
		s.mu.Lock()
		for i := range s.steps {
			steps[i].merge(&s.steps[i])
		}
		for i := range s.stages {
			stages[i].merge(&s.stages[i])
		}
		for i, c := range s.checks {
			checks[i].passes += c.passes
			checks[i].fails += c.fails
			if checks[i].example == "" {
				checks[i].example = c.example
			}
		}
		s.mu.Unlock()
	}
	whole := measured{requests: res.Requests, errors: res.Errors, seconds: res.DurationSeconds, hist: res.hist}
	for _, c := range checks {
		whole.checks += c.passes + c.fails
		whole.failedChecks += c.fails
	}
	if len(steps) == 1 {
		steps[0] = tally{requests: whole.requests, errors: whole.errors, checks: whole.checks,
			failedChecks: whole.failedChecks, hist: whole.hist}
	} else {
		for i, t := range steps {
			res.Steps = append(res.Steps, StepResult{Name: stepName(sc.Steps, i), Requests: t.requests,
				Errors: t.errors, FailedChecks: t.failedChecks, Throughput: perSecond(t.requests, res.DurationSeconds),
				Latency: summarizeOrZero(t.hist)})
		}
	}
	for i, st := range r.steps {
		for j, c := range st.checks {
			ct := checks[st.checkBase+j]
			res.Checks = append(res.Checks, CheckResult{Check: c.text, Step: stepName(sc.Steps, i),
				Passes: ct.passes, Fails: ct.fails, Example: ct.example})
		}
	}
	if r.ramp != nil {
		res.Ramp = r.ramp
		at := time.Duration(0)
		from := r.ramp.Start
		for i, st := range r.ramp.Stages {
			t := stages[i]
			d := time.Duration(st.Duration)
			res.Stages = append(res.Stages, StageResult{Name: r.ramp.stageName(i), From: from, To: st.Target,
				StartSecond: at.Seconds(), EndSecond: (at + d).Seconds(), Requests: t.requests, Errors: t.errors,
				Throughput: perSecond(t.requests, d.Seconds()), Latency: summarizeOrZero(t.hist)})
			at += d
			from = st.Target
		}
	}
	for _, th := range r.thresholds {
		if th.step < 0 {
			res.Thresholds = append(res.Thresholds, th.evaluate(whole, ""))
			continue
		}
		t := steps[th.step]
		m := measured{requests: t.requests, errors: t.errors, checks: t.checks, failedChecks: t.failedChecks,
			seconds: res.DurationSeconds, hist: t.hist}
		res.Thresholds = append(res.Thresholds, th.evaluate(m, stepName(sc.Steps, th.step)))
	}
}

func perSecond(n int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(n) / seconds
}

func summarizeOrZero(h *hdrhistogram.Histogram) Latency {
	if h == nil {
		return Latency{}
	}
	return summarize(h)
}
