package e2e_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// ackLog is the client's record of the writes riftgate acknowledged.
type ackLog struct {
	mu   sync.Mutex
	keys []string
}

func (a *ackLog) add(k string) { a.mu.Lock(); a.keys = append(a.keys, k); a.mu.Unlock() }

// writeUntilKilled puts distinct keys into flows from 16 writers, logging
// every acknowledged one, and kill -9s the process after d.
func writeUntilKilled(t *testing.T, rg *gatewaytest.Instance, port int, d time.Duration) *ackLog {
	t.Helper()
	acks := &ackLog{}
	var stop atomic.Bool
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 5 * time.Second}
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("flow-%d/k%d", w, i)
				req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/imposters/%d/flows/%s", rg.URL, port, key), nil)
				resp, err := client.Do(req)
				if err != nil {
					return // the process is gone
				}
				resp.Body.Close()
				if resp.StatusCode == 200 {
					acks.add(key)
				}
			}
		}(w)
	}
	time.Sleep(d)
	rg.Kill()
	stop.Store(true)
	wg.Wait()
	client.CloseIdleConnections()
	return acks
}

func lostAfterRestart(t *testing.T, rg *gatewaytest.Instance, port int, acks *ackLog) int {
	t.Helper()
	rg.Restart()
	lost := 0
	for _, k := range acks.keys {
		if status, _ := rg.Do("GET", fmt.Sprintf("/imposters/%d/flows/%s", port, k), nil); status != 200 {
			lost++
		}
	}
	return lost
}

func durableImposter(port int, mode string) string {
	return fmt.Sprintf(`{"protocol":"http","port":%d,"_rift":{"flowState":{"durability":%q}}}`, port, mode)
}

func TestSyncLosesNoAcknowledgedWriteOnKill9(t *testing.T) {
	dir := t.TempDir()
	rg := gatewaytest.Start(t, "--datadir", dir)
	port := rg.PostImposter(durableImposter(gatewaytest.FreePort(t), "sync"))
	acks := writeUntilKilled(t, rg, port, 2*time.Second)
	if len(acks.keys) < 10 {
		t.Fatalf("only %d writes acknowledged before the kill", len(acks.keys))
	}
	if lost := lostAfterRestart(t, rg, port, acks); lost != 0 {
		t.Fatalf("sync lost %d of %d acknowledged writes", lost, len(acks.keys))
	}
}

func TestAsyncLosesAtMostTheLastBatch(t *testing.T) {
	dir := t.TempDir()
	rg := gatewaytest.Start(t, "--datadir", dir)
	port := rg.PostImposter(durableImposter(gatewaytest.FreePort(t), "async"))
	acks := writeUntilKilled(t, rg, port, 1500*time.Millisecond)
	lost := lostAfterRestart(t, rg, port, acks)
	// One batch is at most flowshard's MaxPending (4096) operations.
	if lost > 4096 {
		t.Fatalf("async lost %d of %d acknowledged writes, more than one batch", lost, len(acks.keys))
	}
	t.Logf("async: %d acknowledged, %d lost", len(acks.keys), lost)
}

func TestMemoryKeepsNothingAfterRestart(t *testing.T) {
	dir := t.TempDir()
	rg := gatewaytest.Start(t, "--datadir", dir)
	port := rg.PostImposter(durableImposter(gatewaytest.FreePort(t), "memory"))
	if status, _ := rg.Do("PUT", fmt.Sprintf("/imposters/%d/flows/f/k", port), "v"); status != 200 {
		t.Fatal("PUT failed")
	}
	rg.Stop()
	rg.Restart()
	if status, _ := rg.Do("GET", fmt.Sprintf("/imposters/%d/flows/f/k", port), nil); status != 404 {
		t.Fatalf("memory flow survived a restart (%d)", status)
	}
}

func TestImpostersSurviveKill9(t *testing.T) {
	dir := t.TempDir()
	rg := gatewaytest.Start(t, "--datadir", dir)
	port := rg.PostImposter(fmt.Sprintf(`{"protocol":"http","port":%d,"name":"kept",
		"stubs":[{"responses":[{"is":{"body":"first"}}]}]}`, gatewaytest.FreePort(t)))
	if status, body := rg.Do("POST", fmt.Sprintf("/imposters/%d/stubs", port),
		`{"index":0,"stub":{"responses":[{"is":{"body":"added"}}]}}`); status != 200 {
		t.Fatalf("POST stub = %d %s", status, body)
	}
	gone := rg.PostImposter(fmt.Sprintf(`{"protocol":"http","port":%d}`, gatewaytest.FreePort(t)))
	rg.Do("DELETE", fmt.Sprintf("/imposters/%d", gone), nil)
	rg.Kill()
	rg.Restart()
	if _, body := flowGet(t, port, "", "/"); body != "added" {
		t.Fatalf("after kill -9 the imposter answered %q", body)
	}
	_, list := rg.Do("GET", "/imposters", nil)
	if n := len(decode(t, list)["imposters"].([]any)); n != 1 {
		t.Fatalf("%d imposters after restart, want 1: %s", n, list)
	}
}
