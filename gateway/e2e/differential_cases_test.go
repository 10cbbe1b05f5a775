package e2e_test

import (
	"os"
	"testing"
)

// TestDifferential runs every case against mb 2.9.1 and riftgate.
func TestDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mb and riftgate twice")
	}
	csv, err := os.ReadFile("testdata/users.csv")
	if err != nil {
		t.Fatal(err)
	}
	var all []dcase
	for _, group := range [][]dcase{adminCases, acceptCases, responseCases, predicateCases,
		behaviorCases(string(csv)), injectionCases, proxyCases, moreCases, compatCases} {
		all = append(all, group...)
	}
	runDifferential(t, all)
}

// imposter is an http imposter on {a} with the given fields after the port.
func imposter(fields string) dstep {
	if fields != "" {
		fields = "," + fields
	}
	return post(`{"protocol":"http","port":{a}` + fields + `}`)
}

func get(path string) dstep { return call("a", "GET", path, "") }

var adminCases = []dcase{
	{name: "home and an empty list", steps: []dstep{
		admin("GET", "/", ""), admin("GET", "/imposters", ""),
		admin("GET", "/imposters?replayable=true", ""), admin("GET", "/imposters?removeProxies=true", ""),
	}},
	{name: "create, list and delete", steps: []dstep{
		imposter(""), admin("GET", "/imposters", ""), admin("GET", "/imposters?replayable=true", ""),
		admin("DELETE", "/imposters/{a}", ""), admin("DELETE", "/imposters/{a}", ""), admin("GET", "/imposters/{a}", ""),
	}},
	{name: "delete answers with the requests", steps: []dstep{
		imposter(`"recordRequests":true,"stubs":[{"responses":[{"is":{"body":"x"}}]}]`),
		get("/one?q=1"), call("a", "POST", "/two", "body"),
		admin("DELETE", "/imposters/{a}", ""),
	}},
	{name: "delete replayable and removeProxies", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"proxy":{"to":"{up}"}}]},{"responses":[{"is":{"body":"x"}}]}]`),
		admin("DELETE", "/imposters/{a}?replayable=true&removeProxies=true", ""),
	}},
	{name: "delete all imposters", steps: []dstep{
		imposter(`"name":"first","stubs":[{"responses":[{"is":{"body":"x"},"_behaviors":{"wait":1}}]}]`),
		post(`{"protocol":"http","port":{b}}`),
		admin("DELETE", "/imposters", ""),
	}},
	{name: "replace all imposters", steps: []dstep{
		imposter(""),
		admin("PUT", "/imposters", `{"imposters":[{"protocol":"http","port":{b},"stubs":[{"responses":[{"is":{"body":"b"}}]}]},{"protocol":"http","port":{c}}]}`),
		call("b", "GET", "/", ""), admin("GET", "/imposters", ""),
		admin("PUT", "/imposters", `{}`), admin("PUT", "/imposters", `{"imposters":[{"protocol":"nope"}]}`),
	}},
	{name: "stubs API", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"body":"first"}}]}]`),
		admin("POST", "/imposters/{a}/stubs", `{"index":0,"stub":{"predicates":[{"equals":{"path":"/new"}}],"responses":[{"is":{"body":"new"}}]}}`).andStored(),
		admin("POST", "/imposters/{a}/stubs", `{"stub":{"responses":[{"is":{"body":"last"}}]}}`),
		get("/new"), get("/other"),
		admin("PUT", "/imposters/{a}/stubs/1", `{"responses":[{"is":{"body":"changed"}}]}`).andStored(),
		admin("DELETE", "/imposters/{a}/stubs/0", "").andStored(),
		admin("PUT", "/imposters/{a}/stubs", `{"stubs":[{"responses":[{"is":{"body":"all new"}}]}]}`).andStored(),
		get("/"),
	}},
	{name: "stubs API errors", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"body":"first"}}]}]`),
		admin("POST", "/imposters/{a}/stubs", `{"index":5,"stub":{"responses":[{"is":{}}]}}`),
		admin("POST", "/imposters/{a}/stubs", `{"index":0}`),
		admin("PUT", "/imposters/{a}/stubs/9", `{"responses":[{"is":{}}]}`),
		admin("DELETE", "/imposters/{a}/stubs/9", ""),
		admin("PUT", "/imposters/{a}/stubs", `{}`),
		admin("PUT", "/imposters/{a}/stubs", `{"stubs":{}}`),
		admin("GET", "/imposters/{b}", ""), admin("POST", "/imposters/{b}/stubs", `{"stub":{}}`),
	}},
	{name: "saved requests and their routes", steps: []dstep{
		imposter(`"recordRequests":true,"stubs":[{"responses":[{"is":{"body":"x"}}]}]`),
		get("/a"), admin("DELETE", "/imposters/{a}/savedRequests", "").andStored(),
		get("/b"), admin("DELETE", "/imposters/{a}/requests", "").andStored(),
	}},
	{name: "printed header fields", steps: []dstep{
		imposter(`"name":"named","host":"127.0.0.1","allowCORS":true,"recordRequests":false,"defaultResponse":{"statusCode":404}`),
		admin("GET", "/imposters", ""),
	}},
	{name: "creation errors", steps: []dstep{
		admin("POST", "/imposters", `{"protocol":`),
		admin("POST", "/imposters", `{"port":{a}}`),
		admin("POST", "/imposters", `{"protocol":"gopher","port":{a}}`),
		admin("POST", "/imposters", `{"protocol":"http","port":"x"}`),
		admin("POST", "/imposters", `{"protocol":"http","port":70000}`),
		admin("POST", "/imposters", `{"protocol":"http","port":1.5}`),
		admin("POST", "/imposters", `[]`),
	}},
	{name: "a port in use", steps: []dstep{
		imposter(""), admin("POST", "/imposters", `{"protocol":"http","port":{a}}`),
	}},
	{name: "a bad definition on a port in use", steps: []dstep{
		imposter(""),
		admin("POST", "/imposters", `{"protocol":"http","port":{a},"stubs":[{"responses":[{"proxy":{}}]}]}`),
	}},
}

var acceptCases = []dcase{
	{name: "unknown fields are ignored at every level", steps: []dstep{
		imposter(`"colour":"red","stubs":[{"nickname":"s","predicates":[{"equals":{"path":"/x"},"extra":1}],` +
			`"responses":[{"is":{"body":"x","extra":true},"note":"n"}]}]`),
		get("/x"),
	}},
	{name: "a stub with name and recordMatches", steps: []dstep{
		imposter(`"stubs":[{"name":"saved by mb","recordMatches":true,"responses":[{"is":{"body":"named"}}]}]`),
		get("/"),
	}},
	{name: "query inside is", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"body":"q","query":{"a":"1"}}}]}]`), get("/"),
	}},
	{name: "proxy null next to is", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"body":"is wins"},"proxy":null}]}]`), get("/"),
	}},
	{name: "an unknown fault", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"fault":"NO_SUCH_FAULT"}]}]`), get("/"),
	}},
	{name: "a defaultResponse holding a proxy", steps: []dstep{
		imposter(`"defaultResponse":{"proxy":{"to":"{up}"},"statusCode":202}`), get("/text"),
	}},
	{name: "legacy _behaviors are normalized", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"body":"hi ${n}"},"_behaviors":{"repeat":2,"wait":5,` +
			`"copy":[{"from":"path","into":"${n}","using":{"method":"regex","selector":"\\w+"}}]}}]}]`),
		get("/world"), get("/again"), get("/third"),
	}},
	{name: "repeat and statusCode as strings", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"statusCode":"201","body":"one"},"repeat":"2"},{"is":{"body":"two"}}]}]`),
		get("/"), get("/"), get("/"),
	}},
	{name: "refused stubs", steps: []dstep{
		imposter(`"stubs":[{"responses":[]}]`),
		imposter(`"stubs":[{"predicates":[]}]`),
		imposter(`"stubs":[{"responses":[{"is":{},"proxy":{"to":"{up}"}}]}]`),
		imposter(`"stubs":[{"responses":[{"is":{},"repeat":0}]}]`),
		imposter(`"stubs":[{"responses":[{"is":{},"repeat":true}]}]`),
		post(`{"protocol":"http","port":{b},"stubs":[{"responses":[{"is":{},"behaviors":[{"wait":"x"}]}]}]}`),
		imposter(`"stubs":[{"responses":[{"proxy":{}}]}]`),
		imposter(`"stubs":[{"responses":[{"proxy":{"to":"{up}/path"}}]}]`),
	}},
}

