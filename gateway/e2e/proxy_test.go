package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// upstream is a real server on loopback that counts its hits and echoes
// what it saw.
type upstream struct {
	*httptest.Server
	hits atomic.Int64
}

func newUpstream(t *testing.T, tls bool, delay time.Duration) *upstream {
	u := &upstream{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := u.hits.Add(1)
		time.Sleep(delay)
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Hit", fmt.Sprint(n))
		fmt.Fprintf(w, `{"path":%q,"query":%q,"hit":%d,"body":%q,"injected":%q}`,
			r.URL.Path, r.URL.RawQuery, n, body, r.Header.Get("X-Injected"))
	})
	if tls {
		u.Server = httptest.NewTLSServer(h)
	} else {
		u.Server = httptest.NewServer(h)
	}
	t.Cleanup(u.Close)
	return u
}

func proxyImposter(to, mode, generators string) string {
	return fmt.Sprintf(`{"protocol":"http","stubs":[{"responses":[{"proxy":{"to":%q,"mode":%q,
		"predicateGenerators":%s,"injectHeaders":{"X-Injected":"yes"}}}]}]}`, to, mode, generators)
}

func stubsOf(t *testing.T, rg *gatewaytest.Instance, port int) []map[string]any {
	t.Helper()
	_, body := rg.Do("GET", fmt.Sprintf("/imposters/%d", port), nil)
	var out []map[string]any
	for _, s := range decode(t, body)["stubs"].([]any) {
		out = append(out, s.(map[string]any))
	}
	return out
}

func TestProxyOnceRecordsBeforeTheProxyStub(t *testing.T) {
	up := newUpstream(t, false, 0)
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(proxyImposter(up.URL, "proxyOnce", `[{"matches":{"path":true}}]`))
	_, first := flowGet(t, port, "", "/a?x=1")
	_, again := flowGet(t, port, "", "/a?x=2")
	_, other := flowGet(t, port, "", "/b")
	if up.hits.Load() != 2 {
		t.Fatalf("upstream hit %d times, want 2 (one per path)", up.hits.Load())
	}
	if first != again || !strings.Contains(first, `"hit": 1`) || !strings.Contains(first, `"injected": "yes"`) {
		t.Fatalf("replay differs or headers not injected:\n%s\n%s", first, again)
	}
	if !strings.Contains(other, `"hit": 2`) {
		t.Fatalf("second signature: %s", other)
	}
	stubs := stubsOf(t, rg, port)
	if len(stubs) != 3 || stubs[2]["responses"].([]any)[0].(map[string]any)["proxy"] == nil {
		t.Fatalf("recorded stubs must precede the proxy stub: %v", stubs)
	}
	// As mb inserts at the proxy stub's index: recordings in arrival order.
	for i, want := range []string{`[{"deepEquals":{"path":"/a"}}]`, `[{"deepEquals":{"path":"/b"}}]`} {
		if pred, _ := json.Marshal(stubs[i]["predicates"]); string(pred) != want {
			t.Fatalf("recording %d has predicates %s, want %s", i, pred, want)
		}
	}
}

func TestProxyOnceCallsUpstreamOnceUnderConcurrency(t *testing.T) {
	up := newUpstream(t, false, 200*time.Millisecond)
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(proxyImposter(up.URL, "proxyOnce", `[{"matches":{"path":true,"method":true}}]`))
	var wg sync.WaitGroup
	bodies := make([]string, 64)
	for i := range bodies {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, bodies[i] = flowGet(t, port, "", "/same")
		}(i)
	}
	wg.Wait()
	if n := up.hits.Load(); n != 1 {
		t.Fatalf("64 concurrent first requests reached the upstream %d times, want 1", n)
	}
	for i, b := range bodies {
		if b != bodies[0] || !strings.Contains(b, `"hit": 1`) {
			t.Fatalf("request %d answered %q", i, b)
		}
	}
	if n := len(stubsOf(t, rg, port)); n != 2 {
		t.Fatalf("%d stubs, want one recording and the proxy", n)
	}
}

func TestProxyAlwaysAndTransparent(t *testing.T) {
	up := newUpstream(t, false, 0)
	rg := gatewaytest.Start(t)
	always := rg.PostImposter(proxyImposter(up.URL, "proxyAlways", `[{"matches":{"path":true}}]`))
	for i := 0; i < 3; i++ {
		flowGet(t, always, "", "/x")
	}
	if up.hits.Load() != 3 {
		t.Fatalf("proxyAlways hit the upstream %d times, want 3", up.hits.Load())
	}
	stubs := stubsOf(t, rg, always)
	if len(stubs) != 2 || len(stubs[1]["responses"].([]any)) != 3 {
		t.Fatalf("proxyAlways appends responses to one stub after the proxy: %v", stubs)
	}
	// The recordings replay in order once the proxy is removed.
	_, body := rg.Do("GET", "/imposters?replayable=true&removeProxies=true", nil)
	if strings.Contains(string(body), `"proxy"`) {
		t.Fatalf("removeProxies kept a proxy: %s", body)
	}

	transparent := rg.PostImposter(proxyImposter(up.URL, "proxyTransparent", `[]`))
	flowGet(t, transparent, "", "/t")
	flowGet(t, transparent, "", "/t")
	if n := len(stubsOf(t, rg, transparent)); n != 1 || up.hits.Load() != 5 {
		t.Fatalf("proxyTransparent recorded (%d stubs) or skipped the upstream (%d hits)", n, up.hits.Load())
	}

	status, _ := rg.Do("DELETE", fmt.Sprintf("/imposters/%d/savedProxyResponses", always), nil)
	if n := len(stubsOf(t, rg, always)); status != 200 || n != 1 {
		t.Fatalf("savedProxyResponses: %d, %d stubs left", status, n)
	}
}

