package e2e_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

func flowGet(t *testing.T, port int, flowID, path string) (int, string) {
	t.Helper()
	h := http.Header{}
	if flowID != "" {
		h.Set("X-Flow-Id", flowID)
	}
	status, body := gatewaytest.Do(t, "GET", fmt.Sprintf("http://127.0.0.1:%d%s", port, path), nil, h)
	return status, string(body)
}

const scenarioImposter = `{"protocol":"http","_rift":{"flowState":{"flowIdSource":"header:X-Flow-Id"}},"stubs":[
	{"scenarioName":"checkout","requiredScenarioState":"Started","newScenarioState":"cart","responses":[{"is":{"body":"one"}}]},
	{"scenarioName":"checkout","requiredScenarioState":"cart","newScenarioState":"paid","responses":[{"is":{"body":"two"}}]},
	{"scenarioName":"checkout","requiredScenarioState":"paid","responses":[{"is":{"body":"three"}}]}]}`

func TestScenarioKeepsHeaderKeyedFlowsApart(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(scenarioImposter)
	const flows = 100
	want := []string{"one", "two", "three", "three"}
	// Step every flow once per round, so that the flows interleave.
	for step, w := range want {
		var wg sync.WaitGroup
		errs := make(chan string, flows)
		for f := 0; f < flows; f++ {
			wg.Add(1)
			go func(f int) {
				defer wg.Done()
				status, body := flowGet(t, port, fmt.Sprintf("user-%d", f), "/")
				if status != 200 || body != w {
					errs <- fmt.Sprintf("flow %d step %d: %d %q, want %q", f, step, status, body, w)
				}
			}(f)
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
	// The admin view of one flow's scenario.
	status, body := rg.Do("GET", fmt.Sprintf("/imposters/%d/scenarios?flowId=user-7", port), nil)
	if status != 200 || !strings.Contains(string(body), `"state": "paid"`) {
		t.Fatalf("GET scenarios = %d %s", status, body)
	}
	status, body = rg.Do("PUT", fmt.Sprintf("/imposters/%d/scenarios/checkout/state?flowId=user-7", port), `{"state":"cart"}`)
	if status != 200 {
		t.Fatalf("PUT scenario state = %d %s", status, body)
	}
	if _, got := flowGet(t, port, "user-7", "/"); got != "two" {
		t.Fatalf("after setting the state to cart: %q", got)
	}
	if status, body := rg.Do("POST", fmt.Sprintf("/imposters/%d/scenarios/reset", port), nil); status != 200 {
		t.Fatalf("reset = %d %s", status, body)
	}
	for _, f := range []string{"user-1", "user-7"} {
		if _, got := flowGet(t, port, f, "/"); got != "one" {
			t.Fatalf("%s after reset: %q", f, got)
		}
	}
}

func TestConcurrentTransitionsHappenOnce(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(scenarioImposter)
	// 32 requests race on one flow: exactly one may see "one" (the Started
	// state), one "two", and the rest "three".
	counts := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, body := flowGet(t, port, "race", "/")
			mu.Lock()
			counts[body]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if counts["one"] != 1 || counts["two"] != 1 || counts["three"] != 30 {
		t.Fatalf("answers = %v", counts)
	}
}

func TestFlowAdminAPIAndCaps(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"http","_rift":{"flowState":{"flowIdSource":"header:X-Flow-Id","ttlSeconds":1}}}`)
	base := fmt.Sprintf("/imposters/%d/flows", port)
	if status, body := rg.Do("PUT", base+"/alice/cart", `["apple"]`); status != 200 {
		t.Fatalf("PUT flow key = %d %s", status, body)
	}
	rg.Do("PUT", base+"/bob/cart", `[]`)
	status, body := rg.Do("GET", base, nil)
	if status != 200 || !strings.Contains(string(body), `"alice"`) || !strings.Contains(string(body), `"bob"`) {
		t.Fatalf("GET flows = %d %s", status, body)
	}
	status, body = rg.Do("GET", base+"/alice", nil)
	if status != 200 || !strings.Contains(string(body), `"value": "[\"apple\"]"`) {
		t.Fatalf("GET flow = %d %s", status, body)
	}
	if status, _ := rg.Do("PUT", base+"/alice/"+strings.Repeat("k", 2000), "v"); status != 413 && status != 400 {
		t.Fatalf("oversized key = %d, want 400 or 413", status)
	}
	if status, _ := rg.Do("PUT", base+"/alice/big", strings.Repeat("v", 70<<10)); status != 413 {
		t.Fatalf("oversized value = %d, want 413", status)
	}
	if status, body := rg.Do("GET", base+"/alice/cart", nil); status != 200 || !strings.Contains(string(body), "apple") {
		t.Fatalf("a refused write changed the flow: %d %s", status, body)
	}
	// TTL: one second after the last write, the flow is gone.
	time.Sleep(1500 * time.Millisecond)
	if status, _ := rg.Do("GET", base+"/alice/cart", nil); status != 404 {
		t.Fatalf("expired key answered %d, want 404", status)
	}
	if status, body := rg.Do("DELETE", base+"/bob", nil); status != 200 {
		t.Fatalf("DELETE flow = %d %s", status, body)
	}
}

func TestDeletingAnImposterDeletesItsFlows(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := gatewaytest.FreePort(t)
	imp := fmt.Sprintf(`{"protocol":"http","port":%d}`, port)
	rg.PostImposter(imp)
	rg.Do("PUT", fmt.Sprintf("/imposters/%d/flows/x/k", port), "v")
	rg.Do("DELETE", fmt.Sprintf("/imposters/%d", port), nil)
	rg.PostImposter(imp)
	if status, _ := rg.Do("GET", fmt.Sprintf("/imposters/%d/flows/x/k", port), nil); status != 404 {
		t.Fatalf("a recreated imposter sees its predecessor's flow (%d)", status)
	}
}

func TestLRUShedsWholeFlows(t *testing.T) {
	rg := gatewaytest.Start(t, "--maxFlows", "3")
	port := rg.PostImposter(`{"protocol":"http"}`)
	key := func(flow, k string) string { return fmt.Sprintf("/imposters/%d/flows/%s/%s", port, flow, k) }
	for _, f := range []string{"a", "b", "c"} {
		for _, k := range []string{"k1", "k2"} {
			if status, _ := rg.Do("PUT", key(f, k), "v"); status != 200 {
				t.Fatalf("PUT %s/%s = %d", f, k, status)
			}
		}
	}
	rg.Do("GET", key("a", "k1"), nil) // a is now more recent than b
	rg.Do("PUT", key("d", "k1"), "v") // a fourth flow sheds the least recent: b
	for _, tc := range []struct {
		flow string
		want int
	}{{"a", 200}, {"b", 404}, {"c", 200}, {"d", 200}} {
		for _, k := range []string{"k1", "k2"} {
			if tc.flow == "d" && k == "k2" {
				continue
			}
			if status, _ := rg.Do("GET", key(tc.flow, k), nil); status != tc.want {
				t.Errorf("%s/%s = %d, want %d", tc.flow, k, status, tc.want)
			}
		}
	}
}
