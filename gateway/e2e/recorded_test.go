package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// rss reads a process's resident memory in bytes.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	n, err := readRSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// readRSS is a process's VmRSS in bytes, for goroutines that cannot fail
// the test.
func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
}

func pidOf(t testing.TB, in *gatewaytest.Instance) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(in.Dir, "rg.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// load sends n requests to url with the bundled load tool (the binary's
// own `loadtest`, so that the test's race detector does not slow it).
func load(t *testing.T, n int, url string) {
	t.Helper()
	out, err := exec.Command(gatewaytest.Binary(t), "loadtest", "run", "-n", strconv.Itoa(n), "-c", "32",
		"-progress", "never", "-format", "json", url).CombinedOutput()
	if err != nil {
		t.Fatalf("loadtest: %v\n%s", err, out)
	}
	var res struct {
		Requests, Errors int64
	}
	if err := json.Unmarshal(out[bytes.IndexByte(out, '{'):], &res); err != nil || res.Requests != int64(n) || res.Errors != 0 {
		t.Fatalf("loadtest: %v %+v\n%s", err, res, out)
	}
}

type savedPage struct {
	Total, Matched, Dropped, Max int64
	Requests                     []struct{ Path string }
}

func saved(t *testing.T, in *gatewaytest.Instance, port int, query string) savedPage {
	t.Helper()
	status, body := in.Do("GET", fmt.Sprintf("/imposters/%d/savedRequests?%s", port, query), nil)
	if status != http.StatusOK {
		t.Fatalf("savedRequests?%s: %d %s", query, status, body)
	}
	var p savedPage
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// keepAlive is a stub the load tool can reuse connections with.
var keepAlive = []any{map[string]any{"responses": []any{map[string]any{"is": map[string]any{"body": "ok", "headers": map[string]string{"Connection": "keep-alive"}}}}}}

// The load test, scaled to a test's time: with --mock, recorded
// requests cost memory only up to a budget, then nothing more per request
// (the rest is on disk); numberOfRequests is exact; the oldest and the
// newest can be read; and GET /imposters/:id streams an answer larger than
// the process's memory without its memory jumping. RIFTGATE_RECORD_N sets
// how many requests are measured (default 250000; the 1,200,000
// runs in about a minute here).
func TestRecordingStaysInBoundedMemory(t *testing.T) {
	measured := 250_000
	if v := os.Getenv("RIFTGATE_RECORD_N"); v != "" {
		measured, _ = strconv.Atoi(v)
	}
	// First past the memory budget (4 MiB here: about 40k of these
	// records), then measured: each of those must cost next to nothing.
	const warm = 100_000
	// riftgate keeps a 64 MiB floor under its collector (gateway/cli's
	// gc.go), so that garbage grows RSS towards ~100 MB before the first
	// collection whatever is kept: with GOGC set, the floor is off and
	// RSS follows what is live.
	t.Setenv("GOGC", "100")
	rg := gatewaytest.Start(t, "--mock", "--recordedRequestsMemory", "4")
	pid := pidOf(t, rg)
	port := rg.PostImposter(map[string]any{"protocol": "http", "port": gatewaytest.FreePort(t), "stubs": keepAlive})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	if status, _ := gatewaytest.Do(t, "GET", url+"/first", nil, nil); status != 200 {
		t.Fatal(status)
	}
	load(t, warm, url+"/warm")
	before := rss(t, pid)
	load(t, measured, url+"/load?x=1")
	after := rss(t, pid)
	if status, _ := gatewaytest.Do(t, "GET", url+"/last", nil, nil); status != 200 {
		t.Fatal(status)
	}
	total := int64(warm + measured + 2)
	perRequest := float64(after-before) / float64(measured)
	t.Logf("RSS %d MB after %d requests, %d MB after %d more: %.1f bytes per recorded request", before>>20, warm+1, after>>20, measured, perRequest)
	// Kept in memory, a request cost about 580 bytes here; now the growth
	// is the garbage collector's noise over a flat line.
	if perRequest > 60 || after > 400<<20 {
		t.Fatalf("recording grows memory: %.1f bytes per request, RSS %d MB", perRequest, after>>20)
	}

	// Every one counted and kept; the oldest, the newest and a search.
	if p := saved(t, rg, port, "limit=1"); p.Total != total || len(p.Requests) != 1 || p.Requests[0].Path != "/first" {
		t.Fatalf("oldest: %+v", p)
	}
	if p := saved(t, rg, port, "limit=2&order=desc"); len(p.Requests) != 2 || p.Requests[0].Path != "/last" || p.Requests[1].Path != "/load" {
		t.Fatalf("newest: %+v", p)
	}
	if p := saved(t, rg, port, "offset=1&limit=1&order=desc&q=/warm"); p.Matched != warm || len(p.Requests) != 1 || p.Requests[0].Path != "/warm" {
		t.Fatalf("search: %+v", p)
	}

	// The whole answer, streamed: read as it comes while the server's
	// memory is watched.
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if n, err := readRSS(pid); err == nil && n > peak.Load() {
				peak.Store(n)
			}
		}
	})
	start := rss(t, pid)
	resp, err := http.Get(rg.URL + "/imposters/" + strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	var (
		size, requests int64
		numberOf       string
		first, last    string
	)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Bytes()
		size += int64(len(line)) + 1
		switch s := strings.TrimSpace(string(line)); {
		case strings.HasPrefix(s, `"requestFrom":`):
			requests++
		case strings.HasPrefix(s, `"numberOfRequests":`):
			numberOf = s
		case strings.HasPrefix(s, `"path":`):
			if first == "" {
				first = s
			}
			last = s
		}
	}
	resp.Body.Close()
	close(stop)
	wg.Wait()
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	jump := peak.Load() - start
	t.Logf("GET /imposters/%d: %d MB, %d requests; the server's RSS rose by %d MB at most", port, size>>20, requests, jump>>20)
	if requests != total || numberOf != fmt.Sprintf(`"numberOfRequests": %d,`, total) || first != `"path": "/first",` || last != `"path": "/last",` {
		t.Fatalf("the answer: %d requests, %s, first %s, last %s", requests, numberOf, first, last)
	}
	if resp.ContentLength != -1 {
		t.Fatalf("an answer of %d MB was not streamed", size>>20)
	}
	if jump > 64<<20 || jump > size/2 {
		t.Fatalf("the answer (%d MB) raised the server's memory by %d MB", size>>20, jump>>20)
	}

	// Cleared at any size, disk included.
	if status, body := rg.Do("DELETE", fmt.Sprintf("/imposters/%d/savedRequests", port), nil); status != 200 {
		t.Fatalf("DELETE savedRequests: %d %s", status, body)
	}
	if p := saved(t, rg, port, ""); p.Total != 0 || len(p.Requests) != 0 {
		t.Fatalf("after DELETE savedRequests: %+v", p)
	}
	if n := filesUnder(t, fmt.Sprintf("%s/riftgate-%d-*/requests", os.TempDir(), pid)); n > 1 {
		t.Fatalf("%d bytes of files left after DELETE savedRequests", n)
	}
}

