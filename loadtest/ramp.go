package loadtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Ramp is a load profile: the load starts at Start and moves linearly to
// each stage's Target over the stage's Duration, one stage after the other,
// as k6's stages do. With Unit "rate" the load is an open loop and the
// values are requests per second; with Unit "users" it is a closed loop and
// the values are how many virtual users send.
type Ramp struct {
	Unit   string  `json:"unit"`
	Start  float64 `json:"start,omitempty"`
	Stages []Stage `json:"stages"`
}

// Stage is one leg of a Ramp.
type Stage struct {
	Name     string   `json:"name,omitempty"`
	Duration Duration `json:"duration"`
	Target   float64  `json:"target"`
}

// Duration is a time.Duration written as Go writes one ("30s", "1m30s") in
// scenario files and the JSON summary.
type Duration time.Duration

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`a duration is a string such as "30s" or "1m30s"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

const (
	unitRate  = "rate"
	unitUsers = "users"
	// maxStages keeps the per-stage statistics small.
	maxStages = 100
)

// ParseRamp reads a ramp's flag form: an optional start value, then
// DURATION:TARGET stages, comma-separated ("100,30s:500,1m:500,10s:0").
func ParseRamp(unit, s string) (*Ramp, error) {
	r := &Ramp{Unit: unit}
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		d, v, staged := strings.Cut(part, ":")
		if !staged {
			if i != 0 {
				return nil, fmt.Errorf("ramp %q: %q is not DURATION:TARGET (only the first item may be a bare start value)", s, part)
			}
			var err error
			if r.Start, err = strconv.ParseFloat(part, 64); err != nil {
				return nil, fmt.Errorf("ramp %q: start %q is not a number", s, part)
			}
			continue
		}
		dur, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return nil, fmt.Errorf("ramp %q: stage %q: %w", s, part, err)
		}
		t, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return nil, fmt.Errorf("ramp %q: stage %q: target %q is not a number", s, part, v)
		}
		r.Stages = append(r.Stages, Stage{Duration: Duration(dur), Target: t})
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Ramp) validate() error {
	if r.Unit != unitRate && r.Unit != unitUsers {
		return fmt.Errorf("ramp: unit %q: want %q or %q", r.Unit, unitRate, unitUsers)
	}
	if len(r.Stages) == 0 {
		return errors.New("ramp: no stages")
	}
	if len(r.Stages) > maxStages {
		return fmt.Errorf("ramp: %d stages, more than the %d allowed", len(r.Stages), maxStages)
	}
	limit := map[string]float64{unitRate: 10_000_000, unitUsers: maxConnections}[r.Unit]
	check := func(what string, v float64) error {
		if math.IsNaN(v) || v < 0 || v > limit {
			return fmt.Errorf("ramp: %s %v: want 0..%v %s", what, v, limit, r.Unit)
		}
		return nil
	}
	if err := check("start", r.Start); err != nil {
		return err
	}
	for i, st := range r.Stages {
		if st.Duration <= 0 {
			return fmt.Errorf("ramp: stage %d: duration must be positive", i+1)
		}
		if err := check(fmt.Sprintf("stage %d target", i+1), st.Target); err != nil {
			return err
		}
	}
	return nil
}

// Total is the time the stages take together.
func (r *Ramp) Total() time.Duration {
	var t time.Duration
	for _, st := range r.Stages {
		t += time.Duration(st.Duration)
	}
	return t
}

// Peak is the highest value the ramp reaches.
func (r *Ramp) Peak() float64 {
	p := r.Start
	for _, st := range r.Stages {
		p = max(p, st.Target)
	}
	return p
}

// stageName is a stage's name in reports: its own, or its number.
func (r *Ramp) stageName(i int) string {
	if n := r.Stages[i].Name; n != "" {
		return n
	}
	return "stage " + strconv.Itoa(i+1)
}

// profile is a piecewise-linear load over the run's clock (ns since the
// schedule's start): a warm-up held at the start value, then the stages. A
// constant open-loop rate is one open-ended segment, so one mechanism paces
// every open loop.
type profile struct {
	segs []segment
}

type segment struct {
	t0, t1 int64   // ns; t1 is math.MaxInt64 for an open-ended segment
	v0, v1 float64 // values at t0 and t1
	n0     float64 // requests due before t0 (rate profiles)
	stage  int     // index in the ramp's stages; -1 for the warm-up
}

// constantProfile is a rate held from 0 for ever.
func constantProfile(v float64) *profile {
	return &profile{segs: []segment{{t1: math.MaxInt64, v0: v, v1: v, stage: -1}}}
}

// rampProfile lays r out after a warm-up of the given length.
func rampProfile(r *Ramp, warmup time.Duration) *profile {
	p := &profile{}
	t, v, n := int64(0), r.Start, 0.0
	add := func(d int64, to float64, stage int) {
		s := segment{t0: t, t1: t + d, v0: v, v1: to, n0: n, stage: stage}
		p.segs = append(p.segs, s)
		n += (v + to) / 2 * float64(d) / 1e9
		t, v = s.t1, to
	}
	if warmup > 0 {
		add(int64(warmup), r.Start, -1)
	}
	for i, st := range r.Stages {
		add(int64(st.Duration), st.Target, i)
	}
	return p
}

// seg returns the index of the segment holding t (the last one past the end).
func (p *profile) seg(t int64) int {
	lo, hi := 0, len(p.segs)-1
	for lo < hi {
		m := (lo + hi) / 2
		if t < p.segs[m].t1 {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// at is the profile's value at t.
func (p *profile) at(t int64) float64 {
	s := &p.segs[p.seg(t)]
	if t >= s.t1 {
		return s.v1
	}
	if s.t1 == math.MaxInt64 || t <= s.t0 {
		return s.v0
	}
	return s.v0 + (s.v1-s.v0)*float64(t-s.t0)/float64(s.t1-s.t0)
}

// stageAt is the ramp stage that holds t: -1 in the warm-up.
func (p *profile) stageAt(t int64) int { return p.segs[p.seg(t)].stage }

// due is how many requests a rate profile schedules before t.
func (p *profile) due(t int64) float64 {
	s := &p.segs[p.seg(t)]
	t = min(max(t, s.t0), s.t1)
	x := float64(t-s.t0) / 1e9
	if s.t1 == math.MaxInt64 {
		return s.n0 + s.v0*x
	}
	a := (s.v1 - s.v0) / (float64(s.t1-s.t0) / 1e9)
	return s.n0 + s.v0*x + a*x*x/2
}

// timeOf returns when request k (from 0) of a rate profile is due, looking
// from segment *cur on (the pacer's requests come in order, so the search
// only moves forward); ok is false when the profile schedules no request k.
func (p *profile) timeOf(k float64, cur *int) (t int64, ok bool) {
	for ; *cur < len(p.segs); *cur++ {
		s := &p.segs[*cur]
		if s.t1 == math.MaxInt64 {
			if s.v0 <= 0 {
				return 0, false
			}
			return s.t0 + int64((k-s.n0)*(1e9/s.v0)), true
		}
		d := float64(s.t1-s.t0) / 1e9
		if k >= s.n0+(s.v0+s.v1)/2*d {
			continue // due after this segment
		}
		// Solve n0 + v0 x + a x²/2 = k for x, in the form that stays exact
		// when a (the ramp's slope) is near 0.
		a, m := (s.v1-s.v0)/d, k-s.n0
		disc := math.Sqrt(max(s.v0*s.v0+2*a*m, 0))
		x := 0.0
		if den := s.v0 + disc; den > 0 {
			x = 2 * m / den
		}
		return s.t0 + min(int64(x*1e9), s.t1-s.t0), true
	}
	return 0, false
}
