// Package meter holds the counters and latency histograms an imposter keeps
// on its request path: atomics only, so that counting a request takes no
// lock and allocates nothing. gateway/metrics.go exports them under
// Mountebank's metric names, and the web UI's traffic page reads them.
package meter

import (
	"math"
	"sync/atomic"
	"time"
)

// Histogram counts durations into fixed buckets, as a Prometheus histogram
// does: Bounds[i] is bucket i's inclusive upper bound, and the last bucket
// counts everything above the last bound.
type Histogram struct {
	bounds []time.Duration // ascending
	counts []atomic.Uint64 // len(bounds)+1
	sum    atomic.Int64    // nanoseconds
}

// NewHistogram returns a histogram with the given ascending bounds.
func NewHistogram(bounds []time.Duration) *Histogram {
	return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe counts one duration.
func (h *Histogram) Observe(d time.Duration) {
	h.counts[bucket(h.bounds, d)].Add(1)
	h.sum.Add(int64(d))
}

// bucket is the index of the first bound at or above d (len(bounds) when
// none is): a binary search, as the fine histogram has ~50 bounds, after a
// look at the first, which holds most of a fast imposter's requests.
func bucket(bounds []time.Duration, d time.Duration) int {
	if len(bounds) > 0 && d <= bounds[0] {
		return 0
	}
	lo, hi := 0, len(bounds)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bounds[m] < d {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Bounds returns the bucket bounds; the caller must not change them.
func (h *Histogram) Bounds() []time.Duration { return h.bounds }

// Snapshot is a histogram's counts at one moment: Counts[i] is the number
// of observations in bucket i (not cumulative), Counts[len(Bounds)] those
// above the last bound.
type Snapshot struct {
	Bounds []time.Duration
	Counts []uint64
	Sum    time.Duration
}

// Snapshot reads the histogram. Each bucket is read atomically, the whole
// not: a concurrent Observe may be in Sum but not yet in Counts, which a
// scrape of a live histogram tolerates.
func (h *Histogram) Snapshot() Snapshot {
	s := Snapshot{Bounds: h.bounds, Counts: make([]uint64, len(h.counts)), Sum: time.Duration(h.sum.Load())}
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
	}
	return s
}

// Count is the number of observations.
func (s Snapshot) Count() uint64 {
	var n uint64
	for _, c := range s.Counts {
		n += c
	}
	return n
}

// Sub returns the observations made between prev and s (same bounds).
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	out := Snapshot{Bounds: s.Bounds, Counts: make([]uint64, len(s.Counts)), Sum: s.Sum - prev.Sum}
	for i := range s.Counts {
		if i < len(prev.Counts) && prev.Counts[i] <= s.Counts[i] {
			out.Counts[i] = s.Counts[i] - prev.Counts[i]
		} else {
			out.Counts[i] = s.Counts[i]
		}
	}
	return out
}

// Cumulative returns, for each bound in at, the number of observations at
// or below it. Every bound in at must be one of s.Bounds: that is how mb's
// coarse buckets are read off the fine histogram exactly.
func (s Snapshot) Cumulative(at []time.Duration) []uint64 {
	out := make([]uint64, len(at))
	var n uint64
	j := 0
	for i, b := range s.Bounds {
		n += s.Counts[i]
		for j < len(at) && at[j] == b {
			out[j] = n
			j++
		}
	}
	return out
}

// Quantile estimates the q-quantile (0 < q ≤ 1) by linear interpolation
// inside the bucket that holds it, as Prometheus's histogram_quantile does;
// 0 when there are no observations. An estimate in the last, unbounded
// bucket is the last bound.
func (s Snapshot) Quantile(q float64) time.Duration {
	total := s.Count()
	if total == 0 || len(s.Bounds) == 0 {
		return 0
	}
	rank := q * float64(total)
	var seen float64
	for i, c := range s.Counts {
		if c == 0 {
			continue
		}
		if seen+float64(c) >= rank {
			if i == len(s.Bounds) {
				return s.Bounds[len(s.Bounds)-1]
			}
			lo := time.Duration(0)
			if i > 0 {
				lo = s.Bounds[i-1]
			}
			frac := math.Max(0, (rank-seen)/float64(c))
			return lo + time.Duration(frac*float64(s.Bounds[i]-lo))
		}
		seen += float64(c)
	}
	return s.Bounds[len(s.Bounds)-1]
}

// Mountebank's buckets (mb 2.9.1, models/imposter.js), in seconds.
var (
	MatchBuckets    = millis(10, 50, 100, 200, 500, 1000)
	ResponseBuckets = millis(10, 50, 100, 200, 500, 1000, 3000, 5000, 10000, 30000)
)

// FineBuckets are the request-duration histogram's bounds: 1, 1.5, 2, 3, 5
// and 7 times each power of ten from 1 µs to 10 s, then 15, 20 and 30 s.
// They hold every bound of mb's buckets, so mb's histograms are sums of
// these, and they are fine enough (±25%) to chart percentiles of requests
// that take microseconds, which mb's first bucket (10 ms) lumps together.
var FineBuckets = func() []time.Duration {
	var out []time.Duration
	for p := time.Microsecond; p <= 10*time.Second; p *= 10 {
		for _, tenths := range []time.Duration{10, 15, 20, 30, 50, 70} {
			out = append(out, tenths*p/10)
		}
	}
	return append(out[:len(out)-5], 15*time.Second, 20*time.Second, 30*time.Second)
}()

func millis(ms ...time.Duration) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = m * time.Millisecond
	}
	return out
}

