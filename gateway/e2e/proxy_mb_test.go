package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// TestProxyRecordingMatchesMountebank records the same upstream traffic
// through mb and riftgate and compares the replayable imposters: the
// generated predicates and the recorded responses must be equivalent.
func TestProxyRecordingMatchesMountebank(t *testing.T) {
	up := newUpstream(t, false, 0)
	mb := mountebank(t, t.TempDir())
	rg := gatewaytest.Start(t)
	generators := `[{"matches":{"method":true,"path":true,"query":{"q":true}}},{"matches":{"body":true},"jsonpath":{"selector":"$.id"}}]`
	requests := []diffRequest{
		{method: "GET", path: "/items?q=1&page=2"},
		{method: "POST", path: "/items", body: `{"id":"a1","n":2}`},
		{method: "GET", path: "/items?q=1&page=3"}, // replays the first recording
	}
	recorded := map[string][]any{}
	for name, url := range map[string]string{"mb": mb, "riftgate": rg.URL} {
		port := gatewaytest.FreePort(t)
		imp := fmt.Sprintf(`{"protocol":"http","port":%d,"stubs":[{"responses":[{"proxy":{"to":%q,"mode":"proxyOnce","predicateGenerators":%s}}]}]}`,
			port, up.URL, generators)
		if status, body := gatewaytest.Do(t, "POST", url+"/imposters", imp, nil); status != 201 {
			t.Fatalf("%s: POST %d %s", name, status, body)
		}
		for _, r := range requests {
			ask(t, port, r)
		}
		_, body := gatewaytest.Do(t, "GET", fmt.Sprintf("%s/imposters/%d?replayable=true&removeProxies=true", url, port), nil, http.Header{})
		var imp2 map[string]any
		if err := json.Unmarshal(body, &imp2); err != nil {
			t.Fatal(err)
		}
		stubs := imp2["stubs"].([]any)
		for _, s := range stubs {
			// What differs by nature: upstream timing and the Date header.
			is := s.(map[string]any)["responses"].([]any)[0].(map[string]any)["is"].(map[string]any)
			delete(is, "_proxyResponseTime")
			delete(is["headers"].(map[string]any), "Date")
		}
		recorded[name] = stubs
	}
	if got := up.hits.Load(); got%2 != 0 {
		t.Fatalf("upstream hit %d times: the two systems proxied differently", got)
	}
	// The upstream numbers its hits, so the bodies differ in "hit"; compare
	// everything else.
	for _, stubs := range recorded {
		for _, s := range stubs {
			is := s.(map[string]any)["responses"].([]any)[0].(map[string]any)["is"].(map[string]any)
			if body, ok := is["body"].(map[string]any); ok {
				delete(body, "hit")
			}
			delete(is["headers"].(map[string]any), "X-Hit")
		}
	}
	if !reflect.DeepEqual(recorded["mb"], recorded["riftgate"]) {
		a, _ := json.MarshalIndent(recorded["mb"], "", " ")
		b, _ := json.MarshalIndent(recorded["riftgate"], "", " ")
		t.Fatalf("recorded stubs differ:\nmb:\n%s\nriftgate:\n%s", a, b)
	}
}
