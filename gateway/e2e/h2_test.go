package e2e_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2cClient speaks HTTP/2 with prior knowledge over plaintext, as
// `curl --http2-prior-knowledge` does.
func h2cClient() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Protocols: p}}
}

// h1Client speaks HTTP/1.1 only.
func h1Client() *http.Client {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Protocols: p,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
}

// h2TLSClient offers h2 by ALPN over TLS.
func h2TLSClient() *http.Client {
	p := new(http.Protocols)
	p.SetHTTP2(true)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Protocols: p,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
}

type answer struct {
	proto, body string
	status      int
	header      http.Header
}

func ask(t *testing.T, c *http.Client, method, url, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", "h2-test")
	req.Header.Set("X-Case", "Mixed Value")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	h := resp.Header.Clone()
	for _, name := range []string{"Date", "Connection"} {
		h.Del(name) // the clock's, and HTTP/1.1's own
	}
	return answer{proto: resp.Proto, body: string(b), status: resp.StatusCode, header: h}
}

// An HTTP/2 request gets the answer the same HTTP/1.1 request gets, from
// every kind of response, and is recorded as the HTTP/1.1 one is.
func TestH2SameAnswersAsHTTP1(t *testing.T) {
	rg := gatewaytest.Start(t, "--allowInjection")
	upstream := rg.PostImposter(`{"protocol":"http","stubs":[{"responses":[{"is":{"statusCode":203,"headers":{"X-Up":"yes"},"body":"from upstream"}}]}]}`)
	port := rg.PostImposter(fmt.Sprintf(`{"protocol":"http","recordRequests":true,"allowCORS":true,"stubs":[
		{"predicates":[{"equals":{"path":"/static","query":{"q":"1"},"headers":{"x-case":"mixed value"}}}],
		 "responses":[{"is":{"statusCode":201,"headers":{"X-A":"b","Content-Type":"text/plain"},"body":"static"}}]},
		{"predicates":[{"equals":{"path":"/copy"}}],
		 "responses":[{"is":{"body":"id=${ID}"},"_behaviors":{"copy":{"from":{"query":"id"},"into":"${ID}","using":{"method":"regex","selector":".+"}}}}]},
		{"predicates":[{"equals":{"path":"/inject","method":"POST"}}],
		 "responses":[{"inject":"function (config) { return {statusCode: 202, body: config.request.body.toUpperCase()}; }"}]},
		{"predicates":[{"equals":{"path":"/proxy"}}],
		 "responses":[{"proxy":{"to":"http://127.0.0.1:%d","mode":"proxyAlways"}}]},
		{"predicates":[{"equals":{"path":"/cycle"}}],
		 "responses":[{"is":{"body":"one"}},{"is":{"body":"two"}}]}]}`, upstream))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	h1, h2 := h1Client(), h2cClient()
	for _, tt := range []struct{ method, path, body string }{
		{"GET", "/static?q=1", ""},
		{"GET", "/copy?id=42", ""},
		{"POST", "/inject", "shout"},
		{"GET", "/proxy", ""},
		{"GET", "/cycle", ""},
		{"GET", "/none", ""},
	} {
		a1 := ask(t, h1, tt.method, base+tt.path, tt.body)
		a2 := ask(t, h2, tt.method, base+tt.path, tt.body)
		if a1.proto != "HTTP/1.1" || a2.proto != "HTTP/2.0" {
			t.Fatalf("%s: protocols %s and %s", tt.path, a1.proto, a2.proto)
		}
		if tt.path == "/cycle" {
			if a1.body != "one" || a2.body != "two" {
				t.Errorf("one cycle across both protocols: %q then %q", a1.body, a2.body)
			}
			continue
		}
		if a1.status != a2.status || a1.body != a2.body || !sameHeader(a1.header, a2.header) {
			t.Errorf("%s %s:\nHTTP/1.1 %d %v %q\nHTTP/2   %d %v %q", tt.method, tt.path,
				a1.status, a1.header, a1.body, a2.status, a2.header, a2.body)
		}
	}
	if got := ask(t, h2, "GET", base+"/static?q=1", ""); got.status != 201 || got.body != "static" || got.header.Get("X-A") != "b" {
		t.Errorf("static over HTTP/2: %+v", got)
	}
	if got := ask(t, h2, "GET", base+"/proxy", ""); got.status != 203 || got.body != "from upstream" {
		t.Errorf("proxy over HTTP/2: %+v", got)
	}

	// The recorded requests come in pairs, HTTP/1.1 then HTTP/2, and each
	// pair is the same request.
	var imp struct {
		Requests []map[string]any `json:"requests"`
	}
	_, body := rg.Do("GET", fmt.Sprintf("/imposters/%d", port), nil)
	if err := json.Unmarshal(body, &imp); err != nil {
		t.Fatal(err)
	}
	if len(imp.Requests) != 14 {
		t.Fatalf("recorded %d requests, want 14", len(imp.Requests))
	}
	for i := 0; i < 12; i += 2 {
		a, b := imp.Requests[i], imp.Requests[i+1]
		for _, f := range []string{"method", "path", "query", "body", "ip"} {
			if fmt.Sprint(a[f]) != fmt.Sprint(b[f]) {
				t.Errorf("request %d: %s %v over HTTP/1.1, %v over HTTP/2", i/2, f, a[f], b[f])
			}
		}
		if ha, hb := lowerKeys(a["headers"]), lowerKeys(b["headers"]); ha != hb {
			t.Errorf("request %d: headers\n%s over HTTP/1.1\n%s over HTTP/2", i/2, ha, hb)
		}
	}
}

