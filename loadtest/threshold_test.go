package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/valyala/fasthttp"
)

func TestParseThreshold(t *testing.T) {
	steps := []Step{{Name: "login"}, {Name: "a:b"}, {}}
	for _, tc := range []struct {
		in     string
		step   int
		metric string
		op     checkOp
		limit  float64
	}{
		{"p99<50", -1, "p99", opLt, 50},
		{"p99 < 50ms", -1, "p99", opLt, 50},
		{"p99.9<=2s", -1, "p99.9", opLe, 2000},
		{"p50<250us", -1, "p50", opLt, 0.25},
		{"p50<250µs", -1, "p50", opLt, 0.25},
		{"p100<1s", -1, "p100", opLt, 1000},
		{"mean<10", -1, "mean", opLt, 10},
		{"max<=1m", -1, "max", opLe, 60000},
		{"errors<0.1%", -1, "errors", opLt, 0.001},
		{"errors<0.01", -1, "errors", opLt, 0.01},
		{"failed_checks==0", -1, "failed_checks", opEq, 0},
		{"rps>=1000", -1, "rps", opGe, 1000},
		{"requests>10", -1, "requests", opGt, 10},
		{"requests!=0", -1, "requests", opNe, 0},
		{"login:p95<20ms", 0, "p95", opLt, 20},
		{"a:b:errors<1%", 1, "errors", opLt, 0.01},
		{"3:rps>1", 2, "rps", opGt, 1},
	} {
		th, err := parseThreshold(tc.in, steps)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if th.step != tc.step || th.metric != tc.metric || th.op != tc.op || th.limit != tc.limit {
			t.Errorf("%q: %+v", tc.in, th)
		}
	}
	for _, bad := range []string{"", "p99", "p99<", "p99<x", "p0<1", "p101<1", "px<1", "errors<150%", "errors<-1%",
		"latency<1", "nope:p99<1", "4:p99<1", "p99=>1", "p99<>1", "p99~1", "rps>NaN", "rps>Inf", "p99 contains 1"} {
		if th, err := parseThreshold(bad, steps); err == nil {
			t.Errorf("%q: accepted as %+v", bad, th)
		}
	}
}

