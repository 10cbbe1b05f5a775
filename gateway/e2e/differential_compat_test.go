package e2e_test

import (
	"strconv"
	"strings"
)

// compatCases are issue 36's last differences of mb 2.9.1's own API
// suite: the old tcp proxy syntax, asynchronous tcp injection (a script
// that answers from a socket's data event), proxied bodies that are falsy
// JSON, and removeProxies with replayable. A tcp imposter here answers
// HTTP bytes, so that the harness's HTTP client reads its answer.

// tcpHTTP is a tcp imposter's data that reads as an HTTP answer of body.
func tcpHTTP(body string) string {
	return `HTTP/1.1 200 OK\r\nContent-Length: ` + strconv.Itoa(len(body)) + `\r\n\r\n` + body
}

// asyncInject is a tcp response injection that forwards the request to
// the http imposter on {b} over Node's net module and answers, from the
// socket's first data event, with that Buffer: mb's API suite's
// asynchronous injection, in the old (callback argument) or new
// (config.callback) interface.
func asyncInject(old bool) string {
	params, data, callback := "config", "config.request.data", "config.callback"
	if old {
		params, data, callback = "request, state, logger, callback", "request.data", "callback"
	}
	return `(` + params + `) => { const net = require('net'), socket = net.connect({ host: '127.0.0.1', port: {b} }, () => { socket.write(` +
		data + `); }); socket.once('data', data => { ` + callback + `({ data: data }); }); }`
}

