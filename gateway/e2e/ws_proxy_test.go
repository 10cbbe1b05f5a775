package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// wsUpstreamServer is a real WebSocket server (gorilla) for the proxy to
// talk to: "echo X" answers "X"; "two" answers two messages; "bin" a
// binary one; "bye" closes with 4005; "quiet" answers nothing. It greets
// each connection with its path and the X-Token header it got, and counts
// the messages it was sent.
type wsUpstreamServer struct {
	URL  string
	hits atomic.Int64
	// tlsConns counts the connections that came over TLS (wss).
	tlsConns atomic.Int64
	srv      *httptest.Server
	wg       sync.WaitGroup
}

func newWSUpstream(t *testing.T) *wsUpstreamServer { return startWSUpstream(t, false) }

// startWSUpstream starts the upstream, over TLS (wss, httptest's
// self-signed certificate) when secure.
func startWSUpstream(t *testing.T, secure bool) *wsUpstreamServer {
	u := &wsUpstreamServer{}
	up := websocket.Upgrader{}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		if r.TLS != nil {
			u.tlsConns.Add(1)
		}
		u.wg.Add(1)
		defer u.wg.Done()
		defer c.Close()
		_ = c.WriteMessage(websocket.TextMessage, []byte("hello "+r.URL.RequestURI()+" "+r.Header.Get("X-Token")))
		for {
			_, p, err := c.ReadMessage()
			if err != nil {
				return
			}
			u.hits.Add(1)
			switch msg := string(p); {
			case strings.HasPrefix(msg, "echo "):
				_ = c.WriteMessage(websocket.TextMessage, []byte(msg[len("echo "):]))
			case msg == "two":
				_ = c.WriteMessage(websocket.TextMessage, []byte("one of two"))
				time.Sleep(20 * time.Millisecond)
				_ = c.WriteMessage(websocket.TextMessage, []byte("two of two"))
			case msg == "bin":
				_ = c.WriteMessage(websocket.BinaryMessage, []byte{0, 1, 2})
			case msg == "bye":
				_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4005, "upstream done"))
				return
			}
		}
	}))
	if secure {
		u.srv.StartTLS()
	} else {
		u.srv.Start()
	}
	u.URL = "ws" + strings.TrimPrefix(u.srv.URL, "http") // https:// becomes wss://
	t.Cleanup(u.Close)
	return u
}

func (u *wsUpstreamServer) Close() {
	u.srv.CloseClientConnections()
	u.srv.Close()
	u.wg.Wait()
}

func TestWSProxyTransparent(t *testing.T) {
	up := newWSUpstream(t)
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(fmt.Sprintf(`{"protocol":"ws","stubs":[{"responses":[{"proxy":{"to":%q,"mode":"proxyTransparent",
		"injectHeaders":{"X-Injected":"yes"}}}]}]}`, up.URL))
	c := wsDial(t, port, "/room/1?x=2", http.Header{"X-Token": {"secret"}})
	wsSend(t, c, websocket.TextMessage, "echo first")
	// The upstream's greeting (sent unasked) and its answer, both passed on.
	if got := wsRead(t, c).data; got != "hello /room/1?x=2 secret" {
		t.Fatalf("greeting: %q", got)
	}
	if got := wsRead(t, c).data; got != "first" {
		t.Fatalf("answer: %q", got)
	}
	wsSend(t, c, websocket.TextMessage, "bin")
	if got := wsRead(t, c); got.typ != websocket.BinaryMessage || got.data != "\x00\x01\x02" {
		t.Fatalf("binary: %+v", got)
	}
	wsSend(t, c, websocket.TextMessage, "bye")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := c.ReadMessage()
	if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != 4005 || ce.Text != "upstream done" {
		t.Fatalf("the upstream's close passed on: %v", err)
	}
	if imp := getImposter(t, rg.URL, port, ""); len(imp["stubs"].([]any)) != 1 {
		t.Fatalf("proxyTransparent records nothing: %v", imp["stubs"])
	}
}

