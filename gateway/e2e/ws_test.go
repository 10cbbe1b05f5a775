package e2e_test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// wsDial opens a WebSocket to an imposter with gorilla's client, closed
// when the test ends.
func wsDial(t *testing.T, port int, path string, header http.Header) *websocket.Conn {
	t.Helper()
	c, resp, err := wsDialErr(port, path, header)
	if err != nil {
		t.Fatalf("dial ws %s: %v (%+v)", path, err, resp)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func wsDialErr(port int, path string, header http.Header) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	if ps := header.Values("Sec-WebSocket-Protocol"); len(ps) > 0 {
		d.Subprotocols = ps
		header = header.Clone()
		header.Del("Sec-WebSocket-Protocol")
	}
	return d.Dial(fmt.Sprintf("ws://127.0.0.1:%d%s", port, path), header)
}

type wsMsg struct {
	typ  int
	data string
}

// wsRead reads one message, failing the test on an error or a timeout.
func wsRead(t *testing.T, c *websocket.Conn) wsMsg {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	typ, p, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return wsMsg{typ, string(p)}
}

func wsSend(t *testing.T, c *websocket.Conn, typ int, data string) {
	t.Helper()
	if err := c.WriteMessage(typ, []byte(data)); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// wsAsk sends a text message and reads the one answer.
func wsAsk(t *testing.T, c *websocket.Conn, data string) string {
	t.Helper()
	wsSend(t, c, websocket.TextMessage, data)
	return wsRead(t, c).data
}

// The minimal form, as written.
func TestWSMinimalImposter(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := gatewaytest.FreePort(t)
	rg.PostImposter(fmt.Sprintf(`{"protocol": "ws", "port": %d,
		"stubs": [{"predicates": [{"equals": {"data": "ping"}}],
		           "responses": [{"is": {"data": "pong"}}]}]}`, port))
	c := wsDial(t, port, "/", nil)
	if got := wsAsk(t, c, "ping"); got != "pong" {
		t.Fatalf("ping answered %q", got)
	}
	// No stub matches and there is no defaultResponse: nothing is sent,
	// so the next answer is the next ping's.
	wsSend(t, c, websocket.TextMessage, "other")
	if got := wsAsk(t, c, "PING"); got != "pong" {
		t.Fatalf("equals is not case sensitive, as mb's: %q", got)
	}
}

// Requests are messages with the handshake's path, query and headers, and
// every predicate operator reaches every field.
func TestWSPredicatesAndRecordedMessages(t *testing.T) {
	rg := gatewaytest.Start(t, "--allowInjection")
	port := rg.PostImposter(`{"protocol":"ws","recordRequests":true,
		"defaultResponse":{"data":"no match"},
		"stubs":[
		{"predicates":[{"deepEquals":{"query":{"room":"blue"}}},{"equals":{"data":"where"}}],"responses":[{"is":{"data":"blue room"}}]},
		{"predicates":[{"equals":{"type":"binary"}}],"responses":[{"is":{"data":"binary ${d}"},
			"behaviors":[{"copy":{"from":"data","into":"${d}","using":{"method":"regex","selector":".+"}}}]}]},
		{"predicates":[{"contains":{"data":"needle"}}],"responses":[{"is":{"data":"contains"}}]},
		{"predicates":[{"startsWith":{"data":"head"}}],"responses":[{"is":{"data":"startsWith"}}]},
		{"predicates":[{"endsWith":{"data":"tail"}}],"responses":[{"is":{"data":"endsWith"}}]},
		{"predicates":[{"matches":{"data":"^\\d{3}$"}}],"responses":[{"is":{"data":"matches"}}]},
		{"predicates":[{"equals":{"data":"hdr"}},{"exists":{"headers":{"X-Token":true}}}],"responses":[{"is":{"data":"has token"}}]},
		{"predicates":[{"equals":{"data":"hdr"}},{"not":{"exists":{"headers":{"X-Token":true}}}}],"responses":[{"is":{"data":"no token"}}]},
		{"predicates":[{"or":[{"equals":{"data":"a"}},{"equals":{"data":"b"}}]},{"equals":{"path":"/chat"}}],"responses":[{"is":{"data":"or on /chat"}}]},
		{"predicates":[{"and":[{"equals":{"data":"c"}},{"startsWith":{"connection":""}}]}],"responses":[{"is":{"data":"and"}}]},
		{"predicates":[{"equals":{"data":{"op":"buy"}}}],"responses":[{"is":{"data":"json object"}}]},
		{"predicates":[{"equals":{"data":"sell"},"jsonpath":{"selector":"$.op"}}],"responses":[{"is":{"data":"jsonpath"}}]},
		{"predicates":[{"inject":"function (config) { return config.request.data === 'js' && config.request.type === 'text'; }"}],"responses":[{"is":{"data":"inject predicate"}}]},
		{"predicates":[{"equals":{"data":"id"}}],"responses":[{"is":{"data":"${c}"},
			"behaviors":[{"copy":{"from":"connection","into":"${c}","using":{"method":"regex","selector":".+"}}}]}]}
		]}`)
	h := http.Header{"X-Token": {"t"}}
	blue := wsDial(t, port, "/chat?room=blue", h)
	plain := wsDial(t, port, "/other", nil)
	for _, tt := range []struct {
		c         *websocket.Conn
		send, got string
	}{
		{blue, "where", "blue room"},
		{plain, "where", "no match"},
		{blue, "a needle here", "contains"},
		{blue, "HEADER", "startsWith"},
		{blue, "the tail", "endsWith"},
		{blue, "123", "matches"},
		{blue, "1234", "no match"},
		{blue, "hdr", "has token"},
		{plain, "hdr", "no token"},
		{blue, "b", "or on /chat"},
		{plain, "b", "no match"},
		{plain, "c", "and"},
		{blue, `{"op": "buy"}`, "json object"},
		{blue, `{"op": "sell"}`, "jsonpath"},
		{blue, "js", "inject predicate"},
	} {
		if got := wsAsk(t, tt.c, tt.send); got != tt.got {
			t.Errorf("%q answered %q, want %q", tt.send, got, tt.got)
		}
	}
	wsSend(t, blue, websocket.BinaryMessage, "\x00\x01\xff")
	if got := wsRead(t, blue); got.data != "binary AAH/" || got.typ != websocket.TextMessage {
		t.Errorf("a binary message's data is base64: %+v", got)
	}
	id := wsAsk(t, blue, "id")

	imp := getImposter(t, rg.URL, port, "")
	reqs := imp["requests"].([]any)
	var first, last map[string]any
	for _, r := range reqs {
		m := r.(map[string]any)
		if m["connection"] == id {
			if first == nil {
				first = m
			}
			last = m
		}
	}
	if first == nil || first["type"] != "open" || first["path"] != "/chat" || first["query"].(map[string]any)["room"] != "blue" ||
		first["headers"].(map[string]any)["X-Token"] != "t" {
		t.Fatalf("the handshake is recorded as a request of type open: %v", first)
	}
	if last["type"] != "text" || last["data"] != "id" || !strings.HasPrefix(last["requestFrom"].(string), "") {
		t.Fatalf("last message recorded: %v", last)
	}
	var binary map[string]any
	for _, r := range reqs {
		if m := r.(map[string]any); m["type"] == "binary" {
			binary = m
		}
	}
	if binary == nil || binary["data"] != "AAH/" {
		t.Fatalf("binary message recorded: %v", binary)
	}
	// 2 handshakes + 17 messages.
	if n := imp["numberOfRequests"].(float64); n != 19 {
		t.Fatalf("numberOfRequests %v", n)
	}
}

// A response sends zero or more messages, text or binary, waits, and can
// close with a code and a reason.
func TestWSResponses(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"ws","stubs":[
		{"predicates":[{"equals":{"data":"many"}}],"responses":[{"is":{"data":"first","messages":["second",{"data":"AAEC","type":"binary"},{"data":{"n":1}}]}}]}, 
		{"predicates":[{"equals":{"data":"none"}}],"responses":[{"is":{"messages":[]}}]},
		{"predicates":[{"equals":{"data":"slow"}}],"responses":[{"is":{"messages":["now",{"data":"later","wait":300}]}}]},
		{"predicates":[{"equals":{"data":"cycle"}}],"responses":[{"is":{"data":"one"}},{"is":{"data":"two"},"repeat":2}]},
		{"predicates":[{"equals":{"data":"bye"}}],"responses":[{"is":{"data":"see you","close":{"code":4001,"reason":"done here"}}}]},
		{"predicates":[{"equals":{"data":"waited"}}],"responses":[{"is":{"data":"after wait"},"behaviors":[{"wait":250}]}]}
		]}`)
	c := wsDial(t, port, "/", nil)
	wsSend(t, c, websocket.TextMessage, "many")
	want := []wsMsg{{websocket.TextMessage, "first"}, {websocket.TextMessage, "second"}, {websocket.BinaryMessage, "\x00\x01\x02"}, {websocket.TextMessage, `{"n":1}`}}
	for i, w := range want {
		if got := wsRead(t, c); got != w {
			t.Fatalf("message %d: %+v, want %+v", i, got, w)
		}
	}
	wsSend(t, c, websocket.TextMessage, "none")
	if got := wsAsk(t, c, "cycle"); got != "one" {
		t.Fatalf("messages [] sends nothing: the next answer is %q", got)
	}
	start := time.Now()
	wsSend(t, c, websocket.TextMessage, "slow")
	if got := wsRead(t, c).data; got != "now" || time.Since(start) > 250*time.Millisecond {
		t.Fatalf("first message %q after %v", got, time.Since(start))
	}
	if got := wsRead(t, c).data; got != "later" || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("waited message %q after %v", got, time.Since(start))
	}
	start = time.Now()
	if got := wsAsk(t, c, "waited"); got != "after wait" || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("wait behavior: %q after %v", got, time.Since(start))
	}
	var cycle []string
	for range 4 {
		cycle = append(cycle, wsAsk(t, c, "cycle"))
	}
	if strings.Join(cycle, ",") != "two,two,one,two" {
		t.Fatalf("responses cycle with repeat: %v", cycle)
	}
	wsSend(t, c, websocket.TextMessage, "bye")
	if got := wsRead(t, c).data; got != "see you" {
		t.Fatalf("before the close: %q", got)
	}
	_, _, err := c.ReadMessage()
	if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != 4001 || ce.Text != "done here" {
		t.Fatalf("close: %v", err)
	}
}

// inject and wasm responders, decorate and lookup behaviors, and state
// kept across a connection's messages.
func TestWSComputedResponses(t *testing.T) {
	rg := gatewaytest.Start(t, "--allowInjection")
	dir := t.TempDir()
	csv := filepath.Join(dir, "prices.csv")
	if err := os.WriteFile(csv, []byte("symbol,price\nACME,42\nINIT,7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	echo := filepath.Join(gatewaytest.WasmDir(t), "examples", "echo-c.wasm")
	port := rg.PostImposter(fmt.Sprintf(`{"protocol":"ws","stubs":[
		{"predicates":[{"startsWith":{"data":"count"}}],"responses":[{"inject":"function (config) { config.state.n = (config.state.n || 0) + 1; return {data: config.request.data + ' ' + config.state.n, messages: [{data: config.request.path}]}; }"}]},
		{"predicates":[{"startsWith":{"data":"wasm"}}],"responses":[{"wasm":{"module":%q,"config":{"template":"{{method}}:{{body}}:{{path}}"}}}]},
		{"predicates":[{"startsWith":{"data":"price "}}],"responses":[{"is":{"data":"${row}[price]"},
			"behaviors":[{"lookup":{"key":{"from":"data","using":{"method":"regex","selector":"\\w+$"}},"fromDataSource":{"csv":{"path":%q,"keyColumn":"symbol"}},"into":"${row}"}}]}]},
		{"predicates":[{"equals":{"data":"decorate"}}],"responses":[{"is":{"data":"plain"},
			"behaviors":[{"decorate":"function (request, response) { response.data = response.data.toUpperCase(); response.close = {code: 4002}; }"}]}]},
		{"predicates":[{"equals":{"data":"bad"}}],"responses":[{"inject":"function () { return {type: 'neither'}; }"}]}
		]}`, echo, csv))
	c := wsDial(t, port, "/feed", nil)
	if got := wsAsk(t, c, "count"); got != "count 1" {
		t.Fatalf("inject: %q", got)
	}
	if got := wsRead(t, c).data; got != "/feed" {
		t.Fatalf("inject's second message: %q", got)
	}
	if got := wsAsk(t, c, "count"); got != "count 2" {
		t.Fatalf("inject state: %q", got)
	}
	_ = wsRead(t, c)
	if got := wsAsk(t, c, "wasm hi"); got != "text:wasm hi:/feed" {
		t.Fatalf("wasm: %q", got)
	}
	if got := wsAsk(t, c, "price ACME"); got != "42" {
		t.Fatalf("lookup: %q", got)
	}
	if got := wsAsk(t, c, "bad"); !strings.Contains(got, "errors") || !strings.Contains(got, "type") {
		t.Fatalf("an invalid computed response is answered with mb's error: %q", got)
	}
	if got := wsAsk(t, c, "decorate"); got != "PLAIN" {
		t.Fatalf("decorate: %q", got)
	}
	_, _, err := c.ReadMessage()
	if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != 4002 {
		t.Fatalf("a decorator's close: %v", err)
	}
}

func TestWSFaults(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"ws","stubs":[
		{"predicates":[{"equals":{"data":"reset"}}],"responses":[{"fault":"CONNECTION_RESET_BY_PEER"}]},
		{"predicates":[{"equals":{"data":"garbage"}}],"responses":[{"fault":"RANDOM_DATA_THEN_CLOSE"}]}]}`)
	for _, tt := range []struct{ send, want string }{{"reset", "reset by peer"}, {"garbage", ""}} {
		c := wsDial(t, port, "/", nil)
		wsSend(t, c, websocket.TextMessage, tt.send)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _, err := c.ReadMessage()
		if err == nil || (tt.want != "" && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: %v", tt.send, err)
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s: the connection stayed open", tt.send)
		}
	}
}

