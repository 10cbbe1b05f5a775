package loadtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The systems compared, in the order the report lists them.
const (
	sysRift = "riftgate"
	sysRaw  = "raw fasthttp"
	sysMB   = "mb 2.9.1"
	// sysRawProxy is a raw fasthttp reverse proxy (riftload hello
	// -proxy-port) to the raw server: the limit of proxying.
	sysRawProxy = "raw fasthttp proxy"
	// sysRiftDurable is riftgate on --datadir in the recording cases,
	// where sysRift keeps its configuration in memory as mb does.
	sysRiftDurable = "riftgate, --datadir"
)

// benchCase is one row group of the report: an imposter posted to riftgate
// and mb (the raw server answers anything), the request sequence that loads
// it, and a functional probe.
type benchCase struct {
	id, title string
	systems   []string
	imposter  func(port int) string
	scenario  *Scenario
	probe     []probeStep
	// halfOf, when set, makes this an open-loop case at half the
	// throughput measured for case halfOf in the same round.
	halfOf string
	// wasm is the module a case needs ("" none); missing means not available.
	wasm string
	// tcp makes the case a tcp one: its imposter is a tcp imposter, the
	// raw server is the raw tcp server, and each request is this exchange
	// (which is also the probe).
	tcp *TCPExchange
	// ws makes the case a WebSocket one, likewise: a ws imposter, the raw
	// Go WebSocket echo server, and each request this round trip.
	ws *WSExchange
	// grpc makes the case a gRPC one, likewise: a grpc imposter, the raw
	// grpc-go server, and each request this call, whose answer must be
	// grpcWant (JSON).
	grpc     *GRPCExchange
	grpcWant string
	// h2 loads the case's http imposter over HTTP/2 (h2c).
	h2 bool
	// vsStatic shows riftgate's throughput as a multiple of its own on the
	// static case in the same round, with no target.
	vsStatic bool
	// Targets: riftgate's throughput as a multiple of raw's and mb's, and
	// (open loop) its p99 bound in ms; the cluster's as a multiple of one
	// node's. Zero means no target.
	rawTarget, mbTarget, p99Target, clusterTarget float64
	// staticTarget is riftgate's throughput as a multiple of its own on the
	// static case in the same round. Zero means no target.
	staticTarget float64
	// long makes a recording case (issue 34): each system is measured
	// alone, for -record-d, on an imposter posted for that measurement, so
	// that what it records grows over one long run; the report compares
	// the rate in its first and last window (-record-window).
	long bool
	// flatTarget is the rate in the last window over the rate in the
	// first, riftgate's; zero means no target.
	flatTarget float64
	// relTo and relTarget: riftgate's throughput as a multiple of its own
	// on case relTo in the same round.
	relTo     string
	relTarget float64
	// proxyTarget is riftgate's throughput as a multiple of the raw
	// fasthttp proxy's (sysRawProxy).
	proxyTarget float64
	// recordedTarget is the number of stubs the imposter must hold at the
	// end of riftgate's measurement (read back with GET /imposters/:id).
	recordedTarget int
}

// keepAlive is in every stub response on both sides: mb closes connections
// by default, which would measure TCP handshakes instead (FACTS.md).
const keepAlive = `"headers":{"Connection":"keep-alive","Content-Type":"text/plain"}`

func isResponse(body string) string {
	return fmt.Sprintf(`{"is":{"statusCode":200,%s,"body":%q}}`, keepAlive, body)
}

// imposter wraps stubs; unmatched requests get 404, so a system that does
// not match as intended fails the probe instead of answering mb's empty 200.
func imposter(port int, extra string, stubs []string) string {
	return fmt.Sprintf(`{"protocol":"http","port":%d,"name":"bench",%s"defaultResponse":{"statusCode":404,%s,"body":"no match"},"stubs":[%s]}`,
		port, extra, keepAlive, strings.Join(stubs, ","))
}

func get(path string) *Scenario {
	return &Scenario{NoFlowHeader: true, Steps: []Step{{Method: "GET", Path: path, ExpectStatus: 200}}}
}

// findWasm returns the counter example built by the Makefile, or "".
func findWasm(dir string) string {
	for _, name := range []string{"examples/counter-wat.wasm", "examples/counter-go.wasm"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			if abs, err := filepath.Abs(p); err == nil {
				return abs
			}
		}
	}
	return ""
}