// filesUnder returns the bytes of the files under the folders glob names.
func filesUnder(t *testing.T, glob string) int64 {
	t.Helper()
	dirs, _ := filepath.Glob(glob)
	if len(dirs) == 0 {
		t.Fatalf("no %s", glob)
	}
	var n int64
	for _, d := range dirs {
		_ = filepath.Walk(d, func(_ string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() {
				n += fi.Size()
			}
			return nil
		})
	}
	return n
}

// A cap keeps the newest, counts and shows what it dropped; an imposter's
// own cap wins over the process's.
func TestRecordedRequestsCap(t *testing.T) {
	rg := gatewaytest.Start(t, "--maxRecordedRequests", "100")
	ports := map[string]int{
		"process": rg.PostImposter(map[string]any{"protocol": "http", "port": gatewaytest.FreePort(t), "recordRequests": true}),
		"own":     rg.PostImposter(map[string]any{"protocol": "http", "port": gatewaytest.FreePort(t), "recordRequests": true, "_rift": map[string]any{"maxRecordedRequests": 10}}),
		"none":    rg.PostImposter(map[string]any{"protocol": "http", "port": gatewaytest.FreePort(t), "recordRequests": true, "_rift": map[string]any{"maxRecordedRequests": 0}}),
	}
	for _, port := range ports {
		for i := range 250 {
			gatewaytest.Do(t, "GET", fmt.Sprintf("http://127.0.0.1:%d/r%d", port, i), nil, nil)
		}
	}
	for name, c := range map[string]struct{ kept, max int64 }{"process": {100, 100}, "own": {10, 10}, "none": {250, 0}} {
		port := ports[name]
		resp, err := http.Get(fmt.Sprintf("%s/imposters/%d", rg.URL, port))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			NumberOfRequests int64
			Requests         []struct{ Path string }
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		dropped := 250 - c.kept
		if doc.NumberOfRequests != 250 || int64(len(doc.Requests)) != c.kept || doc.Requests[0].Path != fmt.Sprintf("/r%d", dropped) {
			t.Fatalf("%s: numberOfRequests %d, %d requests from %+v", name, doc.NumberOfRequests, len(doc.Requests), doc.Requests[0])
		}
		if h := resp.Header.Get("X-Riftgate-Dropped-Requests"); (dropped > 0) != (h == strconv.FormatInt(dropped, 10)) {
			t.Fatalf("%s: X-Riftgate-Dropped-Requests %q, want %d", name, h, dropped)
		}
		if p := saved(t, rg, port, ""); p.Total != c.kept || p.Dropped != dropped || p.Max != c.max {
			t.Fatalf("%s: savedRequests %+v", name, p)
		}
	}
	_, metrics := rg.Do("GET", "/metrics", nil)
	for name, port := range ports {
		for _, want := range []string{
			fmt.Sprintf(`riftgate_recorded_requests{imposter="[http:%d] "} %d`, port, map[string]int{"process": 100, "own": 10, "none": 250}[name]),
			fmt.Sprintf(`riftgate_recorded_requests_dropped_total{imposter="[http:%d] "} %d`, port, map[string]int{"process": 150, "own": 240, "none": 0}[name]),
		} {
			if !strings.Contains(string(metrics), want+"\n") {
				t.Errorf("GET /metrics lacks %s", want)
			}
		}
	}
	if status, body := rg.Do("POST", "/imposters", map[string]any{"protocol": "http", "_rift": map[string]any{"maxRecordedRequests": -1}}); status != 400 || !strings.Contains(string(body), "maxRecordedRequests") {
		t.Fatalf("a negative cap: %d %s", status, body)
	}
}

