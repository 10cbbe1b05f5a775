package e2e_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// tcpSend writes data on a new connection and returns what came back
// before the connection went quiet for wait, and whether the server closed
// it.
func tcpSend(t *testing.T, port int, data []byte, wait time.Duration) (answer []byte, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
	return tcpRead(t, c, wait)
}

// tcpRead reads until the connection is quiet for wait or closed.
func tcpRead(t *testing.T, c net.Conn, wait time.Duration) ([]byte, bool) {
	t.Helper()
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		_ = c.SetReadDeadline(time.Now().Add(wait))
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		var ne net.Error
		switch {
		case err == nil:
		case errors.As(err, &ne) && ne.Timeout():
			return out, false
		default:
			return out, true
		}
	}
}

func getImposter(t *testing.T, admin string, port int, query string) map[string]any {
	t.Helper()
	status, body := gatewaytest.Do(t, "GET", fmt.Sprintf("%s/imposters/%d%s", admin, port, query), nil, nil)
	if status != http.StatusOK {
		t.Fatalf("GET imposter %d: %d %s", port, status, body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTCPImposterAnswersAndRecords(t *testing.T) {
	rg := gatewaytest.Start(t, "--debug")
	port := rg.PostImposter(`{"protocol":"tcp","recordRequests":true,
		"defaultResponse":{"data":"default"},
		"stubs":[
		{"predicates":[{"startsWith":{"data":"HELLO"}}],"responses":[{"is":{"data":"hi there"}}]},
		{"predicates":[{"contains":{"data":"reset"}}],"responses":[{"fault":"CONNECTION_RESET_BY_PEER"}]},
		{"predicates":[{"contains":{"data":"garbage"}}],"responses":[{"fault":"RANDOM_DATA_THEN_CLOSE"}]},
		{"predicates":[{"equals":{"data":"copy me"}}],"responses":[{"is":{"data":"got ${D}"},
			"behaviors":[{"copy":{"from":"data","into":"${D}","using":{"method":"regex","selector":"\\w+$"}}}]}]},
		{"predicates":[{"equals":{"data":"empty"}}],"responses":[{"is":{}}]}]}`)

	if got, closed := tcpSend(t, port, []byte("hello world"), 300*time.Millisecond); string(got) != "hi there" || closed {
		t.Fatalf("startsWith (not case sensitive): %q closed=%v", got, closed)
	}
	if got, _ := tcpSend(t, port, []byte("copy me"), 300*time.Millisecond); string(got) != "got me" {
		t.Fatalf("copy from data: %q", got)
	}
	if got, _ := tcpSend(t, port, []byte("empty"), 300*time.Millisecond); string(got) != "default" {
		t.Fatalf("an empty is takes the default's data: %q", got)
	}
	if got, _ := tcpSend(t, port, []byte("no stub"), 300*time.Millisecond); string(got) != "default" {
		t.Fatalf("no match answers the defaultResponse: %q", got)
	}
	if got, closed := tcpSend(t, port, []byte("reset"), 2*time.Second); len(got) != 0 || !closed {
		t.Fatalf("CONNECTION_RESET_BY_PEER: %q closed=%v", got, closed)
	}
	if got, closed := tcpSend(t, port, []byte("garbage"), 2*time.Second); len(got) == 0 || !closed {
		t.Fatalf("RANDOM_DATA_THEN_CLOSE: %q closed=%v", got, closed)
	}

	// A connection stays open: each read is a request.
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 3; i++ {
		fmt.Fprintf(c, "HELLO %d", i)
		if got, closed := tcpRead(t, c, 300*time.Millisecond); string(got) != "hi there" || closed {
			t.Fatalf("request %d on one connection: %q closed=%v", i, got, closed)
		}
	}

	imp := getImposter(t, rg.URL, port, "")
	if imp["mode"] != "text" || imp["numberOfRequests"] != float64(9) {
		t.Fatalf("imposter header: mode %v, numberOfRequests %v", imp["mode"], imp["numberOfRequests"])
	}
	reqs := imp["requests"].([]any)
	first := reqs[0].(map[string]any)
	if keys := sortedKeys(first); !reflect.DeepEqual(keys, []string{"data", "ip", "requestFrom", "timestamp"}) || first["data"] != "hello world" {
		t.Fatalf("saved tcp request: %v", first)
	}
	stub := imp["stubs"].([]any)[0].(map[string]any)
	matches := stub["matches"].([]any)
	m := matches[0].(map[string]any)
	if m["response"].(map[string]any)["data"] != "hi there" || m["request"].(map[string]any)["data"] != "hello world" {
		t.Fatalf("--debug match: %v", m)
	}
}

func sortedKeys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestTCPBinaryMode(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"tcp","mode":"binary","recordRequests":true,"stubs":[
		{"predicates":[{"contains":{"data":"AgM="}}],"responses":[{"is":{"data":"AQI="}}]},
		{"predicates":[{"equals":{"data":"CQ=="}}],"responses":[{"is":{"data":"//79"}}]}]}`)
	for _, in := range [][]byte{{1, 2, 3, 4}, {0, 2, 3}} {
		if got, _ := tcpSend(t, port, in, 300*time.Millisecond); !bytes.Equal(got, []byte{1, 2}) {
			t.Fatalf("binary contains, %v: %v", in, got)
		}
	}
	if got, _ := tcpSend(t, port, []byte{9}, 300*time.Millisecond); !bytes.Equal(got, []byte{0xff, 0xfe, 0xfd}) {
		t.Fatalf("binary equals: %v", got)
	}
	reqs := getImposter(t, rg.URL, port, "")["requests"].([]any)
	if d := reqs[0].(map[string]any)["data"]; d != base64.StdEncoding.EncodeToString([]byte{1, 2, 3, 4}) {
		t.Fatalf("binary data is saved as base64: %v", d)
	}
	// What mb's dry run throws on base64 data is refused.
	for _, pred := range []string{`{"matches":{"data":"AgM="}}`, `{"equals":{"data":"x"},"jsonpath":{"selector":"$.a"}}`} {
		status, body := rg.Do("POST", "/imposters", `{"protocol":"tcp","mode":"binary","stubs":[{"predicates":[`+pred+`],"responses":[{"is":{}}]}]}`)
		if status != http.StatusBadRequest || !strings.Contains(string(body), "not allowed in binary mode") {
			t.Fatalf("%s in binary mode: %d %s", pred, status, body)
		}
	}
	status, body := rg.Do("POST", "/imposters", `{"protocol":"tcp","mode":"hex"}`)
	if status != http.StatusBadRequest || !strings.Contains(string(body), `'mode' must be one of ['text', 'binary']`) {
		t.Fatalf("bad mode: %d %s", status, body)
	}
}

// lengthPrefixed is the docs' Mule-style resolver: a big-endian length in
// the first four bytes covers the whole message.
const lengthPrefixed = `function (requestData, logger) { var messageLength = requestData.readInt32BE(0); return requestData.length === messageLength; }`

func TestTCPEndOfRequestResolver(t *testing.T) {
	rg := gatewaytest.Start(t, "--allowInjection")
	resolver, _ := json.Marshal(lengthPrefixed)
	port := rg.PostImposter(`{"protocol":"tcp","mode":"binary","recordRequests":true,
		"endOfRequestResolver":{"inject":` + string(resolver) + `},
		"stubs":[{"responses":[{"is":{"data":"SGVsbG8sIHdvcmxkIQ=="}}]}]}`)
	msg := make([]byte, 200_000)
	binary.BigEndian.PutUint32(msg, uint32(len(msg)))
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < len(msg); i += 30_000 {
		if _, err := c.Write(msg[i:min(i+30_000, len(msg))]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got, _ := tcpRead(t, c, time.Second); string(got) != "Hello, world!" {
		t.Fatalf("answer: %q", got)
	}
	imp := getImposter(t, rg.URL, port, "")
	reqs := imp["requests"].([]any)
	if len(reqs) != 1 || len(reqs[0].(map[string]any)["data"].(string)) != base64.StdEncoding.EncodedLen(len(msg)) {
		t.Fatalf("one request of the whole message, got %d", len(reqs))
	}
	if imp["endOfRequestResolver"] == nil {
		t.Fatal("endOfRequestResolver is printed, as mb prints it")
	}

	// Without --allowInjection it is refused, as mb refuses it.
	plain := gatewaytest.Start(t)
	status, body := plain.Do("POST", "/imposters", `{"protocol":"tcp","endOfRequestResolver":{"inject":`+string(resolver)+`}}`)
	if status != http.StatusBadRequest || !strings.Contains(string(body), "invalid injection") {
		t.Fatalf("endOfRequestResolver without --allowInjection: %d %s", status, body)
	}
}

func TestTCPInjectAndDecorate(t *testing.T) {
	rg := gatewaytest.Start(t, "--allowInjection")
	port := rg.PostImposter(`{"protocol":"tcp","stubs":[
		{"predicates":[{"equals":{"data":"inject"}}],"responses":[{"inject":"function (config) { return { data: 'from ' + config.request.data }; }"}]},
		{"predicates":[{"equals":{"data":"decorate"}}],"responses":[{"is":{"data":"abc"},
			"behaviors":[{"decorate":"function (config) { config.response.data = config.response.data.toUpperCase() + ' ' + config.request.data; }"}]}]},
		{"predicates":[{"equals":{"data":"throw"}}],"responses":[{"inject":"function () { throw new Error('boom'); }"}]},
		{"predicates":[{"inject":"function (config) { return config.request.data === 'pred'; }"}],"responses":[{"is":{"data":"by predicate"}}]}]}`)
	for in, want := range map[string]string{"inject": "from inject", "decorate": "ABC decorate", "pred": "by predicate"} {
		if got, _ := tcpSend(t, port, []byte(in), 500*time.Millisecond); string(got) != want {
			t.Fatalf("%s: %q, want %q", in, got, want)
		}
	}
	got, closed := tcpSend(t, port, []byte("throw"), 500*time.Millisecond)
	var e struct {
		Errors []struct{ Code, Data string } `json:"errors"`
	}
	if json.Unmarshal(got, &e) != nil || len(e.Errors) != 1 || e.Errors[0].Code != "invalid injection" || e.Errors[0].Data != "boom" || closed {
		t.Fatalf("a failing injection writes mb's error and keeps the connection: %q closed=%v", got, closed)
	}
}

// echoServer is a raw tcp upstream answering "echo:" and what it read.
func echoServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					k, err := c.Read(buf)
					if err != nil {
						return
					}
					_, _ = c.Write(append([]byte("echo:"), buf[:k]...))
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestTCPProxyRecords(t *testing.T) {
	rg := gatewaytest.Start(t)
	up := echoServer(t)
	to := fmt.Sprintf("tcp://127.0.0.1:%d", up)
	once := rg.PostImposter(`{"protocol":"tcp","stubs":[{"responses":[{"proxy":{"to":"` + to + `",
		"predicateGenerators":[{"matches":{"data":true}}]}}]}]}`)
	always := rg.PostImposter(`{"protocol":"tcp","stubs":[{"responses":[{"proxy":{"to":"` + to + `","mode":"proxyAlways",
		"predicateGenerators":[{"matches":{"data":true}}]}}]}]}`)
	transparent := rg.PostImposter(`{"protocol":"tcp","stubs":[{"responses":[{"proxy":{"to":"` + to + `","mode":"proxyTransparent"}}]}]}`)
	for _, p := range []int{once, always, transparent} {
		for _, in := range []string{"one", "one", "two"} {
			if got, _ := tcpSend(t, p, []byte(in), 300*time.Millisecond); string(got) != "echo:"+in {
				t.Fatalf("proxy on %d, %s: %q", p, in, got)
			}
		}
	}
	stubs := func(port int) []any { return getImposter(t, rg.URL, port, "?replayable=true")["stubs"].([]any) }
	if s := stubs(once); len(s) != 3 {
		t.Fatalf("proxyOnce records one stub per signature before the proxy: %v", s)
	}
	rec := stubs(once)[0].(map[string]any)
	pred := rec["predicates"].([]any)[0].(map[string]any)
	is := rec["responses"].([]any)[0].(map[string]any)["is"].(map[string]any)
	if pred["deepEquals"].(map[string]any)["data"] != "one" || is["data"] != "echo:one" {
		t.Fatalf("recorded stub: %v", rec)
	}
	if s := stubs(always); len(s) != 3 || len(s[1].(map[string]any)["responses"].([]any)) != 2 {
		t.Fatalf("proxyAlways appends responses to the recorded stub after the proxy: %v", s)
	}
	if s := stubs(transparent); len(s) != 1 {
		t.Fatalf("proxyTransparent records nothing: %v", s)
	}
	// An unreachable upstream answers mb's error on the connection.
	bad := rg.PostImposter(`{"protocol":"tcp","stubs":[{"responses":[{"proxy":{"to":"tcp://127.0.0.1:1"}}]}]}`)
	if got, _ := tcpSend(t, bad, []byte("x"), time.Second); !strings.Contains(string(got), `Unable to connect to \"tcp://127.0.0.1:1\"`) {
		t.Fatalf("unreachable upstream: %q", got)
	}
}

// TestImposterStartStopRace creates a tcp or smtp imposter and deletes it
// at once, many times, then checks the process still stops on SIGTERM: a
// stop that misses a listener would hang there.
func TestImposterStartStopRace(t *testing.T) {
	for _, proto := range []string{"tcp", "smtp"} {
		t.Run(proto, func(t *testing.T) {
			rg := gatewaytest.Start(t)
			deadline := time.Now().Add(30 * time.Second)
			for i := 0; i < 100 && time.Now().Before(deadline); i++ {
				port := rg.PostImposter(`{"protocol":"` + proto + `"}`)
				if i%10 == 0 {
					// Some stops find a connection open.
					c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
					if err == nil {
						defer c.Close()
					}
				}
				if status, body := rg.Do("DELETE", fmt.Sprintf("/imposters/%d", port), nil); status != http.StatusOK {
					t.Fatalf("DELETE %d: %d %s", port, status, body)
				}
			}
			rg.Stop()
		})
	}
}

// stable drops what differs between any two runs (addresses, times, ports,
// links) from an imposter's JSON.
func stable(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			switch k {
			case "requestFrom", "ip", "timestamp", "processingTime", "_proxyResponseTime", "port", "_links":
				continue
			}
			out[k] = stable(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = stable(e)
		}
		return out
	}
	return v
}

