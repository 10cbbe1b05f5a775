package loadtest

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func response(status int, ctype, body string) *fasthttp.Response {
	r := fasthttp.AcquireResponse()
	r.SetStatusCode(status)
	if ctype != "" {
		r.Header.SetContentType(ctype)
	} else {
		r.Header.SetNoDefaultContentType(true)
	}
	r.Header.Set("X-Empty", "")
	r.SetBodyString(body)
	return r
}

func TestChecks(t *testing.T) {
	ok := response(200, "application/json", `{"id":7,"name":"Ann","tags":["a","b"],"ok":true,"n":null}`)
	bad := response(503, "", `<h1>down</h1>`)
	for _, tc := range []struct {
		check     string
		onOK, onB bool // outcome on ok and on bad
	}{
		{"status == 200", true, false},
		{"status != 200", false, true},
		{"status < 400", true, false},
		{"status >= 500", false, true},
		{"header Content-Type == application/json", true, false},
		{"header Content-Type contains json", true, false},
		{"header content-type matches ^application/", true, false},
		{"header Content-Type exists", true, false},
		{"header Content-Type !exists", false, true},
		{"header X-Empty exists", false, false},
		{"header X-Empty !exists", true, true},
		{"header X-Empty == x", false, false},
		{"header X-Missing != x", true, true},
		{"header X-Missing !contains x", true, true},
		{"body contains Ann", true, false},
		{"body !contains down", true, false},
		{`body matches "id":\s*7`, true, false},
		{"body !matches ^<h1>", true, false},
		{`body == <h1>down</h1>`, false, true},
		{"body contains two words", false, false},
		{"jsonpath $.id == 7", true, false},
		{"jsonpath $.id != 7", false, false}, // a body that is not JSON fails every jsonpath check
		{"jsonpath $.id > 6.5", true, false},
		{"jsonpath $.id <= 6", false, false},
		{`jsonpath $.name == "Ann"`, true, false},
		{"jsonpath $.name == Ann", true, false},
		{"jsonpath $.name contains An", true, false},
		{"jsonpath $.name matches ^A.n$", true, false},
		{"jsonpath $.tags == [\"a\",\"b\"]", true, false},
		{"jsonpath $.tags[1] == b", true, false},
		{"jsonpath $.tags contains \"b\"", true, false},
		{"jsonpath $.ok == true", true, false},
		{"jsonpath $.n == null", true, false},
		{"jsonpath $.n exists", true, false},
		{"jsonpath $.missing exists", false, false},
		{"jsonpath $.missing !exists", true, false},
		{"jsonpath $.missing !contains x", true, false},
		{"jsonpath $[?@.id==7] exists", false, false},
		{"jsonpath $..id == 7", true, false},
	} {
		c, err := parseCheck(tc.check)
		if err != nil {
			t.Errorf("%q: %v", tc.check, err)
			continue
		}
		for _, side := range []struct {
			resp *fasthttp.Response
			want bool
		}{{ok, tc.onOK}, {bad, tc.onB}} {
			var doc jsonDoc
			if got := c.eval(side.resp, &doc); got != side.want {
				t.Errorf("%q on %d: %v, want %v (seen: %s)", tc.check, side.resp.StatusCode(), got, side.want, c.seen(side.resp, &doc))
			}
		}
	}
}

func TestCheckSyntaxErrors(t *testing.T) {
	for _, text := range []string{"", "status", "status ==", "status == ok", "status == 42", "status contains 2",
		"status exists", "body exists", "body < 3", "header", "header Bad:Name exists", "header X ~ y",
		"header X exists y", "jsonpath", "jsonpath $.[ == 1", "jsonpath $.a < x", "body matches (", "bogus == 1",
		"body !== x", "body !< x", "jsonpath $.a"} {
		if c, err := parseCheck(text); err == nil {
			t.Errorf("%q: accepted as %+v", text, c)
		} else if !strings.Contains(err.Error(), "check ") {
			t.Errorf("%q: error %q does not name the check", text, err)
		}
	}
}

