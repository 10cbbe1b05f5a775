package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// TestSaveAndReplayWithoutTheUpstream records through a proxy, saves, and
// replays from the saved file with the upstream gone: every answer comes
// from the recording.
func TestSaveAndReplayWithoutTheUpstream(t *testing.T) {
	up := newUpstream(t, false, 0)
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(proxyImposter(up.URL, "proxyOnce", `[{"matches":{"path":true}}]`))
	_, first := flowGet(t, port, "", "/recorded")

	saved := filepath.Join(t.TempDir(), "saved.json")
	cmd := exec.Command(gatewaytest.Binary(t), "save", "--port", strconv.Itoa(rg.Port), "--host", "127.0.0.1",
		"--savefile", saved, "--removeProxies")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("riftgate save: %v\n%s", err, out)
	}
	b, err := os.ReadFile(saved)
	if err != nil || strings.Contains(string(b), `"proxy"`) || !strings.Contains(string(b), "/recorded") {
		t.Fatalf("saved file (%v):\n%s", err, b)
	}

	// riftgate replay turns the running proxy into its recording.
	cmd = exec.Command(gatewaytest.Binary(t), "replay", "--port", strconv.Itoa(rg.Port), "--host", "127.0.0.1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("riftgate replay: %v\n%s", err, out)
	}
	up.Close()
	hits := up.hits.Load()
	if status, body := flowGet(t, port, "", "/recorded"); status != 200 || body != first {
		t.Fatalf("after replay with the upstream stopped: %d %q, want %q", status, body, first)
	}

	// A new process started from the saved file answers the same way.
	rg.Stop()
	again := gatewaytest.Start(t, "--configfile", saved)
	if status, body := flowGet(t, port, "", "/recorded"); status != 200 || body != first {
		t.Fatalf("from the saved file: %d %q", status, body)
	}
	_ = again
	if up.hits.Load() != hits {
		t.Fatal("the upstream was called after it stopped")
	}
}