func TestProxyFailureRecordsNothing(t *testing.T) {
	up := newUpstream(t, false, 0)
	url := up.URL
	up.Close()
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(proxyImposter(url, "proxyOnce", `[{"matches":{"path":true}}]`))
	status, body := flowGet(t, port, "", "/down")
	if status < 400 || !strings.Contains(body, "errors") {
		t.Fatalf("a failed upstream answered %d %s", status, body)
	}
	if n := len(stubsOf(t, rg, port)); n != 1 {
		t.Fatalf("a failed upstream call recorded %d stubs", n-1)
	}
}

func TestProxyToHTTPS(t *testing.T) {
	up := newUpstream(t, true, 0)
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(proxyImposter(up.URL, "proxyOnce", `[{"matches":{"path":true}}]`))
	if status, body := flowGet(t, port, "", "/s"); status != 200 || !strings.Contains(body, `"path": "/s"`) {
		t.Fatalf("https upstream: %d %s", status, body)
	}
}

func TestPredicateGenerators(t *testing.T) {
	up := newUpstream(t, false, 0)
	rg := gatewaytest.Start(t)
	for _, tc := range []struct {
		name, generators, path, body string
		want                         string
	}{
		{"query subset", `[{"matches":{"query":{"q":true}}}]`, "/p?q=1&r=2", "",
			`[{"equals":{"query":{"q":"1"}}}]`},
		{"case sensitive", `[{"matches":{"path":true},"caseSensitive":true}]`, "/Path", "",
			`[{"caseSensitive":true,"deepEquals":{"path":"/Path"}}]`},
		{"except", `[{"matches":{"path":true},"except":"\\d+"}]`, "/p1", "",
			`[{"deepEquals":{"path":"/p1"},"except":"\\d+"}]`},
		{"ignore", `[{"matches":{"query":true},"ignore":{"query":"r"}}]`, "/p?q=1&r=2", "",
			`[{"deepEquals":{"query":{"q":"1"}}}]`},
		{"jsonpath", `[{"matches":{"body":true},"jsonpath":{"selector":"$.id"}}]`, "/j", `{"id":7,"x":1}`,
			`[{"deepEquals":{"body":7},"jsonpath":{"selector":"$.id"}}]`},
		{"xpath", `[{"matches":{"body":true},"xpath":{"selector":"//id"}}]`, "/x", `<r><id>9</id></r>`,
			`[{"deepEquals":{"body":"9"},"xpath":{"selector":"//id"}}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := rg.PostImposter(proxyImposter(up.URL, "proxyOnce", tc.generators))
			status, _ := gatewaytest.Do(t, "POST", fmt.Sprintf("http://127.0.0.1:%d%s", port, tc.path), tc.body, nil)
			if status != 200 {
				t.Fatalf("proxied request answered %d", status)
			}
			got, _ := json.Marshal(stubsOf(t, rg, port)[0]["predicates"])
			if string(got) != tc.want {
				t.Fatalf("generated %s, want %s", got, tc.want)
			}
		})
	}
}

// _rift.proxyKeepAlive keeps the client's connection open on proxied
// answers; without it the answer closes it, as mb's does.
func TestProxyKeepAliveOption(t *testing.T) {
	up := newUpstream(t, false, 0)
	rg := gatewaytest.Start(t)
	for _, keep := range []bool{false, true} {
		rift := ""
		if keep {
			rift = `"_rift":{"proxyKeepAlive":true},`
		}
		port := rg.PostImposter(fmt.Sprintf(`{"protocol":"http",%s"stubs":[{"responses":[{"proxy":{"to":%q,"mode":"proxyTransparent"}}]}]}`, rift, up.URL))
		for _, path := range []string{"/a", "/b"} {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Close == keep {
				t.Fatalf("proxyKeepAlive %v, %s: status %d, Connection %q", keep, path, resp.StatusCode, resp.Header.Get("Connection"))
			}
		}
	}
	if status, _ := rg.Do("POST", "/imposters", `{"protocol":"http","_rift":{"proxyKeepAlive":"yes"}}`); status != 400 {
		t.Fatalf("a proxyKeepAlive that is no boolean: %d", status)
	}
}

// The responses proxyAlways adds to a running stub are compiled where they
// are first answered: a request the proxy stub lets by reaches the
// recorded stub and cycles through every recording, in order, the later
// ones (compiled late) as the first.
func TestProxyAlwaysRecordingsAnswerWhileTheProxyRuns(t *testing.T) {
	up := newUpstream(t, false, 0)
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(fmt.Sprintf(`{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"headers":{"X-Live":"yes"}}}],
		 "responses":[{"proxy":{"to":%q,"mode":"proxyAlways","predicateGenerators":[{"matches":{"path":true}}]}}]}]}`, up.URL))
	live := http.Header{"X-Live": {"yes"}}
	for range 4 {
		if status, body := gatewaytest.Do(t, "GET", fmt.Sprintf("http://127.0.0.1:%d/a", port), nil, live); status != 200 {
			t.Fatalf("through the proxy: %d %s", status, body)
		}
	}
	if n := len(stubsOf(t, rg, port)[1]["responses"].([]any)); n != 4 {
		t.Fatalf("the recorded stub holds %d responses, want 4", n)
	}
	for i := range 6 {
		status, body := gatewaytest.Do(t, "GET", fmt.Sprintf("http://127.0.0.1:%d/a", port), nil, nil)
		want := fmt.Sprintf(`"hit": %d`, i%4+1)
		if status != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("replay %d: %d %s, want the recording with %s", i, status, body, want)
		}
	}
	if up.hits.Load() != 4 {
		t.Fatalf("the upstream was called %d times, want 4", up.hits.Load())
	}
}
