package e2e_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// A PUT /imposters that is refused, whether its maker refuses a definition
// or the reconciler cannot bind a port, changes nothing: the imposters,
// their stubs and their flows (a scenario part way through) stay.
func TestRefusedReplaceChangesNothing(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(scenarioImposter)
	if _, body := flowGet(t, port, "u1", "/"); body != "one" {
		t.Fatalf("first step answered %q", body)
	}
	_, before := rg.Do("GET", "/imposters?replayable=true", nil)

	held, err := net.Listen("tcp", "127.0.0.1:0") // a port another process holds
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	heldPort := held.Addr().(*net.TCPAddr).Port
	fresh := gatewaytest.FreePort(t)
	for name, second := range map[string]string{
		"a protocol mb refuses":   `{"protocol":"ftp"}`,
		"a port someone else has": fmt.Sprintf(`{"protocol":"http","port":%d}`, heldPort),
	} {
		t.Run(name, func(t *testing.T) {
			body := fmt.Sprintf(`{"imposters":[{"protocol":"http","port":%d,"stubs":[{"responses":[{"is":{"body":"new"}}]}]}, %s]}`, fresh, second)
			if status, out := rg.Do("PUT", "/imposters", body); status != 400 {
				t.Fatalf("PUT = %d %s, want 400", status, out)
			}
			if _, after := rg.Do("GET", "/imposters?replayable=true", nil); string(after) != string(before) {
				t.Fatalf("a refused PUT changed the imposters:\n%s\nwas\n%s", after, before)
			}
			if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", fresh)); err == nil {
				c.Close()
				t.Fatalf("the refused PUT's first imposter is listening")
			}
		})
	}
	if _, body := flowGet(t, port, "u1", "/"); body != "two" {
		t.Fatalf("after refused PUTs the scenario answered %q, want its second step", body)
	}
}

// Concurrent admin writes, kill -9 in the middle of them: after a restart
// on the same --datadir, every write that was acknowledged is there.
func TestAcknowledgedConfigWritesSurviveKill9(t *testing.T) {
	rg := gatewaytest.Start(t, "--datadir", t.TempDir())
	port := rg.PostImposter(`{"protocol":"http"}`)
	var (
		mu        sync.Mutex
		stubs     []string // acknowledged stub paths, answered with their own name
		imposters []int
		stop      atomic.Bool
		wg        sync.WaitGroup
	)
	client := &http.Client{Timeout: 5 * time.Second}
	post := func(path, body string) (*http.Response, error) {
		return client.Post(rg.URL+path, "application/json", strings.NewReader(body))
	}
	for w := range 8 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				if w == 0 && i%4 == 0 {
					resp, err := post("/imposters", `{"protocol":"http","stubs":[{"responses":[{"is":{"body":"extra"}}]}]}`)
					if err != nil {
						return
					}
					var created struct{ Port int }
					err = json.NewDecoder(resp.Body).Decode(&created)
					resp.Body.Close()
					if resp.StatusCode == 201 && err == nil {
						mu.Lock()
						imposters = append(imposters, created.Port)
						mu.Unlock()
					}
					continue
				}
				name := fmt.Sprintf("w%d-%d", w, i)
				resp, err := post(fmt.Sprintf("/imposters/%d/stubs", port), fmt.Sprintf(
					`{"stub":{"predicates":[{"equals":{"path":"/%s"}}],"responses":[{"is":{"body":%q}}]}}`, name, name))
				if err != nil {
					return
				}
				resp.Body.Close()
				if resp.StatusCode == 200 {
					mu.Lock()
					stubs = append(stubs, name)
					mu.Unlock()
				}
			}
		})
	}
	time.Sleep(1500 * time.Millisecond)
	rg.Kill()
	stop.Store(true)
	wg.Wait()
	client.CloseIdleConnections()
	if len(stubs) < 20 || len(imposters) < 2 {
		t.Fatalf("only %d stubs and %d imposters acknowledged before the kill", len(stubs), len(imposters))
	}
	rg.Restart()
	for _, name := range stubs {
		if status, body := flowGet(t, port, "", "/"+name); status != 200 || body != name {
			t.Errorf("acknowledged stub %s answers %d %q after kill -9", name, status, body)
		}
	}
	for _, p := range imposters {
		if status, _ := rg.Do("GET", fmt.Sprintf("/imposters/%d", p), nil); status != 200 {
			t.Errorf("acknowledged imposter %d is gone after kill -9", p)
		}
	}
	t.Logf("%d stubs and %d imposters acknowledged, all there after kill -9", len(stubs), len(imposters))
}

// A module registered with PUT /plugins/:name is part of the
// configuration: a saved imposter that names it loads after kill -9.
func TestPluginSurvivesRestart(t *testing.T) {
	rg := gatewaytest.Start(t, "--datadir", t.TempDir())
	wasm := module(t, "examples/counter-wat.wasm")
	if status, body := rg.Do("PUT", "/plugins/counter?deadlineMs=200", wasm); status != 200 {
		t.Fatalf("PUT /plugins/counter = %d %s", status, body)
	}
	port := rg.PostImposter(`{"protocol":"http","stubs":[{"responses":[{"wasm":{"module":"counter"}}]}]}`)
	if status, body := flowGet(t, port, "", "/"); status != 200 {
		t.Fatalf("plugin answered %d %s", status, body)
	}
	rg.Kill()
	rg.Restart()
	if status, body := rg.Do("GET", "/plugins/counter", nil); status != 200 || !strings.Contains(string(body), `"deadlineMs": 200`) {
		t.Fatalf("GET /plugins/counter after restart = %d %s", status, body)
	}
	if status, body := flowGet(t, port, "", "/"); status != 200 {
		t.Fatalf("after restart the plugin answered %d %s", status, body)
	}
	// A plugin a stub uses cannot be deleted from under it.
	if status, body := rg.Do("DELETE", "/plugins/counter", nil); status != 400 || errorCode(t, body) != "resource conflict" {
		t.Fatalf("DELETE a plugin in use = %d %s", status, body)
	}
}