var responseCases = []dcase{
	{name: "is defaults and headers", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"statusCode":201,"headers":{"X-A":"1","Content-Type":"text/plain"},"body":"made"}}]}]`),
		get("/"),
	}},
	{name: "json body object", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"body":{"a":[1,{"b":"c"}],"d":null,"e":1.50,"f":"<&>"}}}]}]`), get("/"),
	}},
	{name: "scalar bodies", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"body":42}},{"is":{"body":true}},{"is":{"body":false}},{"is":{"body":0}}]}]`),
		get("/"), get("/"), get("/"), get("/"),
	}},
	{name: "header arrays and numbers", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"headers":{"Set-Cookie":["a=1","b=2"],"X-N":5,"Connection":"keep-alive"}}}]}]`), get("/"),
	}},
	{name: "default response", steps: []dstep{
		imposter(`"defaultResponse":{"statusCode":404,"body":"none","headers":{"X-D":"d"}},"stubs":[{"predicates":[{"equals":{"path":"/x"}}],"responses":[{"is":{"body":"x"}}]}]`),
		get("/x"), get("/y"),
	}},
	{name: "binary mode", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"_mode":"binary","body":"aGVs\nbG8="}}]}]`), get("/"),
	}},
	{name: "repeat cycle", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"body":"1"},"repeat":2},{"is":{"body":"2"}}]}]`),
		get("/"), get("/"), get("/"), get("/"),
	}},
	{name: "allowCORS preflight", steps: []dstep{
		imposter(`"allowCORS":true,"stubs":[{"responses":[{"is":{"body":"cors"}}]}]`),
		call("a", "OPTIONS", "/", "", [2]string{"Origin", "http://x.test"}, [2]string{"Access-Control-Request-Method", "PUT"},
			[2]string{"Access-Control-Request-Headers", "X-Y"}),
	}},
	{name: "recorded requests", steps: []dstep{
		imposter(`"recordRequests":true`),
		call("a", "POST", "/p?q=1&q=2&e=%20x", "user=ann", [2]string{"content-type", "application/x-www-form-urlencoded"},
			[2]string{"X-Two", "1"}, [2]string{"X-Two", "2"}),
		admin("GET", "/imposters/{a}", ""),
	}},
}

