package ui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// Chromium opens a WebSocket from a page: text and binary messages both
// ways, a greeting from a handshake stub, the close it asks for; then the
// imposter page shows the recorded messages, a hostile one as text.
func TestBrowserWebSocket(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"ws","recordRequests":true,"stubs":[
		{"predicates":[{"equals":{"type":"open"}}],"responses":[{"is":{"data":"hello browser"}}]},
		{"predicates":[{"equals":{"type":"binary"}}],"responses":[{"is":{"data":"AAEC/w==","type":"binary"}}]},
		{"predicates":[{"equals":{"data":"bye"}}],"responses":[{"is":{"close":{"code":4000,"reason":"see you"}}}]},
		{"responses":[{"is":{"data":"got ${d}"},"behaviors":[{"copy":{"from":"data","into":"${d}","using":{"method":"regex","selector":".*"}}}]}]}]}`)
	// A page of the test's own: riftgate's pages allow no connection
	// but to their origin (their Content-Security-Policy).
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<!doctype html><title>ws client</title><p>a page that talks to an imposter</p>"))
	}))
	defer site.Close()
	p := browser(t)
	p.open(site.URL + "/")
	script := fmt.Sprintf(`new Promise((resolve, reject) => {
		const ws = new WebSocket("ws://127.0.0.1:%d/from-browser?x=1");
		ws.binaryType = "arraybuffer";
		const got = [];
		ws.onmessage = e => {
			got.push(typeof e.data === "string" ? e.data : "bytes:" + Array.from(new Uint8Array(e.data)).join(","));
			if (got.length === 1) ws.send(%q);
			if (got.length === 2) ws.send(new Uint8Array([1, 2, 3]).buffer);
			if (got.length === 3) ws.send("bye");
		};
		ws.onclose = e => resolve(got.join("|") + "|close:" + e.code + ":" + e.reason);
		ws.onerror = () => reject(new Error("websocket error"));
		setTimeout(() => reject(new Error("timed out: " + got.join("|"))), 10000);
	})`, port, hostile)
	got := eval[string](p, script)
	want := "hello browser|got " + hostile + "|bytes:0,1,2,255|close:4000:see you"
	if got != want {
		t.Fatalf("the browser saw\n%s\nwant\n%s", got, want)
	}

	p.open(fmt.Sprintf("%s/imposters/%d", rg.URL, port))
	p.wait("the recorded messages", `document.querySelectorAll("#requests tr.request").length === 4`)
	rows := eval[string](p, `document.querySelector("#requests table").innerText`)
	for _, w := range []string{"open", "text", "binary", "/from-browser", hostile, "AQID"} {
		if !strings.Contains(rows, w) {
			t.Errorf("recorded messages lack %q:\n%s", w, rows)
		}
	}
	noScript(t, p)
}

// Chromium over wss: a page opens a secure WebSocket to a wss imposter
// (its built-in self-signed certificate, which this browser is told to
// accept), is greeted, and has a binary message answered.
func TestBrowserSecureWebSocket(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"wss","stubs":[
		{"predicates":[{"equals":{"type":"open"}}],"responses":[{"is":{"data":"hello over TLS"}}]},
		{"predicates":[{"equals":{"type":"binary"}}],"responses":[{"is":{"data":"${d}","type":"binary"},"behaviors":[
			{"copy":{"from":"data","into":"${d}","using":{"method":"regex","selector":".*"}}}]}]}]}`)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<!doctype html><title>wss client</title>"))
	}))
	defer site.Close()
	p := browser(t, chromedp.Flag("ignore-certificate-errors", true))
	p.open(site.URL + "/")
	got := eval[string](p, fmt.Sprintf(`new Promise((resolve, reject) => {
		const ws = new WebSocket("wss://127.0.0.1:%d/secure");
		ws.binaryType = "arraybuffer";
		const got = [];
		ws.onmessage = e => {
			got.push(typeof e.data === "string" ? e.data : "bytes:" + Array.from(new Uint8Array(e.data)).join(","));
			if (got.length === 1) ws.send(new Uint8Array([7, 8, 9]).buffer);
			if (got.length === 2) { ws.close(1000, "done"); }
		};
		ws.onclose = e => resolve(got.join("|") + "|close:" + e.code);
		ws.onerror = () => reject(new Error("websocket error"));
		setTimeout(() => reject(new Error("timed out: " + got.join("|"))), 10000);
	})`, port))
	if want := "hello over TLS|bytes:7,8,9|close:1000"; got != want {
		t.Fatalf("the browser saw %s, want %s", got, want)
	}
}