// bigUpstream answers every request with body, counting them.
func bigUpstream(t *testing.T, body string) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// checkNotRecorded sends two requests through a proxyOnce stub whose
// recording cannot be kept: each gets the upstream's answer, both reach
// the upstream, and the imposter holds no recorded stub.
func checkNotRecorded(t *testing.T, rg *gatewaytest.Instance, target string, hits *atomic.Int64, size int) {
	t.Helper()
	port := rg.PostImposter(fmt.Sprintf(`{"protocol":"http","stubs":[{"responses":[{"proxy":{"to":%q,"mode":"proxyOnce"}}]}]}`, target))
	for i := range 2 {
		status, body := flowGet(t, port, "", "/big")
		if status != 200 || len(body) != size {
			t.Fatalf("request %d: %d, %d bytes; want the upstream's %d", i, status, len(body), size)
		}
	}
	if n := hits.Load(); n != 2 {
		t.Fatalf("the upstream was called %d times; a recording that was not kept must not be served", n)
	}
	if got := stubsOf(t, rg, port); len(got) != 1 {
		t.Fatalf("the imposter has %d stubs after a failed recording", len(got))
	}
	if status, _ := rg.Do("GET", "/", nil); status != 200 {
		t.Fatal("admin API down after a failed recording")
	}
}

func TestRecordingOverTheCommandCapIsNotServed(t *testing.T) {
	const size = 25 << 20 // over configlog.MaxCommandBytes
	srv, hits := bigUpstream(t, strings.Repeat("a", size))
	rg := gatewaytest.Start(t, "--datadir", t.TempDir())
	checkNotRecorded(t, rg, srv.URL, hits, size)
}

// The --datadir is on a 1 MiB tmpfs in a mount namespace of the process's
// own: the disk fills up under the recording, whose commit fails.
func TestRecordingOnAFullDiskIsNotServed(t *testing.T) {
	const size = 2 << 20
	srv, hits := bigUpstream(t, strings.Repeat("b", size))
	dir := filepath.Join(t.TempDir(), "small")
	mount := `mkdir -p "$RG_DIR" && mount -t tmpfs -o size=1m riftgate-test "$RG_DIR" && exec "$0" "$@"`
	t.Setenv("RG_DIR", dir)
	rg := gatewaytest.StartUnder(t, []string{"unshare", "-m", "--propagation", "private", "sh", "-c", mount}, "--datadir", dir)
	checkNotRecorded(t, rg, srv.URL, hits, size)
	if !strings.Contains(rg.Output(), "no space left on device") {
		t.Fatalf("the failed commit was not said in the log:\n%s", rg.Output())
	}
}

// A stub keeps its place in its responses cycle while other stubs are
// added, replaced and deleted around it.
func TestStubKeepsItsCycleWhenOtherStubsChange(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"http","stubs":[{"predicates":[{"equals":{"path":"/c"}}],
		"responses":[{"is":{"body":"a"}},{"is":{"body":"b"}},{"is":{"body":"c"}}]}]}`)
	next := func(want string) {
		t.Helper()
		if _, body := flowGet(t, port, "", "/c"); body != want {
			t.Fatalf("cycle answered %q, want %q", body, want)
		}
	}
	next("a")
	edits := []struct{ method, path, body string }{
		{"POST", "/stubs", `{"index":0,"stub":{"predicates":[{"equals":{"path":"/x"}}],"responses":[{"is":{"body":"x"}}]}}`},
		{"PUT", "/stubs/0", `{"predicates":[{"equals":{"path":"/y"}}],"responses":[{"is":{"body":"y"}}]}`},
		{"DELETE", "/stubs/0", ""},
	}
	for i, e := range edits {
		if status, body := rg.Do(e.method, fmt.Sprintf("/imposters/%d%s", port, e.path), e.body); status != 200 {
			t.Fatalf("%s %s = %d %s", e.method, e.path, status, body)
		}
		next([]string{"b", "c", "a"}[i])
	}
}

// A --datadir that a build before the configuration log wrote (one JSON
// file per imposter under imposters/) is taken in once: its imposters load,
// the folder is renamed, and from then on config.db has them.
func TestOlderDatadirIsMigrated(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "imposters")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	port := gatewaytest.FreePort(t)
	saved := fmt.Sprintf(`{"protocol":"http","port":%d,"name":"old","recordRequests":false,
		"stubs":[{"predicates":[{"equals":{"path":"/a"}}],"responses":[{"is":{"body":"kept"}}]}]}`, port)
	if err := os.WriteFile(filepath.Join(old, fmt.Sprintf("%d.json", port)), []byte(saved), 0o644); err != nil {
		t.Fatal(err)
	}
	rg := gatewaytest.Start(t, "--datadir", dir)
	if _, body := flowGet(t, port, "", "/a"); body != "kept" {
		t.Fatalf("the migrated imposter answered %q", body)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Fatalf("the old folder is still read: %v", err)
	}
	if _, err := os.Stat(old + ".migrated"); err != nil {
		t.Fatalf("the old folder was not kept aside: %v", err)
	}
	rg.Kill()
	rg.Restart()
	if _, body := flowGet(t, port, "", "/a"); body != "kept" {
		t.Fatalf("after a restart the migrated imposter answered %q", body)
	}
}