// A fault on a handshake stub acts on the connection before it is
// upgraded: no 101 is sent, the client's handshake fails as mb's http
// faults fail a request, and the handshake is recorded.
func TestWSFaultOnHandshake(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"ws","recordRequests":true,"stubs":[
		{"predicates":[{"equals":{"type":"open","path":"/reset"}}],"responses":[{"fault":"CONNECTION_RESET_BY_PEER"}]},
		{"predicates":[{"equals":{"type":"open","path":"/garbage"}}],"responses":[{"fault":"RANDOM_DATA_THEN_CLOSE"}]},
		{"responses":[{"is":{"data":"fine"}}]}]}`)
	for _, tt := range []struct{ path, want string }{
		{"/reset", "reset by peer"},
		{"/garbage", "malformed HTTP"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			c, resp, err := wsDialErr(port, tt.path, nil)
			if err == nil {
				c.Close()
				t.Fatalf("the handshake succeeded: %+v", resp)
			}
			if resp != nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("dial: %v (%+v), want an error with %q", err, resp, tt.want)
			}
		})
	}
	// Another path is upgraded as before: the faults took only their
	// own connections.
	if got := wsAsk(t, wsDial(t, port, "/other", nil), "x"); got != "fine" {
		t.Fatalf("after the faults: %q", got)
	}
	var paths []string
	for _, r := range getImposter(t, rg.URL, port, "")["requests"].([]any) {
		m := r.(map[string]any)
		paths = append(paths, fmt.Sprint(m["type"], m["path"]))
	}
	if strings.Join(paths, ",") != "open/reset,open/garbage,open/other,text/other" {
		t.Fatalf("recorded: %v", paths)
	}
}

// Control frames and the close handshake, from the client's side.
func TestWSPingFragmentsAndClose(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"ws","stubs":[{"responses":[{"is":{"data":"got it"}}]}]}`)
	c := wsDial(t, port, "/", nil)
	pong := make(chan string, 1)
	c.SetPongHandler(func(s string) error { pong <- s; return nil })
	if err := c.WriteControl(websocket.PingMessage, []byte("hello?"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	w, _ := c.NextWriter(websocket.TextMessage)
	for _, part := range []string{"one ", "message ", "in three frames"} {
		_, _ = w.Write([]byte(part))
		if fw, ok := w.(interface{ Flush() error }); ok {
			_ = fw.Flush()
		}
	}
	w.Close()
	if got := wsRead(t, c).data; got != "got it" {
		t.Fatalf("fragmented message answered %q", got)
	}
	select {
	case s := <-pong:
		if s != "hello?" {
			t.Fatalf("pong %q", s)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no pong")
	}
	// The client closes: the imposter answers with the same code.
	if err := c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := c.ReadMessage()
	if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != websocket.CloseNormalClosure {
		t.Fatalf("close answered with %v", err)
	}
}

func TestWSRefusesBadDefinitions(t *testing.T) {
	rg := gatewaytest.Start(t)
	for _, tt := range []struct{ name, imposter, want string }{
		{"type", `{"protocol":"ws","stubs":[{"responses":[{"is":{"data":"x","type":"json"}}]}]}`, `'type' must be`},
		{"close code", `{"protocol":"ws","stubs":[{"responses":[{"is":{"close":{"code":1005}}}]}]}`, "close code 1005"},
		{"messages", `{"protocol":"ws","stubs":[{"responses":[{"is":{"messages":{"data":"x"}}}]}]}`, "'messages' must be an array"},
		{"limits", `{"protocol":"ws","limits":{"maxMessageBytes":0}}`, "limits.maxMessageBytes"},
		{"unknown limit", `{"protocol":"ws","limits":{"maxMessages":5}}`, "invalid limits"},
		{"status", `{"protocol":"ws","stubs":[{"predicates":[{"equals":{"type":"open"}}],"responses":[{"is":{"statusCode":150}}]}]}`, "statusCode"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := rg.Do("POST", "/imposters", json.RawMessage(tt.imposter))
			if status != 400 || !strings.Contains(string(body), "bad data") || !strings.Contains(string(body), tt.want) {
				t.Fatalf("%d %s", status, body)
			}
		})
	}
}

// GET shows the limits; save writes a file that replays the imposter.
func TestWSSaveAndMetrics(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"ws","name":"feed","limits":{"messagesPerSecond":500},
		"stubs":[{"responses":[{"is":{"data":"hi"}}]}]}`)
	c := wsDial(t, port, "/", nil)
	if got := wsAsk(t, c, "x"); got != "hi" {
		t.Fatal(got)
	}
	imp := getImposter(t, rg.URL, port, "")
	lim := imp["limits"].(map[string]any)
	if lim["messagesPerSecond"] != 500.0 || lim["maxMessageBytes"] != float64(1<<20) {
		t.Fatalf("limits shown: %v", lim)
	}
	// A message is counted once its write returned, which may be after the
	// client has read it: wait for the count rather than read it once.
	label := fmt.Sprintf(`imposter="[ws:%d feed] "`, port)
	waitMetric(t, rg, "riftgate_ws_messages_sent_total", label, 1)
	status, metrics := rg.Do("GET", "/metrics", nil)
	for _, want := range []string{"riftgate_ws_connections{" + label + "} 1", "riftgate_ws_connections_total{" + label + "} 1",
		"riftgate_ws_messages_sent_total{" + label + "} 1", "mb_request_total{" + label + "} 2"} {
		if status != 200 || !strings.Contains(string(metrics), want) {
			t.Fatalf("metrics lack %s:\n%s", want, metrics)
		}
	}

	saved := filepath.Join(t.TempDir(), "saved.json")
	cmd := exec.Command(gatewaytest.Binary(t), "save", "--port", strconv.Itoa(rg.Port), "--host", "127.0.0.1", "--savefile", saved)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("riftgate save: %v\n%s", err, out)
	}
	c.Close()
	rg.Stop()
	again := gatewaytest.Start(t, "--configfile", saved)
	c2 := wsDial(t, port, "/", nil)
	if got := wsAsk(t, c2, "again"); got != "hi" {
		t.Fatalf("from the saved file: %q", got)
	}
	if lim := getImposter(t, again.URL, port, "")["limits"].(map[string]any); lim["messagesPerSecond"] != 500.0 {
		t.Fatalf("saved limits: %v", lim)
	}
}

// wss: TLS with the built-in certificate, as https has it.
func TestWSSImposter(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"wss","stubs":[{"responses":[{"is":{"data":"secure"}}]}]}`)
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, TLSClientConfig: insecureTLS()}
	c, _, err := d.Dial(fmt.Sprintf("wss://127.0.0.1:%d/", port), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := wsAsk(t, c, "x"); got != "secure" {
		t.Fatalf("wss answered %q", got)
	}
	if imp := getImposter(t, rg.URL, port, ""); imp["cert"] == "" || imp["key"] == "" {
		t.Fatalf("wss shows its certificate as https does: %v", imp)
	}
}

