package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

func TestAllowCORSAnswersPreflights(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"http","allowCORS":true,"stubs":[{"responses":[{"is":{"body":"x"}}]}]}`)
	h := http.Header{"Origin": {"http://app"}, "Access-Control-Request-Method": {"PUT"}, "Access-Control-Request-Headers": {"X-Token"}}
	resp, err := gatewaytest.Request("OPTIONS", fmt.Sprintf("http://127.0.0.1:%d/r", port), nil, h)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for name, want := range map[string]string{
		"Access-Control-Allow-Origin": "http://app", "Access-Control-Allow-Methods": "PUT", "Access-Control-Allow-Headers": "X-Token",
	} {
		if got := resp.Header.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

// TestProxyRecordingOptions covers the inject predicate generator and the
// wait and decorate behaviors a proxy adds to what it records.
func TestProxyRecordingOptions(t *testing.T) {
	up := newUpstream(t, false, 20*time.Millisecond) // mb adds a wait only for a non-zero time
	rg := gatewaytest.Start(t, "--allowInjection")
	port := rg.PostImposter(fmt.Sprintf(`{"protocol":"http","stubs":[{"responses":[{"proxy":{"to":%q,
		"predicateGenerators":[{"inject":"function (config) { return [{equals: {path: config.request.path.toUpperCase()}, caseSensitive: true}]; }"}],
		"addWaitBehavior":true,
		"addDecorateBehavior":"function (config) { config.response.headers['X-Decorated'] = 'yes'; }"}}]}]}`, up.URL))
	flowGet(t, port, "", "/abc")
	stubs := stubsOf(t, rg, port)
	if len(stubs) != 2 {
		t.Fatalf("%d stubs after one proxied request", len(stubs))
	}
	pred, _ := json.Marshal(stubs[0]["predicates"])
	if string(pred) != `[{"caseSensitive":true,"equals":{"path":"/ABC"}}]` {
		t.Fatalf("inject generator made %s", pred)
	}
	behaviors, _ := json.Marshal(stubs[0]["responses"].([]any)[0].(map[string]any)["behaviors"])
	if !strings.Contains(string(behaviors), `"wait"`) || !strings.Contains(string(behaviors), `"decorate"`) {
		t.Fatalf("recorded behaviors = %s", behaviors)
	}
	// The recording answers /ABC (case sensitive) with the decoration.
	resp, err := gatewaytest.Request("GET", fmt.Sprintf("http://127.0.0.1:%d/ABC", port), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Decorated") != "yes" || up.hits.Load() != 1 {
		t.Fatalf("replay: X-Decorated=%q, upstream hits %d", resp.Header.Get("X-Decorated"), up.hits.Load())
	}
}