var compatCases = []dcase{
	// jsonpath-plus's dialect: scripts, filters, and what it takes though
	// it never matches (mb's book uses the first).
	{name: "jsonpath scripts and filters", steps: []dstep{
		imposter(`"stubs":[` +
			`{"predicates":[{"equals":{"body":"clown"},"jsonpath":{"selector":"$.identities[(@.length-1)].career"}}],"responses":[{"is":{"body":"last"}}]},` +
			`{"predicates":[{"deepEquals":{"body":["b"]},"jsonpath":{"selector":"$.identities[?(@.age > 30)].name"}}],"responses":[{"is":{"body":"older"}}]},` +
			`{"predicates":[{"equals":{"body":"a"},"jsonpath":{"selector":"$..[["}}],"responses":[{"is":{"body":"never"}}]},` +
			`{"predicates":[{"exists":{"body":true},"jsonpath":{"selector":"$.identities[(@.x.y)]"}}],"responses":[{"is":{"body":"throws"}}]},` +
			`{"responses":[{"is":{"body":"${NAMES} ${KEYS}"},"behaviors":[` +
			`{"copy":{"from":"body","into":"${NAMES}","using":{"method":"jsonpath","selector":"$.identities[?(@.age)].name"}}},` +
			`{"copy":{"from":"body","into":"${KEYS}","using":{"method":"jsonpath","selector":"$.identities[0].*~"}}}]}]}]`),
		call("a", "POST", "/", `{"identities":[{"name":"a","age":20,"career":"actor"},{"name":"b","age":40,"career":"clown"}]}`),
		call("a", "POST", "/", `{"identities":[{"name":"a","age":31,"career":"clown"},{"name":"b","age":40,"career":"actor"}]}`),
		call("a", "POST", "/", `{"identities":[{"name":"b","age":35,"career":"actor"},{"name":"c","career":"x"}]}`),
	}},
	{name: "the old tcp proxy syntax", steps: []dstep{
		post(`{"protocol":"tcp","port":{b},"stubs":[{"responses":[{"is":{"data":"` + tcpHTTP("PROXIED") + `"}}]}]}`),
		post(`{"protocol":"tcp","port":{a},"name":"MAIN","stubs":[{"responses":[{"proxy":{"to":{"host":"localhost","port":{b}}}}]}]}`),
		get("/"),
		admin("PUT", "/imposters/{a}/stubs", `{"stubs":[{"responses":[{"proxy":{"to":{"host":"127.0.0.1","port":"{b}"}}}]}]}`).andStored(),
		admin("POST", "/imposters/{a}/stubs", `{"index":0,"stub":{"responses":[{"proxy":{"to":{"host":"localhost","port":0}}}]}}`).andStored(),
		// Only tcp is upcast, and only a to with a host and a port.
		post(`{"protocol":"http","port":{c},"stubs":[{"responses":[{"proxy":{"to":{"host":"localhost","port":{b}}}}]}]}`),
	}},
	{name: "asynchronous tcp injection, old interface", steps: []dstep{
		post(`{"protocol":"http","port":{b},"name":"origin","stubs":[{"responses":[{"is":{"body":"origin server"}}]}]}`),
		post(`{"protocol":"tcp","port":{a},"stubs":[{"responses":[{"inject":` + quote(asyncInject(true)) + `}]}]}`),
		get("/"),
	}},
	{name: "asynchronous tcp injection", steps: []dstep{
		post(`{"protocol":"http","port":{b},"name":"origin","stubs":[{"responses":[{"is":{"body":"origin server"}}]}]}`),
		post(`{"protocol":"tcp","port":{a},"stubs":[{"responses":[{"inject":` + quote(asyncInject(false)) + `}]}]}`),
		get("/"),
	}},
	// mb records a body that parses as JSON as that value, falsy or not,
	// and answers a falsy one empty.
	{name: "proxied bodies that are falsy JSON", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"proxy":{"to":"{up}","mode":"proxyAlways","predicateGenerators":[{"matches":{"path":true}}]}}]}]`),
		post(`{"protocol":"http","port":{c},"stubs":[{"responses":[{"proxy":{"to":"{up}","predicateGenerators":[{"matches":{"path":true}}]}}]}]}`),
		get("/json-falsy/0"), get("/json-falsy/false"), get("/json-falsy/null"), get("/json-falsy/empty-string"),
		call("c", "GET", "/json-falsy/0", ""), call("c", "GET", "/json-falsy/false", ""), call("c", "GET", "/json-falsy/null", ""),
		call("c", "GET", "/json-falsy/0", "").andStored(),
	}},
	// mb's API suite: removeProxies with replayable, both ways, on one
	// imposter and on all.
	{name: "removeProxies with and without replayable", steps: []dstep{
		imposter(`"name":"imposter-is","stubs":[{"responses":[{"is":{"body":"Hello, World!"}}]}]`),
		post(`{"protocol":"http","port":{b},"name":"imposter-proxy","stubs":[{"responses":[{"proxy":{"to":"http://www.google.com"}},{"is":{"body":"Hello, World!"}}]}]}`),
		admin("GET", "/imposters?removeProxies=true&replayable=true", ""),
		admin("GET", "/imposters/{b}?removeProxies=true&replayable=false", ""),
		admin("DELETE", "/imposters/{b}?removeProxies=true&replayable=true", ""),
		admin("DELETE", "/imposters?removeProxies=true&replayable=false", ""),
	}},
	{name: "a tcp data that is a Buffer as JSON or array-like", steps: []dstep{
		post(`{"protocol":"tcp","port":{a},"stubs":[{"responses":[{"is":{"data":{"type":"Buffer","data":` + bytesJSON(tcpHTTP("buf")) + `}}}]}]}`),
		get("/"),
		post(`{"protocol":"tcp","port":{b},"stubs":[{"responses":[{"inject":"() => ({ data: Buffer.from('` + strings.ReplaceAll(tcpHTTP("from a Buffer"), `\`, `\\`) + `') })"}]}]}`),
		call("b", "GET", "/", ""),
	}},
}

// quote is s as a JSON string.
func quote(s string) string {
	out := []byte{'"'}
	for _, c := range []byte(s) {
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		default:
			out = append(out, c)
		}
	}
	return string(append(out, '"'))
}

// bytesJSON is the bytes of s, which may hold JSON's \r and \n escapes,
// as a JSON array of numbers.
func bytesJSON(s string) string {
	r := []byte{}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 'r':
				c = '\r'
			case 'n':
				c = '\n'
			default:
				c = s[i]
			}
		}
		r = append(r, c)
	}
	out := "["
	for i, c := range r {
		if i > 0 {
			out += ","
		}
		out += strconv.Itoa(int(c))
	}
	return out + "]"
}