// A check catches a wrong body: it counts failures apart from errors, keeps
// an example of what the server sent, and a threshold on it fails the run.
func TestChecksCatchAWrongBody(t *testing.T) {
	var n atomic.Int64
	url := startServer(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		if n.Add(1)%10 == 0 {
			ctx.SetBodyString(`{"status":"degraded"}`)
			return
		}
		ctx.SetBodyString(`{"status":"up"}`)
	})
	res := run(t, Options{Targets: []string{url}, Connections: 1, Requests: 500,
		Scenario: &Scenario{NoFlowHeader: true, Steps: []Step{{Name: "health", Path: "/",
			Checks: []string{`jsonpath $.status == "up"`}}}},
		Checks:     []string{"status == 200"},
		Thresholds: []string{"failed_checks<1%", "errors<1%", "health:failed_checks<=5%"}})
	if res.Errors != 0 || res.Requests != 500 {
		t.Fatalf("%d requests, %d errors %v", res.Requests, res.Errors, res.ErrorExamples)
	}
	want := []CheckResult{
		{Check: `jsonpath $.status == "up"`, Step: "health", Passes: 450, Fails: 50, Example: `$["status"] = "\"degraded\""`},
		{Check: "status == 200", Step: "health", Passes: 500},
	}
	if len(res.Checks) != 2 || res.Checks[0] != want[0] || res.Checks[1] != want[1] {
		t.Errorf("checks %+v, want %+v", res.Checks, want)
	}
	if res.ThresholdsHeld() || res.Thresholds[0].OK || !res.Thresholds[1].OK || !res.Thresholds[2].OK ||
		res.Thresholds[0].Measured != 0.05 || res.Thresholds[2].Step != "health" {
		t.Errorf("thresholds %+v", res.Thresholds)
	}
}

// Per-step checks and thresholds see only their step's requests.
func TestStepBreakdown(t *testing.T) {
	url := startServer(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/slow" {
			time.Sleep(5 * time.Millisecond)
			ctx.SetStatusCode(500)
		}
	})
	// Only the slow step's lower bound is timed: a loaded machine can make
	// the fast step slow, never the slow one fast.
	sc := &Scenario{NoFlowHeader: true, Steps: []Step{
		{Name: "fast", Path: "/fast", Checks: []string{"status == 200"}, Thresholds: []string{"errors<1%", "failed_checks==0"}},
		{Name: "slow", Path: "/slow", ExpectStatus: 200},
	}}
	res := run(t, Options{Targets: []string{url}, Connections: 2, Requests: 200, Scenario: sc,
		Thresholds: []string{"slow:p50>=5ms", "slow:errors>99%", "2:requests==100", "errors<=50%", "requests>=200"}})
	// The budget counts requests, not iterations: a connection whose
	// iteration began (fast) when the last request was taken ends without
	// its slow step, so fast may run up to one more time per connection.
	if len(res.Steps) != 2 {
		t.Fatalf("steps %+v", res.Steps)
	}
	fast, slow := res.Steps[0], res.Steps[1]
	if fast.Requests+slow.Requests != 200 || fast.Requests < slow.Requests || fast.Requests > slow.Requests+2 ||
		fast.Errors != 0 || slow.Errors != slow.Requests || slow.Latency.P50 < 5 {
		t.Fatalf("steps %+v", res.Steps)
	}
	for _, th := range res.Thresholds {
		if th.Threshold == "2:requests==100" {
			continue
		}
		if !th.OK {
			t.Errorf("threshold %s: %s", th.Threshold, th.Describe())
		}
	}
	if len(res.Checks) != 1 || res.Checks[0].Passes != fast.Requests {
		t.Errorf("checks %+v", res.Checks)
	}
}

func FuzzParseCheck(f *testing.F) {
	for _, s := range []string{"status == 200", "header X contains y", "body !matches ^a", "jsonpath $.a[0] == {\"b\":1}", "jsonpath $..x exists"} {
		f.Add(s)
	}
	ok := response(200, "application/json", `{"a":[{"b":1}],"x":"y"}`)
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseCheck(s)
		if err != nil {
			return
		}
		var doc jsonDoc
		c.eval(ok, &doc)
		_ = c.seen(ok, &doc)
	})
}