func benchCases(wasmDir, upstream string) []benchCase {
	all := []string{sysRift, sysRaw, sysMB}
	both := []string{sysRift, sysMB}
	cases := []benchCase{
		{
			id: "static", title: "static `is` stub", systems: all,
			imposter: func(p int) string {
				return imposter(p, "", []string{`{"responses":[` + isResponse("hello") + `]}`})
			},
			scenario:  get("/hello"),
			probe:     []probeStep{{method: "GET", path: "/hello", status: 200, body: "hello"}},
			rawTarget: 0.9, mbTarget: 12,
		},
		{
			// Right after the peak it halves, so that both see the same
			// machine and the same process state.
			id: "static-half", title: "static stub, open loop at 50% of its peak: p99", systems: all,
			halfOf: "static", p99Target: 2,
		},
		{
			id: "stubs50", title: "50 stubs, only the last matching", systems: all,
			imposter: func(p int) string {
				var stubs []string
				for i := range 50 {
					stubs = append(stubs, fmt.Sprintf(`{"predicates":[{"equals":{"method":"GET","path":"/s/%d"}}],"responses":[%s]}`, i, isResponse(fmt.Sprint("stub ", i))))
				}
				return imposter(p, "", stubs)
			},
			scenario:  get("/s/49"),
			probe:     []probeStep{{method: "GET", path: "/s/49", status: 200, body: "stub 49"}},
			rawTarget: 0.85, mbTarget: 40,
		},
		{
			id: "stubs300", title: "300 stubs, deep path, the last matching", systems: all,
			imposter: func(p int) string {
				var stubs []string
				for i := range 300 {
					stubs = append(stubs, fmt.Sprintf(`{"predicates":[{"equals":{"method":"GET","path":"/api/v1/customers/%d/orders/%d/items"}}],"responses":[%s]}`, i, i, isResponse(fmt.Sprint("item ", i))))
				}
				return imposter(p, "", stubs)
			},
			scenario:  get("/api/v1/customers/299/orders/299/items"),
			probe:     []probeStep{{method: "GET", path: "/api/v1/customers/299/orders/299/items", status: 200, body: "item 299"}},
			rawTarget: 0.85, mbTarget: 40,
		},
		{
			id: "regex100", title: "100 `matches` (regex) stubs, the last matching", systems: all,
			imposter: func(p int) string {
				var stubs []string
				for i := range 100 {
					stubs = append(stubs, fmt.Sprintf(`{"predicates":[{"matches":{"path":"^/r/%d/[a-z]+$"}}],"responses":[%s]}`, i, isResponse(fmt.Sprint("regex ", i))))
				}
				return imposter(p, "", stubs)
			},
			scenario: get("/r/99/abc"),
			probe:    []probeStep{{method: "GET", path: "/r/99/abc", status: 200, body: "regex 99"}},
		},
		{
			// One flow per virtual user on riftgate; mb has one state per
			// imposter (and ignores _rift).
			id: "inject", title: "`inject` counter (JavaScript, a flow per user)", systems: both,
			imposter: func(p int) string {
				fn := `function (config) { config.state.count = (config.state.count || 0) + 1; ` +
					`return { statusCode: 200, headers: { Connection: 'keep-alive', 'Content-Type': 'text/plain' }, body: String(config.state.count) }; }`
				return imposter(p, flowPerUser, []string{fmt.Sprintf(`{"predicates":[{"equals":{"path":"/count"}}],"responses":[{"inject":%q}]}`, fn)})
			},
			scenario: &Scenario{Name: "inject", Steps: []Step{{Path: "/count", ExpectStatus: 200}}},
			probe: []probeStep{
				{method: "GET", path: "/count", flow: "probe", status: 200, body: "1"},
				{method: "GET", path: "/count", flow: "probe", status: 200, body: "2"},
			},
			staticTarget: 0.4, mbTarget: 7,
		},
		{
			id: "wasm", title: "WASM counter (WAT, a flow per user)", systems: []string{sysRift, sysRaw},
			wasm: findWasm(wasmDir),
			imposter: func(p int) string {
				return imposter(p, flowPerUser, []string{fmt.Sprintf(`{"responses":[{"wasm":{"module":%q}}]}`, findWasm(wasmDir))})
			},
			scenario: &Scenario{Name: "wasm", Steps: []Step{{Path: "/wasm", ExpectStatus: 200}}},
			probe: []probeStep{
				{method: "GET", path: "/wasm", flow: "probe", status: 200, body: "1"},
				{method: "GET", path: "/wasm", flow: "probe", status: 200, body: "2"},
			},
			rawTarget: 0.8,
		},
	}
	// The plugin ABI's own yardstick: a Go plugin doing one flow_get and one
	// flow_put per request, against the raw server in the same round (the
	// static case is the same answer from an `is` stub).
	if fb := filepath.Join(wasmDir, "examples", "flowbench.wasm"); fileExists(fb) {
		abs, _ := filepath.Abs(fb)
		cases = append(cases, benchCase{
			id: "wasm-flowbench", title: "WASM Go plugin: one flow_get + one flow_put (a flow per user)", systems: []string{sysRift, sysRaw},
			wasm: abs, rawTarget: 0.7,
			imposter: func(p int) string {
				return imposter(p, flowPerUser, []string{fmt.Sprintf(`{"responses":[{"wasm":{"module":%q}}]}`, abs)})
			},
			scenario: &Scenario{Name: "flowbench", Steps: []Step{{Path: "/flowbench", ExpectStatus: 200}}},
			probe:    []probeStep{{method: "GET", path: "/flowbench", flow: "probe", status: 200, body: "ok"}},
		})
	}
	cases = append(cases, bodyCases()...)
	for _, mode := range []string{"memory", "async", "sync"} {
		cases = append(cases, benchCase{
			id: "flow-" + mode, title: "stateful flow, durability " + mode + " (login/logout per virtual user)", systems: []string{sysRift, sysCluster},
			clusterTarget: clusterTarget(mode),
			imposter: func(p int) string {
				return imposter(p, fmt.Sprintf(`"_rift":{"flowState":{"flowIdSource":"header:X-Flow-Id","durability":%q}},`, mode), []string{
					`{"scenarioName":"session","requiredScenarioState":"Started","newScenarioState":"in","predicates":[{"equals":{"method":"POST","path":"/login"}}],"responses":[` + isResponse("in") + `]}`,
					`{"scenarioName":"session","requiredScenarioState":"in","newScenarioState":"Started","predicates":[{"equals":{"method":"POST","path":"/logout"}}],"responses":[` + isResponse("out") + `]}`,
				})
			},
			scenario: &Scenario{Name: "session", Steps: []Step{
				{Method: "POST", Path: "/login", ExpectStatus: 200},
				{Method: "POST", Path: "/logout", ExpectStatus: 200},
			}},
			// A state machine per flow: logging out first, or twice in, is refused.
			probe: []probeStep{
				{method: "POST", path: "/logout", flow: "probe", status: 404},
				{method: "POST", path: "/login", flow: "probe", status: 200, body: "in"},
				{method: "POST", path: "/login", flow: "probe", status: 404},
				{method: "POST", path: "/login", flow: "other", status: 200, body: "in"},
				{method: "POST", path: "/logout", flow: "probe", status: 200, body: "out"},
			},
		})
	}
	cases = append(cases,
		benchCase{
			id: "tcp-static", title: "tcp: static `is` stub (raw: a Go tcp server)", systems: all,
			imposter: func(p int) string {
				return fmt.Sprintf(`{"protocol":"tcp","port":%d,"name":"bench","stubs":[`+
					`{"predicates":[{"startsWith":{"data":"PING"}}],"responses":[{"is":{"data":%q}}]}]}`, p, tcpHelloAnswer)
			},
			scenario:  get("/"), // counts iterations only
			tcp:       &TCPExchange{Send: []byte("PING"), Expect: tcpHelloAnswer},
			rawTarget: 0.85,
		},
		benchCase{
			id: "ws-echo", title: "WebSocket: a message and its answer, static `is` (raw: a Go WebSocket echo server, gorilla/websocket)",
			systems: []string{sysRift, sysRaw},
			imposter: func(p int) string {
				return fmt.Sprintf(`{"protocol":"ws","port":%d,"name":"bench","limits":{"messagesPerSecond":1000000},"stubs":[`+
					`{"predicates":[{"startsWith":{"data":"{\"op\":\"echo\""}}],"responses":[{"is":{"data":%q}}]}]}`, p, wsBenchMessage)
			},
			scenario:  get("/"), // counts iterations only
			ws:        &WSExchange{Path: "/bench", Send: []byte(wsBenchMessage), Expect: []byte(wsBenchMessage)},
			rawTarget: 0.8,
		},
		benchCase{
			// riftgate's gRPC imposter, in mountebank-grpc's shape, against
			// grpc-go carrying an answer encoded once: the limit.
			id: "grpc-unary", title: "gRPC: a unary call, static `is` (raw: grpc-go answering the same message, encoded once)",
			systems: []string{sysRift, sysRaw},
			imposter: func(p int) string {
				return fmt.Sprintf(`{"protocol":"grpc","port":%d,"name":"bench",`+
					`"services":{"bench.Bench":{"file":%q}},"options":{"protobufjs":{"includeDirs":[%q]}},`+
					`"stubs":[{"predicates":[{"matches":{"path":"Unary"},"caseSensitive":false}],"responses":[{"is":{"value":%s}}]}]}`,
					p, benchProtoFile, benchProtoDirToken, benchGRPCReply)
			},
			scenario:  &Scenario{NoFlowHeader: true, Steps: []Step{{Path: "/"}}}, // counts iterations; the call checks its status
			grpc:      &GRPCExchange{Method: benchGRPCMethod, Messages: []string{benchGRPCRequest}},
			grpcWant:  benchGRPCReply,
			rawTarget: 0.8,
		},
		benchCase{
			// The static case's imposter over HTTP/2 (h2c with prior
			// knowledge), against the static case over HTTP/1.1.
			id: "h2-static", title: "HTTP/2 (h2c): static `is` stub, against the static case over HTTP/1.1",
			systems: []string{sysRift},
			imposter: func(p int) string {
				return imposter(p, "", []string{`{"responses":[` + isResponse("hello") + `]}`})
			},
			scenario: get("/hello"),
			probe:    []probeStep{{method: "GET", path: "/hello", status: 200, body: "hello"}},
			h2:       true, vsStatic: true,
		},
		benchCase{
			id: "proxyonce", title: "`proxyOnce` replay", systems: both,
			imposter: func(p int) string {
				return imposter(p, "", []string{fmt.Sprintf(`{"responses":[{"proxy":{"to":%q,"mode":"proxyOnce","predicateGenerators":[{"matches":{"method":true,"path":true}}]}}]}`, upstream)})
			},
			scenario: get("/proxied"),
			probe: []probeStep{
				{method: "GET", path: "/proxied", status: 200, body: "hello"},
				{method: "GET", path: "/proxied", status: 200, body: "hello"},
			},
		},
	)
	return append(cases, recordingCases(upstream)...)
}

