package loadtest

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"pgregory.net/rapid"
)

func TestParseRamp(t *testing.T) {
	for _, tc := range []struct {
		unit, in string
		want     *Ramp // nil: an error
	}{
		{unitRate, "30s:100", &Ramp{Unit: unitRate, Stages: []Stage{{Duration: Duration(30 * time.Second), Target: 100}}}},
		{unitRate, "50, 1m:500 ,10s:0", &Ramp{Unit: unitRate, Start: 50, Stages: []Stage{
			{Duration: Duration(time.Minute), Target: 500}, {Duration: Duration(10 * time.Second), Target: 0}}}},
		{unitUsers, "2,500ms:10.5", &Ramp{Unit: unitUsers, Start: 2, Stages: []Stage{{Duration: Duration(500 * time.Millisecond), Target: 10.5}}}},
		{unitRate, "", nil},
		{unitRate, "100", nil},        // no stages
		{unitRate, "30s:100,50", nil}, // a start value only first
		{unitRate, "0s:100", nil},     // empty stage
		{unitRate, "-5s:100", nil},    // negative duration
		{unitRate, "30s:-1", nil},     // negative target
		{unitRate, "30s:NaN", nil},    // not a number
		{unitRate, "30:100", nil},     // duration without unit
		{unitUsers, "1s:100001", nil}, // more users than connections allow
		{"fast", "1s:1", nil},         // unknown unit
		{unitRate, "1s:1e99", nil},    // absurd rate
		{unitRate, "1s:x", nil},       // target not a number
		{unitRate, "x,1s:1", nil},     // start not a number
		{unitRate, "1s:1,,2s:2", nil}, // empty item
		{unitRate, "1s:1:2", nil},     // two colons
		{unitUsers, "1s:1,1s:1,1s:1", &Ramp{Unit: unitUsers, Stages: []Stage{{Duration: Duration(time.Second), Target: 1},
			{Duration: Duration(time.Second), Target: 1}, {Duration: Duration(time.Second), Target: 1}}}},
	} {
		got, err := ParseRamp(tc.unit, tc.in)
		switch {
		case tc.want == nil && err == nil:
			t.Errorf("%s %q: accepted as %+v", tc.unit, tc.in, got)
		case tc.want != nil && err != nil:
			t.Errorf("%s %q: %v", tc.unit, tc.in, err)
		case tc.want != nil && !rampEqual(got, tc.want):
			t.Errorf("%s %q: %+v, want %+v", tc.unit, tc.in, got, tc.want)
		}
	}
}

func rampEqual(a, b *Ramp) bool {
	if a.Unit != b.Unit || a.Start != b.Start || len(a.Stages) != len(b.Stages) {
		return false
	}
	for i := range a.Stages {
		if a.Stages[i] != b.Stages[i] {
			return false
		}
	}
	return true
}

// The schedule of a ramp is the inverse of its cumulative count: request k
// is due when k requests have been scheduled before it, in order, inside
// the ramp, and the value at any time is the straight line of its stage.
func TestProfileScheduleProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := &Ramp{Unit: unitRate, Start: rapid.Float64Range(0, 5000).Draw(t, "start")}
		for i := range rapid.IntRange(1, 5).Draw(t, "stages") {
			_ = i
			r.Stages = append(r.Stages, Stage{
				Duration: Duration(rapid.Int64Range(int64(time.Millisecond), int64(10*time.Second)).Draw(t, "d")),
				Target:   rapid.SampledFrom([]float64{0, 1, 100, rapid.Float64Range(0, 5000).Draw(t, "v")}).Draw(t, "t")})
		}
		warm := time.Duration(rapid.Int64Range(0, int64(time.Second)).Draw(t, "warmup"))
		p := rampProfile(r, warm)
		end := int64(warm) + int64(r.Total())
		total := p.due(end)
		seg, last := 0, int64(-1)
		for k := 0.0; k < total-1e-6 && k < 5000; k++ {
			at, ok := p.timeOf(k, &seg)
			if !ok {
				t.Fatalf("request %v of %v not scheduled", k, total)
			}
			if at < last || at < 0 || at > end {
				t.Fatalf("request %v due at %d, after %d, end %d", k, at, last, end)
			}
			if got := p.due(at); math.Abs(got-k) > 1e-3*max(1, k) {
				t.Fatalf("request %v due at %d, where %v are due", k, at, got)
			}
			last = at
		}
		if _, ok := p.timeOf(math.Ceil(total+1e-9)+1, &seg); ok {
			t.Fatalf("a request past the ramp's %v is scheduled", total)
		}
		// The value follows the stages.
		at := int64(warm)
		from := r.Start
		for i, st := range r.Stages {
			mid := at + int64(st.Duration)/2
			if want := (from + st.Target) / 2; math.Abs(p.at(mid)-want) > 1e-6*max(1, want)+math.Abs(st.Target-from)/float64(st.Duration) {
				t.Fatalf("stage %d: value %v mid-way, want %v", i, p.at(mid), want)
			}
			if p.stageAt(mid) != i {
				t.Fatalf("stage %d: stageAt says %d", i, p.stageAt(mid))
			}
			at += int64(st.Duration)
			from = st.Target
		}
	})
}