// proxyOnce records each exchange, the upstream's messages until it is
// quiet, as a stub before the proxy; the same message then replays it.
func TestWSProxyOnceRecordsAndReplays(t *testing.T) {
	up := newWSUpstream(t)
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(fmt.Sprintf(`{"protocol":"ws","stubs":[{"responses":[{"proxy":{"to":%q,
		"predicateGenerators":[{"matches":{"data":true}}],"answerQuietMs":150}}]}]}`, up.URL))
	c := wsDial(t, port, "/", nil)
	wsSend(t, c, websocket.TextMessage, "two")
	// The greeting came in the exchange's window: it is part of the answer.
	var got []string
	for range 3 {
		got = append(got, wsRead(t, c).data)
	}
	if strings.Join(got, "|") != "hello / |one of two|two of two" {
		t.Fatalf("first answer: %v", got)
	}
	if got := wsAsk(t, c, "echo x"); got != "x" {
		t.Fatalf("echo: %q", got)
	}
	wsSend(t, c, websocket.TextMessage, "bin")
	if got := wsRead(t, c); got.typ != websocket.BinaryMessage || got.data != "\x00\x01\x02" {
		t.Fatalf("binary: %+v", got)
	}
	hits := up.hits.Load()

	// A new connection: every recorded message is replayed, the upstream
	// is not called.
	c2 := wsDial(t, port, "/", nil)
	got = nil
	wsSend(t, c2, websocket.TextMessage, "two")
	for range 3 {
		got = append(got, wsRead(t, c2).data)
	}
	if strings.Join(got, "|") != "hello / |one of two|two of two" {
		t.Fatalf("replayed: %v", got)
	}
	if got := wsAsk(t, c2, "echo x"); got != "x" {
		t.Fatalf("replayed echo: %q", got)
	}
	wsSend(t, c2, websocket.TextMessage, "bin")
	if got := wsRead(t, c2); got.typ != websocket.BinaryMessage || got.data != "\x00\x01\x02" {
		t.Fatalf("replayed binary: %+v", got)
	}
	if up.hits.Load() != hits {
		t.Fatalf("the upstream was called %d more times", up.hits.Load()-hits)
	}
	stubs := getImposter(t, rg.URL, port, "")["stubs"].([]any)
	if len(stubs) != 4 {
		t.Fatalf("3 recordings and the proxy: %v", stubs)
	}
	first, _ := json.Marshal(stubs[0])
	if !strings.Contains(string(first), `"deepEquals":{"data":"two"}`) || !strings.Contains(string(first), `"data":"hello / "`) ||
		!strings.Contains(string(first), `"messages":["one of two","two of two"]`) {
		t.Fatalf("recorded stub: %s", first)
	}
	bin, _ := json.Marshal(stubs[2])
	if !strings.Contains(string(bin), `"data":"AAEC","type":"binary"`) {
		t.Fatalf("recorded binary: %s", bin)
	}

	// replay: the proxy goes, the recordings stay, and answer without the
	// upstream.
	cmd := exec.Command(gatewaytest.Binary(t), "replay", "--port", strconv.Itoa(rg.Port), "--host", "127.0.0.1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("riftgate replay: %v\n%s", err, out)
	}
	up.Close()
	c3 := wsDial(t, port, "/", nil)
	if got := wsAsk(t, c3, "echo x"); got != "x" {
		t.Fatalf("after replay: %q", got)
	}
}

