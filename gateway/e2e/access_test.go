package e2e_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// from returns a client whose connections come from the loopback address ip.
func from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 2 * time.Second}
	return &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

func TestIPWhitelistIsEnforcedOnAdminAndImposters(t *testing.T) {
	rg := gatewaytest.Start(t, "--ipWhitelist", "127.0.0.1|::1")
	port := rg.PostImposter(`{"protocol":"http","stubs":[{"responses":[{"is":{"body":"ok"}}]}]}`)
	for _, url := range []string{rg.URL + "/", fmt.Sprintf("http://127.0.0.1:%d/", port)} {
		if resp, err := from("127.0.0.2").Get(url); err == nil {
			resp.Body.Close()
			t.Fatalf("%s answered %d to a client outside the whitelist", url, resp.StatusCode)
		}
		resp, err := from("127.0.0.1").Get(url)
		if err != nil {
			t.Fatalf("%s refused a whitelisted client: %v", url, err)
		}
		resp.Body.Close()
	}
}

func TestAPIKeyAndOrigin(t *testing.T) {
	rg := gatewaytest.Start(t, "--apikey", "s3cret", "--origin", "http://ui.example")
	status, body := rg.Do("GET", "/imposters", nil)
	if status != 401 || errorCode(t, body) != "unauthorized" {
		t.Fatalf("no key: %d %s", status, body)
	}
	h := http.Header{"X-Api-Key": {"s3cret"}, "Origin": {"http://ui.example"}}
	resp, err := gatewaytest.Request("GET", rg.URL+"/imposters", nil, h)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "http://ui.example" {
		t.Fatalf("with key and origin: %d, CORS %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

// TestPprofOnlyWhenAsked: Go's profiler is on the admin API with --pprof,
// and behind --apikey like the rest of it; without the flag it is not there.
func TestPprofOnlyWhenAsked(t *testing.T) {
	if status, _ := gatewaytest.Start(t).Do("GET", "/debug/pprof/", nil); status != 404 {
		t.Fatalf("without --pprof: %d, want 404", status)
	}
	rg := gatewaytest.Start(t, "--pprof", "--apikey", "k")
	if status, _ := rg.Do("GET", "/debug/pprof/", nil); status != 401 {
		t.Fatalf("--pprof without the api key: %d, want 401", status)
	}
	resp, err := gatewaytest.Request("GET", rg.URL+"/debug/pprof/goroutine?debug=1", nil, http.Header{"X-Api-Key": {"k"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("--pprof: %d %.100s", resp.StatusCode, body)
	}
}