// sameHeader compares two answers' headers, names in any case.
// sameHeader compares two answers' headers but their framing: HTTP/1.1
// sends mb's chunks where HTTP/2 frames carry a length.
func sameHeader(a, b http.Header) bool {
	a, b = a.Clone(), b.Clone()
	a.Del("Content-Length")
	b.Del("Content-Length")
	return lowerKeys(map[string][]string(a)) == lowerKeys(map[string][]string(b))
}

// lowerKeys renders a header object with its names in lower case, sorted.
func lowerKeys(h any) string {
	var lines []string
	switch h := h.(type) {
	case map[string]any:
		for k, v := range h {
			lines = append(lines, strings.ToLower(k)+": "+fmt.Sprint(v))
		}
	case map[string][]string:
		for k, v := range h {
			lines = append(lines, strings.ToLower(k)+": "+strings.Join(v, ","))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// curl, the client users reach for: prior knowledge, Upgrade, and ALPN
// over TLS.
func TestH2Curl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is needed (apt-get install curl): ", err)
	}
	rg := gatewaytest.Start(t)
	stubs := `"stubs":[{"responses":[{"is":{"statusCode":201,"headers":{"X-A":"b"},"body":"hello"}}]}]`
	plain := rg.PostImposter(`{"protocol":"http","recordRequests":true,` + stubs + `}`)
	secure := rg.PostImposter(`{"protocol":"https",` + stubs + `}`)
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"prior knowledge", []string{"--http2-prior-knowledge", fmt.Sprintf("http://127.0.0.1:%d/a", plain)}},
		{"upgrade", []string{"--http2", "-d", "up", fmt.Sprintf("http://127.0.0.1:%d/b", plain)}},
		{"alpn", []string{"--http2", "-k", fmt.Sprintf("https://127.0.0.1:%d/c", secure)}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := exec.CommandContext(ctx, curl, append([]string{"-sS", "-i"}, tt.args...)...).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n%s", tt.name, err, out)
		}
		s := string(out)
		if tt.name == "upgrade" && !strings.HasPrefix(s, "HTTP/1.1 101") {
			t.Errorf("%s: no 101 first:\n%s", tt.name, s)
		}
		if !strings.Contains(s, "HTTP/2 201") || !strings.Contains(s, "x-a: b") || !strings.HasSuffix(s, "hello") {
			t.Errorf("%s:\n%s", tt.name, s)
		}
	}
	var imp struct {
		Requests []struct {
			Method, Path, Body string
			Headers            map[string]string
		} `json:"requests"`
	}
	_, body := rg.Do("GET", fmt.Sprintf("/imposters/%d", plain), nil)
	if err := json.Unmarshal(body, &imp); err != nil || len(imp.Requests) != 2 {
		t.Fatalf("recorded: %v %s", err, body)
	}
	up := imp.Requests[1]
	if up.Method != "POST" || up.Path != "/b" || up.Body != "up" || up.Headers["Host"] != fmt.Sprintf("127.0.0.1:%d", plain) {
		t.Errorf("the upgraded request: %+v", up)
	}
	for name := range up.Headers {
		if strings.EqualFold(name, "Upgrade") || strings.EqualFold(name, "HTTP2-Settings") {
			t.Errorf("the upgrade's own header %s is recorded", name)
		}
	}
}

