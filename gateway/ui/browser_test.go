package ui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// chromium returns Debian's Chromium: $RIFTGATE_CHROMIUM, else the one on
// PATH. Its absence fails the test: .ci/run installs it.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("RIFTGATE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("Chromium is not installed: run .ci/run, or apt-get install chromium")
	return ""
}

// page is one tab of a headless Chromium of its own, closed when the test
// ends.
type page struct {
	t   *testing.T
	ctx context.Context
}

// browser starts Chromium with the flags a root, offline machine needs
// (FACTS.md), plus any extra ones.
func browser(t *testing.T, extra ...chromedp.ExecAllocatorOption) *page {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(opts, extra...)...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if _, err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return &page{t, ctx}
}

func (p *page) open(url string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(url)); err != nil {
		p.t.Fatalf("open %s: %v", url, err)
	}
}

// eval runs a script in the page and decodes its value; promises are awaited.
func eval[T any](p *page, js string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("eval %s: %v", js, err)
	}
	return v
}

// wait polls js until it is truthy, failing after 15 s with what about
// says and the page's text.
func (p *page) wait(about, js string) {
	p.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithDeadline(p.ctx, deadline)
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		// A navigation (a form posting into a frame, a page replacing
		// itself) destroys the context a poll runs in; poll again in the
		// new one rather than fail on the browser's timing.
		if strings.Contains(err.Error(), "Cannot find context") && time.Now().Before(deadline) {
			continue
		}
		text, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		p.t.Fatalf("waiting for %s (%s): %v\npage text:\n%s", about, js, err, text)
	}
}

