package loadtest

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

func goldenResult() *Result {
	target := 150.0
	return &Result{
		Version: ResultVersion, Mode: "open", Targets: []string{"http://127.0.0.1:1"},
		Connections: 2, Scenario: "s",
		Started:         time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		DurationSeconds: 2, Requests: 200, Errors: 1, WarmupRequests: 5, Unsent: 3, Throughput: 100,
		Latency:     Latency{P50: 1, P90: 2, P99: 3, P999: 4, Max: 5, Mean: 1.5},
		Uncorrected: &Latency{P50: 0.5, P90: 1, P99: 1.5, P999: 2, Max: 2.5, Mean: 0.75},
		ErrorKinds:  map[string]int64{"timeout": 1}, ErrorExamples: map[string]string{"timeout": "x"},
		Statuses:    map[string]int64{"200": 199},
		TLS:         &TLSSummary{Handshakes: 4, Resumed: 2, Resumption: true},
		Timeline:    []TimePoint{{Second: 1, Requests: 100, Errors: 1, RPS: 100, P50: 1, P99: 3, Max: 5, Target: &target}},
		Percentiles: []PercentilePoint{{Percentile: 50, Ms: 1}, {Percentile: 100, Ms: 5}},
		Ramp: &Ramp{Unit: unitRate, Start: 100, Stages: []Stage{
			{Name: "up", Duration: Duration(time.Second), Target: 200}, {Duration: Duration(time.Second), Target: 0}}},
		Stages: []StageResult{
			{Name: "up", From: 100, To: 200, StartSecond: 0, EndSecond: 1, Requests: 150, Throughput: 150,
				Latency: Latency{P50: 1, P90: 2, P99: 3, P999: 4, Max: 5, Mean: 1.5}},
			{Name: "stage 2", From: 200, To: 0, StartSecond: 1, EndSecond: 2, Requests: 50, Errors: 1, Throughput: 50}},
		Steps: []StepResult{{Name: "login", Requests: 100, FailedChecks: 2, Throughput: 50},
			{Name: "step 2", Requests: 100, Errors: 1, Throughput: 50}},
		Checks: []CheckResult{{Check: "status == 200", Step: "login", Passes: 98, Fails: 2, Example: "status 500"}},
		Thresholds: []ThresholdResult{
			{Threshold: "p99<50ms", Metric: "p99", Op: "<", Limit: 50, Measured: 3, Unit: unitMs, OK: true},
			{Threshold: "login:errors<0.1%", Step: "login", Metric: "errors", Op: "<", Limit: 0.001, Measured: 0.01, Unit: unitRatio},
			{Threshold: "step 2:failed_checks<1%", Step: "step 2", Metric: "failed_checks", Op: "<", Limit: 0.01,
				Unit: unitRatio, Note: "no checks were made"}},
	}
}

// The JSON summary is an interface other tools read: its layout is pinned,
// and a change to it is a new version.
func TestResultJSONGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := goldenResult().WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "testdata/result_v2.json", buf.Bytes())
	back, err := ReadResult(bytes.NewReader(buf.Bytes()))
	if err != nil || back.Version != 2 || back.Uncorrected.P99 != 1.5 || *back.Timeline[0].Target != 150 ||
		back.Ramp.Stages[0].Duration != Duration(time.Second) || back.Thresholds[1].Limit != 0.001 || back.TLS.Resumed != 2 {
		t.Errorf("round trip: %v %+v", err, back)
	}
}

// A version 1 summary, as riftload wrote it before stages and thresholds,
// still reads; a version from the future does not.
func TestReadResultVersions(t *testing.T) {
	v1, err := os.ReadFile("testdata/result_v1.json")
	if err != nil {
		t.Fatal(err)
	}
	res, err := ReadResult(bytes.NewReader(v1))
	if err != nil || res.Version != ResultVersion || res.Requests != 200 || res.Uncorrected.P99 != 1.5 ||
		res.Timeline[0].Target != nil || res.ThresholdsHeld() != true {
		t.Errorf("v1: %v %+v", err, res)
	}
	for _, doc := range []string{`{"version":3}`, `{"version":0}`, `{}`, `[`} {
		if _, err := ReadResult(strings.NewReader(doc)); err == nil {
			t.Errorf("%s: read without error", doc)
		}
	}
}

// CI servers read the thresholds as JUnit XML: pinned too.
func TestJUnitGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := goldenResult().WriteJUnit(&buf); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "testdata/thresholds.junit.xml", buf.Bytes())
}

// The text and HTML reports show every threshold with its measured value,
// and every check with its first failure; user text is escaped in HTML.
func TestReportsShowThresholdsAndChecks(t *testing.T) {
	res := goldenResult()
	res.Checks = append(res.Checks, CheckResult{Check: `body contains <script>`, Step: "login", Fails: 1, Example: `body "<b>"`})
	var text, html bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := res.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ok   p99<50ms: measured 3.00ms, limit < 50.00ms",
		"FAIL login:errors<0.1%: measured 1%, limit < 0.1%",
		"FAIL step 2:failed_checks<1%: no checks were made",
		"FAIL login: status == 200  98 passed, 2 failed (e.g. status 500)",
		"up              0.0s-   1.0s  100 -> 200  150 requests  150.0 req/s",
		"open loop, 2 connections, req/s ramp 100 -> 200 -> 0 over 2s",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	h := html.String()
	for _, want := range []string{`<tr class="fail"><td>FAIL</td><td><code>login:errors&lt;0.1%</code></td><td>login</td><td>measured 1%, limit &lt; 0.1%</td>`,
		`<code>body contains &lt;script&gt;</code>`, ">up</text>", ">stage 2</text>", `stroke-dasharray="6 4"`} {
		if !strings.Contains(h, want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
	if strings.Contains(h, "<script>") || strings.Contains(h, "<b>") {
		t.Error("HTML report carries user text unescaped")
	}
}

func TestThresholdJSONRoundTrip(t *testing.T) {
	b, err := json.Marshal(goldenResult().Thresholds[0])
	if err != nil || string(b) != `{"threshold":"p99\u003c50ms","metric":"p99","op":"\u003c","limit":50,"measured":3,"unit":"ms","ok":true}` {
		t.Errorf("%s %v", b, err)
	}
}