// epoch anchors Now's readings.
var epoch = time.Now()

// Now reads the monotonic clock alone, as the time since the process
// started: the request path times itself with it, since time.Now reads the
// wall clock too, a second clock reading the meters never use.
func Now() time.Duration { return time.Since(epoch) }

// At is t on Now's scale, for a t that carries a monotonic reading (as
// time.Now's do), without reading the clock.
func At(t time.Time) time.Duration { return t.Sub(epoch) }

// Time is the instant of a Now reading, with its monotonic clock: a
// request's one reading serves whoever times it next, without reading the
// clock again.
func Time(d time.Duration) time.Time { return epoch.Add(d) }

// Imposter is what one imposter counts. It outlives the imposter: Mountebank
// keeps a deleted imposter's series until the process exits, and an
// imposter created again under the same label adds to them.
type Imposter struct {
	Requests atomic.Uint64 // mb_request_total
	NoMatch  atomic.Uint64 // mb_no_match_total
	Blocked  atomic.Uint64 // mb_blocked_ip_total
	// Match is the time to select a stub, in MatchBuckets; Response the
	// time from there to the written response, in ResponseBuckets: mb's
	// metrics, which are all they are read for. Their sum per request is
	// Total, in FineBuckets, which the traffic page charts.
	Match, Response, Total *Histogram
	// WS counts a WebSocket imposter's connections and what its limits
	// closed (riftgate_ws_*); requests are its messages.
	WS WS
}

// WS is a WebSocket imposter's connection counters.
type WS struct {
	Open    atomic.Int64  // connections open now
	Opened  atomic.Uint64 // connections accepted
	Refused atomic.Uint64 // handshakes refused
	Sent    atomic.Uint64 // messages sent
	// Limited counts the connections each limit closed, by WSLimit.
	Limited [WSLimits]atomic.Uint64
}

// WSLimit names a WebSocket limit.
type WSLimit int

// The limits, and their names in the metrics.
const (
	WSMessageSize WSLimit = iota
	WSRate
	WSConnections
	WSWriteTimeout
	WSLimits
)

// WSLimitNames are the limits' label values.
var WSLimitNames = [WSLimits]string{"message_size", "rate", "connections", "write_timeout"}

// NewImposter returns zeroed meters.
func NewImposter() *Imposter {
	return &Imposter{
		Match:    NewHistogram(MatchBuckets),
		Response: NewHistogram(ResponseBuckets),
		Total:    NewHistogram(FineBuckets),
	}
}

// Observe counts one request that took match to select its stub (matched
// says whether one did) and respond to answer after that.
func (m *Imposter) Observe(matched bool, match, respond time.Duration) {
	m.Requests.Add(1)
	if !matched {
		m.NoMatch.Add(1)
	}
	m.Match.Observe(match)
	m.Response.Observe(respond)
	m.Total.Observe(match + respond)
}
