package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/examples/demo"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// demoOnFreePorts writes the demo imposters with free ports in place of
// 4545 and 4546 (which other tests or a running demo may hold) and returns the
// file and the demo port -> free port map.
func demoOnFreePorts(t *testing.T) (string, map[int]int) {
	t.Helper()
	var doc struct {
		Imposters []map[string]any `json:"imposters"`
	}
	if err := json.Unmarshal(demo.Imposters, &doc); err != nil {
		t.Fatalf("demo imposters: %v", err)
	}
	ports := map[int]int{}
	for _, imp := range doc.Imposters {
		p := gatewaytest.FreePort(t)
		ports[int(imp["port"].(float64))] = p
		imp["port"] = p
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "demo.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, ports
}

// checkDemo walks the curl tour of the README against a server running the demo.
func checkDemo(t *testing.T, ports map[int]int) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	call := func(method string, port int, path, body string, header map[string]string) (int, string, http.Header, error) {
		req, err := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", ports[port], path), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		// mb indents JSON bodies; compare them compacted.
		var compact bytes.Buffer
		if json.Compact(&compact, b) == nil {
			b = compact.Bytes()
		}
		return resp.StatusCode, string(b), resp.Header, err
	}
	expect := func(method string, port int, path, body string, header map[string]string, wantCode int, wantBody string) http.Header {
		t.Helper()
		code, got, h, err := call(method, port, path, body, header)
		if err != nil || code != wantCode || !strings.Contains(got, wantBody) {
			t.Errorf("%s :%d%s = %d %q (%v), want %d with %q", method, port, path, code, got, err, wantCode, wantBody)
		}
		return h
	}
	expect("GET", 4545, "/customers/123", "", nil, 200, `"name":"Ada Lovelace"`)
	expect("GET", 4545, "/customers?tier=GOLD", "", nil, 200, `"id":123`)
	h := expect("POST", 4545, "/customers", `{"name": "Grace"}`, map[string]string{"Authorization": "Bearer demo", "Content-Type": "application/json"}, 201, `"id":124`)
	if h.Get("Location") != "/customers/124" {
		t.Errorf("POST /customers Location = %q", h.Get("Location"))
	}
	expect("POST", 4545, "/customers", `{"name": "Grace"}`, nil, 401, "Authorization")
	expect("GET", 4545, "/customers/999", "", nil, 404, "customer not found")
	expect("GET", 4545, "/nothing", "", nil, 404, "no stub matched")

	expect("GET", 4546, "/orders", "", nil, 503, "busy")
	expect("GET", 4546, "/orders", "", nil, 503, "busy")
	expect("GET", 4546, "/orders", "", nil, 200, `"A-1"`)
	start := time.Now()
	expect("GET", 4546, "/slow", "", nil, 200, "sorry for the wait")
	if d := time.Since(start); d < 1400*time.Millisecond {
		t.Errorf("/slow answered after %v, want the 1.5 s wait", d)
	}
	for _, path := range []string{"/reset", "/garbage"} {
		if code, body, _, err := call("GET", 4546, path, "", nil); err == nil {
			t.Errorf("%s answered %d %q, want a broken connection", path, code, body)
		}
	}
}

// The demo's tour holds on Mountebank itself, so it shows mb behaviour.
func TestDemoOnMountebank(t *testing.T) {
	path, ports := demoOnFreePorts(t)
	startMB(t, "--configfile", path)
	checkDemo(t, ports)
}

func TestDemoOnRiftgate(t *testing.T) {
	path, ports := demoOnFreePorts(t)
	gatewaytest.Start(t, "--configfile", path)
	checkDemo(t, ports)
}
