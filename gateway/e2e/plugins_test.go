package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// module reads a .wasm the Makefile built; a missing one fails the test.
func module(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(gatewaytest.WasmDir(t), rel))
	if err != nil {
		t.Fatalf("%v: run `make wasm`", err)
	}
	return b
}

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