// shot writes a screenshot of the whole page to build/ui-screenshots/.
func (p *page) shot(name string) {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	root, err := gatewaytest.RepoRoot()
	if err != nil {
		p.t.Fatal(err)
	}
	dir := filepath.Join(root, "build", "ui-screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// A hostile name: markup and script that would run, or add an <img>, if
// any page put it in the DOM as HTML.
const hostile = `<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>"'&`

func get(t *testing.T, url string) {
	t.Helper()
	if status, body := gatewaytest.Do(t, "GET", url, nil, nil); status >= 500 {
		t.Fatalf("GET %s: %d %s", url, status, body)
	}
}

// TestPagesShowWhatTheTestMade creates imposters, requests, flows with
// scenario states and plugins, and finds each on its page.
func TestPagesShowWhatTheTestMade(t *testing.T) {
	rg := gatewaytest.Start(t)
	if status, body := rg.Do("PUT", "/plugins/counter", gatewaytest.Wasm(t, "examples/counter-wat.wasm")); status != 200 {
		t.Fatalf("PUT /plugins/counter: %d %s", status, body)
	}
	if status, body := rg.Do("PUT", "/plugins/trap", gatewaytest.Wasm(t, "plugins/trap.wasm")); status != 200 {
		t.Fatalf("PUT /plugins/trap: %d %s", status, body)
	}
	shop := rg.PostImposter(map[string]any{
		"protocol": "http", "name": hostile, "recordRequests": true,
		"_rift": map[string]any{"flowState": map[string]any{"flowIdSource": "header:X-Flow-Id"}},
		"stubs": []any{
			map[string]any{"scenarioName": "checkout", "requiredScenarioState": "Started", "newScenarioState": "paid",
				"predicates": []any{map[string]any{"equals": map[string]any{"path": "/pay"}}},
				"responses":  []any{map[string]any{"is": map[string]any{"body": "paid"}}}},
			map[string]any{"predicates": []any{map[string]any{"equals": map[string]any{"path": "/count"}}},
				"responses": []any{map[string]any{"wasm": map[string]any{"module": "counter"}}}},
			map[string]any{"predicates": []any{map[string]any{"equals": map[string]any{"path": "/trap"}}},
				"responses": []any{map[string]any{"wasm": map[string]any{"module": "trap"}}}},
			map[string]any{"predicates": []any{map[string]any{"startsWith": map[string]any{"path": "/items/"}}},
				"responses": []any{map[string]any{"is": map[string]any{"statusCode": 200, "body": "item"}}}},
		},
	})
	other := rg.PostImposter(`{"protocol":"http","name":"payments","recordRequests":true,"_rift":{"maxRecordedRequests":1}}`)
	base := fmt.Sprintf("http://127.0.0.1:%d", shop)
	for i := range 60 {
		get(t, fmt.Sprintf("%s/items/%d?page=%d", base, i, i))
	}
	for _, flow := range []string{"alice", "bob"} {
		if _, _, err := doWith("GET", base+"/pay", http.Header{"X-Flow-Id": {flow}}); err != nil {
			t.Fatal(err)
		}
	}
	get(t, base+"/count")
	if status, _, err := doWith("GET", base+"/trap", nil); err != nil || status != 500 {
		t.Fatalf("the trapping plugin answered %d, %v", status, err)
	}
	get(t, base+"/unmatched-path")
	for range 3 {
		get(t, fmt.Sprintf("http://127.0.0.1:%d/", other))
	}

	p := browser(t)
	p.open(rg.URL + "/")
	p.wait("the imposters table", `document.querySelectorAll("#imposters tbody tr").length === 2`)
	if got := eval[string](p, fmt.Sprintf(`document.querySelector('tr[data-port="%d"] .name').textContent`, shop)); got != hostile {
		t.Fatalf("hostile name shown as %q, want the text %q", got, hostile)
	}
	row := eval[string](p, fmt.Sprintf(`document.querySelector('tr[data-port="%d"]').innerText`, shop))
	if !strings.Contains(row, "65") || !strings.Contains(row, "98.5%") {
		t.Errorf("imposter row %q: want 65 requests, 98.5%% matched", row)
	}
	noScript(t, p)
	p.shot("home")

	p.open(fmt.Sprintf("%s/imposters/%d", rg.URL, shop))
	p.wait("the recorded requests", `document.querySelectorAll("#requests tr.request").length === 25`)
	p.wait("the flows", `document.querySelectorAll("#flows tr.flow").length >= 2`)
	if got := eval[string](p, `document.getElementById("imposter-name").textContent`); got != hostile {
		t.Fatalf("imposter page shows the name as %q", got)
	}
	stubs := eval[string](p, `document.getElementById("stubs").innerText`)
	for _, want := range []string{`"path": "/pay"`, `"module": "counter"`, `"startsWith"`} {
		if !strings.Contains(stubs, want) {
			t.Errorf("stubs section lacks %q:\n%s", want, stubs)
		}
	}
	flows := eval[string](p, `document.getElementById("flows").innerText`)
	for _, want := range []string{"alice", "bob", "checkout", "paid"} {
		if !strings.Contains(flows, want) {
			t.Errorf("flows section lacks %q:\n%s", want, flows)
		}
	}
	if got := eval[string](p, `document.querySelector("#requests h2").textContent`); got != "Recorded requests (65)" {
		t.Errorf("requests heading %q", got)
	}
	// Newest first; the next page goes on from there.
	if got := eval[string](p, `document.querySelector("#requests tr.request .path").textContent`); got != "/unmatched-path" {
		t.Errorf("newest request shown first is %q", got)
	}
	eval[bool](p, `document.querySelector("#requests .pager .next").click(), true`)
	p.wait("the second page", `document.querySelector("#requests .range").textContent === "26–50 of 65"`)
	// Search is done by the server, over the whole list.
	eval[bool](p, `(() => { const s = document.getElementById("request-search"); s.value = "page=42"; s.dispatchEvent(new Event("change")); return true })()`)
	p.wait("the search result", `document.querySelectorAll("#requests tr.request").length === 1 && document.querySelector("#requests tr.request .path").textContent === "/items/42"`)
	noScript(t, p)
	p.shot("imposter")

	// A cap says what it dropped.
	p.open(fmt.Sprintf("%s/imposters/%d", rg.URL, other))
	p.wait("the capped requests", `document.querySelectorAll("#requests tr.request").length === 1`)
	if got := eval[string](p, `document.querySelector("#requests .dropped").textContent`); got != "2 older requests were dropped: this imposter keeps the newest 1." {
		t.Errorf("the drops are shown as %q", got)
	}

	p.open(rg.URL + "/plugins")
	p.wait("the plugins", `document.querySelectorAll("#plugins tr.plugin").length === 2`)
	if got := eval[string](p, `document.querySelector('tr[data-name="counter"] .calls').textContent`); got != "1" {
		t.Errorf("counter calls %q, want 1", got)
	}
	if got := eval[string](p, `document.querySelector('tr[data-name="trap"] .traps').textContent`); got != "1" {
		t.Errorf("trap traps %q, want 1", got)
	}
	if got := eval[string](p, `document.querySelector('tr[data-name="counter"] .hash').title`); len(got) != 64 {
		t.Errorf("counter hash %q", got)
	}
	p.shot("plugins")

	p.open(rg.URL + "/logs")
	p.wait("the log", `[...document.querySelectorAll("#log li")].some(li => li.textContent.includes("Open for business"))`)
	// A line logged now arrives live.
	get(t, rg.URL+"/imposters?live-marker")
	p.wait("a live line", `[...document.querySelectorAll("#log li")].some(li => li.textContent.includes("live-marker"))`)
	eval[bool](p, `(() => { const l = document.getElementById("level"); l.value = "error"; l.dispatchEvent(new Event("change")); return true })()`)
	p.wait("the error filter", `[...document.querySelectorAll("#log li")].every(li => li.classList.contains("level-error"))`)
	eval[bool](p, `(() => { const l = document.getElementById("level"); l.value = "info"; l.dispatchEvent(new Event("change")); return true })()`)
	p.shot("logs")

	p.open(rg.URL + "/config")
	p.wait("the options", `document.querySelector("#options dl") !== null && document.getElementById("options").innerText.includes("allowInjection")`)
	p.shot("config")
}

// noScript fails the test if a hostile name ran or made an element.
func noScript(t *testing.T, p *page) {
	t.Helper()
	if got := eval[string](p, `String(window.pwned) + " " + document.querySelectorAll("img, main script").length`); got != "undefined 0" {
		t.Fatalf("a hostile name ran or became markup: pwned, elements = %s", got)
	}
}

func doWith(method, url string, h http.Header) (int, string, error) {
	resp, err := gatewaytest.Request(method, url, nil, h)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestTrafficChartMoves sends requests while the traffic page is open, and
// watches its chart follow them.
func TestTrafficChartMoves(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"http","name":"load","stubs":[{"responses":[{"is":{"body":"ok","headers":{"Connection":"keep-alive"}}}]}]}`)
	p := browser(t)
	p.open(rg.URL + "/traffic")
	p.wait("the stream", `document.getElementById("stream-state").textContent === "live"`)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // about 100 requests a second, for at most 20 s
		defer wg.Done()
		c := &http.Client{Timeout: 2 * time.Second}
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", port)); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	p.wait("requests on the chart", `Number(document.getElementById("rps-chart").dataset.last) > 10`)
	first := eval[string](p, `document.querySelector("#rps-chart path.line").getAttribute("d")`)
	p.wait("the chart to move", fmt.Sprintf(`document.querySelector("#rps-chart path.line").getAttribute("d") !== %q`, first))
	p.wait("latency percentiles", `document.querySelectorAll("#latency-chart path.line").length === 3`)
	p.wait("the busiest imposters", fmt.Sprintf(`document.querySelector('#top tr[data-port="%d"]') !== null`, port))
	// One imposter's own chart.
	eval[bool](p, fmt.Sprintf(`(() => { const s = document.getElementById("imposter"); s.value = "%d"; s.dispatchEvent(new Event("change")); return true })()`, port))
	p.wait("the imposter's chart", `Number(document.getElementById("rps-chart").dataset.points) > 0`)
	p.shot("traffic")
}

// TestConfirmThenDelete: the delete action asks first; Cancel keeps the
// imposter, Confirm deletes it through the API. The other actions too.
func TestConfirmThenDelete(t *testing.T) {
	rg := gatewaytest.Start(t)
	keep := rg.PostImposter(`{"protocol":"http","name":"keep"}`)
	doomed := rg.PostImposter(`{"protocol":"http","name":"doomed","recordRequests":true,
		"stubs":[{"scenarioName":"s","requiredScenarioState":"Started","newScenarioState":"done","responses":[{"is":{"body":"x"}}]}]}`)
	get(t, fmt.Sprintf("http://127.0.0.1:%d/", doomed))

	p := browser(t)
	p.open(fmt.Sprintf("%s/imposters/%d", rg.URL, doomed))
	p.wait("the page", `document.querySelectorAll("#requests tr.request").length === 1 && document.querySelector("#flows button.reset") !== null`)
	clickButton(p, "Clear recorded requests")
	p.wait("the dialog", `document.getElementById("confirm").open`)
	eval[bool](p, `document.getElementById("confirm-ok").click(), true`)
	p.wait("no requests", `document.querySelector("#requests h2").textContent === "Recorded requests (0)"`)
	eval[bool](p, `document.querySelector("#flows button.reset").click(), true`)
	p.wait("the dialog", `document.getElementById("confirm").open`)
	eval[bool](p, `document.getElementById("confirm-ok").click(), true`)
	p.wait("the scenario back at Started", `document.querySelector("#flows td.state").textContent === "Started"`)

	p.open(rg.URL + "/")
	p.wait("both imposters", `document.querySelectorAll("#imposters tbody tr").length === 2`)
	clickDelete := fmt.Sprintf(`document.querySelector('tr[data-port="%d"] button.delete').click(), true`, doomed)
	eval[bool](p, clickDelete)
	p.wait("the dialog", `document.getElementById("confirm").open`)
	if got := eval[string](p, `document.getElementById("confirm-text").textContent`); !strings.Contains(got, "doomed") {
		t.Fatalf("confirmation text %q", got)
	}
	eval[bool](p, `document.getElementById("confirm-cancel").click(), true`)
	time.Sleep(300 * time.Millisecond)
	if status, _ := rg.Do("GET", fmt.Sprintf("/imposters/%d", doomed), nil); status != 200 {
		t.Fatalf("Cancel deleted the imposter: GET = %d", status)
	}
	eval[bool](p, clickDelete)
	p.wait("the dialog", `document.getElementById("confirm").open`)
	eval[bool](p, `document.getElementById("confirm-ok").click(), true`)
	p.wait("one imposter left", `document.querySelectorAll("#imposters tbody tr").length === 1`)
	if status, _ := rg.Do("GET", fmt.Sprintf("/imposters/%d", doomed), nil); status != 404 {
		t.Fatalf("after Confirm, GET = %d, want 404", status)
	}
	if status, _ := rg.Do("GET", fmt.Sprintf("/imposters/%d", keep), nil); status != 200 {
		t.Fatalf("the other imposter went too: %d", status)
	}
}

func clickButton(p *page, label string) {
	p.t.Helper()
	ok := eval[bool](p, fmt.Sprintf(`(() => { const b = [...document.querySelectorAll("button")].find(b => b.textContent === %q); if (!b) return false; b.click(); return true })()`, label))
	if !ok {
		p.t.Fatalf("no button %q", label)
	}
}

// TestAPIKeyInTheBrowser: with --apikey the page asks for the key, keeps
// it in the tab, and sends it as any client does; the data needs it.
func TestAPIKeyInTheBrowser(t *testing.T) {
	rg := gatewaytest.Start(t, "--apikey", "s3cret")
	h := http.Header{"X-Api-Key": {"s3cret"}}
	if status, body := gatewaytest.Do(t, "POST", rg.URL+"/imposters", `{"protocol":"http","name":"secret-one"}`, h); status != 201 {
		t.Fatalf("POST with key: %d %s", status, body)
	}
	p := browser(t)
	p.open(rg.URL + "/")
	p.wait("the key prompt", `document.getElementById("apikey") !== null`)
	eval[bool](p, `(() => { document.getElementById("apikey").value = "wrong"; document.getElementById("apikey-go").click(); return true })()`)
	p.wait("the prompt again", `document.getElementById("apikey") !== null && document.body.innerText.includes("refused")`)
	eval[bool](p, `(() => { document.getElementById("apikey").value = "s3cret"; document.getElementById("apikey-go").click(); return true })()`)
	p.wait("the imposter", `document.querySelector("#imposters td.name") !== null && document.querySelector("#imposters td.name").textContent === "secret-one"`)
}

// TestIPWhitelistCoversThePages: the pages are on the admin listener, which
// refuses a client outside --ipWhitelist before reading a byte, as it
// refuses any API client.
func TestIPWhitelistCoversThePages(t *testing.T) {
	rg := gatewaytest.Start(t, "--ipWhitelist", "127.0.0.1")
	from := func(ip string) (*http.Response, error) {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 2 * time.Second}
		c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
		req, _ := http.NewRequest("GET", rg.URL+"/", nil)
		req.Header.Set("Accept", "text/html")
		return c.Do(req)
	}
	if resp, err := from("127.0.0.2"); err == nil {
		resp.Body.Close()
		t.Fatalf("a browser outside the whitelist got %d", resp.StatusCode)
	}
	resp, err := from("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("the whitelisted browser got %s", resp.Header.Get("Content-Type"))
	}
}

// TestJSONClientsAreUnaffected: API clients get JSON, exactly as without
// the UI, with Vary: Accept; a browser's Accept gets the page. Which one is
// chosen for each Accept is checked against Mountebank.
func TestJSONClientsAreUnaffected(t *testing.T) {
	rg := gatewaytest.Start(t)
	mb := gatewaytest.StartMountebank(t).URL
	for _, u := range []string{rg.URL, mb} {
		if status, body := gatewaytest.Do(t, "POST", u+"/imposters", `{"protocol":"http","port":`+fmt.Sprint(gatewaytest.FreePort(t))+`,"name":"n"}`, nil); status != 201 {
			t.Fatalf("POST %s: %d %s", u, status, body)
		}
	}
	accepts := []string{"", "*/*", "application/json", "text/html",
		"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8",
		"application/json, text/html", "text/html, application/json", "text/*", "text/html;q=0.5, application/json;q=0.9",
		"application/json;q=0.5, text/html;q=0.5", "*/*;q=0.8, text/html;q=0.8"}
	for _, path := range []string{"/", "/imposters", "/logs", "/config"} {
		for _, a := range accepts {
			h := http.Header{}
			if a != "" {
				h.Set("Accept", a)
			}
			kind := func(u string) (string, http.Header) {
				resp, err := gatewaytest.Request("GET", u+path, nil, h)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				ct := resp.Header.Get("Content-Type")
				if strings.HasPrefix(ct, "application/json") && !json.Valid(b) {
					t.Fatalf("%s %s Accept %q: invalid JSON", u, path, a)
				}
				return strings.Split(ct, ";")[0], resp.Header
			}
			got, hdr := kind(rg.URL)
			want, _ := kind(mb)
			if got != want {
				t.Errorf("GET %s Accept %q: riftgate %s, mb %s", path, a, got, want)
			}
			if hdr.Get("Vary") != "Accept" {
				t.Errorf("GET %s Accept %q: Vary %q", path, a, hdr.Get("Vary"))
			}
		}
	}
	// The JSON is the same bytes as an API client got before the UI: the
	// page never stands in for it.
	status, body := rg.Do("GET", "/imposters", nil)
	if status != 200 || !strings.HasPrefix(string(body), "{\n  \"imposters\": [") {
		t.Fatalf("GET /imposters: %d %s", status, body)
	}
}

// attacker serves a hostile page on ln: the page tries to change riftgate
// at admin by fetch, by form post and by fetching its own origin, and
// writes what happened into its title.
func attacker(t *testing.T, ln net.Listener, admin string) {
	t.Helper()
	page := `<!DOCTYPE html><html><head><title>started</title></head><body>
<iframe name="sink" style="display:none"></iframe>
<form id="f" method="POST" action="ADMIN/imposters" enctype="text/plain" target="sink">
<input name='{"protocol":"http","name":"by-form","x":"' value='"}'>
</form>
<script>
(async () => {
  const out = [];
  try { await fetch("ADMIN/imposters", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
    body: JSON.stringify({protocol: "http", name: "by-fetch"})}); out.push("post-sent"); } catch (e) { out.push("post-failed"); }
  try { await fetch("ADMIN/imposters/VICTIM", {method: "DELETE"}); out.push("delete-sent"); } catch (e) { out.push("delete-blocked"); }
  try { const r = await fetch("/imposters", {method: "POST", body: JSON.stringify({protocol: "http", name: "by-rebinding"})});
    out.push("rebind-" + r.status); } catch (e) { out.push("rebind-failed"); }
  try { const r = await fetch("/imposters", {headers: {Accept: "application/json"}}); out.push("read-" + r.status); } catch (e) { out.push("read-failed"); }
  document.getElementById("f").submit();
  setTimeout(() => { document.title = "done " + out.join(" "); }, 500);
})();
</script></body></html>`
	page = strings.ReplaceAll(page, "ADMIN", admin)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, page)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// TestHostilePageCannotChangeState loads a page from another origin in the
// same browser as the UI, and lets it try every way a page has to create or
// delete an imposter: a no-cors fetch, a form post, a DELETE, and DNS
// rebinding (its name resolving, after the page loaded, to the admin
// port). None changes anything; the UI's own actions still work.
func TestHostilePageCannotChangeState(t *testing.T) {
	rg := gatewaytest.Start(t)
	victim := rg.PostImposter(`{"protocol":"http","name":"victim"}`)

	// Rebinding: evil.test resolves to 127.0.0.2, where the attacker serves
	// its page on the admin port's number; every other request to that
	// origin (the page's own fetches) is passed to riftgate, as if the name
	// now resolved to 127.0.0.1.
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.2:%d", rg.Port))
	if err != nil {
		t.Fatal(err)
	}
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	attacker(t, other, rg.URL)
	attacker(t, rebinder(t, ln, fmt.Sprintf("127.0.0.1:%d", rg.Port)), rg.URL)

	p := browser(t, chromedp.Flag("host-resolver-rules", "MAP evil.test 127.0.0.2"))
	for _, u := range []string{other.Addr().String(), fmt.Sprintf("evil.test:%d", rg.Port)} {
		p.open("http://" + u + "/?victim=" + fmt.Sprint(victim))
		p.wait("the attack to finish", `document.title.startsWith("done")`)
		title := eval[string](p, `document.title`)
		t.Logf("attacker at %s: %s", u, title)
		if strings.HasPrefix(u, "evil.test") && (!strings.Contains(title, "rebind-403") || !strings.Contains(title, "read-403")) {
			t.Errorf("the rebound page was not refused: %s", title)
		}
	}
	time.Sleep(500 * time.Millisecond) // the form posts
	status, body := rg.Do("GET", "/imposters", nil)
	if status != 200 || strings.Count(string(body), `"port"`) != 1 || !strings.Contains(string(body), "victim") {
		t.Fatalf("a hostile page changed the imposters: %s", body)
	}
	// The UI's own action, in the same browser, still deletes.
	p.open(rg.URL + "/")
	p.wait("the victim's row", fmt.Sprintf(`document.querySelector('tr[data-port="%d"] button.delete') !== null`, victim))
	eval[bool](p, fmt.Sprintf(`document.querySelector('tr[data-port="%d"] button.delete').click(), true`, victim))
	p.wait("the dialog", `document.getElementById("confirm").open`)
	eval[bool](p, `document.getElementById("confirm-ok").click(), true`)
	p.wait("no imposters", `document.querySelectorAll("#imposters tbody tr").length === 0`)
}

// rebinder serves the attacker's page (GET /?victim=...) from ln, through
// the listener it returns, and passes every other connection to riftgate at
// to: DNS rebinding, as the sockets see it.
func rebinder(t *testing.T, ln net.Listener, to string) net.Listener {
	page := newChanListener(ln.Addr())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				page.Close()
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				br := bufio.NewReader(c)
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				first, err := br.Peek(13)
				_ = c.SetReadDeadline(time.Time{})
				if err == nil && strings.HasPrefix(string(first), "GET /?victim=") {
					page.conns <- &peeked{c, br}
					return
				}
				proxy(&peeked{c, br}, to)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return page
}

// peeked is a connection some of whose bytes sit in a bufio.Reader.
type peeked struct {
	net.Conn
	br *bufio.Reader
}

func (p *peeked) Read(b []byte) (int, error) { return p.br.Read(b) }

func proxy(c net.Conn, to string) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", to, 2*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	deadline := time.Now().Add(10 * time.Second)
	_ = c.SetDeadline(deadline)
	_ = up.SetDeadline(deadline)
	done := make(chan struct{})
	go func() { _, _ = io.Copy(up, c); close(done) }()
	_, _ = io.Copy(c, up)
	c.Close()
	<-done
}

// chanListener is a net.Listener fed connections through a channel.
type chanListener struct {
	addr  net.Addr
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newChanListener(a net.Addr) *chanListener {
	return &chanListener{addr: a, conns: make(chan net.Conn, 4), done: make(chan struct{})}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, errors.New("closed")
	}
}

func (l *chanListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *chanListener) Addr() net.Addr { return l.addr }
