package behavior

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/riftgate/riftgate/gateway/imposter"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/message"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type req struct {
	method  string
	target  string // path and query
	headers [][2]string
	body    string
}

func (r req) wire() (string, string, [][2]string) {
	m, t := r.method, r.target
	if m == "" {
		m = "GET"
	}
	if t == "" {
		t = "/"
	}
	hs := append([][2]string{}, r.headers...)
	hs = append(hs, [2]string{"Host", "127.0.0.1"})
	if r.body != "" {
		hs = append(hs, [2]string{"Content-Length", strconv.Itoa(len(r.body))})
	}
	return m, t, hs
}

func (r req) message() *message.Request {
	m, t, hs := r.wire()
	path, query, _ := strings.Cut(t, "?")
	out := &message.Request{Method: m, Path: path, Query: message.ParseQuery(query), Body: []byte(r.body)}
	for _, h := range hs {
		out.Headers = append(out.Headers, message.KV{Name: h[0], Value: h[1]})
	}
	return out
}

// result is the part of an answer the table checks.
type result struct {
	status  int
	headers [][2]string
	body    string
}

type row struct {
	name     string
	response string // the stub response, with behaviors
	req      req
	want     result
}

// csvPath is written by writeCSV before the table runs; the table refers
// to it as CSVPATH.
func writeCSV(t testing.TB) string {
	dir := t.TempDir()
	p := filepath.Join(dir, "people.csv")
	data := "id,name,age,city\n123,Bob Smith,42,\"Paris, France\"\n456,Alice,31,Rome\n123,Duplicate,0,Nowhere\n"
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	semi := filepath.Join(dir, "semi.csv")
	if err := os.WriteFile(semi, []byte("code;label\nA1;first\nB2;second\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func table(dir string) []row {
	csvPath := filepath.Join(dir, "people.csv")
	semiPath := filepath.Join(dir, "semi.csv")
	return []row{
		{"copy regex path", `{"is":{"body":"id ${ID}"},"behaviors":[{"copy":{"from":"path","into":"${ID}","using":{"method":"regex","selector":"\\d+"}}}]}`,
			req{target: "/orders/123"}, result{200, nil, "id 123"}},
		{"copy regex groups", `{"is":{"body":"${T}[1] ${T}[2] ${T}"},"behaviors":[{"copy":{"from":{"query":"id"},"into":"${T}","using":{"method":"regex","selector":"(\\w+)-(\\d+)"}}}]}`,
			req{target: "/?id=abc-42"}, result{200, nil, "abc 42 abc-42"}},
		{"copy into headers and status", `{"is":{"statusCode":"${CODE}","headers":{"X-Echo":"v-${CODE}"},"body":"x"},"behaviors":[{"copy":{"from":{"headers":"x-code"},"into":"${CODE}","using":{"method":"regex","selector":"\\d+"}}}]}`,
			req{headers: [][2]string{{"X-Code", "201"}}}, result{201, [][2]string{{"X-Echo", "v-201"}}, "x"}},
		{"copy jsonpath into json body", `{"is":{"body":{"greeting":"hello ${NAME}","name":"${NAME}"}},"behaviors":[{"copy":{"from":"body","into":"${NAME}","using":{"method":"jsonpath","selector":"$.name"}}}]}`,
			req{method: "POST", body: `{"name":"Bob \"The\" Builder\\"}`}, result{200, nil, "{\n    \"greeting\": \"hello Bob \\\"The\\\" Builder\\\\\",\n    \"name\": \"Bob \\\"The\\\" Builder\\\\\"\n}"}},
		{"copy token in a json key moves it last", `{"is":{"body":{"${K}":"v","a":"${K}","z":{"${K}[0]":[1.50,"${K}",{}],"e":[]}}},"behaviors":[{"copy":{"from":"path","into":"${K}","using":{"method":"regex","selector":"[a-z]+"}}}]}`,
			req{target: "/key"}, result{200, nil, "{\n    \"a\": \"key\",\n    \"z\": {\n        \"e\": [],\n        \"key\": [\n            1.5,\n            \"key\",\n            {}\n        ]\n    },\n    \"key\": \"v\"\n}"}},
		{"copy json integer keys first", `{"is":{"body":{"b":"${K}","10":"ten","2":"two"}},"behaviors":[{"copy":{"from":"path","into":"${K}","using":{"method":"regex","selector":"[a-z]+"}}}]}`,
			req{target: "/key"}, result{200, nil, "{\n    \"2\": \"two\",\n    \"10\": \"ten\",\n    \"b\": \"key\"\n}"}},
		{"copy jsonpath indices", `{"is":{"body":"${T}[0]|${T}[1]|${T}"},"behaviors":[{"copy":{"from":"body","into":"${T}","using":{"method":"jsonpath","selector":"$..title"}}}]}`,
			req{method: "POST", body: `{"books":[{"title":"A"},{"title":"B"}]}`}, result{200, nil, "A|B|A"}},
		{"copy jsonpath descendant order", `{"is":{"body":"${T}[0]|${T}[1]|${T}[2]|${T}[3]|${T}[4]"},"behaviors":[{"copy":{"from":"body","into":"${T}","using":{"method":"jsonpath","selector":"$..title"}}}]}`,
			req{method: "POST", body: `{"title":"A","x":{"title":"B","y":{"title":"C"},"w":{"title":"E"}},"z":[{"title":"D"}]}`}, result{200, nil, "A|B|C|E|D"}},
		{"copy jsonpath wildcard order", `{"is":{"body":"${T}[0]|${T}[1]|${T}[2]"},"behaviors":[{"copy":{"from":"body","into":"${T}","using":{"method":"jsonpath","selector":"$.*"}}}]}`,
			req{method: "POST", body: `{"z":"1","a":"2","m":"3"}`}, result{200, nil, "1|2|3"}},
		{"copy jsonpath number", `{"is":{"body":"n=${N}"},"behaviors":[{"copy":{"from":"body","into":"${N}","using":{"method":"jsonpath","selector":"$.n"}}}]}`,
			req{method: "POST", body: `{"n":1.50}`}, result{200, nil, "n=1.5"}},
		{"copy xpath ns", `{"is":{"body":"t=${T}"},"behaviors":[{"copy":{"from":"body","into":"${T}","using":{"method":"xpath","selector":"//b:title","ns":{"b":"urn:books"}}}}]}`,
			req{method: "POST", body: `<r xmlns:b="urn:books"><b:title>Dune</b:title></r>`}, result{200, nil, "t=Dune"}},
		{"copy xpath attribute", `{"is":{"body":"${L}"},"behaviors":[{"copy":{"from":"body","into":"${L}","using":{"method":"xpath","selector":"//book/@lang"}}}]}`,
			req{method: "POST", body: `<r><book lang="fr">x</book></r>`}, result{200, nil, "fr"}},
		{"copy ignoreCase", `{"is":{"body":"${X}"},"behaviors":[{"copy":{"from":"path","into":"${X}","using":{"method":"regex","selector":"ABC\\d","options":{"ignoreCase":true}}}}]}`,
			req{target: "/abc1"}, result{200, nil, "abc1"}},
		{"copy no match leaves token", `{"is":{"body":"${X}"},"behaviors":[{"copy":{"from":"path","into":"${X}","using":{"method":"regex","selector":"\\d+"}}}]}`,
			req{target: "/none"}, result{200, nil, "${X}"}},
		{"copy missing header is undefined", `{"is":{"body":"${X}"},"behaviors":[{"copy":{"from":{"headers":"X-Missing"},"into":"${X}","using":{"method":"regex","selector":".*"}}}]}`,
			req{}, result{200, nil, "undefined"}},
		{"copy object form names the field exactly", `{"is":{"body":"${X}"},"behaviors":[{"copy":{"from":{"Query":"a"},"into":"${X}","using":{"method":"regex","selector":".+"}}}]}`,
			req{target: "/?a=1"}, result{200, nil, "undefined"}},
		{"copy string form ignores case", `{"is":{"body":"${X}"},"behaviors":[{"copy":{"from":"PATH","into":"${X}","using":{"method":"regex","selector":".+"}}}]}`,
			req{target: "/p"}, result{200, nil, "/p"}},
		{"copy jsonpath over query object", `{"is":{"body":"${X}"},"behaviors":[{"copy":{"from":"query","into":"${X}","using":{"method":"jsonpath","selector":"$.a"}}}]}`,
			req{target: "/?a=1&a=2&b=3"}, result{200, nil, "1,2"}},
		{"copy repeated query first", `{"is":{"body":"${X}"},"behaviors":[{"copy":{"from":{"query":"A"},"into":"${X}","using":{"method":"regex","selector":".+"}}}]}`,
			req{target: "/?a=1&a=2"}, result{200, nil, "1"}},
		{"copy unmatched group", `{"is":{"body":"[${X}[2]]"},"behaviors":[{"copy":{"from":"path","into":"${X}","using":{"method":"regex","selector":"(a)|(b)"}}}]}`,
			req{target: "/a"}, result{200, nil, "[,]"}},
		{"copy header name token", `{"is":{"headers":{"X-${N}":"1"},"body":""},"behaviors":[{"copy":{"from":"path","into":"${N}","using":{"method":"regex","selector":"[a-z]+"}}}]}`,
			req{target: "/name"}, result{200, [][2]string{{"X-name", "1"}}, ""}},
		{"lookup csv", `{"is":{"body":"${row}['name'] is ${row}[\"age\"] from ${row}[city]"},"behaviors":[{"lookup":{"key":{"from":"path","using":{"method":"regex","selector":"\\d+"}},"fromDataSource":{"csv":{"path":"` + csvPath + `","keyColumn":"id"}},"into":"${row}"}}]}`,
			req{target: "/people/123"}, result{200, nil, "Bob Smith is 42 from Paris, France"}},
		{"lookup csv miss", `{"is":{"body":"${row}['name']"},"behaviors":[{"lookup":{"key":{"from":"path","using":{"method":"regex","selector":"\\d+"}},"fromDataSource":{"csv":{"path":"` + csvPath + `","keyColumn":"id"}},"into":"${row}"}}]}`,
			req{target: "/people/999"}, result{200, nil, "${row}['name']"}},
		{"lookup csv index and delimiter", `{"is":{"body":"${r}[label]"},"behaviors":[{"lookup":{"key":{"from":{"query":"c"},"using":{"method":"regex","selector":"(\\w)(\\d)"},"index":0},"fromDataSource":{"csv":{"path":"` + semiPath + `","keyColumn":"code","delimiter":";"}},"into":"${r}"}}]}`,
			req{target: "/?c=B2"}, result{200, nil, "second"}},
		{"lookup jsonpath key into json", `{"is":{"body":{"who":"${p}['name']"}},"behaviors":[{"lookup":{"key":{"from":"body","using":{"method":"jsonpath","selector":"$.id"}},"fromDataSource":{"csv":{"path":"` + csvPath + `","keyColumn":"id"}},"into":"${p}"}}]}`,
			req{method: "POST", body: `{"id":456}`}, result{200, nil, "{\n    \"who\": \"Alice\"\n}"}},
		{"legacy _behaviors", `{"is":{"body":"${A} ${row}[name]"},"_behaviors":{"copy":[{"from":"path","into":"${A}","using":{"method":"regex","selector":"\\d+"}}],"lookup":{"key":{"from":"path","using":{"method":"regex","selector":"\\d+"}},"fromDataSource":{"csv":{"path":"` + csvPath + `","keyColumn":"id"}},"into":"${row}"},"wait":1}}`,
			req{target: "/456"}, result{200, nil, "456 Alice"}},
		{"behaviors in order", `{"is":{"body":"${B}"},"behaviors":[{"copy":{"from":{"query":"q"},"into":"${B}","using":{"method":"regex","selector":".+"}}},{"copy":{"from":"method","into":"${M}","using":{"method":"regex","selector":".+"}}}]}`,
			req{target: "/?q=%24%7BM%7D"}, result{200, nil, "GET"}},
		{"wait then copy", `{"is":{"body":"${B}"},"behaviors":[{"wait":5},{"copy":{"from":"method","into":"${B}","using":{"method":"regex","selector":".+"}}}]}`,
			req{method: "PUT"}, result{200, nil, "PUT"}},
	}
}

// render builds the Response the engine hands to behaviors from a stub's
// "is": a string statusCode goes to StatusText, an object body is rendered
// as JSON.stringify(body, null, 4) (keys here are in sorted order, which
// is what encoding/json writes).
func render(t interface{ Fatal(...any) }, response string) *Response {
	var r struct {
		Is struct {
			StatusCode json.RawMessage   `json:"statusCode"`
			Headers    map[string]string `json:"headers"`
			Body       json.RawMessage   `json:"body"`
		} `json:"is"`
	}
	if err := json.Unmarshal([]byte(response), &r); err != nil {
		t.Fatal(err)
	}
	out := &Response{Response: &message.Response{StatusCode: 200}}
	if len(r.Is.StatusCode) > 0 {
		var s string
		if json.Unmarshal(r.Is.StatusCode, &s) == nil {
			out.StatusText = s
		} else if err := json.Unmarshal(r.Is.StatusCode, &out.StatusCode); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range r.Is.Headers {
		out.Headers = append(out.Headers, message.KV{Name: k, Value: v})
	}
	var s string
	switch {
	case len(r.Is.Body) == 0:
	case json.Unmarshal(r.Is.Body, &s) == nil:
		out.Body = []byte(s)
	default:
		var v any
		if err := json.Unmarshal(r.Is.Body, &v); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "    ")
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		out.Body = bytes.TrimSuffix(b.Bytes(), []byte("\n"))
		out.JSONBody = true
	}
	return out
}

// stored is a response as the imposter package stores it, a legacy
// `_behaviors` object upcast, which is what Compile is given.
func stored(t testing.TB, response string) json.RawMessage {
	t.Helper()
	st, err := imposter.ParseStub([]byte(`{"responses":[` + response + `]}`))
	if err != nil {
		t.Fatalf("%s: %v", response, err)
	}
	var obj struct {
		Responses []json.RawMessage `json:"responses"`
	}
	if err := json.Unmarshal(st.JSON(), &obj); err != nil {
		t.Fatal(err)
	}
	return obj.Responses[0]
}

func TestTable(t *testing.T) {
	dir := writeCSV(t)
	for _, c := range table(dir) {
		t.Run(c.name, func(t *testing.T) {
			b, err := Compile(stored(t, c.response), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if w := b.Warnings(); len(w) > 0 {
				t.Fatalf("warnings: %v", w)
			}
			resp := render(t, c.response)
			if err := b.Apply(context.Background(), c.req.message(), resp); err != nil {
				t.Fatal(err)
			}
			status := resp.StatusCode
			if resp.StatusText != "" {
				if status, err = strconv.Atoi(resp.StatusText); err != nil {
					t.Fatalf("status %q", resp.StatusText)
				}
			}
			if status != c.want.status {
				t.Errorf("status %d, want %d", status, c.want.status)
			}
			for _, h := range c.want.headers {
				if v, ok := resp.Header(h[0]); !ok || v != h[1] {
					t.Errorf("header %s = %q, want %q (headers %v)", h[0], v, h[1], resp.Headers)
				}
			}
			if string(resp.Body) != c.want.body {
				t.Errorf("body %q, want %q", resp.Body, c.want.body)
			}
		})
	}
}

func TestWait(t *testing.T) {
	b, err := Compile(json.RawMessage(`{"is":{},"behaviors":[{"wait":30},{"wait":20}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp := &Response{Response: &message.Response{}}
	start := time.Now()
	if err := b.Apply(context.Background(), &message.Request{}, resp); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("waited %v, want at least 50ms", el)
	}
	d, err := b.ApplyDeferred(context.Background(), &message.Request{}, resp)
	if err != nil || d != 50*time.Millisecond {
		t.Fatalf("deferred wait %v, %v", d, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	long, err := Compile(json.RawMessage(`{"is":{},"behaviors":[{"wait":60000}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := long.Apply(ctx, &message.Request{}, resp); err != context.DeadlineExceeded {
		t.Fatalf("cancelled wait: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("cancelled wait took %v", el)
	}
}

// errorTable holds validation failures with mb's code and message.
var errorTable = []struct{ response, code, msg string }{
	{`{"is":{},"behaviors":[{"nope":1}]}`, "bad data", `Unrecognized behavior: "nope"`},
	{`{"is":{},"behaviors":[{"wait":1,"copy":{}}]}`, "bad data", "Each behavior object must have only one behavior type"},
	{`{"is":{},"behaviors":[{"wait":-1}]}`, "bad data", `wait behavior "wait" field must be an integer greater than or equal to 0`},
	{`{"is":{},"behaviors":[{"wait":true}]}`, "bad data", `wait behavior "wait" field must be a string or a number`},
	{`{"is":{},"behaviors":[{"copy":{"into":"${X}","using":{"method":"regex","selector":"x"}}}]}`, "bad data", `copy behavior "from" field required`},
	{`{"is":{},"behaviors":[{"copy":{"from":{"a":"b","c":"d"},"into":"${X}","using":{"method":"regex","selector":"x"}}}]}`, "bad data", `copy behavior "from" field must have exactly one key`},
	{`{"is":{},"behaviors":[{"copy":{"from":"path","into":5,"using":{"method":"regex","selector":"x"}}}]}`, "bad data", `copy behavior "into" field must be a string, representing the token to replace in response fields`},
	{`{"is":{},"behaviors":[{"copy":{"from":"path","into":"${X}","using":{"method":"sql","selector":"x"}}}]}`, "bad data", `copy behavior "using.method" field must be one of [regex, xpath, jsonpath]`},
	{`{"is":{},"behaviors":[{"copy":{"from":"path","into":"${X}","using":{"method":"regex"}}}]}`, "bad data", `copy behavior "using.selector" field required`},
	{`{"is":{},"behaviors":[{"lookup":{"key":{"from":"path","using":{"method":"regex","selector":"x"}},"fromDataSource":{"csv":{"path":"x.csv"}},"into":"${R}"}}]}`, "bad data", `lookup behavior "fromDataSource.csv.keyColumn" field required`},
	{`{"is":{},"behaviors":[{"lookup":{"key":{"using":{"method":"regex","selector":"x"}},"fromDataSource":{"csv":{"path":"x.csv","keyColumn":"id"}},"into":"${R}"}}]}`, "bad data", `lookup behavior "key.from" field required`},
	{`{"is":{},"behaviors":[{"lookup":{"key":{"from":"path","using":{"method":"regex","selector":"x"}},"fromDataSource":{"sql":{}},"into":"${R}"}}]}`, "bad data", `lookup behavior "fromDataSource" field must be one of [csv]`},
	{`{"is":{},"behaviors":[{"decorate":5}]}`, "bad data", `decorate behavior "decorate" field must be a string, representing a JavaScript function`},
	{`{"is":{},"behaviors":[{"decorate":"function (config) {}"}]}`, "invalid injection", injectionDisabled},
	{`{"is":{},"behaviors":[{"wait":"100"}]}`, "invalid injection", injectionDisabled},
	{`{"is":{},"behaviors":[{"wait":"function () { return 1; }"}]}`, "invalid injection", injectionDisabled},
	{`{"is":{},"behaviors":[{"shellTransform":"echo"}]}`, "invalid injection", shellDisabled},
	{`{"is":{},"_behaviors":{"decorate":"function (config) {}"}}`, "invalid injection", injectionDisabled},
}

func TestCompileErrors(t *testing.T) {
	for _, c := range errorTable {
		_, err := Compile(stored(t, c.response), Options{Inject: InjectHooks{}})
		if err == nil {
			t.Errorf("%s: compiled", c.response)
			continue
		}
		if err.Error() != c.code+": "+c.msg {
			t.Errorf("%s: %v, want %s: %s", c.response, err, c.code, c.msg)
		}
	}
}

// A binary body's tokens live in its base64 text, which decoding loses:
// they are replaced there, and the text decoded after, as mb does.
func TestReplaceInBinaryText(t *testing.T) {
	for _, c := range []struct {
		text string
		tcp  bool
		want string
		none bool // NoDefault: truthy data, no bytes
	}{
		{text: "${X}", want: "abc"},
		{text: "QUJD${X}", want: "ABCabc"},
		{text: "${X}", tcp: true, want: "abc"},
		{text: "${Y}=", tcp: true, want: "", none: true},
	} {
		fields, err := message.ParseResponseFields(json.RawMessage(`{"_mode":"binary","body":` + string(message.AppendJSONString(nil, c.text)) + `}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, _, err := fields.Response(&message.ResponseFields{})
		if err != nil {
			t.Fatal(err)
		}
		replaceTokens(&Response{Response: resp, TCP: c.tcp}, [][2]string{{"${X}", "YWJj"}, {"${Y}", ""}})
		if string(resp.Body) != c.want || resp.NoDefault != c.none {
			t.Errorf("%q (tcp %v): body %q, NoDefault %v; want %q, %v", c.text, c.tcp, resp.Body, resp.NoDefault, c.want, c.none)
		}
	}
}