// With --datadir, recorded requests outlive a restart, as mb's datadir
// keeps them, and mb is the oracle: numberOfRequests counts from the
// start (0), the requests are all there, oldest first; a request within
// a second of a kill -9 survives it too (riftgate; mb writes each at
// once); deleting the imposter deletes them.
func TestRecordedRequestsSurviveARestart(t *testing.T) {
	type doc struct {
		NumberOfRequests int
		Requests         []struct{ Path string }
	}
	run := func(t *testing.T, in *gatewaytest.Instance) []string {
		port := gatewaytest.FreePort(t)
		body := map[string]any{"protocol": "http", "port": port, "recordRequests": true}
		if status, b := in.Do("POST", "/imposters", body); status != 201 {
			t.Fatalf("POST: %d %s", status, b)
		}
		send := func(path string) {
			if status, _ := gatewaytest.Do(t, "GET", fmt.Sprintf("http://127.0.0.1:%d%s", port, path), nil, nil); status != 200 {
				t.Fatalf("GET %s: %d", path, status)
			}
			time.Sleep(2 * time.Millisecond) // distinct times: mb orders by its file names
		}
		show := func() string {
			status, b := in.Do("GET", "/imposters/"+strconv.Itoa(port), nil)
			if status != 200 {
				t.Fatalf("GET imposter: %d %s", status, b)
			}
			var d doc
			if err := json.Unmarshal(b, &d); err != nil {
				t.Fatal(err)
			}
			paths := []string{}
			for _, r := range d.Requests {
				paths = append(paths, r.Path)
			}
			return fmt.Sprintf("%d %v", d.NumberOfRequests, paths)
		}
		var seen []string
		send("/a")
		send("/b")
		in.Stop()
		in.Restart()
		seen = append(seen, show())
		send("/c")
		seen = append(seen, show())
		in.Stop()
		in.Restart()
		seen = append(seen, show())
		if status, b := in.Do("DELETE", "/imposters/"+strconv.Itoa(port), nil); status != 200 {
			t.Fatalf("DELETE: %d %s", status, b)
		}
		if status, b := in.Do("POST", "/imposters", body); status != 201 {
			t.Fatalf("POST again: %d %s", status, b)
		}
		seen = append(seen, show())
		return seen
	}
	want := []string{"0 [/a /b]", "1 [/a /b /c]", "0 [/a /b /c]", "0 []"}
	mb := run(t, gatewaytest.StartMountebank(t, "--datadir", filepath.Join(t.TempDir(), "mb")))
	if strings.Join(mb, "|") != strings.Join(want, "|") {
		t.Fatalf("mb 2.9.1 did %v; this test expects %v", mb, want)
	}
	dir := filepath.Join(t.TempDir(), "rg")
	rg := gatewaytest.Start(t, "--datadir", dir)
	if got := run(t, rg); strings.Join(got, "|") != strings.Join(mb, "|") {
		t.Fatalf("riftgate did %v, mb %v", got, mb)
	}

	// kill -9 a second after the last request: it was written.
	port := rg.PostImposter(map[string]any{"protocol": "http", "port": gatewaytest.FreePort(t), "recordRequests": true})
	gatewaytest.Do(t, "GET", fmt.Sprintf("http://127.0.0.1:%d/before-kill", port), nil, nil)
	time.Sleep(1500 * time.Millisecond)
	rg.Kill()
	rg.Restart()
	if p := saved(t, rg, port, ""); p.Total != 1 || p.Requests[0].Path != "/before-kill" {
		t.Fatalf("after kill -9: %+v", p)
	}
}