func postTo(t *testing.T, admin, body string) int {
	t.Helper()
	status, out := gatewaytest.Do(t, "POST", admin+"/imposters", body, nil)
	if status != http.StatusCreated {
		t.Fatalf("POST %s/imposters: %d %s", admin, status, out)
	}
	var m struct{ Port int }
	_ = json.Unmarshal(out, &m)
	return m.Port
}

// TestTCPMatchesMountebank sends the same tcp conversations to mb 2.9.1 and
// riftgate and compares the bytes answered and the stored imposter.
func TestTCPMatchesMountebank(t *testing.T) {
	mb := mountebank(t, "--debug")
	rg := gatewaytest.Start(t, "--allowInjection", "--debug")
	cases := []struct {
		name     string
		imposter string
		sends    [][]byte
	}{
		{"text predicates and defaults", `"defaultResponse":{"data":"dflt"},"stubs":[
			{"predicates":[{"equals":{"data":"A"}}],"responses":[{"is":{"data":"one"}},{"is":{"data":"two"}}]},
			{"predicates":[{"not":{"contains":{"data":"x"}}},{"endsWith":{"data":"Z"}}],"responses":[{"is":{"data":"ends"}}]},
			{"predicates":[{"matches":{"data":"^n\\d+$"}}],"responses":[{"is":{"data":"number"}}]},
			{"predicates":[{"exists":{"data":true}}],"responses":[{"is":{"data":""}}]}]`,
			[][]byte{[]byte("a"), []byte("a"), []byte("a"), []byte("abZ"), []byte("axZ"), []byte("N12"), []byte("q")}},
		{"binary", `"mode":"binary","stubs":[
			{"predicates":[{"contains":{"data":"AgM="}}],"responses":[{"is":{"data":"AQI="}}]},
			{"predicates":[{"startsWith":{"data":"/w=="}}],"responses":[{"is":{"data":"AA=="}}]}]`,
			[][]byte{{1, 2, 3, 4}, {0xff, 1}, {7}}},
		{"inject and behaviors", `"stubs":[
			{"predicates":[{"equals":{"data":"i"}}],"responses":[{"inject":"function (config) { return { data: config.request.data + '!' }; }"}]},
			{"predicates":[{"equals":{"data":"c"}}],"responses":[{"is":{"data":"<${X}>"},"behaviors":[{"copy":{"from":"data","into":"${X}","using":{"method":"regex","selector":"."}}}]}]},
			{"predicates":[{"equals":{"data":"d"}}],"responses":[{"is":{"data":"lower"},"behaviors":[{"decorate":"function (config) { config.response.data = config.response.data.toUpperCase(); }"}]}]}]`,
			[][]byte{[]byte("i"), []byte("c"), []byte("d")}},
		// mb writes Buffer.from(data || defaultData): a falsy data takes the
		// default, an array one byte an element, anything else Node's error.
		{"data that is not a string", `"defaultResponse":{"data":"dflt"},"stubs":[
			{"predicates":[{"equals":{"data":"0"}}],"responses":[{"is":{"data":0}}]},
			{"predicates":[{"equals":{"data":"f"}}],"responses":[{"is":{"data":false}}]},
			{"predicates":[{"equals":{"data":"n"}}],"responses":[{"is":{"data":null}}]},
			{"predicates":[{"equals":{"data":"o"}}],"responses":[{"is":{"data":{"a":1}}}]},
			{"predicates":[{"equals":{"data":"5"}}],"responses":[{"is":{"data":5}}]},
			{"predicates":[{"equals":{"data":"a"}}],"responses":[{"is":{"data":[1,"x",257,-1,true,"7"]}}]},
			{"predicates":[{"equals":{"data":"i"}}],"responses":[{"inject":"function () { return { data: 0 }; }"}]},
			{"predicates":[{"equals":{"data":"d"}}],"responses":[{"is":{"data":"x"},"behaviors":[{"decorate":"function (config) { config.response.data = false; }"}]}]},
			{"predicates":[{"equals":{"data":"D"}}],"responses":[{"is":{"data":"x"},"behaviors":[{"decorate":"function (config) { config.response.data = { a: 1 }; }"}]}]}]`,
			[][]byte{[]byte("0"), []byte("f"), []byte("n"), []byte("o"), []byte("5"), []byte("a"), []byte("i"), []byte("d"), []byte("D")}},
		// The defaultResponse's data is the last resort: only "" is nothing.
		{"a defaultResponse data that is not a string", `"defaultResponse":{"data":0},"stubs":[
			{"predicates":[{"equals":{"data":"e"}}],"responses":[{"is":{"data":""}}]},
			{"predicates":[{"equals":{"data":"a"}}],"responses":[{"is":{"data":"A"}}]}]`,
			[][]byte{[]byte("e"), []byte("a"), []byte("q")}},
		// A truthy data can be no bytes: then nothing is written, and no
		// default; -0 and 0.0 are as falsy as 0.
		{"truthy data of no bytes", `"defaultResponse":{"data":"dflt"},"stubs":[
			{"predicates":[{"equals":{"data":"a"}}],"responses":[{"is":{"data":[]}}]},
			{"predicates":[{"equals":{"data":"i"}}],"responses":[{"inject":"function () { return { data: [] }; }"}]},
			{"predicates":[{"equals":{"data":"d"}}],"responses":[{"is":{"data":"x"},"behaviors":[{"decorate":"function (config) { config.response.data = []; }"}]}]},
			{"predicates":[{"equals":{"data":"w"}}],"responses":[{"is":{"data":[]},"behaviors":[{"wait":1}]}]},
			{"predicates":[{"equals":{"data":"z"}}],"responses":[{"is":{"data":-0}}]},
			{"predicates":[{"equals":{"data":"Z"}}],"responses":[{"is":{"data":0.0}}]}]`,
			[][]byte{[]byte("a"), []byte("i"), []byte("d"), []byte("w"), []byte("z"), []byte("Z")}},
		{"binary data of no bytes", `"mode":"binary","defaultResponse":{"data":"ZGZsdA=="},"stubs":[
			{"predicates":[{"equals":{"data":"AQ=="}}],"responses":[{"is":{"data":"="}}]},
			{"predicates":[{"equals":{"data":"Ag=="}}],"responses":[{"is":{"data":""}}]}]`,
			[][]byte{{1}, {2}}},
		// copy replaces in a binary data's base64 text, then decodes it.
		{"copy into binary data", `"mode":"binary","defaultResponse":{"data":"RA=="},"stubs":[
			{"predicates":[{"equals":{"data":"YQ=="}}],"responses":[{"is":{"data":"${X}"},"behaviors":[{"copy":{"from":"data","into":"${X}","using":{"method":"regex","selector":".+"}}}]}]},
			{"predicates":[{"equals":{"data":"Yg=="}}],"responses":[{"is":{"data":"QUJD${X}"},"behaviors":[{"copy":{"from":"data","into":"${X}","using":{"method":"regex","selector":"zzz"}}}]}]},
			{"predicates":[{"equals":{"data":"Yw=="}}],"responses":[{"is":{"data":"${X}="},"behaviors":[{"copy":{"from":"data","into":"${X}","using":{"method":"regex","selector":"zzz"}}}]}]}]`,
			[][]byte{[]byte("a"), []byte("b"), []byte("c")}},
		// A match shows the response object as mb holds it, other fields
		// and all, and a decorator sees it so.
		{"the response object as mb holds it", `"stubs":[
			{"predicates":[{"equals":{"data":"e"}}],"responses":[{"is":{"data":"x","foo":1}}]},
			{"predicates":[{"equals":{"data":"i"}}],"responses":[{"inject":"function () { return {}; }"}]},
			{"predicates":[{"equals":{"data":"j"}}],"responses":[{"inject":"function () { return { data: 'x', foo: [1] }; }"}]},
			{"predicates":[{"equals":{"data":"d"}}],"responses":[{"is":{"data":[65,66],"foo":1},"behaviors":[{"decorate":"function (config) { config.response.data = JSON.stringify(config.response); config.response.bar = 2; }"}]}]},
			{"predicates":[{"equals":{"data":"s"}}],"responses":[{"is":{}}]}]`,
			[][]byte{[]byte("e"), []byte("i"), []byte("j"), []byte("d"), []byte("s")}},
		{"a binary response object as mb holds it", `"mode":"binary","stubs":[
			{"predicates":[{"equals":{"data":"YQ=="}}],"responses":[{"is":{"data":"QQ"},"behaviors":[{"decorate":"function (config) { config.response.data = config.response.data + config.response.data; }"}]}]},
			{"predicates":[{"equals":{"data":"Yg=="}}],"responses":[{"is":{"data":"${X}"},"behaviors":[{"copy":{"from":"data","into":"${X}","using":{"method":"regex","selector":".+"}}},{"decorate":"function (config) { config.response.data = config.response.data + 'RA=='; }"}]}]}]`,
			[][]byte{[]byte("a"), []byte("b")}},
		{"a defaultResponse without data", `"defaultResponse":{},"stubs":[{"responses":[{"is":{"data":null}}]}]`,
			[][]byte{[]byte("x")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			def := `{"protocol":"tcp","recordRequests":true,` + c.imposter + `}`
			mp, rp := postTo(t, mb, def), postTo(t, rg.URL, def)
			for _, s := range c.sends {
				want, wantClosed := tcpSend(t, mp, s, 300*time.Millisecond)
				got, gotClosed := tcpSend(t, rp, s, 300*time.Millisecond)
				if !bytes.Equal(got, want) || gotClosed != wantClosed {
					t.Fatalf("%q: riftgate %q (closed %v), mb %q (closed %v)", s, got, gotClosed, want, wantClosed)
				}
			}
			for _, q := range []string{"", "?replayable=true"} {
				want, got := stable(getImposter(t, mb, mp, q)), stable(getImposter(t, rg.URL, rp, q))
				if !reflect.DeepEqual(got, want) {
					wb, _ := json.MarshalIndent(want, "", " ")
					gb, _ := json.MarshalIndent(got, "", " ")
					t.Fatalf("GET imposter%s:\nriftgate %s\nmb %s", q, gb, wb)
				}
			}
		})
	}
}

