package loadtest

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// TimePoint is one interval of the timeline (latencies in milliseconds).
type TimePoint struct {
	Second   float64 `json:"second"` // end of the interval, from the start of measuring
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	RPS      float64 `json:"rps"`
	P50      float64 `json:"p50Ms"`
	P99      float64 `json:"p99Ms"`
	Max      float64 `json:"maxMs"`
	// Target is the ramp's value (req/s or users) at the interval's end.
	Target *float64 `json:"target,omitempty"`
}

// collector closes a timeline interval every opts.Interval and redraws the
// progress bar several times a second.
type collector struct {
	r        *runner
	merged   *hdrhistogram.Histogram
	timeline []TimePoint
	lastCut  int64 // ns since base of the last interval cut
}

func newCollector(r *runner) *collector {
	return &collector{r: r, merged: newHist(), lastCut: r.measureFrom}
}

const progressEvery = 200 * time.Millisecond

func (c *collector) loop(ctx context.Context) {
	tick := time.NewTicker(min(progressEvery, c.r.opts.Interval))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			c.cut(c.r.now())
			if c.r.opts.Progress != nil {
				c.progress(true)
			}
			return
		case <-tick.C:
			now := c.r.now()
			if now-c.lastCut >= int64(c.r.opts.Interval) {
				c.cut(now)
			}
			if c.r.opts.Progress != nil {
				c.progress(false)
			}
		}
	}
}

// cut closes the interval that ends at now, unless it is still warm-up or
// empty of time.
func (c *collector) cut(now int64) {
	if now <= c.r.measureFrom || now <= c.lastCut {
		return
	}
	c.merged.Reset()
	var reqs, errs int64
	for _, s := range c.r.shards {
		s.mu.Lock()
		c.merged.Merge(s.interval)
		s.interval.Reset()
		reqs += s.ivRequests
		errs += s.ivErrors
		s.ivRequests, s.ivErrors = 0, 0
		s.mu.Unlock()
	}
	span := time.Duration(now - c.lastCut).Seconds()
	c.lastCut = now
	if reqs == 0 && len(c.timeline) > 0 && span < c.r.opts.Interval.Seconds()/10 {
		return // the final cut came right after a regular one
	}
	var target *float64
	if c.r.ramp != nil {
		v := math.Round(c.r.profile().at(now)*1000) / 1000
		target = &v
	}
	c.timeline = append(c.timeline, TimePoint{
		Target:   target,
		Second:   time.Duration(now - c.r.measureFrom).Seconds(),
		Requests: reqs,
		Errors:   errs,
		RPS:      float64(reqs) / span,
		P50:      usToMs(c.merged.ValueAtQuantile(50)),
		P99:      usToMs(c.merged.ValueAtQuantile(99)),
		Max:      usToMs(c.merged.Max()),
	})
}

func usToMs(us int64) float64 { return float64(us) / 1000 }

func (c *collector) progress(final bool) {
	r := c.r
	var done, errs int64
	for _, s := range r.shards {
		s.mu.Lock()
		done += s.requests
		for _, e := range s.errs {
			errs += e
		}
		s.mu.Unlock()
	}
	now := r.now()
	var frac float64
	phase := "run   "
	switch {
	case now < r.measureFrom:
		phase = "warmup"
		frac = float64(now) / float64(r.measureFrom)
	case r.end > 0:
		frac = float64(now-r.measureFrom) / float64(r.end-r.measureFrom)
	default:
		frac = float64(done) / float64(r.opts.Requests)
	}
	if r.opts.Requests > 0 && r.end > 0 && now >= r.measureFrom {
		frac = max(frac, float64(done)/float64(r.opts.Requests))
	}
	frac = min(max(frac, 0), 1)
	const width = 30
	n := int(frac * width)
	elapsed := time.Duration(max(now-r.measureFrom, 0))
	var rps float64
	if elapsed > 0 {
		rps = float64(done) / elapsed.Seconds()
	}
	end := ""
	if final {
		end = "\n"
	}
	fmt.Fprintf(r.opts.Progress, "\r%s [%s%s] %3.0f%%  %d req  %.0f req/s  %d errors  %s%s",
		phase, strings.Repeat("=", n), strings.Repeat(" ", width-n), frac*100, done, rps, errs,
		elapsed.Truncate(100*time.Millisecond), end)
}

// progressWriter returns w if it is a terminal and nil otherwise, so that
// logs and pipes get no carriage-return noise.
func progressWriter(w io.Writer) io.Writer {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return w
}
