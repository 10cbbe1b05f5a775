package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
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

// recordUntil sends GETs of new paths (/r/<worker>/<i>) through a proxyOnce
// imposter from 16 workers until want of them were answered, then kill -9s
// riftgate while the workers still send. It returns the paths answered
// with the upstream's 200: each was recorded before it was answered.
func recordUntil(t *testing.T, rg *gatewaytest.Instance, port, want int) []string {
	t.Helper()
	var (
		mu    sync.Mutex
		acked []string
		count atomic.Int64
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	reached := make(chan struct{})
	var once sync.Once
	for w := range 16 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				path := fmt.Sprintf("/r/%d/%d", w, i)
				resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
				if err != nil {
					time.Sleep(10 * time.Millisecond) // not answered: not acknowledged
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					continue
				}
				mu.Lock()
				acked = append(acked, path)
				mu.Unlock()
				if count.Add(1) >= int64(want) {
					once.Do(func() { close(reached) })
				}
			}
		})
	}
	select {
	case <-reached:
	case <-time.After(10 * time.Minute):
		t.Errorf("only %d recordings in 10 minutes", count.Load())
	}
	rg.Kill()
	stop.Store(true)
	wg.Wait()
	tr.CloseIdleConnections()
	return acked
}

// recordedPaths returns the paths of the imposter's recorded stubs, as
// GET /imposters/:id shows them, and how long the GET took.
func recordedPaths(t *testing.T, rg *gatewaytest.Instance, port int, query string) (map[string]bool, int, time.Duration) {
	t.Helper()
	start := time.Now()
	status, body := rg.Do("GET", fmt.Sprintf("/imposters/%d%s", port, query), nil)
	took := time.Since(start)
	if status != 200 {
		t.Fatalf("GET /imposters/%d%s: %d", port, query, status)
	}
	var imp struct {
		Stubs []struct {
			Predicates []struct {
				DeepEquals struct {
					Path string `json:"path"`
				} `json:"deepEquals"`
			} `json:"predicates"`
		} `json:"stubs"`
	}
	if err := json.Unmarshal(body, &imp); err != nil {
		t.Fatal(err)
	}
	paths := map[string]bool{}
	for _, st := range imp.Stubs {
		if len(st.Predicates) == 1 {
			paths[st.Predicates[0].DeepEquals.Path] = true
		}
	}
	return paths, len(imp.Stubs), took
}

// TestLargeRecordingSurvivesKill9 records 20,000 exchanges (10,000 with
// -short; RIFTGATE_RECORDINGS=100000 for the size, which takes
// minutes here) through proxyOnce on --datadir, kill -9s riftgate under
// load, and restarts it: every answered exchange is still recorded, and
// the recording is served, shown and saved. The times are logged, not
// checked: this is not a benchmark.
func TestLargeRecordingSurvivesKill9(t *testing.T) {
	want := 20000
	if testing.Short() {
		want = 10000
	}
	if n, err := strconv.Atoi(os.Getenv("RIFTGATE_RECORDINGS")); err == nil && n > 0 {
		want = n
	}
	recordKillSave(t, want, false)
}

// TestLargeRecordingReplays records 10,000 exchanges and replays them
// (riftgate replay, then a start from the saved file);
// RIFTGATE_REPLAY_RECORDINGS=100000 for the size, whose ~79 MB
// file is past the admin API's 16 MiB body and the configuration's 24 MiB
// command, so that replay and --configfile send it in parts
// (TestReplayInParts checks those parts at a size make test affords).
func TestLargeRecordingReplays(t *testing.T) {
	want := 10000
	if n, err := strconv.Atoi(os.Getenv("RIFTGATE_REPLAY_RECORDINGS")); err == nil && n > 0 {
		want = n
	}
	recordKillSave(t, want, true)
}