func insecureTLS() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the imposter's self-signed pair
}

// Handshake stubs (predicates on type "open") accept or refuse the upgrade,
// choose a subprotocol and headers, and greet the connection.
func TestWSHandshakeStubs(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"ws","stubs":[
		{"predicates":[{"equals":{"type":"open","path":"/private"}},{"not":{"exists":{"headers":{"Authorization":true}}}}],
		 "responses":[{"is":{"statusCode":401,"headers":{"WWW-Authenticate":"Bearer"},"body":"token required"}}]},
		{"predicates":[{"equals":{"type":"open"}},{"contains":{"headers":{"Sec-WebSocket-Protocol":"chat.v2"}}}],
		 "responses":[{"is":{"subprotocol":"chat.v2","headers":{"X-Server":"riftgate"},"data":"welcome","messages":[{"data":"AQI=","type":"binary"}]}}]},
		{"predicates":[{"equals":{"type":"open","path":"/full"}}],
		 "responses":[{"is":{"close":{"code":1013,"reason":"come back later"}}}]},
		{"responses":[{"is":{"data":"echo ${d}"},"behaviors":[{"copy":{"from":"data","into":"${d}","using":{"method":"regex","selector":".*"}}}]}]}
		]}`)

	_, resp, err := wsDialErr(port, "/private", nil)
	if err == nil || resp == nil || resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != "Bearer" {
		t.Fatalf("refusal: %v %+v", err, resp)
	}
	c := wsDial(t, port, "/private", http.Header{"Authorization": {"Bearer x"}})
	if got := wsAsk(t, c, "hi"); got != "echo hi" {
		t.Fatalf("an accepted handshake without a greeting, then the catch-all: %q", got)
	}

	d := websocket.Dialer{Subprotocols: []string{"chat.v1", "chat.v2"}}
	c2, resp, err := d.Dial(fmt.Sprintf("ws://127.0.0.1:%d/room", port), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if c2.Subprotocol() != "chat.v2" || resp.Header.Get("X-Server") != "riftgate" {
		t.Fatalf("subprotocol %q, headers %v", c2.Subprotocol(), resp.Header)
	}
	if got := wsRead(t, c2); got.data != "welcome" {
		t.Fatalf("greeting %+v", got)
	}
	if got := wsRead(t, c2); got.typ != websocket.BinaryMessage || got.data != "\x01\x02" {
		t.Fatalf("second greeting %+v", got)
	}

	c3 := wsDial(t, port, "/full", nil)
	_ = c3.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err = c3.ReadMessage()
	if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != 1013 || ce.Text != "come back later" {
		t.Fatalf("closed on open: %v", err)
	}
}

// Server pushes: every N ms, M times, from the handshake or from a message.
func TestWSSchedules(t *testing.T) {
	rg := gatewaytest.Start(t, "--allowInjection")
	port := rg.PostImposter(`{"protocol":"ws","stubs":[
		{"predicates":[{"equals":{"type":"open","path":"/ticks"}}],
		 "responses":[{"is":{"data":"tick","every":50,"times":3}}]},
		{"predicates":[{"equals":{"data":"subscribe"}}],
		 "responses":[{"is":{"messages":["p1","p2"],"every":40,"times":2,"close":{"code":4000,"reason":"end of stream"}}}]},
		{"predicates":[{"equals":{"data":"forever"}}],
		 "responses":[{"is":{"data":"again","every":20}}]}
		]}`)
	c := wsDial(t, port, "/ticks", nil)
	start := time.Now()
	for i := range 3 {
		if got := wsRead(t, c).data; got != "tick" {
			t.Fatalf("tick %d: %q", i, got)
		}
	}
	if el := time.Since(start); el < 90*time.Millisecond {
		t.Fatalf("three ticks every 50 ms came in %v", el)
	}
	// The ticks stop after three: the next message is the subscription's.
	wsSend(t, c, websocket.TextMessage, "subscribe")
	var got []string
	for range 4 {
		got = append(got, wsRead(t, c).data)
	}
	if strings.Join(got, ",") != "p1,p2,p1,p2" {
		t.Fatalf("stream %v", got)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := c.ReadMessage()
	if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != 4000 || ce.Text != "end of stream" {
		t.Fatalf("closed after the stream: %v", err)
	}

	// A schedule without times runs until the connection ends, and ends
	// with it.
	c2 := wsDial(t, port, "/", nil)
	wsSend(t, c2, websocket.TextMessage, "forever")
	for range 5 {
		if got := wsRead(t, c2).data; got != "again" {
			t.Fatal(got)
		}
	}
	c2.Close()
	waitMetric(t, rg, "riftgate_ws_connections", fmt.Sprintf(`imposter="[ws:%d] "`, port), 0)
}

// Flows: the flow id comes from the connection, a query parameter or a
// handshake header; scenarios and (with cycles "flow") response cycles
// are kept per flow.
func TestWSFlows(t *testing.T) {
	rg := gatewaytest.Start(t)
	stubs := `"stubs":[
		{"scenarioName":"session","requiredScenarioState":"Started","newScenarioState":"in",
		 "predicates":[{"equals":{"data":"login"}}],"responses":[{"is":{"data":"welcome"}}]},
		{"scenarioName":"session","requiredScenarioState":"in",
		 "predicates":[{"equals":{"data":"whoami"}}],"responses":[{"is":{"data":"logged in"}}]},
		{"predicates":[{"equals":{"data":"whoami"}}],"responses":[{"is":{"data":"anonymous"}}]},
		{"predicates":[{"equals":{"data":"next"}}],"responses":[{"is":{"data":"1"}},{"is":{"data":"2"}},{"is":{"data":"3"}}]}]`
	byConn := rg.PostImposter(`{"protocol":"ws","_rift":{"flowState":{"flowIdSource":"connection","cycles":"flow"}},` + stubs + `}`)
	byQuery := rg.PostImposter(`{"protocol":"ws","_rift":{"flowState":{"flowIdSource":"query:user"}},` + stubs + `}`)
	byHeader := rg.PostImposter(`{"protocol":"ws","_rift":{"flowState":{"flowIdSource":"header:X-User","cycles":"flow"}},` + stubs + `}`)

	t.Run("connection", func(t *testing.T) {
		a, b := wsDial(t, byConn, "/", nil), wsDial(t, byConn, "/", nil)
		if got := wsAsk(t, a, "login"); got != "welcome" {
			t.Fatal(got)
		}
		if got := wsAsk(t, a, "whoami"); got != "logged in" {
			t.Fatalf("a after login: %q", got)
		}
		if got := wsAsk(t, b, "whoami"); got != "anonymous" {
			t.Fatalf("b is a flow of its own: %q", got)
		}
		var seq []string
		for _, c := range []*websocket.Conn{a, a, b, a, b} {
			seq = append(seq, wsAsk(t, c, "next"))
		}
		if strings.Join(seq, ",") != "1,2,1,3,2" {
			t.Fatalf("cycles per connection: %v", seq)
		}
		status, body := rg.Do("GET", fmt.Sprintf("/imposters/%d/flows", byConn), nil)
		var flows struct{ Flows []string }
		_ = json.Unmarshal(body, &flows)
		if status != 200 || len(flows.Flows) != 2 {
			t.Fatalf("two connections, two flows: %d %s", status, body)
		}
		a.Close()
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, body = rg.Do("GET", fmt.Sprintf("/imposters/%d/flows", byConn), nil)
			_ = json.Unmarshal(body, &flows)
			if len(flows.Flows) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a closed connection's flow stays: %s", body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	t.Run("query", func(t *testing.T) {
		a1, a2 := wsDial(t, byQuery, "/?user=ann", nil), wsDial(t, byQuery, "/?user=ann", nil)
		bob := wsDial(t, byQuery, "/?user=bob", nil)
		if got := wsAsk(t, a1, "login"); got != "welcome" {
			t.Fatal(got)
		}
		if got := wsAsk(t, a2, "whoami"); got != "logged in" {
			t.Fatalf("ann's second connection shares her flow: %q", got)
		}
		if got := wsAsk(t, bob, "whoami"); got != "anonymous" {
			t.Fatalf("bob: %q", got)
		}
		// Cycles per stub (mb's): across every connection.
		var seq []string
		for _, c := range []*websocket.Conn{a1, bob, a2} {
			seq = append(seq, wsAsk(t, c, "next"))
		}
		if strings.Join(seq, ",") != "1,2,3" {
			t.Fatalf("cycles per stub: %v", seq)
		}
		status, body := rg.Do("GET", fmt.Sprintf("/imposters/%d/scenarios?flowId=ann", byQuery), nil)
		if status != 200 || !strings.Contains(string(body), `"in"`) {
			t.Fatalf("ann's scenario: %d %s", status, body)
		}
	})
	t.Run("header", func(t *testing.T) {
		h := http.Header{"X-User": {"carol"}}
		c1, c2 := wsDial(t, byHeader, "/", h), wsDial(t, byHeader, "/", h)
		other := wsDial(t, byHeader, "/", http.Header{"X-User": {"dave"}})
		_ = wsAsk(t, c1, "login")
		if got := wsAsk(t, c2, "whoami"); got != "logged in" {
			t.Fatalf("carol's other connection: %q", got)
		}
		var seq []string
		for _, c := range []*websocket.Conn{c1, c2, other, c1} {
			seq = append(seq, wsAsk(t, c, "next"))
		}
		if strings.Join(seq, ",") != "1,2,1,3" {
			t.Fatalf("cycles per user: %v", seq)
		}
	})
	if status, body := rg.Do("POST", "/imposters", json.RawMessage(`{"protocol":"ws","_rift":{"flowState":{"cycles":"user"}}}`)); status != 400 {
		t.Fatalf("a bad cycles: %d %s", status, body)
	}
}

// query:<name> and cycles "flow" on an http imposter.
func TestHTTPFlowFromQueryCyclesPerFlow(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"http","_rift":{"flowState":{"flowIdSource":"query:user","cycles":"flow"}},
		"stubs":[{"responses":[{"is":{"body":"1"}},{"is":{"body":"2"}}]}]}`)
	var seq []string
	for _, user := range []string{"ann", "ann", "bob", "ann"} {
		_, body := gatewaytest.Do(t, "GET", fmt.Sprintf("http://127.0.0.1:%d/?user=%s", port, user), nil, nil)
		seq = append(seq, string(body))
	}
	if strings.Join(seq, ",") != "1,2,1,1" {
		t.Fatalf("cycles per user: %v", seq)
	}
}

