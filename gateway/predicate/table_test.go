package predicate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/message"
)

// req is a test request as it goes on the wire: the same spec feeds our
// matcher and the real Mountebank in mb_test.go.
type req struct {
	method  string
	path    string
	query   string // raw, without '?'
	headers [][2]string
	body    string
}

// wireHeaders are the headers mb sees for r: ours, then Host, then
// Content-Length when there is a body.
func (r req) wireHeaders() []message.KV {
	var kvs []message.KV
	for _, h := range r.headers {
		kvs = append(kvs, message.KV{Name: h[0], Value: h[1]})
	}
	kvs = append(kvs, message.KV{Name: "Host", Value: "127.0.0.1"})
	if r.body != "" {
		kvs = append(kvs, message.KV{Name: "Content-Length", Value: itoa(len(r.body))})
	}
	return kvs
}

func (r req) message() *message.Request {
	m := r.method
	if m == "" {
		m = "GET"
	}
	p := r.path
	if p == "" {
		p = "/"
	}
	return &message.Request{Method: m, Path: p, Query: message.ParseQuery(r.query), Headers: r.wireHeaders(), Body: []byte(r.body)}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

type row struct {
	name string
	pred string
	req  req
	want bool
}

var jsonBody = `{"book":[{"title":"Game of Thrones","author":"George R.R. Martin","price":8},{"title":"Catcher in the Rye","author":"J. D. Salinger","price":12}],"Name":"Bob","tags":["a","b"],"n":5,"nil":null,"ok":true}`

const xmlBody = `<books xmlns:isbn="http://schemas.isbn.org/ns/1999/basic.dtd"><book><title>Game of Thrones</title><isbn:summary>Dragons</isbn:summary></book><book lang="en"><title>Catcher in the Rye</title><isbn:summary>It is a book</isbn:summary></book></books>`

var form = [][2]string{{"Content-Type", "application/x-www-form-urlencoded"}}

// table holds every operator x parameter x field case; mb_test.go checks
// that the real Mountebank 2.9.1 gives the same answers.
var table = []row{
	// equals on each field, with the default case insensitivity
	{"equals method", `{"equals":{"method":"post"}}`, req{method: "POST"}, true},
	{"equals method miss", `{"equals":{"method":"PUT"}}`, req{method: "POST"}, false},
	{"equals path", `{"equals":{"path":"/Test"}}`, req{path: "/test"}, true},
	{"equals path miss", `{"equals":{"path":"/test"}}`, req{path: "/test/"}, false},
	{"equals path key case", `{"equals":{"PATH":"/test"}}`, req{path: "/test"}, true},
	{"equals path caseSensitive", `{"equals":{"path":"/Test"},"caseSensitive":true}`, req{path: "/test"}, false},
	{"equals path caseSensitive key", `{"equals":{"Path":"/test"},"caseSensitive":true}`, req{path: "/test"}, false},
	{"equals query", `{"equals":{"query":{"first":"1","second":"2"}}}`, req{query: "Second=2&First=1"}, true},
	{"equals query extra ok", `{"equals":{"query":{"first":"1"}}}`, req{query: "first=1&x=2"}, true},
	{"equals query missing", `{"equals":{"query":{"first":"1"}}}`, req{query: "x=2"}, false},
	{"equals query empty value", `{"equals":{"query":{"first":""}}}`, req{query: "x=2"}, true},
	{"equals query repeated any", `{"equals":{"query":{"a":"2"}}}`, req{query: "a=1&a=2"}, true},
	{"equals query repeated array", `{"equals":{"query":{"a":["2","1"]}}}`, req{query: "a=1&a=2"}, true},
	{"equals query array subset", `{"equals":{"query":{"a":["1"]}}}`, req{query: "a=1&a=2"}, true},
	{"equals query array miss", `{"equals":{"query":{"a":["1","3"]}}}`, req{query: "a=1&a=2"}, false},
	{"equals query number", `{"equals":{"query":{"n":5}}}`, req{query: "n=5"}, true},
	{"equals query caseSensitive key", `{"equals":{"query":{"First":"1"}},"caseSensitive":true}`, req{query: "first=1"}, false},
	{"equals query keyCaseSensitive false", `{"equals":{"query":{"FIRST":"One"}},"caseSensitive":true,"keyCaseSensitive":false}`, req{query: "first=One"}, true},
	{"equals query keyCaseSensitive false value", `{"equals":{"query":{"FIRST":"one"}},"caseSensitive":true,"keyCaseSensitive":false}`, req{query: "first=One"}, false},
	{"equals headers", `{"equals":{"headers":{"accept":"TEXT/plain"}}}`, req{headers: [][2]string{{"Accept", "text/plain"}}}, true},
	{"equals headers empty then value", `{"equals":{"headers":{"x-a":""}}}`, req{headers: [][2]string{{"X-A", ""}, {"X-A", "a"}}}, false},
	{"equals headers value then empty", `{"equals":{"headers":{"x-a":""}}}`, req{headers: [][2]string{{"X-A", "a"}, {"X-A", ""}}}, true},
	{"deepEquals headers empty then value", `{"deepEquals":{"headers":{"x-a":"a","host":"127.0.0.1"}}}`, req{headers: [][2]string{{"X-A", ""}, {"X-A", "a"}}}, true},
	{"equals headers miss", `{"equals":{"headers":{"Accept":"application/xml"}}}`, req{headers: [][2]string{{"Accept", "text/plain"}}}, false},
	{"equals body", `{"equals":{"body":"hello, world"},"caseSensitive":true,"except":"!$"}`, req{body: "hello, world!"}, true},
	{"equals body case", `{"equals":{"body":"Hello, world"},"caseSensitive":true,"except":"!$"}`, req{body: "hello, world!"}, false},
	{"equals body ci", `{"equals":{"body":"HELLO"}}`, req{body: "hello"}, true},
	{"equals empty body", `{"equals":{"body":""}}`, req{}, true},
	{"equals form", `{"equals":{"form":{"name":"Bob Smith"}}}`, req{method: "POST", headers: form, body: "name=Bob+Smith&x=1"}, true},
	{"equals form no form", `{"equals":{"form":{"name":"bob"}}}`, req{method: "POST", body: "name=bob"}, false},
	{"equals unknown field", `{"equals":{"nope":""}}`, req{}, true},
	{"equals unknown field value", `{"equals":{"nope":"x"}}`, req{}, false},
	{"equals multi fields", `{"equals":{"method":"POST","path":"/test","query":{"first":"1"},"headers":{"Accept":"text/plain"}}}`, req{method: "POST", path: "/test", query: "first=1", headers: [][2]string{{"accept", "text/plain"}}}, true},
	// equals on JSON bodies
	{"equals json field", `{"equals":{"body":{"name":"bob"}}}`, req{body: jsonBody}, true},
	{"equals json nested array any", `{"equals":{"body":{"book":{"title":"catcher in the rye"}}}}`, req{body: jsonBody}, true},
	{"equals json number", `{"equals":{"body":{"n":"5"}}}`, req{body: jsonBody}, true},
	{"equals json number literal", `{"equals":{"body":{"n":5}}}`, req{body: jsonBody}, true},
	{"equals json bool", `{"equals":{"body":{"ok":true}}}`, req{body: jsonBody}, true},
	{"equals json array", `{"equals":{"body":{"tags":["b"]}}}`, req{body: jsonBody}, true},
	{"equals json miss", `{"equals":{"body":{"name":"alice"}}}`, req{body: jsonBody}, false},
	{"equals json caseSensitive key", `{"equals":{"body":{"name":"Bob"}},"caseSensitive":true}`, req{body: jsonBody}, false},
	{"equals json not json", `{"equals":{"body":{"name":"bob"}}}`, req{body: "name=bob"}, false},
	{"equals json empty body", `{"equals":{"body":{"name":""}}}`, req{}, false},
	// deepEquals
	{"deepEquals query empty", `{"deepEquals":{"query":{}}}`, req{}, true},
	{"deepEquals query empty miss", `{"deepEquals":{"query":{}}}`, req{query: "a=1"}, false},
	{"deepEquals query exact", `{"deepEquals":{"query":{"first":"1","second":"2"}}}`, req{query: "Second=2&First=1"}, true},
	{"deepEquals query extra", `{"deepEquals":{"query":{"first":"1"}}}`, req{query: "first=1&third=3"}, false},
	{"deepEquals query array", `{"deepEquals":{"query":{"a":["2","1"]}}}`, req{query: "a=1&a=2"}, true},
	{"deepEquals query array partial", `{"deepEquals":{"query":{"a":"1"}}}`, req{query: "a=1&a=2"}, false},
	{"deepEquals path", `{"deepEquals":{"path":"/TEST"}}`, req{path: "/test"}, true},
	{"deepEquals body json", `{"deepEquals":{"body":{"a":"1","b":["y","x"]}}}`, req{body: `{"b":["x","y"],"a":1}`}, true},
	{"deepEquals body json extra", `{"deepEquals":{"body":{"a":"1"}}}`, req{body: `{"a":1,"b":2}`}, false},
	{"deepEquals body string", `{"deepEquals":{"body":"abc"}}`, req{body: "ABC"}, true},
	{"deepEquals headers subset", `{"deepEquals":{"headers":{"host":"127.0.0.1"}}}`, req{}, true},
	// contains, startsWith, endsWith
	{"contains body", `{"contains":{"body":"WORLD"}}`, req{body: "hello world"}, true},
	{"contains body miss", `{"contains":{"body":"mars"}}`, req{body: "hello world"}, false},
	{"contains body cs", `{"contains":{"body":"WORLD"},"caseSensitive":true}`, req{body: "hello world"}, false},
	{"contains header", `{"contains":{"headers":{"content-type":"json"}}}`, req{headers: [][2]string{{"Content-Type", "application/JSON"}}}, true},
	{"contains query repeated", `{"contains":{"query":{"a":"yz"}}}`, req{query: "a=abc&a=xyz"}, true},
	{"contains json", `{"contains":{"body":{"name":"o"}}}`, req{body: jsonBody}, true},
	{"startsWith path", `{"startsWith":{"path":"/API"}}`, req{path: "/api/v1"}, true},
	{"startsWith path miss", `{"startsWith":{"path":"/v1"}}`, req{path: "/api/v1"}, false},
	{"startsWith method", `{"startsWith":{"method":"PO"}}`, req{method: "POST"}, true},
	{"endsWith path", `{"endsWith":{"path":"V1"}}`, req{path: "/api/v1"}, true},
	{"endsWith path miss", `{"endsWith":{"path":"/api"}}`, req{path: "/api/v1"}, false},
	{"endsWith query", `{"endsWith":{"query":{"q":"ar"}}}`, req{query: "q=bar"}, true},
	{"endsWith empty", `{"endsWith":{"body":""}}`, req{body: "x"}, true},
	// matches
	{"matches path", `{"matches":{"path":"^/api/\\d+$"}}`, req{path: "/api/42"}, true},
	{"matches path miss", `{"matches":{"path":"^/api/\\d+$"}}`, req{path: "/api/x"}, false},
	{"matches ci", `{"matches":{"body":"^HELLO"}}`, req{body: "hello"}, true},
	{"matches cs", `{"matches":{"body":"^HELLO"},"caseSensitive":true}`, req{body: "hello"}, false},
	{"matches upper metachar", `{"matches":{"body":"^\\S+$"}}`, req{body: "hello"}, true},
	{"matches header key ci", `{"matches":{"headers":{"X-ID":"^[0-9]+$"}}}`, req{headers: [][2]string{{"x-id", "123"}}}, true},
	{"matches header key cs", `{"matches":{"headers":{"X-ID":"^[0-9]+$"}},"caseSensitive":true}`, req{headers: [][2]string{{"x-id", "123"}}}, false},
	{"matches unicode escape", `{"matches":{"body":"^caf\\u00e9 \\u00C9T\\u00c9$"}}`, req{body: "café été"}, true},
	{"matches except", `{"matches":{"body":"^world"},"except":"^hello "}`, req{body: "hello world"}, true},
	{"matches json", `{"matches":{"body":{"name":"^B"}}}`, req{body: jsonBody}, true},
	{"matches query absent", `{"matches":{"query":{"q":"^$"}}}`, req{}, true},
	// exists
	{"exists query", `{"exists":{"query":{"q":true,"search":false}}}`, req{query: "q=1"}, true},
	{"exists query miss", `{"exists":{"query":{"q":true,"search":false}}}`, req{query: "q=1&search=2"}, false},
	{"exists query empty value", `{"exists":{"query":{"q":true}}}`, req{query: "q="}, false},
	{"exists query repeated empty", `{"exists":{"query":{"q":true}}}`, req{query: "q=&q="}, true},
	{"exists headers", `{"exists":{"headers":{"Accept":true,"X-Rate-Limit":false}}}`, req{headers: [][2]string{{"accept", "*/*"}}}, true},
	{"exists body false", `{"exists":{"method":true,"body":false}}`, req{}, true},
	{"exists body false miss", `{"exists":{"method":true,"body":false}}`, req{body: "x"}, false},
	{"exists json", `{"exists":{"body":{"name":true,"missing":false}}}`, req{body: jsonBody}, true},
	{"exists json empty body", `{"exists":{"body":{"missing":false}}}`, req{}, false},
	{"exists form", `{"exists":{"form":{"a":true}}}`, req{method: "POST", headers: form, body: "a=1"}, true},
	// except
	{"except path", `{"equals":{"path":"/users"},"except":"/\\d+$"}`, req{path: "/users/123"}, true},
	{"except ci", `{"equals":{"body":"x"},"except":"A"}`, req{body: "aXa"}, true},
	{"except cs", `{"equals":{"body":"x"},"except":"A","caseSensitive":true}`, req{body: "aXa"}, false},
	{"except query", `{"equals":{"query":{"id":"abc"}},"except":"\\d"}`, req{query: "id=a1b2c3"}, true},
	// jsonpath
	{"jsonpath any", `{"equals":{"body":"Catcher in the Rye"},"jsonpath":{"selector":"$..title"}}`, req{body: jsonBody}, true},
	{"jsonpath cs", `{"equals":{"body":"Catcher in the Rye"},"jsonpath":{"selector":"$..title"},"caseSensitive":true}`, req{body: jsonBody}, true},
	{"jsonpath cs selector", `{"equals":{"body":"Catcher in the Rye"},"jsonpath":{"selector":"$..TITLE"},"caseSensitive":true}`, req{body: jsonBody}, false},
	{"jsonpath upper selector", `{"equals":{"body":"RYE"},"jsonpath":{"selector":"$..TITLE"},"except":"CATCHER IN THE "}`, req{body: jsonBody}, true},
	{"jsonpath matches", `{"matches":{"body":"^Catcher"},"jsonpath":{"selector":"$..title"}}`, req{body: jsonBody}, true},
	{"jsonpath exists", `{"exists":{"body":true},"jsonpath":{"selector":"$..title"}}`, req{body: jsonBody}, true},
	{"jsonpath exists false", `{"exists":{"body":false},"jsonpath":{"selector":"$..publisher"}}`, req{body: jsonBody}, true},
	{"jsonpath index", `{"equals":{"body":"j. d. salinger"},"jsonpath":{"selector":"$.book[1].author"}}`, req{body: jsonBody}, true},
	{"jsonpath number", `{"equals":{"body":12},"jsonpath":{"selector":"$.book[1].price"}}`, req{body: jsonBody}, true},
	{"jsonpath deepEquals one", `{"deepEquals":{"body":"Bob"},"jsonpath":{"selector":"$.Name"}}`, req{body: jsonBody}, true},
	{"jsonpath deepEquals all", `{"deepEquals":{"body":["J. D. Salinger","George R.R. Martin"]},"jsonpath":{"selector":"$.book..author"}}`, req{body: jsonBody}, true},
	{"jsonpath deepEquals partial", `{"deepEquals":{"body":"J. D. Salinger"},"jsonpath":{"selector":"$.book..author"}}`, req{body: jsonBody}, false},
	{"jsonpath not json", `{"equals":{"body":"x"},"jsonpath":{"selector":"$.a"}}`, req{body: "x"}, false},
	{"jsonpath filter", `{"equals":{"body":"game of thrones"},"jsonpath":{"selector":"$.book[?(@.price < 10)].title"}}`, req{body: jsonBody}, true},
	{"jsonpath keyCaseSensitive", `{"equals":{"body":"bob"},"jsonpath":{"selector":"$.Name"},"keyCaseSensitive":true}`, req{body: jsonBody}, false},
	// xpath
	{"xpath any", `{"equals":{"body":"Catcher in the Rye"},"xpath":{"selector":"//title"}}`, req{body: xmlBody}, true},
	{"xpath ns", `{"equals":{"body":"it is a book"},"xpath":{"selector":"//isbn:summary","ns":{"isbn":"http://schemas.isbn.org/ns/1999/basic.dtd"}}}`, req{body: xmlBody}, true},
	{"xpath attribute", `{"equals":{"body":"en"},"xpath":{"selector":"//book/@lang"}}`, req{body: xmlBody}, true},
	{"xpath count", `{"equals":{"body":2},"xpath":{"selector":"count(//book)"}}`, req{body: xmlBody}, true},
	{"xpath exists", `{"exists":{"body":true},"xpath":{"selector":"//title"}}`, req{body: xmlBody}, true},
	{"xpath exists false", `{"exists":{"body":false},"xpath":{"selector":"//publisher"}}`, req{body: xmlBody}, true},
	{"xpath deepEquals", `{"deepEquals":{"body":["Game of Thrones","Catcher in the Rye"]},"xpath":{"selector":"//title"}}`, req{body: xmlBody}, true},
	{"xpath matches", `{"matches":{"body":"^catcher"},"xpath":{"selector":"//title"}}`, req{body: xmlBody}, true},
	{"xpath cs", `{"equals":{"body":"catcher in the rye"},"xpath":{"selector":"//title"},"caseSensitive":true}`, req{body: xmlBody}, false},
	// malformed XML, read as mb's DOM parser recovers it
	{"xpath unclosed", `{"equals":{"body":"x"},"xpath":{"selector":"/r/text()"}}`, req{body: "<r><b>x</r>"}, true},
	{"xpath unclosed closes at once", `{"exists":{"body":false},"xpath":{"selector":"//a"}}`, req{body: "<a>"}, false},
	{"xpath stray lt", `{"equals":{"body":"a < b"},"xpath":{"selector":"/r"}}`, req{body: "<r>a < b</r>"}, true},
	{"xpath mismatched end tag", `{"equals":{"body":2},"xpath":{"selector":"count(/r/b)"}}`, req{body: "<r><b>1</b><b>2</r>"}, true},
	{"xpath second root is text", `{"equals":{"body":0},"xpath":{"selector":"count(//c)"}}`, req{body: "<r/><c/>"}, true},
	{"xpath first child an instruction", `{"equals":{"body":"d"},"xpath":{"selector":"/r"}}`, req{body: "<r><?p d?>x</r>"}, true},
	{"xpath first child an empty instruction", `{"exists":{"body":false},"xpath":{"selector":"/r"}}`, req{body: "<r><?p?></r>"}, true},
	// not, or, and
	{"not", `{"not":{"equals":{"method":"GET"}}}`, req{method: "POST"}, true},
	{"not miss", `{"not":{"equals":{"method":"GET"}}}`, req{}, false},
	{"or", `{"or":[{"equals":{"path":"/a"}},{"equals":{"path":"/b"}}]}`, req{path: "/b"}, true},
	{"or miss", `{"or":[{"equals":{"path":"/a"}},{"equals":{"path":"/b"}}]}`, req{path: "/c"}, false},
	{"and", `{"and":[{"startsWith":{"path":"/a"}},{"endsWith":{"path":"z"}}]}`, req{path: "/a/z"}, true},
	{"and miss", `{"and":[{"startsWith":{"path":"/a"}},{"endsWith":{"path":"z"}}]}`, req{path: "/a/y"}, false},
	{"first operator wins", `{"equals":{"path":"/a"},"contains":{"path":"zzz"}}`, req{path: "/a"}, true},
}

func TestTable(t *testing.T) {
	for _, c := range table {
		t.Run(c.name, func(t *testing.T) {
			p, err := Compile(json.RawMessage(c.pred), Options{})
			if err != nil {
				t.Fatalf("compile %s: %v", c.pred, err)
			}
			if got := p.Match(c.req.message()); got != c.want {
				t.Fatalf("%s on %+v: got %v, want %v", c.pred, c.req, got, c.want)
			}
			// The generic algorithm must agree with the fast path.
			if l, ok := p.(*leaf); ok && l.fast != nil {
				slow := *l
				slow.fast = nil
				if got := slow.Match(c.req.message()); got != c.want {
					t.Fatalf("generic path: got %v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	for _, c := range compileErrors {
		_, err := Compile(json.RawMessage(c.pred), c.opts)
		if err == nil {
			t.Fatalf("%s: compiled", c.pred)
		}
		if !strings.Contains(err.Error(), c.code+": "+c.msg) {
			t.Fatalf("%s: error %q, want %s: %s", c.pred, err, c.code, c.msg)
		}
	}
	p, err := Compile(json.RawMessage(`{"inject":"function () { return true; }"}`), Options{Inject: inject})
	if err != nil || !p.Match(&message.Request{}) {
		t.Fatalf("inject hook: %v", err)
	}
}

func inject(string) (Predicate, error) { return allP(nil), nil }

// compileErrors are refusals; those marked mb are mb's own code and
// message, which mb_test.go checks.
var compileErrors = []struct {
	pred, code, msg string
	opts            Options
	mb              bool
}{
	{`{"foo":{"path":"/"}}`, "bad data", "missing predicate", Options{}, true},
	{`"x"`, "bad data", "missing predicate", Options{}, false},
	{`{"not":{"bar":1}}`, "bad data", "missing predicate", Options{}, true},
	{`{"matches":{"path":"(?<=a)b"}}`, "bad data", "invalid regular expression", Options{}, false},
	{`{"equals":{"path":"/"},"except":"["}`, "bad data", "invalid regular expression", Options{}, false},
	{`{"equals":{"body":"a"},"xpath":{"selector":"//a[["}}`, "bad data", "malformed xpath predicate selector", Options{}, true},
	{`{"or":{"equals":{}}}`, "bad data", `"or" must be an array`, Options{}, false},
	{`{"inject":"function () { return true; }"}`, "invalid injection", "JavaScript injection is not allowed unless mb is run with the --allowInjection flag", Options{}, true},
	{`{"wasm":{"module":"m"}}`, "bad data", "wasm predicates need", Options{Inject: inject}, false},
}