func TestThresholdEvaluate(t *testing.T) {
	h := hdrhistogram.New(histMin, histMax, histSigFigs)
	for v := int64(1); v <= 100; v++ {
		_ = h.RecordValue(v * 1000) // 1..100 ms
	}
	m := measured{requests: 100, errors: 2, checks: 200, failedChecks: 1, seconds: 4, hist: h}
	for _, tc := range []struct {
		in       string
		measured float64
		ok       bool
	}{
		// The histogram keeps three significant digits: a latency reads back
		// as the top of its bucket, within 0.1%.
		{"p50<=50.1ms", 50, true},
		{"p99<99ms", 99, false},
		{"max>=100", 100, true},
		{"mean<50", 50.5, false},
		{"errors<=2%", 0.02, true},
		{"errors<2%", 0.02, false},
		{"failed_checks<1%", 0.005, true},
		{"rps==25", 25, true},
		{"requests>100", 100, false},
	} {
		th, err := parseThreshold(tc.in, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := th.evaluate(m, "")
		if math.Abs(r.Measured-tc.measured) > 0.001*tc.measured || r.OK != tc.ok {
			t.Errorf("%s: measured %v ok %v, want %v %v", tc.in, r.Measured, r.OK, tc.measured, tc.ok)
		}
	}
	// Nothing measured fails a threshold rather than passing it vacuously.
	for _, in := range []string{"p99<1s", "errors<50%", "failed_checks<1%"} {
		th, _ := parseThreshold(in, nil)
		if r := th.evaluate(measured{hist: h}, ""); r.OK || r.Note == "" {
			t.Errorf("%s with nothing measured: %+v", in, r)
		}
	}
}

// Through the command line, as CI runs it: thresholds that hold exit 0,
// one that does not exits 3, and every report shows each threshold with
// its measured value.
func TestMainThresholdsExitCode(t *testing.T) {
	url := startServer(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"ok":true}`)
	})
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		extra []string
		code  int
	}{
		{"hold", []string{"-threshold", "p99<5s", "-threshold", "errors<0.1%", "-check", "jsonpath $.ok == true",
			"-threshold", "failed_checks==0"}, 0},
		{"latency", []string{"-threshold", "p50<1us", "-threshold", "errors<0.1%"}, thresholdExitCode},
		{"check", []string{"-check", "body contains nope", "-threshold", "failed_checks<1%"}, thresholdExitCode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			junit, js := filepath.Join(dir, tc.name+".xml"), filepath.Join(dir, tc.name+".json")
			var stdout, stderr bytes.Buffer
			args := append([]string{url + "/", "-n", "200", "-c", "2", "-progress", "never", "-junit", junit, "-json-out", js}, tc.extra...)
			code := Main(context.Background(), args, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), "thresholds:\n") {
				t.Errorf("text summary has no thresholds:\n%s", stdout.String())
			}
			if (code != 0) != strings.Contains(stderr.String(), "thresholds failed") {
				t.Errorf("stderr: %s", stderr.String())
			}
			x, err := os.ReadFile(junit)
			if err != nil || !bytes.Contains(x, []byte(`<testsuite name="riftload thresholds"`)) ||
				bytes.Contains(x, []byte("<failure")) != (code != 0) {
				t.Errorf("JUnit: %v\n%s", err, x)
			}
			f, err := os.Open(js)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			res, err := ReadResult(f)
			if err != nil || len(res.Thresholds) == 0 || res.ThresholdsHeld() != (code == 0) {
				t.Errorf("JSON: %v %+v", err, res)
			}
		})
	}
}

func TestMainRampAndCheckFlags(t *testing.T) {
	url := startServer(t, func(*fasthttp.RequestCtx) {})
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{url, "-ramp-users", "1,300ms:3", "-format", "json", "-progress", "never"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.Connections != 3 || res.Ramp == nil ||
		len(res.Stages) != 1 || res.DurationSeconds > 1 || res.Requests == 0 {
		t.Errorf("%v %+v", err, res)
	}
	sc := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(sc, []byte(`{"ramp":{"unit":"rate","start":50,"stages":[{"duration":"300ms","target":100}]},
		"thresholds":["requests>=10"],"steps":[{"path":"/","checks":["status == 200"],"thresholds":["p99<5s"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	start := time.Now()
	code = Main(context.Background(), []string{"-scenario", sc, url, "-progress", "never"}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "req/s ramp 50 -> 100 over 300ms") ||
		!strings.Contains(stdout.String(), "ok   step 1: status == 200") || time.Since(start) > 5*time.Second {
		t.Errorf("exit %d:\n%s%s", code, stdout.String(), stderr.String())
	}
}

func TestMainRampUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"http://127.0.0.1:1/", "-ramp-rate", "1s:10", "-ramp-users", "1s:1"},
		{"http://127.0.0.1:1/", "-ramp-rate", "1s:10", "-d", "1s"},
		{"http://127.0.0.1:1/", "-ramp-rate", "1s:10", "-rate", "5"},
		{"http://127.0.0.1:1/", "-ramp-users", "1s:10", "-c", "2"},
		{"http://127.0.0.1:1/", "-ramp-rate", "x"},
		{"http://127.0.0.1:1/", "-check", "bogus"},
		{"http://127.0.0.1:1/", "-threshold", "p99"},
		{"http://127.0.0.1:1/", "-threshold", "nostep:p99<1"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), args, &stdout, &stderr); code != 2 && code != 1 {
			t.Errorf("%v: exit %d\n%s", args, code, stderr.String())
		} else if stderr.Len() == 0 {
			t.Errorf("%v: no message", args)
		}
	}
}

func FuzzParseThreshold(f *testing.F) {
	for _, s := range []string{"p99<50ms", "login:errors<0.1%", "rps>=1", "p99.99<=1m", "2:requests==1"} {
		f.Add(s)
	}
	h := newHist()
	_ = h.RecordValue(1000)
	f.Fuzz(func(t *testing.T, s string) {
		th, err := parseThreshold(s, []Step{{Name: "login"}, {}})
		if err != nil {
			return
		}
		r := th.evaluate(measured{requests: 1, checks: 1, seconds: 1, hist: h}, "")
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
	})
}
