package loadtest

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// benchLine is one result line of `go test -bench -benchmem`.
type benchLine struct {
	name         string // without the -GOMAXPROCS suffix
	nsOp, allocs float64
}

// parseBenchLine reads a line such as
//
//	BenchmarkServe/static-2   8868420   135.2 ns/op   0 B/op   0 allocs/op
//
// ok is false for anything else (headers, PASS, ok lines, logs).
func parseBenchLine(line string) (l benchLine, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
		return benchLine{}, false
	}
	if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
		return benchLine{}, false
	}
	l = benchLine{name: f[0]}
	if i := strings.LastIndexByte(l.name, '-'); i > 0 {
		if _, err := strconv.Atoi(l.name[i+1:]); err == nil {
			l.name = l.name[:i]
		}
	}
	seenNs := false
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return benchLine{}, false
		}
		switch f[i+1] {
		case "ns/op":
			l.nsOp, seenNs = v, true
		case "allocs/op":
			l.allocs = v
		}
	}
	if !seenNs {
		return benchLine{}, false
	}
	return l, true
}

// inProcess is what `go test -bench` printed for the benchmarks the report
// gives, every -count run of each.
type inProcess struct {
	order []string
	runs  map[string][]benchLine
}

func readInProcess(r io.Reader) (*inProcess, error) {
	ip := &inProcess{runs: map[string][]benchLine{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l, ok := parseBenchLine(sc.Text())
		if !ok {
			continue
		}
		if _, ok := ip.runs[l.name]; !ok {
			ip.order = append(ip.order, l.name)
		}
		ip.runs[l.name] = append(ip.runs[l.name], l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("in-process results: %w", err)
	}
	return ip, nil
}

// inProcessTargets are issue #16's in-process targets: the plugin path with
// the WAT guest (one flow_get, one flow_put) at most 1.3 µs, and the static
// path allocating nothing.
var inProcessTargets = map[string]func(ns, allocs float64) string{
	"BenchmarkServe/flowbench-wat": func(ns, _ float64) string { return "<= 1300 ns: " + mark(ns <= 1300) },
	"BenchmarkServe/static":        func(_, allocs float64) string { return "0 allocs: " + mark(allocs == 0) },
}

func (ip *inProcess) report(p func(string, ...any)) {
	if ip == nil || len(ip.order) == 0 {
		return
	}
	p("\n## In process (`go test -bench`)\n\n")
	p("`go test -pgo=cmd/riftgate/default.pgo -run '^$' -bench '^BenchmarkServe$' -benchmem -count 5 ./gateway/`, pinned to the servers' CPU before the load runs: one request through the engine's handler, no sockets, compiled with the profile the riftgate binary is built with. Medians of the runs.\n\n")
	p("| benchmark | ns/op | allocs/op | runs | target |\n|---|---|---|---|---|\n")
	for _, name := range ip.order {
		runs := ip.runs[name]
		var ns, allocs []float64
		for _, r := range runs {
			ns = append(ns, r.nsOp)
			allocs = append(allocs, r.allocs)
		}
		mns, mal := median(ns), median(allocs)
		target := ""
		if t, ok := inProcessTargets[name]; ok {
			target = t(mns, mal)
		}
		p("| %s | %.0f | %.0f | %d | %s |\n", strings.TrimPrefix(name, "Benchmark"), mns, mal, len(runs), target)
	}
}
