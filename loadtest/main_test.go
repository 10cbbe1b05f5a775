package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestMainRun(t *testing.T) {
	var seen atomic.Int64
	var lastMethod, lastBody, lastHeader atomic.Value
	url := startServer(t, func(ctx *fasthttp.RequestCtx) {
		seen.Add(1)
		lastMethod.Store(string(ctx.Method()))
		lastBody.Store(string(ctx.PostBody()))
		lastHeader.Store(string(ctx.Request.Header.Peek("X-A")))
		ctx.SetStatusCode(202)
	})
	dir := t.TempDir()
	htmlPath, jsonPath := filepath.Join(dir, "r.html"), filepath.Join(dir, "r.json")
	var stdout, stderr bytes.Buffer
	// Flags after the URL, as people type them.
	code := Main(context.Background(), []string{url + "/p?q=1", "-n", "50", "-c", "2", "-method", "PUT",
		"-H", "X-A: b", "-body", "payload", "-expect", "202", "-format", "json",
		"-html", htmlPath, "-json-out", jsonPath, "-progress", "never"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not the JSON summary: %v\n%s", err, stdout.String())
	}
	if res.Requests != 50 || seen.Load() != 50 || res.Errors != 0 {
		t.Errorf("requests %d, server saw %d, errors %v", res.Requests, seen.Load(), res.ErrorKinds)
	}
	if lastMethod.Load() != "PUT" || lastBody.Load() != "payload" || lastHeader.Load() != "b" {
		t.Errorf("request was %v %v %v", lastMethod.Load(), lastBody.Load(), lastHeader.Load())
	}
	for _, p := range []string{htmlPath, jsonPath} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}

	stdout.Reset()
	sc := filepath.Join(dir, "s.json")
	if err := os.WriteFile(sc, []byte(`{"name":"two","steps":[{"path":"/a"},{"path":"/b","expectStatus":202}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code = Main(context.Background(), []string{"run", "-scenario", sc, "-n", "10", "-c", "1", url}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), `scenario "two"`) || !strings.Contains(stdout.String(), "202=10") {
		t.Errorf("exit %d, text summary:\n%s%s", code, stdout.String(), stderr.String())
	}
}

func TestMainUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"frobnicate"},
		{"run"},
		{"-c", "x", "http://127.0.0.1:1/"},
		{"ftp://127.0.0.1:1/"},
		{"-format", "xml", "http://127.0.0.1:1/"},
		{"-H", "no colon", "http://127.0.0.1:1/"},
		{"http://127.0.0.1:1/a", "http://127.0.0.1:2/b"},
	} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"-scenario", "/nonexistent", "http://127.0.0.1:1/"}, &out, &errb); code != 1 {
		t.Errorf("missing scenario file: exit %d, want 1", code)
	}
}

func TestMainHello(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int)
	go func() { done <- Main(ctx, []string{"hello", "-port", "0"}, &out, &errb) }()
	var url string
	for deadline := time.Now().Add(5 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if s := out.String(); strings.Contains(s, "http://") {
			url = strings.TrimSpace(s[strings.Index(s, "http://"):])
		}
	}
	if url == "" {
		cancel()
		<-done
		t.Fatal("hello server did not report its address")
	}
	res := run(t, Options{Targets: []string{url}, Scenario: simple("/anything"), Connections: 2, Requests: 20})
	if res.Statuses["200"] != 20 {
		t.Errorf("statuses %v", res.Statuses)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("hello exited %d: %s", code, errb.String())
	}
}

// The raw proxy forwards every request to its upstream, method, path and
// body as they are, and answers with the upstream's answer on a connection
// it keeps open.
func TestMainHelloProxy(t *testing.T) {
	upstream := startServer(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetBodyString(string(ctx.Method()) + " " + string(ctx.RequestURI()) + " " + string(ctx.PostBody()))
	})
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int)
	go func() {
		done <- Main(ctx, []string{"hello", "-port", "0", "-proxy-port", "0", "-proxy-to", upstream}, &out, &errb)
	}()
	var url string
	for deadline := time.Now().Add(5 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if s := out.String(); strings.Contains(s, "proxy server listening on ") {
			url = strings.Fields(s[strings.Index(s, "proxy server listening on "):])[4]
		}
	}
	if url == "" {
		cancel()
		<-done
		t.Fatalf("proxy server did not report its address: %s %s", out.String(), errb.String())
	}
	tr := &http.Transport{}
	resp, err := (&http.Client{Transport: tr}).Post(url+"/a/b?c=d", "text/plain", strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	tr.CloseIdleConnections()
	if got, want := string(body), "POST /a/b?c=d body"; resp.StatusCode != 200 || got != want {
		t.Errorf("proxied answer %d %q, want 200 %q", resp.StatusCode, got, want)
	}
	if resp.Close {
		t.Error("the proxy closed the client's connection")
	}
	res := run(t, Options{Targets: []string{url}, Scenario: simple("/anything"), Connections: 2, Requests: 20})
	if res.Statuses["200"] != 20 {
		t.Errorf("statuses %v", res.Statuses)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("hello exited %d: %s", code, errb.String())
	}
	if code := Main(context.Background(), []string{"hello", "-proxy-to", upstream}, &out, &errb); code != 2 {
		t.Errorf("-proxy-to without -proxy-port: exit %d, want 2", code)
	}
}

func TestProgressBar(t *testing.T) {
	url := startServer(t, func(*fasthttp.RequestCtx) {})
	var bar syncBuffer
	run(t, Options{Targets: []string{url}, Scenario: simple("/"), Connections: 2,
		Duration: 700 * time.Millisecond, Warmup: 300 * time.Millisecond, Progress: &bar})
	s := bar.String()
	for _, want := range []string{"\rwarmup [", "\rrun    [", "100%", " req/s", "\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("progress output lacks %q: %q", want, s)
		}
	}
	// Not a terminal: no bar.
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if progressWriter(f) != nil || progressWriter(&bar) != nil {
		t.Error("progress drawn on a file or a buffer")
	}
}