func TestTCPProxyMatchesMountebank(t *testing.T) {
	mb := mountebank(t)
	rg := gatewaytest.Start(t)
	up := echoServer(t)
	for _, mode := range []string{"proxyOnce", "proxyAlways"} {
		def := fmt.Sprintf(`{"protocol":"tcp","stubs":[{"responses":[{"proxy":{"to":"tcp://127.0.0.1:%d","mode":%q,
			"predicateGenerators":[{"matches":{"data":true}}]}}]}]}`, up, mode)
		mp, rp := postTo(t, mb, def), postTo(t, rg.URL, def)
		for _, s := range []string{"a", "b", "a"} {
			want, _ := tcpSend(t, mp, []byte(s), 300*time.Millisecond)
			got, _ := tcpSend(t, rp, []byte(s), 300*time.Millisecond)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s %q: riftgate %q, mb %q", mode, s, got, want)
			}
		}
		want, got := stable(getImposter(t, mb, mp, "")), stable(getImposter(t, rg.URL, rp, ""))
		if !reflect.DeepEqual(got, want) {
			wb, _ := json.MarshalIndent(want, "", " ")
			gb, _ := json.MarshalIndent(got, "", " ")
			t.Fatalf("%s recording:\nriftgate %s\nmb %s", mode, gb, wb)
		}
	}
}

