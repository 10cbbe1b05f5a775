package cli_test

// Differential tests: save and replay pointed at the real Mountebank 2.9.1.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// recordThroughMB starts mb with a proxyOnce imposter in front of a real
// upstream and sends one request through it, so that mb records a response.
func recordThroughMB(t *testing.T, mbArgs ...string) (adminPort, impPort int, header http.Header) {
	t.Helper()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "from upstream")
	}))
	t.Cleanup(upstream.Close)
	adminPort, _ = startMB(t, mbArgs...)
	header = http.Header{}
	for i, a := range mbArgs {
		if a == "--apikey" {
			header.Set("x-api-key", mbArgs[i+1])
		}
	}
	impPort = gatewaytest.FreePort(t)
	imposter := map[string]any{"port": impPort, "protocol": "http", "stubs": []any{
		map[string]any{"responses": []any{map[string]any{"proxy": map[string]any{"to": upstream.URL, "mode": "proxyOnce"}}}},
	}}
	admin := fmt.Sprintf("http://localhost:%d", adminPort)
	if code, body := gatewaytest.Do(t, http.MethodPost, admin+"/imposters", imposter, header); code != http.StatusCreated {
		t.Fatalf("mb POST /imposters: %d %s", code, body)
	}
	if code, body := gatewaytest.Do(t, http.MethodGet, fmt.Sprintf("http://localhost:%d/x", impPort), nil, nil); string(body) != "from upstream" {
		t.Fatalf("proxy answered %d %q", code, body)
	}
	return adminPort, impPort, header
}

// riftgate save writes the same bytes as mb save, with and without --removeProxies.
func TestSaveMatchesMountebank(t *testing.T) {
	mb := mbBinary(t)
	port, _, _ := recordThroughMB(t)
	bin := gatewaytest.Binary(t)
	dir := t.TempDir()
	for _, extra := range [][]string{nil, {"--removeProxies"}} {
		args := append([]string{"save", "--port", strconv.Itoa(port)}, extra...)
		if _, stderr, code := run(t, mb, dir, append(args, "--savefile", "mb.json")...); code != 0 {
			t.Fatalf("mb save: exit %d: %s", code, stderr)
		}
		if _, stderr, code := run(t, bin, dir, append(args, "--savefile", "rg.json")...); code != 0 {
			t.Fatalf("riftgate save: exit %d: %s", code, stderr)
		}
		want, err := os.ReadFile(filepath.Join(dir, "mb.json"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "rg.json"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("save %v:\nriftgate wrote\n%s\nmb wrote\n%s", extra, got, want)
		}
		if removes := len(extra) > 0; removes == strings.Contains(string(got), `"proxy"`) {
			t.Fatalf("save %v: proxies present = %t", extra, !removes)
		}
	}
}

// riftgate replay turns mb's proxy into the recorded response, as mb replay does.
func TestReplayAgainstMountebank(t *testing.T) {
	port, imp, _ := recordThroughMB(t)
	if _, stderr, code := run(t, gatewaytest.Binary(t), t.TempDir(), "replay", "--port", strconv.Itoa(port)); code != 0 {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	code, body := getJSON(t, fmt.Sprintf("http://localhost:%d/imposters/%d", port, imp), nil)
	if code != http.StatusOK || strings.Contains(string(body), `"proxy"`) || !strings.Contains(string(body), "from upstream") {
		t.Fatalf("after replay mb holds %d %s", code, body)
	}
}

// save and replay send --apikey as x-api-key; without it mb refuses them.
func TestAPIKeyAgainstMountebank(t *testing.T) {
	port, _, _ := recordThroughMB(t, "--apikey", "s3cret")
	bin := gatewaytest.Binary(t)
	dir := t.TempDir()
	p := strconv.Itoa(port)
	if _, stderr, code := run(t, bin, dir, "save", "--port", p, "--savefile", "no.json"); code != 1 || !strings.HasPrefix(stderr, "401\n") {
		t.Fatalf("save without the key: exit %d, stderr %q", code, stderr)
	}
	if fileExists(filepath.Join(dir, "no.json")) {
		t.Fatal("a refused save wrote a file")
	}
	if _, stderr, code := run(t, bin, dir, "save", "--port", p, "--savefile", "yes.json", "--apikey", "s3cret"); code != 0 {
		t.Fatalf("save with the key: exit %d: %s", code, stderr)
	}
	if _, stderr, code := run(t, bin, dir, "replay", "--port", p, "--apikey", "s3cret"); code != 0 {
		t.Fatalf("replay with the key: exit %d: %s", code, stderr)
	}
}