// recordingCases load proxies that record (issue 34): proxyAlways adds
// every answer to one recorded stub, proxyOnce records a new path per
// request; proxyTransparent records nothing, and with
// _rift.proxyKeepAlive keeps the client's connection as the others do
// not (mb closes it). Select them alone with -only '^record-'.
//
// Issue 34's targets: proxyAlways flat over the run (last window >= 0.8x
// the first), >= 0.5x proxyTransparent's rate and >= 10x mb's; proxyOnce
// with a new path per request as flat, with 100,000 signatures recorded by
// the end (reached only where riftgate runs at >= 1,700 req/s for 60 s);
// proxyTransparent with keep-alive >= 0.8x a raw fasthttp reverse proxy.
func recordingCases(upstream string) []benchCase {
	both := []string{sysRift, sysRiftDurable, sysMB}
	proxy := func(mode, extra string) func(int) string {
		return func(p int) string {
			return imposter(p, extra, []string{fmt.Sprintf(`{"responses":[{"proxy":{"to":%q,"mode":%q,"predicateGenerators":[{"matches":{"path":true}}]}}]}`, upstream, mode)})
		}
	}
	hello := []probeStep{{method: "GET", path: "/probe", status: 200, body: "hello"}}
	return []benchCase{
		{id: "record-always", title: "`proxyAlways`: every answer recorded into one stub", systems: both,
			imposter: proxy("proxyAlways", ""), scenario: get("/always"), probe: hello, long: true,
			mbTarget: 10, flatTarget: 0.8, relTo: "record-transparent", relTarget: 0.5},
		{id: "record-once-new", title: "`proxyOnce`, a new path (a new stub) per request", systems: both,
			imposter: proxy("proxyOnce", ""),
			scenario: &Scenario{NoFlowHeader: true, Steps: []Step{{Method: "GET", Path: "/r/{{vu}}/{{iter}}", ExpectStatus: 200}}},
			probe:    hello, long: true, flatTarget: 0.8, recordedTarget: 100_000},
		{id: "record-transparent", title: "`proxyTransparent` (nothing recorded)", systems: both,
			imposter: proxy("proxyTransparent", ""), scenario: get("/t"), probe: hello, long: true},
		{id: "record-transparent-keepalive", title: "`proxyTransparent`, `_rift.proxyKeepAlive`", systems: []string{sysRift, sysRawProxy},
			imposter: proxy("proxyTransparent", `"_rift":{"proxyKeepAlive":true},`), scenario: get("/t"), probe: hello, long: true,
			proxyTarget: 0.8},
	}
}

