package e2e_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

func module(t *testing.T, rel string) []byte { return gatewaytest.Wasm(t, rel) }

func TestPluginAdminAPIRefusesBadModules(t *testing.T) {
	rg := gatewaytest.Start(t)
	status, body := rg.Do("PUT", "/plugins/good", module(t, "plugins/good.wasm"))
	if status != 200 || !strings.Contains(string(body), `"sha256"`) {
		t.Fatalf("PUT good = %d %s", status, body)
	}
	for _, bad := range []string{"bad_marker", "bad_noentry", "bad_start", "bad_import", "bad_nomemory"} {
		status, body := rg.Do("PUT", "/plugins/"+bad, module(t, "plugins/"+bad+".wasm"))
		if status != 400 || errorCode(t, body) != "bad data" {
			t.Errorf("PUT %s = %d %s, want 400 bad data", bad, status, body)
		}
	}
	status, body = rg.Do("GET", "/plugins", nil)
	if status != 200 || !strings.Contains(string(body), `"good"`) || strings.Contains(string(body), "bad_") {
		t.Fatalf("GET /plugins = %d %s", status, body)
	}
	// An imposter naming a refused module is refused when it is created.
	status, body = rg.Do("POST", "/imposters", `{"protocol":"http","stubs":[{"responses":[{"wasm":{"module":"bad_marker"}}]}]}`)
	if status != 400 {
		t.Fatalf("imposter with an unregistered module = %d %s", status, body)
	}
	if status, _ := rg.Do("DELETE", "/plugins/good", nil); status != 200 {
		t.Fatalf("DELETE = %d", status)
	}
	if status, _ := rg.Do("GET", "/plugins/good", nil); status != 404 {
		t.Fatalf("GET deleted plugin = %d", status)
	}
}

func TestHostileGuestsCostOneRequest(t *testing.T) {
	rg := gatewaytest.Start(t)
	for _, m := range []string{"loop", "membomb", "trap", "huge", "oob"} {
		if status, body := rg.Do("PUT", "/plugins/"+m, module(t, "plugins/"+m+".wasm")); status != 200 {
			t.Fatalf("PUT %s = %d %s", m, status, body)
		}
	}
	wasmDir := gatewaytest.WasmDir(t)
	healthy := rg.PostImposter(fmt.Sprintf(`{"protocol":"http","stubs":[{"responses":[{"wasm":{"module":%q}}]}]}`,
		filepath.Join(wasmDir, "examples", "counter-wat.wasm")))
	hostile := rg.PostImposter(`{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"path":"/loop"}}],"responses":[{"wasm":{"module":"loop"}}]},
		{"predicates":[{"equals":{"path":"/membomb"}}],"responses":[{"wasm":{"module":"membomb"}}]},
		{"predicates":[{"equals":{"path":"/trap"}}],"responses":[{"wasm":{"module":"trap"}}]},
		{"predicates":[{"equals":{"path":"/huge"}}],"responses":[{"wasm":{"module":"huge"}}]},
		{"predicates":[{"equals":{"path":"/oob-request"}}],"responses":[{"wasm":{"module":"oob","export":"request_read"}}]},
		{"predicates":[{"equals":{"path":"/oob-put"}}],"responses":[{"wasm":{"module":"oob","export":"flow_put_val"}}]},
		{"predicates":[{"equals":{"path":"/oob-response"}}],"responses":[{"wasm":{"module":"oob","export":"response_write"}}]}]}`)
	for _, path := range []string{"/loop", "/membomb", "/trap", "/huge", "/oob-request", "/oob-put", "/oob-response"} {
		status, body := flowGet(t, hostile, "", path)
		if status != 500 || !strings.Contains(body, "plugin error") {
			t.Errorf("%s answered %d %s, want 500 plugin error", path, status, body)
		}
		if status, body := flowGet(t, healthy, "", "/"); status != 200 {
			t.Fatalf("after %s the healthy plugin answered %d %s", path, status, body)
		}
	}
	if status, _ := rg.Do("GET", "/", nil); status != 200 {
		t.Fatal("admin API down after hostile guests")
	}
}