func TestConstantProfileIsTheOldSchedule(t *testing.T) {
	p := constantProfile(300)
	seg := 0
	for k := range int64(1000) {
		at, ok := p.timeOf(float64(k), &seg)
		if want := int64(float64(k) * float64(time.Second) / 300); !ok || at != want {
			t.Fatalf("request %d at %d, want %d", k, at, want)
		}
	}
	if due := p.due(int64(time.Second)); due != 300 {
		t.Errorf("%v due in a second", due)
	}
}

// An open-loop ramp's measured rate follows its stages: within 5% of each
// stage's mean target, against a real server.
func TestRateRampFollowsStages(t *testing.T) {
	url := startServer(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") })
	ramp := &Ramp{Unit: unitRate, Start: 200, Stages: []Stage{
		{Name: "up", Duration: Duration(time.Second), Target: 2000},
		{Name: "hold", Duration: Duration(time.Second), Target: 2000},
		{Name: "down", Duration: Duration(time.Second), Target: 500},
		{Name: "idle", Duration: Duration(500 * time.Millisecond), Target: 0},
	}}
	res := run(t, Options{Targets: []string{url}, Scenario: simple("/"), Connections: 32, Ramp: ramp,
		Interval: 250 * time.Millisecond})
	if res.Mode != "open" || res.Errors != 0 || res.Unsent != 0 || len(res.Stages) != 4 {
		t.Fatalf("mode %s, errors %v, unsent %d, %d stages", res.Mode, res.ErrorKinds, res.Unsent, len(res.Stages))
	}
	for _, st := range res.Stages {
		want := (st.From + st.To) / 2
		if math.Abs(st.Throughput-want) > 0.05*want+1 {
			t.Errorf("stage %s: %.1f req/s, want %.1f within 5%%", st.Name, st.Throughput, want)
		}
	}
	// 1100 + 2000 + 1250 + 125 requests in all.
	if res.Requests < 4400 || res.Requests > 4500 {
		t.Errorf("%d requests, want about 4475", res.Requests)
	}
	marked := 0
	for _, p := range res.Timeline {
		if p.Target != nil {
			marked++
		}
	}
	if marked != len(res.Timeline) || len(res.Timeline) < 8 {
		t.Errorf("%d of %d timeline points carry the target", marked, len(res.Timeline))
	}
}

// A closed-loop ramp lets as many users send as its stages say: never more,
// and all of them while it holds its peak.
func TestUsersRampFollowsStages(t *testing.T) {
	var inFlight, peak atomic.Int64
	var mu sync.Mutex
	type obs struct {
		at time.Time
		n  int64
	}
	var seen []obs
	url := startServer(t, func(ctx *fasthttp.RequestCtx) {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		mu.Lock()
		seen = append(seen, obs{time.Now(), n})
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		inFlight.Add(-1)
	})
	ramp := &Ramp{Unit: unitUsers, Stages: []Stage{
		{Name: "up", Duration: Duration(time.Second), Target: 8},
		{Name: "hold", Duration: Duration(time.Second), Target: 8},
		{Name: "down", Duration: Duration(500 * time.Millisecond), Target: 2},
	}}
	start := time.Now()
	res := run(t, Options{Targets: []string{url}, Scenario: simple("/"), Connections: 8, Ramp: ramp})
	if res.Mode != "closed" || res.Errors != 0 || len(res.Stages) != 3 {
		t.Fatalf("mode %s, errors %v, stages %+v", res.Mode, res.ErrorKinds, res.Stages)
	}
	if peak.Load() != 8 {
		t.Errorf("at most %d requests in flight, want the peak's 8", peak.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	var early, late int64
	for _, o := range seen {
		switch at := o.at.Sub(start); {
		case at < 200*time.Millisecond:
			early = max(early, o.n)
		case at > 2420*time.Millisecond && at < 2500*time.Millisecond:
			late = max(late, o.n)
		}
	}
	// The ramp allows round(1.6) users at 0.2 s, and round(3.0) down to 2
	// after 2.42 s, when a user just let go may still finish a request.
	if early > 2 || late > 4 || late < 1 {
		t.Errorf("in flight: at most %d early in the ramp up, %d late in the ramp down", early, late)
	}
	hold := res.Stages[1].Throughput
	if up := res.Stages[0].Throughput; up > 0.75*hold || up < 0.25*hold {
		t.Errorf("ramping up to 8 users ran %.0f req/s, holding 8 ran %.0f: want about half", up, hold)
	}
}

// A ramp's run ends with its stages, a count bound ends it earlier, and
// cancelling it lets waiting users go at once.
func TestRampEnds(t *testing.T) {
	url := startServer(t, func(*fasthttp.RequestCtx) {})
	ramp := &Ramp{Unit: unitUsers, Stages: []Stage{{Duration: Duration(time.Hour), Target: 0}}, Start: 1}
	start := time.Now()
	res := run(t, Options{Targets: []string{url}, Scenario: simple("/"), Connections: 4, Ramp: ramp, Requests: 300})
	if res.Requests != 300 || time.Since(start) > 10*time.Second {
		t.Errorf("%d requests in %v", res.Requests, time.Since(start))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	zero := &Ramp{Unit: unitUsers, Stages: []Stage{{Duration: Duration(time.Hour), Target: 0}}}
	start = time.Now()
	if _, err := Run(ctx, Options{Targets: []string{url}, Scenario: simple("/"), Connections: 4, Ramp: zero}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("a cancelled ramp of idle users took %v to end", d)
	}
}

func TestRampOptionErrors(t *testing.T) {
	url := "http://127.0.0.1:1"
	users := &Ramp{Unit: unitUsers, Stages: []Stage{{Duration: Duration(time.Second), Target: 10}}}
	rate := &Ramp{Unit: unitRate, Stages: []Stage{{Duration: Duration(time.Second), Target: 10}}}
	for name, o := range map[string]Options{
		"too few connections": {Targets: []string{url}, Scenario: simple("/"), Connections: 5, Ramp: users},
		"rate and ramp":       {Targets: []string{url}, Scenario: simple("/"), Connections: 5, Ramp: rate, Rate: 10},
		"other duration":      {Targets: []string{url}, Scenario: simple("/"), Connections: 5, Ramp: rate, Duration: time.Minute},
		"two ramps": {Targets: []string{url}, Connections: 5, Ramp: rate,
			Scenario: &Scenario{Steps: []Step{{Path: "/"}}, Ramp: rate}},
	} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzParseRamp(f *testing.F) {
	for _, s := range []string{"30s:100", "50,1m:500,10s:0", "1s:1e99", "x", ",", "1h:1,1ns:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, unit := range []string{unitRate, unitUsers} {
			r, err := ParseRamp(unit, s)
			if err != nil {
				continue
			}
			// Whatever it accepts makes a schedule that ends.
			p := rampProfile(r, 0)
			if n := p.due(int64(r.Total())); math.IsNaN(n) || n < 0 {
				t.Fatalf("%q: %v requests due", s, n)
			}
		}
	})
}