// benchProtoDirToken stands for the bench's folder, where bench.proto is
// written, in the grpc-unary imposter.
const benchProtoDirToken = "{{benchdir}}"

// wsBenchMessage is the ws-echo case's message: the raw server echoes it,
// riftgate's stub answers it with itself.
const wsBenchMessage = `{"op":"echo","seq":1,"payload":"abcdefghijklmnopqrstuvwxyz"}`

// flowPerUser keys an imposter's flows on the load generator's X-Flow-Id.
const flowPerUser = `"_rift":{"flowState":{"flowIdSource":"header:X-Flow-Id"}},`

// The body predicate cases post a 120-byte JSON or XML body to ten stubs
// of which only the last matches.
const (
	benchJSON = `{"user":{"name":"user9","role":"admin","email":"user9@example.com"},"order":{"id":12345,"items":["a1","b2"]}}`
	benchXML  = `<order><user><name>user9</name><role>admin</role><email>u9@example.com</email></user><id>12345</id></order>`
)

func bodyCases() []benchCase {
	all := []string{sysRift, sysRaw, sysMB}
	cases := []struct {
		id, title, pred, path, body, contentType string
		rawTarget                                float64
	}{
		{"json-equals", "10 JSON body `equals` stubs, the last matching", `{"equals":{"body":{"user":{"name":"user%d","role":"admin"}}}}`, "/body", benchJSON, "application/json", 0.6},
		{"jsonpath", "10 `jsonpath` stubs ($.user.name), the last matching", `{"equals":{"body":"user%d"},"jsonpath":{"selector":"$.user.name"}}`, "/body", benchJSON, "application/json", 0.6},
		{"xpath", "10 `xpath` stubs (//user/name), the last matching", `{"equals":{"body":"user%d"},"xpath":{"selector":"//user/name"}}`, "/body", benchXML, "application/xml", 0.4},
		{"nested", "10 nested `and`/`or`/`not` stubs, the last matching",
			`{"and":[{"equals":{"method":"POST"}},{"or":[{"equals":{"path":"/n/%d"}},{"startsWith":{"path":"/nested/%d/"}}]},{"not":{"contains":{"body":"forbidden"}}}]}`,
			"/nested/9/x", benchJSON, "application/json", 0.85},
	}
	var out []benchCase
	for _, c := range cases {
		out = append(out, benchCase{
			id: c.id, title: c.title, systems: all,
			imposter: func(p int) string {
				var stubs []string
				for i := range 10 {
					pred := strings.ReplaceAll(c.pred, "%d", fmt.Sprint(i))
					stubs = append(stubs, fmt.Sprintf(`{"predicates":[%s],"responses":[%s]}`, pred, isResponse(fmt.Sprint("stub ", i))))
				}
				return imposter(p, "", stubs)
			},
			scenario: &Scenario{NoFlowHeader: true, Steps: []Step{{Method: "POST", Path: c.path,
				Headers: map[string]string{"Content-Type": c.contentType}, Body: jsonText(c.body), ExpectStatus: 200}}},
			probe:     []probeStep{{method: "POST", path: c.path, send: c.body, contentType: c.contentType, status: 200, body: "stub 9"}},
			rawTarget: c.rawTarget,
		})
	}
	return out
}

// jsonText is s as a scenario body: a JSON string, sent as it is.
func jsonText(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// clusterTarget is the cluster's target against one node for a flow case:
// 0.4x where the CPU bounds both. Under sync the disk does: here the three
// nodes share one disk and make three times the fsyncs of one node (each
// write is committed by its owner and both successors), which no target on
// this machine would measure the runtime by.
func clusterTarget(mode string) float64 {
	if mode == "sync" {
		return 0
	}
	return 0.4
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