// Go's client over TLS negotiates h2; an HTTP/1.1 client on the same port
// still gets HTTP/1.1.
func TestH2OverTLS(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"https","stubs":[{"responses":[{"is":{"body":"secure"}}]}]}`)
	url := fmt.Sprintf("https://127.0.0.1:%d/", port)
	if a := ask(t, h2TLSClient(), "GET", url, ""); a.proto != "HTTP/2.0" || a.body != "secure" {
		t.Errorf("h2: %+v", a)
	}
	if a := ask(t, h1Client(), "GET", url, ""); a.proto != "HTTP/1.1" || a.body != "secure" {
		t.Errorf("http/1.1: %+v", a)
	}
}

// A fault breaks the HTTP/2 connection, as it breaks an HTTP/1.1 one.
func TestH2Faults(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"path":"/reset"}}],"responses":[{"fault":"CONNECTION_RESET_BY_PEER"}]},
		{"predicates":[{"equals":{"path":"/garbage"}}],"responses":[{"fault":"RANDOM_DATA_THEN_CLOSE"}]}]}`)
	for _, path := range []string{"/reset", "/garbage"} {
		resp, err := h2cClient().Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: answered %d", path, resp.StatusCode)
		}
	}
	if a := ask(t, h2cClient(), "GET", fmt.Sprintf("http://127.0.0.1:%d/other", port), ""); a.status != 200 {
		t.Errorf("after the faults: %+v", a)
	}
}

// h2conn opens a raw HTTP/2 connection: the preface and an empty
// SETTINGS frame sent, and a framer to go on with.
func h2conn(t *testing.T, port int) (net.Conn, *http2.Framer) {
	t.Helper()
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return c, fr
}

// untilClosed reads frames until the server ends the connection, and
// returns the last GOAWAY's code, or -1 without one.
func untilClosed(fr *http2.Framer) (goaway int, frames int) {
	goaway = -1
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return goaway, frames
		}
		frames++
		if g, ok := f.(*http2.GoAwayFrame); ok {
			goaway = int(g.ErrCode)
		}
	}
}