var predicateCases = func() []dcase {
	table := []struct {
		name, stubs string
		requests    []dstep
	}{
		{"equals on fields", `[{"predicates":[{"equals":{"method":"POST","path":"/p","query":{"q":"1"},"headers":{"X-H":"v"},"body":"hi"}}],"responses":[{"is":{"body":"yes"}}]}]`,
			[]dstep{call("a", "POST", "/p?q=1", "HI", [2]string{"X-H", "V"}), call("a", "POST", "/p?q=2", "hi", [2]string{"X-H", "v"}),
				call("a", "GET", "/p?q=1", "hi", [2]string{"X-H", "v"})}},
		{"caseSensitive and except", `[
			{"predicates":[{"equals":{"path":"/Case"},"caseSensitive":true}],"responses":[{"is":{"body":"exact"}}]},
			{"predicates":[{"equals":{"body":"abc"},"except":"\\d+"}],"responses":[{"is":{"body":"except"}}]}]`,
			[]dstep{get("/Case"), get("/case"), call("a", "POST", "/z", "a1b22c")}},
		{"deepEquals query", `[{"predicates":[{"deepEquals":{"query":{"a":"1"}}}],"responses":[{"is":{"body":"deep"}}]}]`,
			[]dstep{get("/?a=1"), get("/?a=1&b=2")}},
		{"contains startsWith endsWith matches", `[
			{"predicates":[{"contains":{"body":"needle"}}],"responses":[{"is":{"body":"contains"}}]},
			{"predicates":[{"startsWith":{"path":"/api"}}],"responses":[{"is":{"body":"starts"}}]},
			{"predicates":[{"endsWith":{"path":".json"}}],"responses":[{"is":{"body":"ends"}}]},
			{"predicates":[{"matches":{"path":"^/item/\\d+$"}}],"responses":[{"is":{"body":"matches"}}]}]`,
			[]dstep{call("a", "POST", "/", "hay needle hay"), get("/api/x"), get("/f.JSON"), get("/item/42"), get("/item/x")}},
		{"exists not or and", `[
			{"predicates":[{"exists":{"query":{"token":true}}}],"responses":[{"is":{"body":"has token"}}]},
			{"predicates":[{"not":{"equals":{"method":"GET"}}}],"responses":[{"is":{"body":"not get"}}]},
			{"predicates":[{"or":[{"equals":{"path":"/a"}},{"equals":{"path":"/b"}}]}],"responses":[{"is":{"body":"a or b"}}]},
			{"predicates":[{"and":[{"startsWith":{"path":"/c"}},{"endsWith":{"path":"d"}}]}],"responses":[{"is":{"body":"c and d"}}]}]`,
			[]dstep{get("/?token=1"), call("a", "PUT", "/", ""), get("/b"), get("/cxd"), get("/cx")}},
		{"json body fields and jsonpath", `[
			{"predicates":[{"equals":{"body":{"user":{"name":"ann"}}}}],"responses":[{"is":{"body":"json ann"}}]},
			{"predicates":[{"equals":{"body":"gold"},"jsonpath":{"selector":"$.tier"}}],"responses":[{"is":{"body":"jsonpath gold"}}]}]`,
			[]dstep{call("a", "POST", "/", `{"user":{"name":"ANN","age":3}}`), call("a", "POST", "/", `{"tier":"gold"}`),
				call("a", "POST", "/", `{"tier":"lead"}`)}},
		{"xpath with namespaces", `[{"predicates":[{"equals":{"body":"42"},"xpath":{"selector":"//b:id","ns":{"b":"urn:b"}}}],"responses":[{"is":{"body":"xpath"}}]}]`,
			[]dstep{call("a", "POST", "/", `<r xmlns:b="urn:b"><b:id>42</b:id></r>`), call("a", "POST", "/", `<r><id>42</id></r>`)}},
		{"form and keyCaseSensitive", `[
			{"predicates":[{"equals":{"form":{"user":"ann"}}}],"responses":[{"is":{"body":"form"}}]},
			{"predicates":[{"equals":{"headers":{"X-Key":"v"}},"keyCaseSensitive":true}],"responses":[{"is":{"body":"key case"}}]}]`,
			[]dstep{call("a", "POST", "/", "user=ann&x=1", [2]string{"Content-Type", "application/x-www-form-urlencoded"}),
				call("a", "GET", "/", "", [2]string{"X-Key", "v"}), call("a", "GET", "/", "", [2]string{"x-key", "v"})}},
	}
	var out []dcase
	for _, tc := range table {
		out = append(out, dcase{name: "predicates: " + tc.name,
			steps: append([]dstep{imposter(`"stubs":` + tc.stubs)}, tc.requests...)})
	}
	return out
}()