// An http imposter's stub that answers 101 takes an upgrade request's
// connection over as a WebSocket, and the imposter's stubs answer its
// messages; plain http requests go on as before, on the same port.
func TestHTTPImposterUpgradesToWebSocket(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"http","recordRequests":true,"stubs":[
		{"predicates":[{"equals":{"path":"/socket"}},{"equals":{"headers":{"Upgrade":"websocket"}}}],
		 "responses":[{"is":{"statusCode":101,"subprotocol":"v1","headers":{"X-Upgraded":"yes"},"data":"welcome"}}]},
		{"predicates":[{"equals":{"data":"ping"}}],"responses":[{"is":{"data":"pong"}}]},
		{"predicates":[{"equals":{"type":"text","path":"/socket"}}],"responses":[{"is":{"data":"echo ${d}"},
			"behaviors":[{"copy":{"from":"data","into":"${d}","using":{"method":"regex","selector":".*"}}}]}]},
		{"predicates":[{"equals":{"path":"/plain"}}],"responses":[{"is":{"body":"plain http"}}]}]}`)
	d := websocket.Dialer{Subprotocols: []string{"v1"}, HandshakeTimeout: 5 * time.Second}
	c, resp, err := d.Dial(fmt.Sprintf("ws://127.0.0.1:%d/socket", port), nil)
	if err != nil {
		t.Fatalf("upgrade: %v %+v", err, resp)
	}
	defer c.Close()
	if c.Subprotocol() != "v1" || resp.Header.Get("X-Upgraded") != "yes" {
		t.Fatalf("handshake answer: %q %v", c.Subprotocol(), resp.Header)
	}
	if got := wsRead(t, c).data; got != "welcome" {
		t.Fatalf("greeting %q", got)
	}
	if got := wsAsk(t, c, "ping"); got != "pong" {
		t.Fatalf("ping: %q", got)
	}
	if got := wsAsk(t, c, "hello"); got != "echo hello" {
		t.Fatalf("copy on an upgraded connection: %q", got)
	}
	if status, body := gatewaytest.Do(t, "GET", fmt.Sprintf("http://127.0.0.1:%d/plain", port), nil, nil); status != 200 || string(body) != "plain http" {
		t.Fatalf("http alongside: %d %q", status, body)
	}
	// The upgrade stub answers a request that is no handshake with why.
	if status, body := gatewaytest.Do(t, "GET", fmt.Sprintf("http://127.0.0.1:%d/socket", port), nil, http.Header{"Upgrade": {"websocket"}}); status != 426 {
		t.Fatalf("not a handshake: %d %s", status, body)
	}
	imp := getImposter(t, rg.URL, port, "")
	var types []string
	for _, r := range imp["requests"].([]any) {
		m := r.(map[string]any)
		types = append(types, fmt.Sprint(m["method"], m["type"]))
	}
	if strings.Join(types, ",") != "GET<nil>,<nil>text,<nil>text,GET<nil>,GET<nil>" {
		t.Fatalf("recorded: %v", types)
	}
	status, metrics := rg.Do("GET", "/metrics", nil)
	if status != 200 || !strings.Contains(string(metrics), fmt.Sprintf(`riftgate_ws_connections_total{imposter="[http:%d] "} 1`, port)) {
		t.Fatalf("metrics:\n%s", metrics)
	}
	// A change of stubs reaches the next upgraded connection.
	if status, body := rg.Do("POST", fmt.Sprintf("/imposters/%d/stubs", port), json.RawMessage(
		`{"index":0,"stub":{"predicates":[{"equals":{"data":"new"}}],"responses":[{"is":{"data":"new stub"}}]}}`)); status != 200 {
		t.Fatalf("add stub: %d %s", status, body)
	}
	c2, _, err := d.Dial(fmt.Sprintf("ws://127.0.0.1:%d/socket", port), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_ = wsRead(t, c2)
	if got := wsAsk(t, c2, "new"); got != "new stub" {
		t.Fatalf("after a stub change: %q", got)
	}
	// Deleting the imposter ends its upgraded connections too.
	start := time.Now()
	if status, body := rg.Do("DELETE", fmt.Sprintf("/imposters/%d", port), nil); status != 200 {
		t.Fatalf("delete: %d %s", status, body)
	}
	_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := c2.ReadMessage(); err == nil || time.Since(start) > 3*time.Second {
		t.Fatalf("after the delete: %v, %v", err, time.Since(start))
	}
}