// Hostile HTTP/2 costs the connection it came on, never the process nor
// the other clients.
func TestH2HostileInput(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"http","stubs":[{"responses":[{"is":{"body":"fine"}}]}]}`)
	headerBlock := func(extra int) []byte {
		var b bytes.Buffer
		enc := hpack.NewEncoder(&b)
		for _, f := range []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"},
			{Name: ":authority", Value: "x"}, {Name: ":path", Value: "/"}} {
			_ = enc.WriteField(f)
		}
		for i := 0; extra > 0; i++ {
			_ = enc.WriteField(hpack.HeaderField{Name: fmt.Sprintf("x-big-%d", i), Value: strings.Repeat("v", 4000)})
			extra -= 4000
		}
		return b.Bytes()
	}

	t.Run("garbage after the preface", func(t *testing.T) {
		c, fr := h2conn(t, port)
		_, _ = c.Write(bytes.Repeat([]byte{0xff, 0x00, 0x13, 0x37}, 4096))
		if code, _ := untilClosed(fr); code == int(http2.ErrCodeNo) {
			t.Errorf("garbage ended the connection without an error code")
		}
	})
	t.Run("a header block past the limit", func(t *testing.T) {
		_, fr := h2conn(t, port)
		block := headerBlock(1 << 20)
		// HEADERS then CONTINUATION frames of 16 KiB, the default frame size.
		first, rest := block[:16384], block[16384:]
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndStream: true}); err != nil {
			t.Fatal(err)
		}
		for len(rest) > 0 {
			n := min(len(rest), 16384)
			if err := fr.WriteContinuation(1, n == len(rest), rest[:n]); err != nil {
				break // the server has had enough and closed
			}
			rest = rest[n:]
		}
		// Go's server answers 431 on the stream or closes the
		// connection: either way no 200.
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if h, ok := f.(*http2.HeadersFrame); ok && h.StreamID == 1 {
				fields, _ := hpack.NewDecoder(4096, nil).DecodeFull(h.HeaderBlockFragment())
				for _, f := range fields {
					if f.Name == ":status" && f.Value == "200" {
						t.Fatalf("a 1 MiB header block was answered 200")
					}
				}
				return
			}
		}
	})
	t.Run("many streams never read", func(t *testing.T) {
		c, fr := h2conn(t, port)
		block := headerBlock(0)
		refused := 0
		for id := uint32(1); id < 2*1000; id += 2 {
			// Half-open streams: no END_STREAM, the request never ends.
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true}); err != nil {
				break
			}
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				break
			}
			if r, ok := f.(*http2.RSTStreamFrame); ok && r.ErrCode == http2.ErrCodeRefusedStream {
				refused++
			}
			if _, ok := f.(*http2.GoAwayFrame); ok {
				refused++
				break
			}
		}
		if refused == 0 {
			t.Errorf("1000 concurrent streams were all taken")
		}
	})
	// The process and the imposter are still there, on both protocols.
	for _, c := range []*http.Client{h1Client(), h2cClient()} {
		if a := ask(t, c, "GET", fmt.Sprintf("http://127.0.0.1:%d/", port), ""); a.body != "fine" {
			t.Errorf("after hostile input, %s: %+v", a.proto, a)
		}
	}
	if status, _ := rg.Do("GET", "/imposters", nil); status != 200 {
		t.Errorf("the admin API answers %d", status)
	}
}

// Deleting an imposter closes its HTTP/2 connections rather than waiting
// for them.
func TestH2StopClosesConnections(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"http","stubs":[{"responses":[{"is":{"body":"x"}}]}]}`)
	c, fr := h2conn(t, port)
	_ = c
	start := time.Now()
	if status, body := rg.Do("DELETE", fmt.Sprintf("/imposters/%d", port), nil); status != 200 {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("DELETE took %v with an HTTP/2 connection open", d)
	}
	untilClosed(fr) // the connection ends (or the test's deadline fails it)
}

// A flow is the same flow whichever protocol its requests come over: a
// scenario's state moved over HTTP/1.1 is read over HTTP/2, and back.
func TestH2SharesFlowsWithHTTP1(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"http","_rift":{"flowState":{"flowIdSource":"header:X-Flow-Id","durability":"memory"}},
		"defaultResponse":{"statusCode":404},"stubs":[
		{"scenarioName":"session","requiredScenarioState":"Started","newScenarioState":"in",
		 "predicates":[{"equals":{"method":"POST","path":"/login"}}],"responses":[{"is":{"statusCode":200,"body":"in"}}]},
		{"scenarioName":"session","requiredScenarioState":"in","newScenarioState":"Started",
		 "predicates":[{"equals":{"method":"POST","path":"/logout"}}],"responses":[{"is":{"statusCode":200,"body":"out"}}]}]}`)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	send := func(c *http.Client, path, flow string) int {
		req, _ := http.NewRequest("POST", base+path, nil)
		req.Header.Set("X-Flow-Id", flow)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	h1, h2 := h1Client(), h2cClient()
	for i, step := range []struct {
		c          *http.Client
		path, flow string
		want       int
	}{
		{h1, "/login", "a", 200},
		{h2, "/login", "a", 404}, // already in, over the other protocol
		{h2, "/login", "b", 200}, // another flow
		{h2, "/logout", "a", 200},
		{h1, "/logout", "a", 404},
		{h1, "/logout", "b", 200},
	} {
		if got := send(step.c, step.path, step.flow); got != step.want {
			t.Errorf("step %d: %s %s answered %d, want %d", i, step.path, step.flow, got, step.want)
		}
	}
}