func behaviorCases(csv string) []dcase {
	return []dcase{
		{name: "copy", steps: []dstep{
			imposter(`"stubs":[{"responses":[{"is":{"statusCode":200,"body":"hello ${NAME} from ${P}"},"behaviors":[
				{"copy":{"from":{"query":"name"},"into":"${NAME}","using":{"method":"regex","selector":".+"}}},
				{"copy":{"from":"path","into":"${P}","using":{"method":"regex","selector":"\\w+"}}}]}]}]`),
			get("/world?name=ann"),
		}},
		{name: "copy jsonpath into a json body", steps: []dstep{
			imposter(`"stubs":[{"responses":[{"is":{"body":{"echo":"${ID}"}},"behaviors":[
				{"copy":{"from":"body","into":"${ID}","using":{"method":"jsonpath","selector":"$.id"}}}]}]}]`),
			call("a", "POST", "/", `{"id":"a\"b"}`),
		}},
		// A binary body's tokens are replaced in its base64 text, which is
		// decoded after: "${X}" alone decodes to nothing.
		{name: "copy into a binary body", steps: []dstep{
			imposter(`"stubs":[
				{"predicates":[{"startsWith":{"path":"/whole"}}],"responses":[{"is":{"_mode":"binary","body":"${X}"},"behaviors":[
					{"copy":{"from":"query","into":"${X}","using":{"method":"jsonpath","selector":"$.b"}}}]}]},
				{"responses":[{"is":{"_mode":"binary","body":"QUJD${X}"},"behaviors":[
					{"copy":{"from":"path","into":"${X}","using":{"method":"regex","selector":"[A-Za-z]+"}}}]}]}]`),
			get("/whole?b=YWJj"), get("/RA"),
		}},
		{name: "lookup reads its file on each request", steps: []dstep{
			imposter(`"stubs":[{"responses":[{"is":{"body":"${row}['name'] is ${row}['tier']"},"behaviors":[
				{"lookup":{"key":{"from":{"query":"id"},"using":{"method":"regex","selector":".+"}},
				"fromDataSource":{"csv":{"path":"later.csv","keyColumn":"id"}},"into":"${row}"}}]}]}]`),
			get("/?id=2"),
			writeFile("later.csv", csv),
			get("/?id=2"),
			writeFile("later.csv", "id,name,tier\n2,changed,new\n"),
			get("/?id=2"),
		}},
		{name: "wait", steps: []dstep{
			imposter(`"stubs":[{"responses":[{"is":{"body":"late"},"behaviors":[{"wait":50}]}]}]`), get("/"),
		}},
		{name: "decorate sees an empty body as ''", steps: []dstep{
			imposter(`"stubs":[{"responses":[{"is":{},"behaviors":[{"decorate":"function (req, res) { res.body = typeof res.body + ':' + JSON.stringify(res.body) + ':' + JSON.stringify(res.headers) + ':' + res.statusCode; }"}]}]}]`),
			get("/"),
		}},
		{name: "shellTransform", steps: []dstep{
			imposter(`"stubs":[{"responses":[{"is":{"body":"shell"},"behaviors":[{"shellTransform":"node -e \"const r=JSON.parse(process.env.MB_RESPONSE); r.body=r.body+'!'; console.log(JSON.stringify(r))\""}]}]}]`),
			get("/"),
		}},
	}
}

