package loadtest

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// A threshold is a pass/fail condition on a run's measurements, written as
//
//	[STEP:]METRIC OP VALUE
//
// with OP one of < <= > >= == !=.
// METRIC is a latency percentile (p50, p95, p99.9, ...), mean or max, with
// VALUE in ms unless it says us, ms or s; errors or failed_checks, a rate
// written as a percentage (0.1%) or a fraction (0.001); rps, the
// throughput; or requests, the count. A STEP prefix (a
// scenario step's name, or its number from 1) scopes it to that step's
// requests; in a scenario file a step's own thresholds need none. A run
// whose thresholds do not all hold ends with exit code 3.
type threshold struct {
	text   string
	step   int // -1: the whole run
	metric string
	pct    float64 // latency percentile, for a p metric
	op     checkOp
	limit  float64 // in the metric's unit: ms, a fraction, req/s or a count
}

// Threshold units, as reports show them.
const (
	unitMs    = "ms"
	unitRatio = "ratio"
	unitRPS   = "req/s"
	unitCount = "requests"
)

// thresholdExitCode is riftload's exit code when a threshold does not hold.
const thresholdExitCode = 3

func (t *threshold) unit() string {
	switch t.metric {
	case "errors", "failed_checks":
		return unitRatio
	case "rps":
		return unitRPS
	case "requests":
		return unitCount
	}
	return unitMs
}

// parseThreshold compiles one threshold; steps resolves a STEP prefix.
func parseThreshold(text string, steps []Step) (*threshold, error) {
	t := &threshold{text: strings.TrimSpace(text), step: -1}
	fail := func(format string, a ...any) (*threshold, error) {
		return nil, fmt.Errorf("threshold %q: %s", t.text, fmt.Sprintf(format, a...))
	}
	expr := t.text
	if i := strings.LastIndex(expr, ":"); i >= 0 {
		scope := strings.TrimSpace(expr[:i])
		expr = expr[i+1:]
		t.step = findStep(scope, steps)
		if t.step < 0 {
			return fail("no step named %q", scope)
		}
	}
	i := strings.IndexAny(expr, "<>=!")
	if i < 0 {
		return fail("want METRIC < VALUE (or <=, >, >=, ==, !=)")
	}
	t.metric = strings.TrimSpace(expr[:i])
	opLen := 1
	if i+1 < len(expr) && expr[i+1] == '=' {
		opLen = 2
	}
	op, ok := checkOps[expr[i:i+opLen]]
	if !ok || op > opGe {
		return fail("want METRIC < VALUE (or <=, >, >=, ==, !=)")
	}
	t.op = op
	value := strings.TrimSpace(expr[i+opLen:])
	switch {
	case t.metric == "mean" || t.metric == "max":
	case strings.HasPrefix(t.metric, "p"):
		p, err := strconv.ParseFloat(t.metric[1:], 64)
		if err != nil || !(p > 0 && p <= 100) {
			return fail("%q is not a percentile (p50, p99, p99.9, ...)", t.metric)
		}
		t.pct = p
	case t.metric == "errors" || t.metric == "failed_checks" || t.metric == "rps" || t.metric == "requests":
	default:
		return fail("unknown metric %q (want pNN, mean, max, errors, failed_checks, rps or requests)", t.metric)
	}
	var err error
	switch t.unit() {
	case unitMs:
		t.limit, err = parseMs(value)
	case unitRatio:
		pct := strings.HasSuffix(value, "%")
		t.limit, err = strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(value, "%")), 64)
		if pct {
			t.limit /= 100
		}
		if err == nil && (t.limit < 0 || t.limit > 1) {
			err = fmt.Errorf("%q is not a rate between 0 and 100%%", value)
		}
	default:
		t.limit, err = strconv.ParseFloat(value, 64)
	}
	if err == nil && (math.IsNaN(t.limit) || math.IsInf(t.limit, 0)) {
		err = fmt.Errorf("%q is not a number", value)
	}
	if err != nil {
		return fail("%v", err)
	}
	return t, nil
}

// parseMs reads a latency: a number of ms, or a Go duration (250us, 2s).
func parseMs(v string) (float64, error) {
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		return n, nil
	}
	d, err := time.ParseDuration(strings.ReplaceAll(v, "µs", "us"))
	if err != nil {
		return 0, fmt.Errorf("%q is not a latency (50, 50ms, 250us, 2s)", v)
	}
	return float64(d) / float64(time.Millisecond), nil
}

// findStep resolves a step by name, or by number from 1; -1 if none.
func findStep(scope string, steps []Step) int {
	for i, st := range steps {
		if st.Name == scope {
			return i
		}
	}
	if n, err := strconv.Atoi(scope); err == nil && n >= 1 && n <= len(steps) {
		return n - 1
	}
	return -1
}

// ThresholdResult is one threshold and what the run measured for it.
type ThresholdResult struct {
	Threshold string  `json:"threshold"`
	Step      string  `json:"step,omitempty"`
	Metric    string  `json:"metric"`
	Op        string  `json:"op"`
	Limit     float64 `json:"limit"`
	Measured  float64 `json:"measured"`
	Unit      string  `json:"unit"`
	OK        bool    `json:"ok"`
	// Note says why a threshold failed without a measurement.
	Note string `json:"note,omitempty"`
}

// measured is what a threshold looks at: the whole run's or one step's.
type measured struct {
	requests, errors     int64
	checks, failedChecks int64
	seconds              float64
	hist                 *hdrhistogram.Histogram
}

// evaluate checks t against m.
func (t *threshold) evaluate(m measured, stepName string) ThresholdResult {
	r := ThresholdResult{Threshold: t.text, Step: stepName, Metric: t.metric, Op: opText(t.op),
		Limit: t.limit, Unit: t.unit()}
	switch {
	case t.metric == "failed_checks" && m.checks == 0:
		r.Note = "no checks were made"
	case t.metric != "requests" && m.requests == 0:
		r.Note = "no requests were measured"
	}
	if r.Note != "" {
		return r
	}
	switch t.metric {
	case "errors":
		r.Measured = float64(m.errors) / float64(m.requests)
	case "failed_checks":
		r.Measured = float64(m.failedChecks) / float64(m.checks)
	case "rps":
		if m.seconds > 0 {
			r.Measured = float64(m.requests) / m.seconds
		}
	case "requests":
		r.Measured = float64(m.requests)
	case "mean":
		r.Measured = math.Round(m.hist.Mean()) / 1000
	case "max":
		r.Measured = usToMs(m.hist.Max())
	default:
		r.Measured = usToMs(m.hist.ValueAtQuantile(t.pct))
	}
	r.OK = compareNum(t.op, r.Measured, t.limit)
	return r
}

func opText(op checkOp) string {
	for k, v := range checkOps {
		if v == op {
			return k
		}
	}
	return "?"
}

// Describe says what was measured against the limit, in the metric's unit.
func (r ThresholdResult) Describe() string {
	if r.Note != "" {
		return r.Note
	}
	f := func(v float64) string {
		switch r.Unit {
		case unitMs:
			return fmtMs(v)
		case unitRatio:
			return strconv.FormatFloat(v*100, 'g', 4, 64) + "%"
		case unitRPS:
			return strconv.FormatFloat(v, 'f', 1, 64) + " req/s"
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return "measured " + f(r.Measured) + ", limit " + r.Op + " " + f(r.Limit)
}
