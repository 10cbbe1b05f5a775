package gateway

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"time"
)

// metrics answers GET /metrics in Prometheus's text format, with mb's metric
// names for what mb also counts.
func (g *gateway) metrics(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	metric := func(name, kind, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
	}
	imps := g.snapshot()
	metric("mb_request_total", "counter", "Number of requests to the imposter")
	for _, imp := range imps {
		fmt.Fprintf(&b, "mb_request_total{imposter=%q} %d\n", imposterLabel(imp.Port(), imp.Spec().Protocol), imp.Stats().Requests)
	}
	metric("mb_no_match_total", "counter", "Number of times no stub matched the request")
	for _, imp := range imps {
		fmt.Fprintf(&b, "mb_no_match_total{imposter=%q} %d\n", imposterLabel(imp.Port(), imp.Spec().Protocol), imp.Stats().NoMatch)
	}
	metric("riftgate_imposters", "gauge", "Number of imposters")
	fmt.Fprintf(&b, "riftgate_imposters %d\n", len(imps))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	metric("riftgate_go_heap_alloc_bytes", "gauge", "Bytes of allocated heap objects")
	fmt.Fprintf(&b, "riftgate_go_heap_alloc_bytes %d\n", ms.HeapAlloc)
	metric("riftgate_go_goroutines", "gauge", "Number of goroutines")
	fmt.Fprintf(&b, "riftgate_go_goroutines %d\n", runtime.NumGoroutine())
	metric("riftgate_uptime_seconds", "gauge", "Seconds since the process started")
	fmt.Fprintf(&b, "riftgate_uptime_seconds %.3f\n", time.Since(g.started).Seconds())
	g.engine.metrics(r.Context(), &b, metric)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

func imposterLabel(port int, protocol string) string {
	return fmt.Sprintf("%s:%d", protocol, port)
}