// TestReplayInParts: an imposter of 30 stubs of 1 MiB each (built with
// riftgate's POST /imposters/:id/stubs {"stubs": [...]}) saves to over 30
// MB, more than one admin body (16 MiB) or command (24 MiB) holds:
// `riftgate replay` sends it in parts, and a start with --configfile of
// the saved file applies it in parts; both keep every stub, in order.
func TestReplayInParts(t *testing.T) {
	const nStubs, perBody = 30, 6
	big := strings.Repeat("x", 1<<20)
	stub := func(i int) string {
		return fmt.Sprintf(`{"predicates":[{"equals":{"path":"/s/%d"}}],"responses":[{"is":{"statusCode":200,"body":"%d %s"}}]}`, i, i, big)
	}
	stubs := func(from, to int) string {
		var ss []string
		for i := from; i < to; i++ {
			ss = append(ss, stub(i))
		}
		return strings.Join(ss, ",")
	}
	rg := gatewaytest.Start(t, "--datadir", t.TempDir())
	port := rg.PostImposter(`{"protocol":"http","name":"big","stubs":[` + stubs(0, perBody) + `]}`)
	for from := perBody; from < nStubs; from += perBody {
		status, body := rg.Do("POST", fmt.Sprintf("/imposters/%d/stubs", port), []byte(`{"stubs":[`+stubs(from, from+perBody)+`]}`))
		var added struct{ Port, Added, NumberOfStubs int }
		if status != 200 || json.Unmarshal(body, &added) != nil || added.Port != port || added.Added != perBody || added.NumberOfStubs != from+perBody {
			t.Fatalf("POST stubs from %d: %d %.200s", from, status, body)
		}
	}
	check := func(when string, inst *gatewaytest.Instance) {
		t.Helper()
		status, body := inst.Do("GET", fmt.Sprintf("/imposters/%d", port), nil)
		var imp struct {
			Name  string `json:"name"`
			Stubs []struct {
				Responses []struct {
					Is struct {
						Body string `json:"body"`
					} `json:"is"`
				} `json:"responses"`
			} `json:"stubs"`
		}
		if status != 200 || json.Unmarshal(body, &imp) != nil {
			t.Fatalf("%s: GET /imposters/%d: %d", when, port, status)
		}
		if len(imp.Stubs) != nStubs || imp.Name != "big" {
			t.Fatalf("%s: %d stubs named %q, want %d named big", when, len(imp.Stubs), imp.Name, nStubs)
		}
		for i, st := range imp.Stubs {
			if len(st.Responses) != 1 || st.Responses[0].Is.Body != fmt.Sprintf("%d %s", i, big) {
				t.Fatalf("%s: stub %d is not the %dth stub sent", when, i, i)
			}
		}
		// Served: the last stub answers its path.
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/s/%d", port, nStubs-1))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.HasPrefix(string(b), fmt.Sprintf("%d x", nStubs-1)) {
			t.Fatalf("%s: the last stub answered %.40q", when, b)
		}
	}
	check("posted in parts", rg)

	saved := filepath.Join(t.TempDir(), "saved.json")
	cmd := exec.Command(gatewaytest.Binary(t), "save", "--port", strconv.Itoa(rg.Port), "--host", "127.0.0.1", "--savefile", saved)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("riftgate save: %v\n%s", err, out)
	}
	if fi, err := os.Stat(saved); err != nil || fi.Size() < 30<<20 {
		t.Fatalf("saved file: %v %v, want over 30 MiB", fi, err)
	}
	cmd = exec.Command(gatewaytest.Binary(t), "replay", "--port", strconv.Itoa(rg.Port), "--host", "127.0.0.1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("riftgate replay: %v\n%s", err, out)
	}
	check("replayed", rg)
	rg.Stop()
	again := gatewaytest.Start(t, "--configfile", saved)
	check("started from the saved file", again)
}