var injectionCases = []dcase{
	{name: "response injection with state", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"inject":"function (request, state, logger) { state.n = (state.n || 0) + 1; return { statusCode: 201, headers: {\"X-A\": String(state.n)}, body: {path: request.path, q: request.query.q, n: state.n} }; }"}]}]`),
		get("/p0?q=v"), get("/p1?q=v"), get("/p2?q=v"),
	}},
	{name: "injection that does not compile fails the request", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"inject":"function ( {"}]}]`),
		get("/").onlyStatus(),
	}},
	{name: "injection that throws", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"inject":"function () { throw new Error('boom'); }"}]}]`),
		get("/"),
	}},
	{name: "predicate injection", steps: []dstep{
		imposter(`"stubs":[{"predicates":[{"inject":"function (config) { return config.request.path === '/yes'; }"}],"responses":[{"is":{"body":"injected"}}]}]`),
		get("/yes"), get("/no"),
	}},
	{name: "process and require in scripts", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"inject":"function (config) { const util = require('util'); return { body: util.format('%s:%d', typeof process.env, 42) + ':' + require('path').join('a','b') + ':' + typeof Buffer }; }"}]}]`),
		get("/"),
	}},
	{name: "injection is refused without --allowInjection", noInjection: true, steps: []dstep{
		imposter(`"stubs":[{"responses":[{"inject":"function () { return {}; }"}]}]`),
		imposter(`"stubs":[{"predicates":[{"inject":"function () { return true; }"}],"responses":[{"is":{}}]}]`),
		imposter(`"stubs":[{"responses":[{"is":{},"behaviors":[{"decorate":"function () {}"}]}]}]`),
		imposter(`"stubs":[{"responses":[{"is":{},"behaviors":[{"wait":"function () { return 1; }"}]}]}]`),
		imposter(`"stubs":[{"responses":[{"is":{},"behaviors":[{"shellTransform":"echo"}]}]}]`),
		imposter(`"stubs":[{"responses":[{"proxy":{"to":"{up}","predicateGenerators":[{"inject":"function () { return []; }"}]}}]}]`),
		imposter(`"stubs":[{"responses":[{"proxy":{"to":"{up}","addDecorateBehavior":"function () {}"}}]}]`),
		imposter(`"endOfRequestResolver":{"inject":"function () { return true; }"}`),
	}},
}

func proxy(fields string) dstep {
	return imposter(`"stubs":[{"responses":[{"proxy":{"to":"{up}"` + fields + `}}]}]`)
}

