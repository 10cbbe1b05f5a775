package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/meter"
	"github.com/riftgate/riftgate/gateway/reqlog"
)

// The admin routes riftgate adds for views that must stay small however
// much an imposter holds (the web UI uses them; so may any client):
//
//	GET /imposters/:id/savedRequests   recorded requests, paged and searched
//	                                   (?offset=&limit=&q=&order=asc|desc)
//	GET /stats                         request counts, latencies and plugin
//	                                   counters (?imposters=false, ?plugins=false);
//	                                   with Accept: text/event-stream, one
//	                                   sample of the last second, every second
//
// and GET /logs with Accept: text/event-stream streams the log (logs.go).
func (e *engine) uiRoutes(mux *http.ServeMux) {
	g := e.g
	mux.HandleFunc("GET /imposters/{id}/savedRequests", g.withImposter(g.savedRequests))
	mux.HandleFunc("GET /stats", g.stats)
}

// intParam reads a non-negative integer query parameter, def when absent.
func intParam(r *http.Request, name string, def, max int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > max {
		return 0, mberr.New(mberr.BadData, fmt.Sprintf("%s must be an integer from 0 to %d", name, max))
	}
	return n, nil
}

func (g *gateway) savedRequests(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	offset, err := intParam(r, "offset", 0, 1<<31-1)
	if err != nil {
		writeErr(w, err)
		return
	}
	limit, err := intParam(r, "limit", 100, 10000)
	if err != nil {
		writeErr(w, err)
		return
	}
	order := r.URL.Query().Get("order")
	if order != "" && order != "asc" && order != "desc" {
		writeErr(w, mberr.New(mberr.BadData, "order must be asc or desc"))
		return
	}
	snap := imp.RecordedRequests()
	if snap == nil {
		writeJSON(w, http.StatusOK, map[string]any{"total": 0, "matched": 0, "offset": offset, "dropped": 0, "max": 0, "requests": []json.RawMessage{}})
		return
	}
	defer snap.Close()
	total := snap.Len()
	var (
		list    = []json.RawMessage{}
		rec     reqlog.Record
		matched int64
	)
	add := func() {
		var out bytes.Buffer
		rec.AppendJSON(&out)
		list = append(list, out.Bytes())
	}
	each := snap.Each
	if order == "desc" {
		each = snap.EachReverse
	}
	if q := r.URL.Query().Get("q"); q == "" {
		// Only the page is read: a million requests cost no more.
		matched = total
		if limit > 0 {
			err = each(int64(offset), func(b []byte) bool {
				if rec.Decode(b) == nil {
					add()
				}
				return len(list) < limit
			})
		}
	} else {
		// Every request is searched, one chunk in memory at a time.
		needle := []byte(strings.ToLower(q))
		err = each(0, func(b []byte) bool {
			if rec.Decode(b) != nil || !recordContains(&rec, needle) {
				return true
			}
			if matched >= int64(offset) && len(list) < limit {
				add()
			}
			matched++
			return true
		})
	}
	if err != nil {
		writeErr(w, mberr.New(mberr.CannotStartServer, "cannot read the recorded requests: "+err.Error()))
		return
	}
	st := imp.Recorded()
	writeJSON(w, http.StatusOK, map[string]any{
		"total": total, "matched": matched, "offset": offset, "dropped": st.Dropped, "max": st.Max, "requests": list,
	})
}

// recordContains reports whether needle (lowercased) is in a recorded
// request: requestContains's fields, or for a request recorded as its
// JSON (smtp), anywhere in that.
func recordContains(rec *reqlog.Record, needle []byte) bool {
	if rec.JSON != nil {
		return containsFold(rec.JSON, needle)
	}
	return requestContains(&rec.Request, needle)
}

// requestContains reports whether needle (lowercased) is in the request's
// method, path, query, headers ("name=value") or body, ignoring case.
func requestContains(r *message.Request, needle []byte) bool {
	has := func(s string) bool { return containsFold(unsafe.Slice(unsafe.StringData(s), len(s)), needle) }
	if has(r.Method) || has(r.Path) || containsFold(r.Body, needle) {
		return true
	}
	eq := bytes.IndexByte(needle, '=')
	for _, kvs := range [][]message.KV{r.Query, r.Headers} {
		for _, kv := range kvs {
			if has(kv.Name) || has(kv.Value) {
				return true
			}
			// Spanning "name=value" (without building it): through the
			// '=' only.
			for i := eq; i >= 0; i = nextIndex(needle, '=', i) {
				if hasSuffixFold(kv.Name, needle[:i]) && hasPrefixFold(kv.Value, needle[i+1:]) {
					return true
				}
			}
		}
	}
	return false
}