func recordKillSave(t *testing.T, want int, replay bool) {
	up := newUpstream(t, false, 0)
	dir := t.TempDir()
	rg := gatewaytest.Start(t, "--datadir", dir)
	// Kept alive, the clients record rather than open and close 100,000
	// connections.
	port := rg.PostImposter(fmt.Sprintf(`{"protocol":"http","_rift":{"proxyKeepAlive":true},"stubs":[{"responses":[{"proxy":{"to":%q,"mode":"proxyOnce","predicateGenerators":[{"matches":{"path":true}}]}}]}]}`, up.URL))
	start := time.Now()
	acked := recordUntil(t, rg, port, want)
	t.Logf("%d exchanges recorded in %v", len(acked), time.Since(start).Round(time.Millisecond))

	start = time.Now()
	rg.Restart()
	t.Logf("restart on --datadir: %v", time.Since(start).Round(time.Millisecond))
	paths, n, took := recordedPaths(t, rg, port, "")
	t.Logf("GET /imposters/%d with %d stubs: %v", port, n, took.Round(time.Millisecond))
	lost := 0
	for _, p := range acked {
		if !paths[p] {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged recordings lost after kill -9", lost, len(acked))
	}
	if n != len(paths)+1 {
		t.Fatalf("%d stubs for %d recorded paths and the proxy", n, len(paths))
	}
	_, rn, took := recordedPaths(t, rg, port, "?replayable=true")
	t.Logf("?replayable=true: %v", took.Round(time.Millisecond))
	if rn != n {
		t.Fatalf("replayable shows %d stubs of %d", rn, n)
	}

	// Served from the recording: the upstream is not called again.
	hits := up.hits.Load()
	if status, body := flowGet(t, port, "", acked[len(acked)/2]); status != 200 || up.hits.Load() != hits {
		t.Fatalf("a recorded path: %d %s (upstream hits %d → %d)", status, body, hits, up.hits.Load())
	}

	saved := filepath.Join(t.TempDir(), "saved.json")
	start = time.Now()
	cmd := exec.Command(gatewaytest.Binary(t), "save", "--port", strconv.Itoa(rg.Port), "--host", "127.0.0.1",
		"--savefile", saved, "--removeProxies")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("riftgate save: %v\n%s", err, out)
	}
	fi, err := os.Stat(saved)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("save: %v, %d bytes", time.Since(start).Round(time.Millisecond), fi.Size())
	if !replay {
		return
	}

	start = time.Now()
	cmd = exec.Command(gatewaytest.Binary(t), "replay", "--port", strconv.Itoa(rg.Port), "--host", "127.0.0.1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("riftgate replay: %v\n%s", err, out)
	}
	t.Logf("replay: %v", time.Since(start).Round(time.Millisecond))
	if _, rn, _ := recordedPaths(t, rg, port, ""); rn != n-1 {
		t.Fatalf("after replay: %d stubs, want the %d recorded", rn, n-1)
	}

	// A new process loads the saved file: at 100,000 stubs (~79 MB, in
	// parts) on a busy machine, in more than Start's 30 s.
	rg.Stop()
	start = time.Now()
	again := gatewaytest.StartWithin(t, 5*time.Minute, "--configfile", saved)
	t.Logf("start from the saved file: %v", time.Since(start).Round(time.Millisecond))
	if _, rn, _ := recordedPaths(t, again, port, ""); rn != n-1 {
		t.Fatalf("from the saved file: %d stubs, want %d", rn, n-1)
	}
	if status, _ := flowGet(t, port, "", acked[0]); status != 200 || up.hits.Load() != hits {
		t.Fatalf("from the saved file, a recorded path: %d (upstream hits %d → %d)", status, hits, up.hits.Load())
	}
}

// TestRecordingsOnOneCoreGoInBatches sends new paths through a proxyOnce
// imposter from 32 clients at once to riftgate on one core (GOMAXPROCS=1,
// as when it is pinned): the recordings made while one batch is written go
// together in the next configuration command, so there are far fewer
// commands than recordings, and GET /metrics counts both.
func TestRecordingsOnOneCoreGoInBatches(t *testing.T) {
	up := newUpstream(t, false, 0)
	rg := gatewaytest.StartUnder(t, []string{"env", "GOMAXPROCS=1"})
	port := rg.PostImposter(proxyImposter(up.URL, "proxyOnce", `[{"matches":{"path":true}}]`))
	const workers, each = 32, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if status, _ := flowGet(t, port, "", fmt.Sprintf("/r/%d/%d", w, i)); status != 200 {
					t.Errorf("GET /r/%d/%d: %d", w, i, status)
				}
			}
		})
	}
	wg.Wait()
	recordings := int(metricValue(t, rg, "riftgate_proxy_recordings_total", ""))
	batches := int(metricValue(t, rg, "riftgate_proxy_recording_batches_total", ""))
	t.Logf("%d recordings in %d batches", recordings, batches)
	if recordings != workers*each {
		t.Fatalf("%d recordings counted, want %d", recordings, workers*each)
	}
	if batches > recordings/2 {
		t.Fatalf("%d recordings went in %d batches: they were not grouped", recordings, batches)
	}
}
