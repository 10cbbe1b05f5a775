package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// mountebank starts the reference implementation, mb 2.9.1 from npm, on a
// free loopback port, with --allowInjection and args. The Makefile installs
// it (make node); its absence is a failure, not a skip.
func mountebank(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return gatewaytest.StartMountebank(t, dir, append([]string{"--allowInjection"}, args...)...)
}

// differential holds imposters posted to both systems and the requests
// whose answers must agree.
var differential = []struct {
	name     string
	imposter string // without protocol and port
	requests []diffRequest
}{
	{"is defaults and headers", `"stubs":[{"responses":[{"is":{"statusCode":201,"headers":{"X-A":"1","Content-Type":"text/plain"},"body":"made"}}]}]`,
		[]diffRequest{{method: "GET", path: "/"}}},
	{"json body object", `"stubs":[{"responses":[{"is":{"body":{"a":[1,{"b":"c"}],"d":null}}}]}]`,
		[]diffRequest{{method: "GET", path: "/"}}},
	{"default response", `"defaultResponse":{"statusCode":404,"body":"none"},"stubs":[{"predicates":[{"equals":{"path":"/x"}}],"responses":[{"is":{"body":"x"}}]}]`,
		[]diffRequest{{method: "GET", path: "/x"}, {method: "GET", path: "/y"}}},
	{"equals on fields", `"stubs":[{"predicates":[{"equals":{"method":"POST","path":"/p","query":{"q":"1"},"headers":{"X-H":"v"},"body":"hi"}}],"responses":[{"is":{"body":"yes"}}]}]`,
		[]diffRequest{
			{method: "POST", path: "/p?q=1", headers: map[string]string{"X-H": "V"}, body: "HI"},
			{method: "POST", path: "/p?q=2", headers: map[string]string{"X-H": "v"}, body: "hi"},
			{method: "GET", path: "/p?q=1", headers: map[string]string{"X-H": "v"}, body: "hi"},
		}},
	{"caseSensitive and except", `"stubs":[
		{"predicates":[{"equals":{"path":"/Case"},"caseSensitive":true}],"responses":[{"is":{"body":"exact"}}]},
		{"predicates":[{"equals":{"body":"abc"},"except":"\\d+"}],"responses":[{"is":{"body":"except"}}]}]`,
		[]diffRequest{{method: "GET", path: "/Case"}, {method: "GET", path: "/case"}, {method: "POST", path: "/z", body: "a1b22c"}}},
	{"deepEquals query", `"stubs":[{"predicates":[{"deepEquals":{"query":{"a":"1"}}}],"responses":[{"is":{"body":"deep"}}]}]`,
		[]diffRequest{{method: "GET", path: "/?a=1"}, {method: "GET", path: "/?a=1&b=2"}}},
	{"contains startsWith endsWith matches", `"stubs":[
		{"predicates":[{"contains":{"body":"needle"}}],"responses":[{"is":{"body":"contains"}}]},
		{"predicates":[{"startsWith":{"path":"/api"}}],"responses":[{"is":{"body":"starts"}}]},
		{"predicates":[{"endsWith":{"path":".json"}}],"responses":[{"is":{"body":"ends"}}]},
		{"predicates":[{"matches":{"path":"^/item/\\d+$"}}],"responses":[{"is":{"body":"matches"}}]}]`,
		[]diffRequest{{method: "POST", path: "/", body: "hay needle hay"}, {method: "GET", path: "/api/x"},
			{method: "GET", path: "/f.JSON"}, {method: "GET", path: "/item/42"}, {method: "GET", path: "/item/x"}}},
	{"exists not or and", `"stubs":[
		{"predicates":[{"exists":{"query":{"token":true}}}],"responses":[{"is":{"body":"has token"}}]},
		{"predicates":[{"not":{"equals":{"method":"GET"}}}],"responses":[{"is":{"body":"not get"}}]},
		{"predicates":[{"or":[{"equals":{"path":"/a"}},{"equals":{"path":"/b"}}]}],"responses":[{"is":{"body":"a or b"}}]},
		{"predicates":[{"and":[{"startsWith":{"path":"/c"}},{"endsWith":{"path":"d"}}]}],"responses":[{"is":{"body":"c and d"}}]}]`,
		[]diffRequest{{method: "GET", path: "/?token=1"}, {method: "PUT", path: "/"}, {method: "GET", path: "/b"},
			{method: "GET", path: "/cxd"}, {method: "GET", path: "/cx"}}},
	{"json body fields and jsonpath", `"stubs":[
		{"predicates":[{"equals":{"body":{"user":{"name":"ann"}}}}],"responses":[{"is":{"body":"json ann"}}]},
		{"predicates":[{"equals":{"body":"gold"},"jsonpath":{"selector":"$.tier"}}],"responses":[{"is":{"body":"jsonpath gold"}}]}]`,
		[]diffRequest{{method: "POST", path: "/", body: `{"user":{"name":"ANN","age":3}}`},
			{method: "POST", path: "/", body: `{"tier":"gold"}`}, {method: "POST", path: "/", body: `{"tier":"lead"}`}}},
	{"xpath with namespaces", `"stubs":[{"predicates":[{"equals":{"body":"42"},"xpath":{"selector":"//b:id","ns":{"b":"urn:b"}}}],"responses":[{"is":{"body":"xpath"}}]}]`,
		[]diffRequest{{method: "POST", path: "/", body: `<r xmlns:b="urn:b"><b:id>42</b:id></r>`},
			{method: "POST", path: "/", body: `<r><id>42</id></r>`}}},
	{"form and keyCaseSensitive", `"stubs":[
		{"predicates":[{"equals":{"form":{"user":"ann"}}}],"responses":[{"is":{"body":"form"}}]},
		{"predicates":[{"equals":{"headers":{"X-Key":"v"}},"keyCaseSensitive":true}],"responses":[{"is":{"body":"key case"}}]}]`,
		[]diffRequest{{method: "POST", path: "/", body: "user=ann&x=1", headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}},
			{method: "GET", path: "/", headers: map[string]string{"X-Key": "v"}},
			{method: "GET", path: "/", headers: map[string]string{"x-key": "v"}}}},
	{"repeat cycle", `"stubs":[{"responses":[{"is":{"body":"1"},"repeat":2},{"is":{"body":"2"}}]}]`,
		[]diffRequest{{method: "GET", path: "/"}, {method: "GET", path: "/"}, {method: "GET", path: "/"}, {method: "GET", path: "/"}}},
	{"copy behavior", `"stubs":[{"responses":[{"is":{"statusCode":200,"body":"hello ${NAME} from ${P}"},"behaviors":[
		{"copy":{"from":{"query":"name"},"into":"${NAME}","using":{"method":"regex","selector":".+"}}},
		{"copy":{"from":"path","into":"${P}","using":{"method":"regex","selector":"\\w+"}}}]}]}]`,
		[]diffRequest{{method: "GET", path: "/world?name=ann"}}},
	{"copy jsonpath into json body", `"stubs":[{"responses":[{"is":{"body":{"echo":"${ID}"}},"behaviors":[
		{"copy":{"from":"body","into":"${ID}","using":{"method":"jsonpath","selector":"$.id"}}}]}]}]`,
		[]diffRequest{{method: "POST", path: "/", body: `{"id":"a\"b"}`}}},
	{"lookup behavior", `"stubs":[{"responses":[{"is":{"body":"${row}['name'] is ${row}['tier']"},"behaviors":[
		{"lookup":{"key":{"from":{"query":"id"},"using":{"method":"regex","selector":".+"}},
		"fromDataSource":{"csv":{"path":"users.csv","keyColumn":"id"}},"into":"${row}"}}]}]}]`,
		[]diffRequest{{method: "GET", path: "/?id=2"}}},
	{"wait behavior", `"stubs":[{"responses":[{"is":{"body":"late"},"behaviors":[{"wait":50}]}]}]`,
		[]diffRequest{{method: "GET", path: "/"}}},
	{"binary mode", `"stubs":[{"responses":[{"is":{"_mode":"binary","body":"aGVsbG8="}}]}]`,
		[]diffRequest{{method: "GET", path: "/"}}},
}