// TestPluginLimitsFromTheAPI: a module's limits come from PUT's query or the
// stub's `limits`, show in GET /plugins, and bind: a 50 ms deadline stops
// the endless loop long before the default second, and 33 pages stop the
// memory bomb. Bad limits are refused with 400 and change nothing.
func TestPluginLimitsFromTheAPI(t *testing.T) {
	rg := gatewaytest.Start(t)
	loop := module(t, "plugins/loop.wasm")
	if status, body := rg.Do("PUT", "/plugins/loop?deadlineMs=50&poolSize=1", loop); status != 200 ||
		!strings.Contains(string(body), `"deadlineMs": 50`) || !strings.Contains(string(body), `"poolSize": 1`) {
		t.Fatalf("PUT with limits = %d %s", status, body)
	}
	for _, bad := range []string{"deadlineMs=-2", "memoryPages=70000", "poolSize=x", "colour=blue", "recycleAfter=-1"} {
		status, body := rg.Do("PUT", "/plugins/loop?"+bad, loop)
		if status != 400 || errorCode(t, body) != "bad data" {
			t.Errorf("PUT ?%s = %d %s, want 400 bad data", bad, status, body)
		}
	}
	if _, body := rg.Do("GET", "/plugins/loop", nil); !strings.Contains(string(body), `"deadlineMs": 50`) {
		t.Fatalf("a refused PUT changed the limits: %s", body)
	}

	bomb := filepath.Join(gatewaytest.WasmDir(t), "plugins", "membomb.wasm")
	imp := rg.PostImposter(fmt.Sprintf(`{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"path":"/loop"}}],"responses":[{"wasm":{"module":"loop"}}]},
		{"predicates":[{"equals":{"path":"/bomb"}}],"responses":[{"wasm":{"module":%q,"limits":{"memoryPages":33}}}]}]}`, bomb))
	start := time.Now()
	status, body := flowGet(t, imp, "", "/loop")
	if took := time.Since(start); status != 500 || !strings.Contains(body, "deadline of 50ms") || took > 900*time.Millisecond {
		t.Fatalf("/loop: %d %s after %s, want the 50 ms deadline", status, body, took)
	}
	if status, body := flowGet(t, imp, "", "/bomb"); status != 500 || !strings.Contains(body, "limit of 33 pages") {
		t.Fatalf("/bomb: %d %s, want the 33-page limit", status, body)
	}
	if _, body := rg.Do("GET", "/plugins", nil); !strings.Contains(string(body), `"memoryPages": 33`) {
		t.Fatalf("GET /plugins does not show the stub's limits: %s", body)
	}

	for name, wasm := range map[string]string{
		"limits on a module registered by name": `{"module":"loop","limits":{"deadlineMs":10}}`,
		"deadline below -1":                     fmt.Sprintf(`{"module":%q,"limits":{"deadlineMs":-5}}`, bomb),
		"unknown limit":                         fmt.Sprintf(`{"module":%q,"limits":{"fuel":5}}`, bomb),
	} {
		status, body := rg.Do("POST", "/imposters", `{"protocol":"http","stubs":[{"responses":[{"wasm":`+wasm+`}]}]}`)
		if status != 400 || errorCode(t, body) != "bad data" {
			t.Errorf("%s: %d %s, want 400 bad data", name, status, body)
		}
	}
}

// TestRepeatedPluginAnswerIsNotChangedByBehaviors: a plugin that answers
// the same bytes every call gets one response built and rendered for all
// of them; a stub whose behaviors change the answer changes its own copy,
// so neither the next request on it nor another stub on the module sees
// the change.
func TestRepeatedPluginAnswerIsNotChangedByBehaviors(t *testing.T) {
	rg := gatewaytest.Start(t)
	fb := filepath.Join(gatewaytest.WasmDir(t), "examples", "flowbench-wat.wasm")
	imp := rg.PostImposter(fmt.Sprintf(`{"protocol":"http","stubs":[
		{"predicates":[{"startsWith":{"path":"/copy/"}}],"responses":[{"wasm":{"module":%[1]q},
			"behaviors":[{"copy":{"from":"path","into":"ok","using":{"method":"regex","selector":"[a-z]+$"}}}]}]},
		{"responses":[{"wasm":{"module":%[1]q}}]}]}`, fb))
	for i := range 6 {
		path := fmt.Sprintf("/copy/%c", 'a'+i)
		if status, body := flowGet(t, imp, "", path); status != 200 || body != path[len("/copy/"):] {
			t.Fatalf("%s answered %d %q", path, status, body)
		}
		if status, body := flowGet(t, imp, "", "/plain"); status != 200 || body != "ok" {
			t.Fatalf("after %s, /plain answered %d %q", path, status, body)
		}
	}
}

// TestPluginCountersKeepTheirFlowsApartUnderConcurrency: virtual users,
// each on a flow of its own (ids of a load generator's length, over the 32
// bytes a string concatenation keeps on the stack), step the WAT counter
// at once; each sees exactly 1, 2, 3 ... Every answer's body is a copy in
// its request's own room and every flow read a copy in its call's, so a
// body or a count that leaked between concurrent requests shows here.
func TestPluginCountersKeepTheirFlowsApartUnderConcurrency(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(fmt.Sprintf(`{"protocol":"http","_rift":{"flowState":{"flowIdSource":"header:X-Flow-Id"}},
		"stubs":[{"responses":[{"wasm":{"module":%q}}]}]}`, filepath.Join(gatewaytest.WasmDir(t), "examples", "counter-wat.wasm")))
	const users, steps = 24, 40
	var wg sync.WaitGroup
	for u := range users {
		wg.Go(func() {
			id := fmt.Sprintf("riftload-5f3a9c1e-2b7d-4c11-vu-%d", u)
			for want := 1; want <= steps; want++ {
				status, body := flowGet(t, port, id, "/")
				if status != 200 || body != fmt.Sprint(want) {
					t.Errorf("flow %s step %d answered %d %q", id, want, status, body)
					return
				}
			}
		})
	}
	wg.Wait()
}
