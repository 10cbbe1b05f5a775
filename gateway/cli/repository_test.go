package cli_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("never: %s", what)
}

// getBody answers a GET's status and body, 0 when nothing answers.
func getBody(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// TestImpostersRepository runs mb's own filesystem-backed imposters
// repository module (from the mountebank package) as riftgate's
// --impostersRepository: riftgate's changes are written through to it (an
// imposter added, a stub added, an imposter deleted); real mb then serves
// what it wrote; and riftgate, its own log gone, loads the imposters back
// from the repository at start.
func TestImpostersRepository(t *testing.T) {
	module := filepath.Join(nodeModulesDir(t), "mountebank", "src", "models", "filesystemBackedImpostersRepository.js")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	bin := gatewaytest.Binary(t)
	port, a, b := gatewaytest.FreePort(t), gatewaytest.FreePort(t), gatewaytest.FreePort(t)
	start := func(name string) *proc {
		p := startProc(t, dir, bin, "start", "--port", strconv.Itoa(port), "--host", "127.0.0.1", "--nologfile", "--pidfile", name,
			"--datadir", data, "--impostersRepository", module)
		waitForFile(t, p, filepath.Join(dir, name))
		return p
	}
	p := start("a.pid")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for _, imp := range []string{
		fmt.Sprintf(`{"protocol":"http","port":%d,"name":"kept","stubs":[{"predicates":[{"equals":{"path":"/x"}}],"responses":[{"is":{"body":"first"}},{"is":{"body":"second"}}]}]}`, a),
		fmt.Sprintf(`{"protocol":"http","port":%d,"name":"deleted","stubs":[{"responses":[{"is":{"body":"gone"}}]}]}`, b),
	} {
		if code, body := gatewaytest.Do(t, http.MethodPost, base+"/imposters", imp, nil); code != http.StatusCreated {
			t.Fatalf("POST: %d %s", code, body)
		}
	}
	if code, body := gatewaytest.Do(t, http.MethodPost, fmt.Sprintf("%s/imposters/%d/stubs", base, a), `{"stub":{"responses":[{"is":{"statusCode":202,"body":"added"}}]}}`, nil); code != 200 {
		t.Fatalf("POST stub: %d %s", code, body)
	}
	if code, body := gatewaytest.Do(t, http.MethodDelete, fmt.Sprintf("%s/imposters/%d", base, b), nil, nil); code != 200 {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	header := filepath.Join(data, strconv.Itoa(a), "imposter.json")
	waitFor(t, "the repository holds the kept imposter with its added stub and not the deleted one", func() bool {
		h, err := os.ReadFile(header)
		_, gone := os.Stat(filepath.Join(data, strconv.Itoa(b)))
		return err == nil && strings.Contains(string(h), `"kept"`) && strings.Count(string(h), `"meta"`) == 2 && os.IsNotExist(gone)
	})
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("riftgate exit %d", code)
	}

	// mb reads the repository riftgate wrote.
	mbPort := gatewaytest.FreePort(t)
	mb := startProc(t, dir, mbBinary(t), "start", "--port", strconv.Itoa(mbPort), "--host", "127.0.0.1", "--nologfile", "--pidfile", "mb.pid", "--datadir", data)
	waitForFile(t, mb, filepath.Join(dir, "mb.pid"))
	want := []string{"200 first", "200 second", "202 added"}
	check := func(who string) {
		t.Helper()
		var got []string
		for _, path := range []string{"/x", "/x", "/y"} {
			var code int
			var body string
			waitFor(t, who+" serves the imposter", func() bool { code, body = getBody(fmt.Sprintf("http://127.0.0.1:%d%s", a, path)); return code != 0 })
			got = append(got, fmt.Sprintf("%d %s", code, body))
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("%s answered %v, want %v", who, got, want)
		}
		if code, _ := getBody(fmt.Sprintf("http://127.0.0.1:%d/", b)); code != 0 {
			t.Fatalf("%s serves the deleted imposter", who)
		}
	}
	check("mb")
	_ = mb.cmd.Process.Signal(syscall.SIGTERM)
	mb.exitCode(t)

	// riftgate without its own log loads the repository's imposters.
	if err := os.Remove(filepath.Join(data, "config.db")); err != nil {
		t.Fatal(err)
	}
	p = start("b.pid")
	check("riftgate restarted from the repository")
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	p.exitCode(t)
}

// TestImpostersRepositoryFailures: a module that is not a repository ends
// the start with its reason; a path that names no file is warned about,
// as mb warns, and the server runs.
func TestImpostersRepositoryFailures(t *testing.T) {
	bin := gatewaytest.Binary(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.js"), []byte(`module.exports = { create: () => ({}) };`), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, bin, dir, "start", "--port", strconv.Itoa(gatewaytest.FreePort(t)), "--nologfile", "--pidfile", "x.pid", "--impostersRepository", "bad.js")
	if code != 1 || !strings.Contains(stdout+stderr, "does not create an imposters repository") {
		t.Fatalf("bad module: exit %d: %s%s", code, stdout, stderr)
	}
	p := startProc(t, dir, bin, "start", "--port", strconv.Itoa(gatewaytest.FreePort(t)), "--nologfile", "--pidfile", "y.pid", "--impostersRepository", "missing.js")
	waitForFile(t, p, filepath.Join(dir, "y.pid"))
	if !strings.Contains(p.out.String(), "does not exist") {
		t.Fatalf("no warning:\n%s", p.out.String())
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	p.exitCode(t)
}