type diffRequest struct {
	method, path, body string
	headers            map[string]string
}

type answer struct {
	status int
	body   string
	header map[string]string
}

// headersThatMatter are the response headers compared; Date and framing
// differ by design.
var headersThatMatter = []string{"Content-Type", "X-A", "Connection"}

func ask(t *testing.T, port int, r diffRequest) answer {
	t.Helper()
	h := http.Header{}
	for k, v := range r.headers {
		h[k] = []string{v}
	}
	var body any
	if r.body != "" {
		body = r.body
	}
	resp, err := gatewaytest.Request(r.method, fmt.Sprintf("http://127.0.0.1:%d%s", port, r.path), body, h)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	_, _ = readAll(&sb, resp)
	a := answer{status: resp.StatusCode, body: sb.String(), header: map[string]string{}}
	for _, name := range headersThatMatter {
		a.header[name] = resp.Header.Get(name)
	}
	return a
}

func TestDifferentialAgainstMountebank(t *testing.T) {
	dir := t.TempDir()
	csv, err := os.ReadFile("testdata/users.csv")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "users.csv"), csv, 0o644); err != nil {
		t.Fatal(err)
	}
	mb := mountebank(t, dir)
	rg := gatewaytest.Start(t)
	// riftgate resolves lookup paths against its working directory too.
	if err := os.WriteFile(filepath.Join(rg.Dir, "users.csv"), csv, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range differential {
		t.Run(tc.name, func(t *testing.T) {
			mbPort, rgPort := gatewaytest.FreePort(t), gatewaytest.FreePort(t)
			for url, port := range map[string]int{mb: mbPort, rg.URL: rgPort} {
				imp := fmt.Sprintf(`{"protocol":"http","port":%d,%s}`, port, tc.imposter)
				if status, body := gatewaytest.Do(t, "POST", url+"/imposters", imp, nil); status != 201 {
					t.Fatalf("POST to %s: %d %s", url, status, body)
				}
			}
			for _, r := range tc.requests {
				want, got := ask(t, mbPort, r), ask(t, rgPort, r)
				if want.status != got.status || want.body != got.body {
					t.Errorf("%s %s %q:\n mb       %d %q\n riftgate %d %q", r.method, r.path, r.body, want.status, want.body, got.status, got.body)
				}
				for name, v := range want.header {
					if got.header[name] != v {
						t.Errorf("%s %s: header %s: mb %q, riftgate %q", r.method, r.path, name, v, got.header[name])
					}
				}
			}
		})
	}
}

func readAll(sb *strings.Builder, resp *http.Response) (int64, error) {
	return io.Copy(sb, resp.Body)
}