func nextIndex(b []byte, c byte, after int) int {
	if j := bytes.IndexByte(b[after+1:], c); j >= 0 {
		return after + 1 + j
	}
	return -1
}

// containsFold reports whether lower (lowercased) is in s, ignoring case,
// without allocating when both are ASCII (a search reads every request).
func containsFold(s, lower []byte) bool {
	if len(lower) == 0 {
		return true
	}
	if !isASCII(s) || !isASCII(lower) {
		return bytes.Contains(bytes.ToLower(s), lower)
	}
	for i := 0; i+len(lower) <= len(s); i++ {
		if equalFoldASCII(s[i:i+len(lower)], lower) {
			return true
		}
	}
	return false
}

func hasSuffixFold(s string, lower []byte) bool {
	return len(s) >= len(lower) && bytes.Equal(bytes.ToLower([]byte(s[len(s)-len(lower):])), lower)
}

func hasPrefixFold(s string, lower []byte) bool {
	return len(s) >= len(lower) && bytes.Equal(bytes.ToLower([]byte(s[:len(lower)])), lower)
}

func equalFoldASCII(s, lower []byte) bool {
	for i, c := range s {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// imposterStat is one imposter in GET /stats: counters since the process
// started (mb's metrics, which DELETE savedRequests does not reset) and
// latency percentiles in milliseconds.
type imposterStat struct {
	Port     int     `json:"port"`
	Protocol string  `json:"protocol"`
	Name     string  `json:"name,omitempty"`
	Requests uint64  `json:"requests"`
	NoMatch  uint64  `json:"noMatch"`
	P50      float64 `json:"p50"`
	P90      float64 `json:"p90"`
	P99      float64 `json:"p99"`
}

type pluginStat struct {
	Name      string            `json:"name"`
	SHA256    string            `json:"sha256"`
	Calls     uint64            `json:"calls"`
	Errors    map[string]uint64 `json:"errors"`
	Instances map[string]int64  `json:"instances"`
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (g *gateway) stats(w http.ResponseWriter, r *http.Request) {
	if wantsStream(r) {
		g.streamStats(w, r)
		return
	}
	out := map[string]any{}
	if r.URL.Query().Get("imposters") != "false" {
		list := []imposterStat{}
		for _, imp := range g.snapshot() {
			m := imp.Meters()
			s := m.Total.Snapshot()
			list = append(list, imposterStat{
				Port: imp.Port(), Protocol: imp.Spec().Protocol, Name: imp.Spec().Name,
				Requests: m.Requests.Load(), NoMatch: m.NoMatch.Load(),
				P50: millis(s.Quantile(0.5)), P90: millis(s.Quantile(0.9)), P99: millis(s.Quantile(0.99)),
			})
		}
		out["imposters"] = list
	}
	if r.URL.Query().Get("plugins") != "false" {
		list := []pluginStat{}
		for _, m := range g.engine.plugins.Stats() {
			list = append(list, pluginStat{
				Name: m.Name, SHA256: m.Hash, Calls: m.Calls, Errors: m.Errors,
				Instances: map[string]int64{"live": m.InstancesLive, "instantiated": int64(m.Instantiated),
					"recycled": int64(m.Recycled), "discarded": int64(m.Discarded)},
			})
		}
		out["plugins"] = list
	}
	writeJSON(w, http.StatusOK, out)
}

// wantsStream reports whether the client asked for Server-Sent Events.
func wantsStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// sample is one second of traffic: rates per second, percentiles in ms.
type sample struct {
	T         int64          `json:"t"` // unix milliseconds
	Total     rate           `json:"total"`
	Imposters []imposterRate `json:"imposters"`
}

type rate struct {
	RPS     float64 `json:"rps"`
	NoMatch float64 `json:"noMatch"`
	P50     float64 `json:"p50"`
	P90     float64 `json:"p90"`
	P99     float64 `json:"p99"`
}

type imposterRate struct {
	Port     int    `json:"port"`
	Protocol string `json:"protocol"`
	Name     string `json:"name,omitempty"`
	rate
}

type seen struct {
	hist    meter.Snapshot
	noMatch uint64
}

// streamStats sends a sample every second until the client goes or the
// server shuts down. Each stream keeps its own previous readings, so
// nothing runs while nobody watches.
func (g *gateway) streamStats(w http.ResponseWriter, r *http.Request) {
	sse, ok := startSSE(w)
	if !ok {
		return
	}
	prev := map[*meter.Imposter]seen{}
	read := func() map[*meter.Imposter]seen {
		now := make(map[*meter.Imposter]seen, len(prev))
		for _, imp := range g.snapshot() {
			m := imp.Meters()
			now[m] = seen{m.Total.Snapshot(), m.NoMatch.Load()}
		}
		return now
	}
	prev = read()
	last := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for seq := 1; ; seq++ {
		select {
		case <-r.Context().Done():
			return
		case <-g.engine.streamsDone:
			return
		case now := <-tick.C:
			secs := now.Sub(last).Seconds()
			last = now
			cur := read()
			s := sample{T: now.UnixMilli(), Imposters: []imposterRate{}}
			total := meter.Snapshot{Bounds: meter.FineBuckets, Counts: make([]uint64, len(meter.FineBuckets)+1)}
			var totalNoMatch uint64
			for _, imp := range g.snapshot() {
				m := imp.Meters()
				c, p := cur[m], prev[m]
				d := c.hist.Sub(p.hist)
				n := d.Count()
				if n == 0 {
					continue
				}
				nm := c.noMatch - min(p.noMatch, c.noMatch)
				totalNoMatch += nm
				for i, k := range d.Counts {
					total.Counts[i] += k
				}
				s.Imposters = append(s.Imposters, imposterRate{imp.Port(), imp.Spec().Protocol, imp.Spec().Name, rateOf(d, nm, secs)})
			}
			s.Total = rateOf(total, totalNoMatch, secs)
			prev = cur
			if !sse.send("sample", strconv.Itoa(seq), s) {
				return
			}
		}
	}
}

func rateOf(d meter.Snapshot, noMatch uint64, secs float64) rate {
	return rate{
		RPS: float64(d.Count()) / secs, NoMatch: float64(noMatch) / secs,
		P50: millis(d.Quantile(0.5)), P90: millis(d.Quantile(0.9)), P99: millis(d.Quantile(0.99)),
	}
}

// sseWriter writes Server-Sent Events and flushes each one.
type sseWriter struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter) (sseWriter, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		writeErr(w, mberr.New(mberr.BadData, "this connection cannot stream"))
		return sseWriter{}, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return sseWriter{w, f}, true
}

// send writes one event with v as its JSON data; false when the client is
// gone.
func (s sseWriter) send(event, id string, v any) bool {
	data, err := json.Marshal(v)
	if err != nil {
		return false
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\nid: %s\ndata: %s\n\n", event, id, data); err != nil {
		return false
	}
	s.f.Flush()
	return true
}

// withLogStream serves GET /logs as a stream of Server-Sent Events when
// the client asks for text/event-stream, and as list (mb's JSON) otherwise.
// A stream starts with the last 200 entries, or those after Last-Event-ID.
func (g *gateway) withLogStream(list http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !wantsStream(r) {
			list(w, r)
			return
		}
		after := -1
		if id, err := strconv.Atoi(r.Header.Get("Last-Event-ID")); err == nil {
			after = id
		}
		past, next, stop := g.logs.follow(after, 200)
		defer stop()
		sse, ok := startSSE(w)
		if !ok {
			return
		}
		for _, e := range past {
			if !sse.send("log", strconv.Itoa(e.i), e.e) {
				return
			}
		}
		for {
			select {
			case <-r.Context().Done():
				return
			case <-g.engine.streamsDone:
				return
			case e := <-next:
				if !sse.send("log", strconv.Itoa(e.i), e.e) {
					return
				}
			}
		}
	}
}