var proxyCases = []dcase{
	{name: "proxyOnce records what the upstream saw and said", steps: []dstep{
		proxy(`,"predicateGenerators":[{"matches":{"path":true}}]`),
		call("a", "POST", "/echo", "payload", [2]string{"X-Client", "c"}, [2]string{"content-type", "text/plain"}).andStored(),
		call("a", "POST", "/echo", "again"),
	}},
	{name: "--debug records the matches of proxy and is stubs", flags: []string{"--debug"}, volatile: []string{"timestamp"}, steps: []dstep{
		imposter(`"stubs":[{"predicates":[{"equals":{"path":"/is"}}],"responses":[{"is":{"body":"is"}}]},` +
			`{"responses":[{"proxy":{"to":"{up}","predicateGenerators":[{"matches":{"path":true}}]}}]}]`),
		get("/is"), get("/echo").andStored(), get("/echo").andStored(), get("/is").andStored(),
		get("/binary").andStored(), get("/json").andStored(),
	}},
	{name: "--debug records the matches of responses with behaviors", flags: []string{"--debug"}, volatile: []string{"timestamp"}, steps: []dstep{
		imposter(`"stubs":[{"predicates":[{"equals":{"path":"/d"}}],"responses":[{"is":{"body":"x"},"behaviors":[{"decorate":"(config) => { config.response.body += 'y'; }"}]}]},` +
			`{"predicates":[{"equals":{"path":"/c"}}],"responses":[{"is":{"statusCode":201,"headers":{"X-A":"1"},"body":{"a":1}},"behaviors":[{"copy":{"from":"path","into":"${p}","using":{"method":"regex","selector":".*"}}}]}]},` +
			`{"responses":[{"inject":"() => ({ body: 'injected' })"}]}]`),
		get("/d"), get("/c"), get("/i").andStored(),
	}},
	// A binary response's match shows its base64 text as mb holds it (as
	// given, or as a copy left it) and its _mode, however it was made.
	{name: "--debug records the matches of binary responses", flags: []string{"--debug"}, volatile: []string{"timestamp"}, steps: []dstep{
		imposter(`"stubs":[{"predicates":[{"equals":{"path":"/i"}}],"responses":[{"inject":"() => ({ _mode: 'binary', body: 'QUJD' })"}]},` +
			`{"predicates":[{"equals":{"path":"/m"}}],"responses":[{"is":{"body":"QUJD"},"behaviors":[{"decorate":"(config) => { config.response._mode = 'binary'; }"}]}]},` +
			`{"predicates":[{"equals":{"path":"/u"}}],"responses":[{"is":{"_mode":"binary","body":"QQ"},"behaviors":[{"decorate":"(config) => { config.response.headers = { 'X-Body': config.response.body }; }"}]}]},` +
			`{"predicates":[{"equals":{"path":"/b"}}],"responses":[{"is":{"_mode":"binary","body":"QUJD"},"behaviors":[{"decorate":"(config) => { config.response.body = 'QU!JD-_x'; }"}]}]},` +
			`{"responses":[{"is":{"_mode":"binary","body":"QUJD${X}"},"behaviors":[{"copy":{"from":"path","into":"${X}","using":{"method":"regex","selector":"[A-Za-z]+"}}}]}]}]`),
		get("/i"), get("/m"), get("/u"), get("/b"), get("/RA").andStored(),
	}},
	// A decorator sees the object mb holds: an is as given (its _mode, its
	// order, no defaults), an injection's answer, a proxy's (the body as
	// JSON.parse read it, _mode, _proxyResponseTime); the defaults fill
	// what it leaves out.
	{name: "decorators see the object mb holds", flags: []string{"--debug"}, volatile: []string{"timestamp"}, steps: []dstep{
		imposter(`"defaultResponse":{"statusCode":404},"stubs":[` +
			`{"predicates":[{"equals":{"path":"/is"}}],"responses":[{"is":{"body":{"k":1},"_mode":"text"},"behaviors":[{"decorate":"(config) => { config.response.body = JSON.stringify(config.response); }"}]}]},` +
			`{"predicates":[{"equals":{"path":"/inject"}}],"responses":[{"inject":"() => ({ body: { k: 1 } })","behaviors":[{"decorate":"(config) => { config.response.body = JSON.stringify(config.response); }"}]}]},` +
			`{"responses":[{"proxy":{"to":"{up}"},"behaviors":[{"decorate":"(config) => { config.response.body = JSON.stringify(Object.keys(config.response)) + typeof config.response.body; }"}]}]}]`),
		get("/is"), get("/inject"), get("/json"),
	}},
	// An injection's or a decorator's match shows the object the script
	// left, field for field: one equal to the default, a _mode it set or
	// removed, an object body, a body that decodes to nothing; a copy
	// after it rewrites that object.
	{name: "--debug records the objects scripts answered", flags: []string{"--debug"}, volatile: []string{"timestamp"}, steps: []dstep{
		imposter(`"defaultResponse":{"statusCode":404,"headers":{"X-D":"1"}},"stubs":[` +
			`{"predicates":[{"equals":{"path":"/s"}}],"responses":[{"inject":"() => ({ statusCode: 200, body: '' })"}]},` +
			`{"predicates":[{"equals":{"path":"/h"}}],"responses":[{"inject":"() => ({ headers: {} })"}]},` +
			`{"predicates":[{"equals":{"path":"/n"}}],"responses":[{"inject":"() => ({ _mode: 'binary', body: '-_-_' })"}]},` +
			`{"predicates":[{"equals":{"path":"/o"}}],"responses":[{"inject":"() => ({ _mode: 'binary', body: { a: 1 } })"}]},` +
			`{"predicates":[{"equals":{"path":"/t"}}],"responses":[{"is":{"_mode":"binary","body":"QUJD"},"behaviors":[{"decorate":"(config) => { config.response._mode = 'text'; config.response.body = 'hi'; }"}]}]},` +
			`{"predicates":[{"equals":{"path":"/r"}}],"responses":[{"is":{"_mode":"binary","body":"QUJD"},"behaviors":[{"decorate":"(config) => { delete config.response._mode; }"}]}]},` +
			`{"predicates":[{"equals":{"path":"/x"}}],"responses":[{"is":{"statusCode":201},"behaviors":[{"decorate":"() => ({ statusCode: 202, body: { x: [1, 2] } })"}]}]},` +
			`{"predicates":[{"equals":{"path":"/injected"}}],"responses":[{"inject":"() => ({ body: { k: '${P}' } })","behaviors":[{"copy":{"from":"path","into":"${P}","using":{"method":"regex","selector":"[a-z]+"}}}]}]},` +
			`{"responses":[{"is":{"body":{"k":"${P}"},"_mode":"text"},"behaviors":[{"decorate":"(config) => { config.response.headers = { 'X-P': '${P}' }; }"},{"copy":{"from":"path","into":"${P}","using":{"method":"regex","selector":"[a-z]+"}}}]}]}]`),
		get("/s"), get("/h"), get("/n"), get("/o"), get("/t"), get("/r"), get("/x"), get("/injected"), get("/decorated").andStored(),
	}},
	{name: "the query goes as sent", steps: []dstep{
		proxy(`,"mode":"proxyTransparent"`), get("/echo?WSDL"), get("/echo?a=1&a=2&b=%20x+y&c"),
	}},
	{name: "upstream bodies and headers", steps: []dstep{
		proxy(`,"predicateGenerators":[{"matches":{"path":true}}]`),
		get("/text"), get("/no-content-type"), get("/json"), get("/json-number"), get("/json-string"),
		get("/binary"), get("/gzip"), get("/chunked"), get("/headers"), get("/status/201"),
		admin("GET", "/imposters/{a}", ""),
		get("/json"), get("/json-number"), get("/json-string"), get("/binary"), get("/headers"),
	}},
	{name: "an unreachable upstream is a 500", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"proxy":{"to":"http://127.0.0.1:1"}}]}]`), get("/"),
		post(`{"protocol":"http","port":{b},"stubs":[{"responses":[{"proxy":{"to":"http://no-such-host.invalid"}}]}]}`),
		call("b", "GET", "/", ""),
	}},
	{name: "injectHeaders", steps: []dstep{
		proxy(`,"mode":"proxyTransparent","injectHeaders":{"X-Injected":"yes","Host":"example.test"}`),
		get("/echo"),
		post(`{"protocol":"http","port":{b},"stubs":[{"responses":[{"proxy":{"to":"{up}","mode":"proxyTransparent","injectHeaders":{"x-client":"replaced"}}}]}]}`),
		call("b", "GET", "/echo", "", [2]string{"X-Client", "original"}),
	}},
	{name: "proxyAlways groups responses as mb does", steps: []dstep{
		proxy(`,"mode":"proxyAlways","predicateGenerators":[{"matches":{"path":true}}]`),
		get("/path/a"), get("/path/b"), get("/path/a"), get("/path/c"), get("/path/b").andStored(),
	}},
	{name: "proxyAlways after a user stub with the same predicates", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"proxy":{"to":"{up}","mode":"proxyAlways","predicateGenerators":[{"matches":{"path":true}}]}}]},` +
			`{"predicates":[{"deepEquals":{"path":"/path/a"}}],"responses":[{"is":{"body":"user"}}]}]`),
		get("/path/a").andStored(),
	}},
	{name: "proxyTransparent records nothing", steps: []dstep{
		proxy(`,"mode":"proxyTransparent"`), get("/text").andStored(),
	}},
	{name: "recording options", volatile: []string{"wait"}, steps: []dstep{
		proxy(`,"addWaitBehavior":true,"addDecorateBehavior":"function (req, res) { res.body += '!'; }"`),
		get("/slow").andStored(), get("/slow"),
	}},
	{name: "removeProxies and savedProxyResponses", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"body":"mine"}},{"proxy":{"to":"{up}"}}]},{"responses":[{"proxy":{"to":"{up}"}}]}]`),
		get("/text"), get("/text"), get("/text").andStored(),
		admin("DELETE", "/imposters/{a}/savedProxyResponses", "").andStored(),
	}},
	{name: "predicate generators", steps: []dstep{
		proxy(`,"predicateGenerators":[{"matches":{"query":{"q":true}}},{"matches":{"path":true},"caseSensitive":true},` +
			`{"matches":{"query":true},"ignore":{"query":"r"}},{"matches":{"body":true},"jsonpath":{"selector":"$.id"}}]`),
		call("a", "POST", "/Echo?q=1&r=2", `{"id":7}`).andStored(),
		post(`{"protocol":"http","port":{b},"stubs":[{"responses":[{"proxy":{"to":"{up}","predicateGenerators":[` +
			`{"matches":{"body":true},"xpath":{"selector":"//id"}},{"matches":{"path":true},"except":"\\d+"},{"matches":{"path":true},"predicateOperator":"contains"}]}}]}]}`),
		call("b", "POST", "/echo1", `<r><id>9</id></r>`, [2]string{"X-K", "v"}).andStored(),
	}},
}

// moreCases are the rest of the core: faults, routes mb does not have,
// https imposters, behaviors driven by scripts, asynchronous injection.
var moreCases = []dcase{
	{name: "datadir: a delete removes the imposter's folder and nothing else", flags: []string{"--datadir", "db"}, steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"body":"one"}},{"is":{"body":"two"}}]}]`),
		fileState("db/{a}/imposter.json"),
		writeFile("db/{a}/INSIDE.txt", "x"), writeFile("db/meta/OUTSIDE.txt", "x"),
		get("/"),
		admin("DELETE", "/imposters/{a}", ""),
		fileState("db/{a}"), fileState("db/meta/OUTSIDE.txt"),
		post(`{"protocol":"http","port":{b},"stubs":[{"responses":[{"is":{"body":"b"}}]}]}`),
		admin("DELETE", "/imposters", ""),
		fileState("db/{b}"), fileState("db/meta/OUTSIDE.txt"),
	}},
	{name: "faults", steps: []dstep{
		imposter(`"stubs":[{"predicates":[{"equals":{"path":"/reset"}}],"responses":[{"fault":"CONNECTION_RESET_BY_PEER"}]},` +
			`{"responses":[{"fault":"RANDOM_DATA_THEN_CLOSE"}]}]`),
		get("/reset").onlyStatus(), get("/random").onlyStatus(), admin("GET", "/imposters/{a}", ""),
	}},
	{name: "routes mb does not have", steps: []dstep{
		admin("GET", "/nothing", "").onlyStatus(), admin("POST", "/imposters/1/nothing", "").onlyStatus(),
		admin("GET", "/imposters/notanumber", ""), admin("DELETE", "/imposters/notanumber", ""),
		admin("PUT", "/imposters/999/stubs", `{"stubs":[]}`),
	}},
	{name: "an https imposter with the built-in certificate", steps: []dstep{
		post(`{"protocol":"https","port":{a},"name":"tls","stubs":[{"responses":[{"is":{"body":"secure"}}]}]}`),
	}},
	{name: "wait as a function", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"body":"w"},"behaviors":[{"wait":"function () { return 20; }"}]}]}]`), get("/"),
	}},
	{name: "decorate with the logger and request", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"body":"d","headers":{}},"behaviors":[{"decorate":"(config) => { config.response.headers['X-Path'] = config.request.path; config.response.body = JSON.stringify(config.request.query); }"}]}]}]`),
		get("/here?a=1&b=2"),
	}},
	{name: "asynchronous injection", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"inject":"(config) => { setTimeout(() => config.callback({ statusCode: 202, body: 'later' }), 10); }"}]}]`),
		get("/"),
	}},
	{name: "copy from a header and xpath", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"body":"${H} ${X}"},"behaviors":[
			{"copy":{"from":{"headers":"X-In"},"into":"${H}","using":{"method":"regex","selector":"\\d+"}}},
			{"copy":{"from":"body","into":"${X}","using":{"method":"xpath","selector":"//b"}}}]}]}]`),
		call("a", "POST", "/", "<a><b>one</b><b>two</b></a>", [2]string{"X-In", "abc123"}),
	}},
	{name: "a stub added, replaced and deleted while answering", steps: []dstep{
		imposter(`"stubs":[{"responses":[{"is":{"body":"first"}}]}]`), get("/"),
		admin("POST", "/imposters/{a}/stubs", `{"index":0,"stub":{"predicates":[{"equals":{"path":"/new"}}],"responses":[{"is":{"body":"new"}}]}}`).andStored(),
		get("/new"),
		admin("PUT", "/imposters/{a}/stubs/0", `{"responses":[{"is":{"body":"replaced"}}]}`).andStored(),
		get("/new"),
		admin("DELETE", "/imposters/{a}/stubs/0", "").andStored(),
		get("/new"),
	}},
	// Node writes an IPv4 client of a dual-stack listener (an imposter on
	// "::", or on no host when mb has no --host) as ::ffff:127.0.0.1, and mb
	// records and matches it so; an imposter on an IPv4 address sees it
	// plain.
	{name: "the client's address in its socket's family", steps: []dstep{
		imposter(`"host":"::","stubs":[{"predicates":[{"startsWith":{"requestFrom":"::ffff:127.0.0.1:"}},{"equals":{"ip":"::ffff:127.0.0.1"}}],"responses":[{"is":{"body":"mapped"}}]},{"responses":[{"is":{"body":"other"}}]}]`),
		get("/"),
		post(`{"protocol":"http","port":{b},"host":"127.0.0.1","stubs":[{"predicates":[{"equals":{"ip":"127.0.0.1"}}],"responses":[{"is":{"body":"plain"}}]}]}`),
		call("b", "GET", "/", ""),
		// 0.0.0.0 is an IPv4 socket for Node, not Go's dual-stack one.
		post(`{"protocol":"http","port":{c},"host":"0.0.0.0","stubs":[{"predicates":[{"equals":{"ip":"127.0.0.1"}}],"responses":[{"is":{"body":"plain"}}]}]}`),
		call("c", "GET", "/", ""),
	}},
	// JavaScript reads keys by exact name, and mb's `||` gives a falsy
	// field the defaultResponse's.
	{name: "response fields by exact name, falsy ones defaulted", steps: []dstep{
		imposter(`"defaultResponse":{"statusCode":404,"body":"default"},"stubs":[
			{"predicates":[{"equals":{"path":"/is"}}],"responses":[{"is":{"Body":"x","StatusCode":500}}]},
			{"predicates":[{"equals":{"path":"/empty"}}],"responses":[{"is":{"statusCode":201,"body":"b"},"behaviors":[{"decorate":"(config, response) => { response.statusCode = ''; response.body = 0; }"}]}]},
			{"predicates":[{"equals":{"path":"/case"}}],"responses":[{"is":{"statusCode":201,"body":"b"},"behaviors":[{"decorate":"(config, response) => ({ StatusCode: 500, BODY: 'upper', headers: { A: '1' } })"}]}]},
			{"predicates":[{"equals":{"path":"/zero"}}],"responses":[{"is":{"statusCode":0,"body":""}}]}]`),
		get("/is"), get("/empty"), get("/case"), get("/zero"),
	}},
	// Express answers a route mb lacks 404 with its page, whatever the
	// method; Go's mux would answer a known path's other methods 405.
	{name: "a route the admin API lacks", steps: []dstep{
		imposter(""),
		admin("GET", "/imposters/{a}/stubs", ""), admin("PATCH", "/imposters", ""),
		admin("GET", "/no%20such?x=<b>", ""), admin("POST", "/logs", ""),
	}},
}