// proxyAlways records every exchange as another response of its stub; an
// upstream that closes inside an exchange has its close recorded.
func TestWSProxyAlwaysRecordsEveryExchange(t *testing.T) {
	up := newWSUpstream(t)
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(fmt.Sprintf(`{"protocol":"ws","stubs":[{"responses":[{"proxy":{"to":%q,"mode":"proxyAlways",
		"predicateGenerators":[{"matches":{"data":true}}],"answerWaitMs":300,"answerQuietMs":50}}]}]}`, up.URL))
	c := wsDial(t, port, "/", nil)
	wsSend(t, c, websocket.TextMessage, "echo a")
	if got := wsRead(t, c).data; got != "hello / " {
		t.Fatalf("greeting: %q", got)
	}
	if got := wsRead(t, c).data; got != "a" {
		t.Fatalf("answer: %q", got)
	}
	if got := wsAsk(t, c, "echo a"); got != "a" {
		t.Fatalf("answer again: %q", got)
	}
	// An answer of nothing (after answerWaitMs) is recorded as no message.
	wsSend(t, c, websocket.TextMessage, "quiet")
	if got := wsAsk(t, c, "echo b"); got != "b" {
		t.Fatalf("after a quiet message: %q", got)
	}
	wsSend(t, c, websocket.TextMessage, "bye")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := c.ReadMessage()
	if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != 4005 {
		t.Fatalf("the upstream's close: %v", err)
	}
	stubs := getImposter(t, rg.URL, port, "")["stubs"].([]any)
	all, _ := json.Marshal(stubs)
	for _, want := range []string{`"deepEquals":{"data":"echo a"}`, `"messages":[]`, `"close":{"code":4005,"reason":"upstream done"}`} {
		if !strings.Contains(string(all), want) {
			t.Fatalf("recordings lack %s: %s", want, all)
		}
	}
	var echoA map[string]any
	for _, s := range stubs {
		b, _ := json.Marshal(s)
		if strings.Contains(string(b), `"echo a"`) {
			_ = json.Unmarshal(b, &echoA)
		}
	}
	if n := len(echoA["responses"].([]any)); n != 2 {
		t.Fatalf("proxyAlways keeps both answers to echo a: %d", n)
	}
}

// A wss upstream (TLS, a self-signed certificate the proxy does not
// check, as mb's proxies check none), in each of the three modes: the
// answer comes back over TLS, and the recording modes record it.
func TestWSProxyToWSSUpstream(t *testing.T) {
	up := startWSUpstream(t, true)
	if !strings.HasPrefix(up.URL, "wss://") {
		t.Fatalf("the upstream is not wss: %s", up.URL)
	}
	rg := gatewaytest.Start(t)
	for _, mode := range []string{"proxyTransparent", "proxyOnce", "proxyAlways"} {
		t.Run(mode, func(t *testing.T) {
			before := up.tlsConns.Load()
			port := rg.PostImposter(fmt.Sprintf(`{"protocol":"ws","stubs":[{"responses":[{"proxy":{"to":%q,"mode":%q,
				"predicateGenerators":[{"matches":{"data":true}}],"answerQuietMs":100}}]}]}`, up.URL, mode))
			c := wsDial(t, port, "/secure?m="+mode, http.Header{"X-Token": {"t1"}})
			wsSend(t, c, websocket.TextMessage, "two")
			var got []string
			for range 3 {
				got = append(got, wsRead(t, c).data)
			}
			if want := "hello /secure?m=" + mode + " t1|one of two|two of two"; strings.Join(got, "|") != want {
				t.Fatalf("through the wss upstream: %v, want %s", got, want)
			}
			wsSend(t, c, websocket.TextMessage, "bin")
			if got := wsRead(t, c); got.typ != websocket.BinaryMessage || got.data != "\x00\x01\x02" {
				t.Fatalf("binary over wss: %+v", got)
			}
			if n := up.tlsConns.Load() - before; n != 1 {
				t.Fatalf("%d TLS connections reached the upstream, want 1", n)
			}
			stubs, _ := json.Marshal(getImposter(t, rg.URL, port, "")["stubs"])
			recorded := strings.Contains(string(stubs), `"messages":["one of two","two of two"]`) &&
				strings.Contains(string(stubs), `"data":"AAEC","type":"binary"`)
			if recorded == (mode == "proxyTransparent") {
				t.Fatalf("%s recorded %v: %s", mode, recorded, stubs)
			}
		})
	}
}