// TestTCPAndSMTPIPWhitelist holds tcp and smtp imposters to --ipWhitelist
// at accept time: a refused address is closed before it is answered (or,
// for smtp, greeted).
func TestTCPAndSMTPIPWhitelist(t *testing.T) {
	rg := gatewaytest.Start(t, "--ipWhitelist", "127.0.0.1")
	tcpPort := rg.PostImposter(`{"protocol":"tcp","stubs":[{"responses":[{"is":{"data":"ok"}}]}]}`)
	smtpPort := rg.PostImposter(`{"protocol":"smtp"}`)
	from := func(ip string, port int, send string) ([]byte, bool) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 2 * time.Second}
		c, err := d.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if send != "" {
			_, _ = c.Write([]byte(send))
		}
		return tcpRead(t, c, 500*time.Millisecond)
	}
	if got, _ := from("127.0.0.1", tcpPort, "x"); string(got) != "ok" {
		t.Fatalf("allowed tcp client: %q", got)
	}
	if got, closed := from("127.0.0.2", tcpPort, "x"); len(got) != 0 || !closed {
		t.Fatalf("refused tcp client: %q closed=%v", got, closed)
	}
	if got, _ := from("127.0.0.1", smtpPort, ""); !strings.HasPrefix(string(got), "220 ") {
		t.Fatalf("allowed smtp client: %q", got)
	}
	if got, closed := from("127.0.0.2", smtpPort, ""); len(got) != 0 || !closed {
		t.Fatalf("refused smtp client: %q closed=%v", got, closed)
	}
}
