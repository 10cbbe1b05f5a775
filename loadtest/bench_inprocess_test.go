package loadtest

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseBenchLine(t *testing.T) {
	for _, tc := range []struct {
		line   string
		want   benchLine
		ok     bool
		reason string
	}{
		{"BenchmarkServe/static-2   8868420   135.2 ns/op   0 B/op   0 allocs/op", benchLine{name: "BenchmarkServe/static", nsOp: 135.2}, true, "a -benchmem line"},
		{"BenchmarkServe/flowbench-wat-16 850000 1350 ns/op 16 B/op 1 allocs/op", benchLine{name: "BenchmarkServe/flowbench-wat", nsOp: 1350, allocs: 1}, true, "a dash in the name"},
		{"BenchmarkX 10 20 ns/op", benchLine{name: "BenchmarkX", nsOp: 20}, true, "no -GOMAXPROCS suffix, no memory"},
		{"BenchmarkServe/inject-2 100 5000 ns/op 57623 instructions/op", benchLine{name: "BenchmarkServe/inject", nsOp: 5000}, true, "a custom metric"},
		{"goos: linux", benchLine{}, false, "a header"},
		{"BenchmarkServe/static-2 --- FAIL", benchLine{}, false, "a failure"},
		{"BenchmarkServe/static-2 100 abc ns/op", benchLine{}, false, "not a number"},
		{"BenchmarkServe/static-2 100 12 B/op", benchLine{}, false, "no ns/op"},
		{"ok  	github.com/riftgate/riftgate/gateway	12.3s", benchLine{}, false, "the package line"},
	} {
		if got, ok := parseBenchLine(tc.line); got != tc.want || ok != tc.ok {
			t.Errorf("%s: %q: got %+v %v, want %+v %v", tc.reason, tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestInProcessReport(t *testing.T) {
	out := `goos: linux
BenchmarkServe/static-2   1000   135 ns/op   0 B/op   0 allocs/op
BenchmarkServe/flowbench-wat-2   1000   1350 ns/op   16 B/op   1 allocs/op
BenchmarkServe/static-2   1000   125 ns/op   0 B/op   0 allocs/op
BenchmarkServe/flowbench-wat-2   1000   1250 ns/op   16 B/op   1 allocs/op
BenchmarkServe/flowbench-wat-2   1000   1270 ns/op   16 B/op   1 allocs/op
BenchmarkServe/static-2   1000   145 ns/op   0 B/op   1 allocs/op
PASS
`
	ip, err := readInProcess(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	ip.report(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) })
	got := b.String()
	for _, want := range []string{
		"| Serve/static | 135 | 0 | 3 | 0 allocs: PASS |",
		"| Serve/flowbench-wat | 1270 | 1 | 3 | <= 1300 ns: PASS |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	(*inProcess)(nil).report(func(string, ...any) { t.Error("a nil report wrote") })
}

func FuzzParseBenchLine(f *testing.F) {
	f.Add("BenchmarkServe/static-2   8868420   135.2 ns/op   0 B/op   0 allocs/op")
	f.Add("Benchmark- 1 1 ns/op")
	f.Fuzz(func(t *testing.T, line string) {
		l, ok := parseBenchLine(line)
		if ok && !strings.HasPrefix(l.name, "Benchmark") {
			t.Fatalf("%q: name %q", line, l.name)
		}
		if !ok && l != (benchLine{}) {
			t.Fatalf("%q: half a result %+v", line, l)
		}
	})
}
