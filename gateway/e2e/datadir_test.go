package e2e_test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// datadirPorts are the imposters of the round trip, by role.
type datadirPorts struct {
	http, https, tcp, smtp, once, always, added int
	up                                          string
}

// datadirUpstream answers each path with the path and how many times it
// was asked for it: a proxy that calls it again shows, and two servers
// asked the same sequence see the same answers once reset.
type datadirUpstream struct {
	mu     sync.Mutex
	counts map[string]int
}

func (u *datadirUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.counts[r.URL.Path]++
	n := u.counts[r.URL.Path]
	u.mu.Unlock()
	w.Header().Set("X-Upstream", "yes")
	fmt.Fprintf(w, "%s#%d", r.URL.Path, n)
}

func (u *datadirUpstream) reset() {
	u.mu.Lock()
	u.counts = map[string]int{}
	u.mu.Unlock()
}

// script is a list of requests to the imposters; run gives each one's
// answer as a line, so that two servers' runs compare as text.
type script []func(t *testing.T) string

func (s script) run(t *testing.T) []string {
	t.Helper()
	out := make([]string, len(s))
	for i, step := range s {
		out[i] = step(t)
	}
	return out
}

var tlsClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	DisableKeepAlives: true,
	TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the imposter's self-signed pair
}}

func httpStep(scheme string, port int, path string) func(t *testing.T) string {
	return func(t *testing.T) string {
		resp, err := tlsClient.Get(fmt.Sprintf("%s://127.0.0.1:%d%s", scheme, port, path))
		if err != nil {
			if strings.Contains(err.Error(), "connection refused") {
				return fmt.Sprintf("%d%s refused", port, path)
			}
			t.Fatalf("%d%s: %v", port, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d%s %d %q upstream=%q", port, path, resp.StatusCode, b, resp.Header.Get("X-Upstream"))
	}
}

func tcpStep(port int, data string) func(t *testing.T) string {
	return func(t *testing.T) string {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 5*time.Second)
		if err != nil {
			return fmt.Sprintf("tcp %d refused", port)
		}
		defer c.Close()
		if _, err := c.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
		// The first bytes may take a while on a busy machine; the rest
		// follow at once.
		buf := make([]byte, 4096)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _ := c.Read(buf)
		rest, _ := tcpRead(t, c, 200*time.Millisecond)
		return fmt.Sprintf("tcp %d %q", port, append(buf[:n], rest...))
	}
}

func smtpStep(port int) func(t *testing.T) string {
	return func(t *testing.T) string {
		// Plain SMTP: mb's STARTTLS certificate has expired, riftgate's is
		// its own; neither is what this test is about.
		c, err := smtp.Dial("127.0.0.1:" + strconv.Itoa(port))
		if err != nil {
			return fmt.Sprintf("smtp %d refused", port)
		}
		defer c.Close()
		err = c.Mail("a@example.com")
		if err == nil {
			err = c.Rcpt("b@example.com")
		}
		if err == nil {
			var w io.WriteCloser
			if w, err = c.Data(); err == nil {
				_, _ = w.Write([]byte("From: a@example.com\r\nTo: b@example.com\r\nSubject: hi\r\n\r\nhello\r\n"))
				err = w.Close()
			}
		}
		if err == nil {
			err = c.Quit()
		}
		return fmt.Sprintf("smtp %d err=%v", port, err)
	}
}

// decodeImposter decodes GET /imposters/:id into v and returns "", or
// returns the status, named by what, when it is not 200 (where
// getImposter fails the test).
func decodeImposter(t *testing.T, in *gatewaytest.Instance, what string, port int, v any) string {
	t.Helper()
	status, body := in.Do("GET", fmt.Sprintf("/imposters/%d", port), nil)
	if status != 200 {
		return fmt.Sprintf("%s %d: %d", what, port, status)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatal(err)
	}
	return ""
}

// stubsStep shows an imposter's stubs as GET /imposters/:id gives them
// (recorded responses included), without links and response times.
func stubsStep(in **gatewaytest.Instance, port int) func(t *testing.T) string {
	return func(t *testing.T) string {
		var imp struct {
			Protocol string `json:"protocol"`
			Stubs    []any  `json:"stubs"`
		}
		if failed := decodeImposter(t, *in, "imposter", port, &imp); failed != "" {
			return failed
		}
		b, _ := json.Marshal(dropKeys(imp.Stubs, "_links", "_proxyResponseTime", "Date"))
		return fmt.Sprintf("imposter %d %s %s", port, imp.Protocol, b)
	}
}

// requestsStep shows an imposter's recorded requests, what mb and
// riftgate both keep of them (not when, nor from where).
func requestsStep(in **gatewaytest.Instance, port int) func(t *testing.T) string {
	return func(t *testing.T) string {
		var imp struct {
			Requests []map[string]any `json:"requests"`
		}
		if failed := decodeImposter(t, *in, "requests", port, &imp); failed != "" {
			return failed
		}
		var kept []any
		for _, r := range imp.Requests {
			k := map[string]any{}
			for _, f := range []string{"method", "path", "query", "body", "data", "subject", "text", "from"} {
				if v, ok := r[f]; ok {
					k[f] = v
				}
			}
			kept = append(kept, k)
		}
		b, _ := json.Marshal(kept)
		return fmt.Sprintf("requests %d %s", port, b)
	}
}

// dropKeys removes the keys named, at any depth, from decoded JSON.
func dropKeys(v any, keys ...string) any {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range keys {
			delete(v, k)
		}
		for k := range v {
			v[k] = dropKeys(v[k], keys...)
		}
	case []any:
		for i := range v {
			v[i] = dropKeys(v[i], keys...)
		}
	}
	return v
}

// copyDir copies a datadir (cp -a), so that two servers can each start
// from the same folder.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
}

func diffLines(t *testing.T, what string, want, got []string) {
	t.Helper()
	if reflect.DeepEqual(want, got) {
		return
	}
	for i := range max(len(want), len(got)) {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w != g {
			t.Errorf("%s, step %d:\n  mb:       %s\n  riftgate: %s", what, i+1, w, g)
		}
	}
}

// An mb 2.9.1 datadir, written by real mb (http, https, tcp and smtp
// imposters, cycles part way through, proxyOnce and proxyAlways
// recordings), is served by riftgate as mb serves it (the next response of
// each cycle included); riftgate then changes it through its API, and mb
// started on the folder riftgate left serves what riftgate serves.
func TestDatadirRoundTripWithMountebank(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mb and riftgate five times")
	}
	up := &datadirUpstream{counts: map[string]int{}}
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()
	work := t.TempDir()
	dd := filepath.Join(work, "dd")
	var p datadirPorts
	seen := map[int]bool{}
	for _, ptr := range []*int{&p.http, &p.https, &p.tcp, &p.smtp, &p.once, &p.always, &p.added} {
		for *ptr == 0 || seen[*ptr] {
			*ptr = gatewaytest.FreePort(t)
		}
		seen[*ptr] = true
	}
	p.up = upSrv.URL

	// 1. mb writes the datadir.
	mb := gatewaytest.StartMountebank(t, "--datadir", dd)
	for _, imp := range []string{
		fmt.Sprintf(`{"protocol":"http","port":%d,"name":"cycles","recordRequests":true,"stubs":[
			{"predicates":[{"equals":{"path":"/cycle"}}],"responses":[{"is":{"body":"A"},"repeat":2},{"is":{"body":"B"}},{"is":{"statusCode":201,"body":"C"}}]},
			{"predicates":[{"equals":{"path":"/static"}}],"responses":[{"is":{"body":"static","headers":{"X-Kind":"static"}}}]}]}`, p.http),
		fmt.Sprintf(`{"protocol":"https","port":%d,"stubs":[{"responses":[{"is":{"body":"x"}},{"is":{"body":"y"}}]}]}`, p.https),
		fmt.Sprintf(`{"protocol":"tcp","port":%d,"mode":"text","stubs":[{"responses":[{"is":{"data":"t1"}},{"is":{"data":"t2"}},{"is":{"data":"t3"}}]}]}`, p.tcp),
		fmt.Sprintf(`{"protocol":"smtp","port":%d,"recordRequests":true}`, p.smtp),
		fmt.Sprintf(`{"protocol":"http","port":%d,"stubs":[{"responses":[{"proxy":{"to":%q,"mode":"proxyOnce","predicateGenerators":[{"matches":{"path":true}}]}}]}]}`, p.once, p.up),
		fmt.Sprintf(`{"protocol":"http","port":%d,"stubs":[{"responses":[{"proxy":{"to":%q,"mode":"proxyAlways","predicateGenerators":[{"matches":{"path":true}}]}}]}]}`, p.always, p.up),
	} {
		if status, body := mb.Do("POST", "/imposters", imp); status != 201 {
			t.Fatalf("mb refused %s: %d %s", imp, status, body)
		}
	}
	script{
		httpStep("http", p.http, "/cycle"), httpStep("http", p.http, "/cycle"),
		httpStep("https", p.https, "/"),
		tcpStep(p.tcp, "hello"),
		smtpStep(p.smtp),
		httpStep("http", p.once, "/o1"), httpStep("http", p.once, "/o2"),
		httpStep("http", p.always, "/a1"), httpStep("http", p.always, "/a1"),
	}.run(t)
	mb.Stop()
	if _, err := os.Stat(filepath.Join(dd, strconv.Itoa(p.http), "imposter.json")); err != nil {
		t.Fatalf("mb wrote no datadir: %v", err)
	}

	// 2. riftgate serves mb's folder as mb does.
	var cur *gatewaytest.Instance
	served := script{
		httpStep("http", p.http, "/cycle"), httpStep("http", p.http, "/cycle"), httpStep("http", p.http, "/cycle"),
		httpStep("http", p.http, "/cycle"), httpStep("http", p.http, "/static"), httpStep("http", p.http, "/none"),
		httpStep("https", p.https, "/"), httpStep("https", p.https, "/"),
		tcpStep(p.tcp, "again"), tcpStep(p.tcp, "again"),
		smtpStep(p.smtp),
		httpStep("http", p.once, "/o1"), httpStep("http", p.once, "/o2"), httpStep("http", p.once, "/o1"),
		httpStep("http", p.always, "/a1"),
		stubsStep(&cur, p.http), stubsStep(&cur, p.https), stubsStep(&cur, p.tcp),
		stubsStep(&cur, p.once), stubsStep(&cur, p.always), stubsStep(&cur, p.smtp),
		requestsStep(&cur, p.http), requestsStep(&cur, p.smtp),
	}
	oracle := filepath.Join(work, "oracle1")
	copyDir(t, dd, oracle)
	up.reset()
	cur = gatewaytest.StartMountebank(t, "--datadir", oracle)
	want := served.run(t)
	cur.Stop()
	up.reset()
	rg := gatewaytest.Start(t, "--datadir", dd)
	cur = rg
	got := served.run(t)
	diffLines(t, "riftgate on mb's datadir", want, got)
	if t.Failed() {
		return
	}

	// 3. riftgate changes it: imposters added, replaced and deleted, stubs
	// added, replaced and deleted, recordings, cycles moved.
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/imposters", fmt.Sprintf(`{"protocol":"http","port":%d,"stubs":[{"responses":[{"is":{"body":"n1"}},{"is":{"body":"n2"}},{"is":{"body":"n3"}}]}]}`, p.added), 201},
		{"DELETE", fmt.Sprintf("/imposters/%d", p.https), "", 200},
		{"POST", "/imposters", fmt.Sprintf(`{"protocol":"https","port":%d,"name":"again","stubs":[{"responses":[{"is":{"body":"r1"}},{"is":{"body":"r2"}}]}]}`, p.https), 201},
		{"DELETE", fmt.Sprintf("/imposters/%d", p.tcp), "", 200},
		{"POST", fmt.Sprintf("/imposters/%d/stubs", p.http), `{"index":0,"stub":{"predicates":[{"equals":{"path":"/new"}}],"responses":[{"is":{"body":"new1"}},{"is":{"body":"new2"}}]}}`, 200},
		{"PUT", fmt.Sprintf("/imposters/%d/stubs/2", p.http), `{"predicates":[{"equals":{"path":"/static"}}],"responses":[{"is":{"body":"static2"}},{"is":{"body":"static3"}}]}`, 200},
		{"POST", fmt.Sprintf("/imposters/%d/stubs", p.http), `{"stub":{"predicates":[{"equals":{"path":"/gone"}}],"responses":[{"is":{"body":"gone"}}]}}`, 200},
		{"DELETE", fmt.Sprintf("/imposters/%d/stubs/3", p.http), "", 200},
	} {
		if status, body := rg.Do(c.method, c.path, c.body); status != c.status {
			t.Fatalf("%s %s: %d %s", c.method, c.path, status, body)
		}
	}
	if _, err := os.Stat(filepath.Join(dd, strconv.Itoa(p.tcp))); !os.IsNotExist(err) {
		t.Errorf("the deleted tcp imposter's folder is still there: %v", err)
	}
	script{
		httpStep("http", p.added, "/"),
		httpStep("https", p.https, "/"),
		httpStep("http", p.http, "/new"), httpStep("http", p.http, "/static"), httpStep("http", p.http, "/cycle"),
		httpStep("http", p.once, "/o3"),
		httpStep("http", p.always, "/a1"), httpStep("http", p.always, "/a2"),
	}.run(t)
	rg.Stop()

	// 4. Both serve the folder riftgate left: riftgate on a copy, mb on
	// the folder itself.
	again := script{
		httpStep("http", p.added, "/"), httpStep("http", p.added, "/"), httpStep("http", p.added, "/"),
		httpStep("https", p.https, "/"), httpStep("https", p.https, "/"),
		tcpStep(p.tcp, "x"),
		httpStep("http", p.http, "/new"), httpStep("http", p.http, "/new"),
		httpStep("http", p.http, "/static"), httpStep("http", p.http, "/static"),
		httpStep("http", p.http, "/cycle"), httpStep("http", p.http, "/cycle"), httpStep("http", p.http, "/gone"),
		httpStep("http", p.once, "/o1"), httpStep("http", p.once, "/o3"), httpStep("http", p.once, "/o4"),
		httpStep("http", p.always, "/a1"),
		stubsStep(&cur, p.added), stubsStep(&cur, p.http), stubsStep(&cur, p.https),
		stubsStep(&cur, p.once), stubsStep(&cur, p.always), stubsStep(&cur, p.tcp),
		requestsStep(&cur, p.http), requestsStep(&cur, p.smtp),
	}
	copied := filepath.Join(work, "copy2")
	copyDir(t, dd, copied)
	up.reset()
	cur = gatewaytest.Start(t, "--datadir", copied)
	got = again.run(t)
	cur.Stop()
	up.reset()
	cur = gatewaytest.StartMountebank(t, "--datadir", dd)
	want = again.run(t)
	cur.Stop()
	diffLines(t, "mb on riftgate's datadir", want, got)
}

// eventually runs step until its answer holds want, for up to 5 s.
func eventually(t *testing.T, step func(t *testing.T) string, want string) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got = step(t); strings.Contains(got, want) {
			return
		}
	}
	t.Fatalf("got %s, want %s", got, want)
}

// starter starts one of the two servers on a datadir, with more flags.
type starter struct {
	name  string
	start func(t testing.TB, args ...string) *gatewaytest.Instance
}

var bothServers = []starter{
	{"mb", gatewaytest.StartMountebank},
	{"riftgate", gatewaytest.Start},
}

// What mb's own CLI suite checks of --datadir, on mb and on riftgate
// alike: cycles go on after a restart, a deleted imposter stays deleted,
// --configfile wins over the datadir, and a delete removes the imposter's
// folder and nothing else.
func TestDatadirLikeMountebank(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mb and riftgate several times")
	}
	for _, s := range bothServers {
		t.Run(s.name+"/cycles survive a restart, deletes stay", func(t *testing.T) {
			dd := filepath.Join(t.TempDir(), "db")
			port := gatewaytest.FreePort(t)
			in := s.start(t, "--datadir", dd)
			in.PostImposter(map[string]any{"protocol": "http", "port": port, "stubs": []any{
				map[string]any{"responses": []any{
					map[string]any{"is": map[string]any{"body": "first"}},
					map[string]any{"is": map[string]any{"body": "second"}},
				}},
			}})
			if got := httpStep("http", port, "/")(t); !strings.Contains(got, `"first"`) {
				t.Fatalf("got %s", got)
			}
			in.Stop()
			in.Restart()
			if got := httpStep("http", port, "/")(t); !strings.Contains(got, `"second"`) {
				t.Fatalf("after a restart: %s, want the second response", got)
			}
			if status, body := in.Do("DELETE", "/imposters", nil); status != 200 {
				t.Fatalf("DELETE /imposters: %d %s", status, body)
			}
			in.Stop()
			in.Restart()
			if got := httpStep("http", port, "/")(t); !strings.HasSuffix(got, "refused") {
				t.Fatalf("a deleted imposter came back: %s", got)
			}
		})
		t.Run(s.name+"/configfile wins over the datadir", func(t *testing.T) {
			dir := t.TempDir()
			dd := filepath.Join(dir, "db")
			port := gatewaytest.FreePort(t)
			in := s.start(t, "--datadir", dd)
			in.PostImposter(map[string]any{"protocol": "http", "port": port, "stubs": []any{
				map[string]any{"responses": []any{map[string]any{"is": map[string]any{"body": "SHOULD BE OVERWRITTEN"}}}},
			}})
			in.Stop()
			cf := filepath.Join(dir, "imposters.json")
			body := fmt.Sprintf(`{"imposters":[{"protocol":"http","port":%d,"stubs":[{"predicates":[{"equals":{"path":"/orders/123"}}],"responses":[{"is":{"body":"Order 123"}}]}]}]}`, port)
			if err := os.WriteFile(cf, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			in = s.start(t, "--datadir", dd, "--configfile", cf)
			// mb answers its admin API before it has PUT the configfile's
			// imposters: wait for them, a little.
			eventually(t, httpStep("http", port, "/orders/123"), `"Order 123"`)
			in.Stop()
			in.Restart() // the configfile's imposter is the datadir's now
			eventually(t, httpStep("http", port, "/orders/123"), `"Order 123"`)
		})
		t.Run(s.name+"/a delete removes the imposter's folder and nothing else", func(t *testing.T) {
			dd := filepath.Join(t.TempDir(), "db")
			port := gatewaytest.FreePort(t)
			in := s.start(t, "--datadir", dd)
			inside := filepath.Join(dd, strconv.Itoa(port), "INSIDE-IMPOSTER-DIR.txt")
			outside := filepath.Join(dd, "meta", "OUTSIDE-IMPOSTER-DIR.txt")
			for _, f := range []string{inside, outside} {
				if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			in.PostImposter(map[string]any{"protocol": "http", "port": port, "stubs": []any{
				map[string]any{"responses": []any{map[string]any{"is": map[string]any{"body": "BODY"}}}},
			}})
			if got := httpStep("http", port, "/")(t); !strings.Contains(got, `"BODY"`) {
				t.Fatalf("got %s", got)
			}
			if status, body := in.Do("DELETE", "/imposters", nil); status != 200 {
				t.Fatalf("DELETE /imposters: %d %s", status, body)
			}
			if _, err := os.Stat(outside); err != nil {
				t.Errorf("a file outside the imposter's folder went: %v", err)
			}
			if _, err := os.Stat(filepath.Dir(inside)); !os.IsNotExist(err) {
				t.Errorf("the imposter's folder is still there: %v", err)
			}
		})
	}
}

// matchesStep shows what each stub of the imposter on port matched under
// --debug: each match's method and path, and the body it answered.
func matchesStep(in **gatewaytest.Instance, port int) func(t *testing.T) string {
	return func(t *testing.T) string {
		var imp struct {
			Stubs []struct {
				Matches []struct {
					Request  struct{ Method, Path string }
					Response struct{ Body string }
				}
			}
		}
		if failed := decodeImposter(t, *in, "imposter", port, &imp); failed != "" {
			return failed
		}
		var out []string
		for i, st := range imp.Stubs {
			for _, m := range st.Matches {
				out = append(out, fmt.Sprintf("stub %d: %s %s -> %s", i, m.Request.Method, m.Request.Path, m.Response.Body))
			}
		}
		return strings.Join(out, "; ")
	}
}

// Under --debug, what each stub matched is kept in its matches/ folder, as
// mb keeps it: riftgate shows what mb recorded there, and mb what
// riftgate did, across restarts; riftgate keeps a stub's newest 1,000.
func TestDatadirDebugMatches(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mb and riftgate four times")
	}
	work := t.TempDir()
	dd := filepath.Join(work, "dd")
	port := gatewaytest.FreePort(t)
	var cur *gatewaytest.Instance
	show := script{matchesStep(&cur, port)}

	cur = gatewaytest.StartMountebank(t, "--datadir", dd, "--debug")
	cur.PostImposter(map[string]any{"protocol": "http", "port": port, "stubs": []any{
		map[string]any{"predicates": []any{map[string]any{"equals": map[string]any{"path": "/a"}}},
			"responses": []any{map[string]any{"is": map[string]any{"body": "A"}}}},
		map[string]any{"responses": []any{map[string]any{"is": map[string]any{"body": "B"}}}},
	}})
	script{httpStep("http", port, "/a"), httpStep("http", port, "/x")}.run(t)
	cur.Stop()

	oracle := filepath.Join(work, "oracle")
	copyDir(t, dd, oracle)
	cur = gatewaytest.StartMountebank(t, "--datadir", oracle, "--debug")
	want := show.run(t)
	cur.Stop()
	if want[0] != "stub 0: GET /a -> A; stub 1: GET /x -> B" {
		t.Fatalf("mb shows %q after a restart", want[0])
	}
	cur = gatewaytest.Start(t, "--datadir", dd, "--debug")
	diffLines(t, "riftgate on mb's matches", want, show.run(t))
	httpStep("http", port, "/a")(t)
	cur.Stop()

	copied := filepath.Join(work, "copy")
	copyDir(t, dd, copied)
	cur = gatewaytest.Start(t, "--datadir", copied, "--debug")
	got := show.run(t)
	cur.Stop()
	cur = gatewaytest.StartMountebank(t, "--datadir", dd, "--debug")
	want = show.run(t)
	cur.Stop()
	if want[0] != "stub 0: GET /a -> A; stub 0: GET /a -> A; stub 1: GET /x -> B" {
		t.Fatalf("mb shows %q on riftgate's folder", want[0])
	}
	diffLines(t, "mb on riftgate's matches", want, got)

	t.Run("a stub keeps its newest 1000", func(t *testing.T) {
		dd := filepath.Join(t.TempDir(), "dd")
		port := gatewaytest.FreePort(t)
		in := gatewaytest.Start(t, "--datadir", dd, "--debug")
		in.PostImposter(cycleImposter(port, "only"))
		c := &http.Client{Timeout: 5 * time.Second}
		for i := range 1005 {
			resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/%d", port, i))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		in.Stop()
		files, _ := filepath.Glob(filepath.Join(dd, strconv.Itoa(port), "stubs", "*", "matches", "*.json"))
		if len(files) != 1000 {
			t.Errorf("%d files in matches/, want 1000", len(files))
		}
		in.Restart()
		seen := matchesStep(&in, port)(t)
		if n := strings.Count(seen, "stub 0:"); n != 1000 || !strings.HasPrefix(seen, "stub 0: GET /5 ->") {
			t.Errorf("after a restart: %d matches, starting %.40q; want 1000 from /5", n, seen)
		}
		httpStep("http", port, "/more")(t)
		seen = matchesStep(&in, port)(t)
		if n := strings.Count(seen, "stub 0:"); n != 1000 || !strings.HasPrefix(seen, "stub 0: GET /6 ->") || !strings.HasSuffix(seen, "GET /more -> only") {
			t.Errorf("after one more: %d matches, starting %.40q; want 1000 from /6 to /more", n, seen)
		}
	})
}

// cycleImposter is an http imposter on port whose one stub cycles
// through bodies.
func cycleImposter(port int, bodies ...string) map[string]any {
	var rs []any
	for _, b := range bodies {
		rs = append(rs, map[string]any{"is": map[string]any{"body": b}})
	}
	return map[string]any{"protocol": "http", "port": port, "stubs": []any{map[string]any{"responses": rs}}}
}

// After kill -9, every acknowledged change is there (the configuration
// log wins over a folder it may have been writing), and a cycle goes on
// from where it was a moment before.
func TestDatadirKill9(t *testing.T) {
	dd := filepath.Join(t.TempDir(), "db")
	p1, p2 := gatewaytest.FreePort(t), gatewaytest.FreePort(t)
	rg := gatewaytest.Start(t, "--datadir", dd)
	rg.PostImposter(cycleImposter(p1, "one", "two", "three"))
	httpStep("http", p1, "/")(t)
	time.Sleep(500 * time.Millisecond) // positions are written every 100 ms
	rg.PostImposter(cycleImposter(p2, "a", "b"))
	rg.Kill()
	rg.Restart()
	if got := httpStep("http", p1, "/")(t); !strings.Contains(got, `"two"`) {
		t.Errorf("after kill -9: %s, want the second response", got)
	}
	if got := httpStep("http", p2, "/")(t); !strings.Contains(got, `"a"`) {
		t.Errorf("the imposter made just before kill -9: %s", got)
	}
	rg.Stop()
	// mb reads what riftgate left.
	mb := gatewaytest.StartMountebank(t, "--datadir", dd)
	if got := httpStep("http", p1, "/")(t); !strings.Contains(got, `"three"`) {
		t.Errorf("mb after riftgate: %s, want the third response", got)
	}
	if got := httpStep("http", p2, "/")(t); !strings.Contains(got, `"b"`) {
		t.Errorf("mb after riftgate: %s, want the second response", got)
	}
	mb.Stop()
}

// Files of the datadir that cannot be read are said at error, naming the
// file, and left as they are; what the configuration log holds is served
// still, and nothing is written over them.
func TestDatadirBadFiles(t *testing.T) {
	dd := filepath.Join(t.TempDir(), "db")
	bad, partial, ours := gatewaytest.FreePort(t), gatewaytest.FreePort(t), gatewaytest.FreePort(t)
	rg := gatewaytest.Start(t, "--datadir", dd)
	rg.PostImposter(cycleImposter(ours, "mine", "still mine"))
	rg.Stop()

	write := func(rel, content string) string {
		path := filepath.Join(dd, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	badFile := write(strconv.Itoa(bad)+"/imposter.json", `{"protocol":"http","port":`)
	write(strconv.Itoa(partial)+"/imposter.json",
		fmt.Sprintf(`{"protocol":"http","port":%d,"stubs":[{"meta":{"dir":"stubs/s1"}}]}`, partial))
	write(strconv.Itoa(partial)+"/stubs/s1/meta.json", `{"responseFiles":["responses/r1.json"],"orderWithRepeats":[0],"nextIndex":0}`)
	metas, _ := filepath.Glob(filepath.Join(dd, strconv.Itoa(ours), "stubs", "*", "meta.json"))
	if len(metas) != 1 {
		t.Fatalf("riftgate wrote %d meta.json for its imposter, want 1", len(metas))
	}
	oursFile := write(strings.TrimPrefix(metas[0], dd+"/"), `{"responseFiles": [`)

	rg.Restart()
	out := rg.Output()
	for _, want := range []string{badFile, filepath.Join(dd, strconv.Itoa(partial), "stubs/s1/responses/r1.json"), oursFile} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not name %s:\n%s", want, out)
		}
	}
	if got := httpStep("http", bad, "/")(t); !strings.HasSuffix(got, "refused") {
		t.Errorf("an unreadable imposter is served: %s", got)
	}
	if got := httpStep("http", partial, "/")(t); !strings.HasSuffix(got, "refused") {
		t.Errorf("a partial imposter is served: %s", got)
	}
	if got := httpStep("http", ours, "/")(t); !strings.Contains(got, `"mine"`) {
		t.Errorf("the log's imposter, whose folder is damaged: %s", got)
	}
	// A change to that imposter leaves its folder alone.
	if status, body := rg.Do("POST", fmt.Sprintf("/imposters/%d/stubs", ours), `{"stub":{"responses":[{"is":{"body":"x"}}]}}`); status != 200 {
		t.Fatalf("adding a stub: %d %s", status, body)
	}
	rg.Stop()
	for path, want := range map[string]string{badFile: `{"protocol":"http","port":`, oursFile: `{"responseFiles": [`} {
		if b, err := os.ReadFile(path); err != nil || string(b) != want {
			t.Errorf("%s changed: %q %v", path, b, err)
		}
	}
}

// A team that switches back and forth keeps what each side changed:
// riftgate's folder changed by mb (a stub added, an imposter deleted,
// requests recorded, a cycle moved) is what riftgate serves next.
func TestDatadirBackAndForth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mb and riftgate")
	}
	dd := filepath.Join(t.TempDir(), "db")
	kept, gone := gatewaytest.FreePort(t), gatewaytest.FreePort(t)
	rg := gatewaytest.Start(t, "--datadir", dd)
	imp := cycleImposter(kept, "one", "two", "three")
	imp["recordRequests"] = true
	rg.PostImposter(imp)
	rg.PostImposter(cycleImposter(gone, "x"))
	httpStep("http", kept, "/rg")(t)
	rg.Stop()

	mb := gatewaytest.StartMountebank(t, "--datadir", dd)
	if got := httpStep("http", kept, "/mb")(t); !strings.Contains(got, `"two"`) {
		t.Fatalf("mb on riftgate's folder: %s", got)
	}
	if status, body := mb.Do("POST", fmt.Sprintf("/imposters/%d/stubs", kept),
		`{"index":0,"stub":{"predicates":[{"equals":{"path":"/added"}}],"responses":[{"is":{"body":"added by mb"}}]}}`); status != 200 {
		t.Fatalf("mb: %d %s", status, body)
	}
	if status, body := mb.Do("DELETE", fmt.Sprintf("/imposters/%d", gone), nil); status != 200 {
		t.Fatalf("mb: %d %s", status, body)
	}
	mb.Stop()

	rg.Restart()
	for _, c := range []struct{ step, want string }{
		{httpStep("http", kept, "/")(t), `"three"`},
		{httpStep("http", kept, "/added")(t), `"added by mb"`},
		{httpStep("http", gone, "/")(t), "refused"},
		{requestsStep(&rg, kept)(t), `[{"body":"","method":"GET","path":"/rg","query":{}},{"body":"","method":"GET","path":"/mb","query":{}},{"body":"","method":"GET","path":"/","query":{}},{"body":"","method":"GET","path":"/added","query":{}}]`},
	} {
		if !strings.Contains(c.step, c.want) {
			t.Errorf("riftgate after mb: %s, want %s", c.step, c.want)
		}
	}
	// Deleting the recorded requests removes mb's files of them too.
	if status, _ := rg.Do("DELETE", fmt.Sprintf("/imposters/%d/savedRequests", kept), nil); status != 200 {
		t.Fatalf("DELETE savedRequests: %d", status)
	}
	if _, err := os.Stat(filepath.Join(dd, strconv.Itoa(kept), "requests")); !os.IsNotExist(err) {
		t.Errorf("the imposter's requests folder is still there: %v", err)
	}
	rg.Stop()
}

// stubFolders lists the stub folders of port's imposter in the datadir.
func stubFolders(t *testing.T, dd string, port int) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dd, strconv.Itoa(port), "stubs"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// A PUT of what the datadir already holds (what `riftgate replay` sends)
// keeps the stubs' folders, as their content is the same: nothing is
// rewritten or removed, and yet each stub is a new one whose cycle starts
// again, on riftgate, after a restart and on mb reading the folder.
func TestDatadirReplayKeepsFolders(t *testing.T) {
	dd := filepath.Join(t.TempDir(), "db")
	port := gatewaytest.FreePort(t)
	imp := cycleImposter(port, "one", "two", "three")
	imp["stubs"] = append([]any{map[string]any{
		"predicates": []any{map[string]any{"equals": map[string]any{"path": "/other"}}},
		"responses":  []any{map[string]any{"is": map[string]any{"body": "other"}}},
	}}, imp["stubs"].([]any)...)
	rg := gatewaytest.Start(t, "--datadir", dd)
	rg.PostImposter(imp)
	httpStep("http", port, "/")(t)     // the cycle moves on to "two"
	time.Sleep(500 * time.Millisecond) // positions are written every 100 ms
	before := stubFolders(t, dd, port)
	if len(before) != 2 {
		t.Fatalf("stub folders %v, want 2", before)
	}
	if status, body := rg.Do("PUT", "/imposters", map[string]any{"imposters": []any{imp}}); status != 200 {
		t.Fatalf("PUT /imposters: %d %s", status, body)
	}
	if after := stubFolders(t, dd, port); !slices.Equal(before, after) {
		t.Errorf("stub folders after the PUT %v, want the same as before %v", after, before)
	}
	if got := httpStep("http", port, "/")(t); !strings.Contains(got, `"one"`) {
		t.Errorf("after the PUT: %s, want the first response (a new stub)", got)
	}
	time.Sleep(500 * time.Millisecond)
	rg.Stop()
	rg.Restart()
	if got := httpStep("http", port, "/")(t); !strings.Contains(got, `"two"`) {
		t.Errorf("after a restart: %s, want the second response", got)
	}
	if got := httpStep("http", port, "/other")(t); !strings.Contains(got, `"other"`) {
		t.Errorf("the other stub after a restart: %s", got)
	}
	time.Sleep(500 * time.Millisecond)
	rg.Stop()
	mb := gatewaytest.StartMountebank(t, "--datadir", dd)
	if got := httpStep("http", port, "/")(t); !strings.Contains(got, `"three"`) {
		t.Errorf("mb after riftgate: %s, want the third response", got)
	}
	mb.Stop()
}

// putPathStubs PUTs an http imposter on port of n stubs, the i-th
// answering "s<i>" to the path "/<i>".
func putPathStubs(t *testing.T, rg *gatewaytest.Instance, port, n int) {
	t.Helper()
	stubs := make([]string, n)
	for i := range stubs {
		stubs[i] = fmt.Sprintf(`{"predicates":[{"equals":{"path":"/%d"}}],"responses":[{"is":{"body":"s%d"}}]}`, i, i)
	}
	imp := fmt.Sprintf(`{"protocol":"http","port":%d,"stubs":[%s]}`, port, strings.Join(stubs, ","))
	if status, body := rg.Do("PUT", "/imposters", `{"imposters":[`+imp+`]}`); status != 200 {
		t.Fatalf("PUT: %d %.200s", status, body)
	}
}

// A kill -9 while the folder of a large imposter (more than 1,000 stubs,
// written in the background) is being written loses nothing: the next
// start serves every stub, and writes the folder, so that mb started on
// it after a clean stop serves the same stubs.
func TestDatadirKill9DuringALargeWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 3,000 stub folders twice, and starts mb")
	}
	dd := filepath.Join(t.TempDir(), "dd")
	port := gatewaytest.FreePort(t)
	const n = 3000
	rg := gatewaytest.Start(t, "--datadir", dd)
	putPathStubs(t, rg, port, n)
	rg.Kill()
	rg.Restart()
	for _, i := range []int{0, n / 2, n - 1} {
		if got := httpStep("http", port, fmt.Sprintf("/%d", i))(t); !strings.Contains(got, fmt.Sprintf(`"s%d"`, i)) {
			t.Fatalf("after kill -9 and a restart, stub %d answers %s", i, got)
		}
	}
	rg.Stop()
	cur := gatewaytest.StartMountebank(t, "--datadir", dd)
	defer cur.Stop()
	got := stubsStep(&cur, port)(t)
	if c := strings.Count(got, `"predicates"`); c != n {
		t.Fatalf("mb on the folder riftgate left shows %d stubs of %d", c, n)
	}
	if got := httpStep("http", port, fmt.Sprintf("/%d", n-1))(t); !strings.Contains(got, fmt.Sprintf(`"s%d"`, n-1)) {
		t.Fatalf("mb on the folder riftgate left answers %s", got)
	}
}

// A large imposter's folder that a kill -9 left behind the log is written
// again in the background once riftgate serves (resync): under --debug,
// what its stubs matched before is shown again once it is written, and a
// match made meanwhile is kept on disk too.
func TestDatadirLaggingFolderKeepsItsMatches(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1,500 stub folders twice")
	}
	dd := filepath.Join(t.TempDir(), "dd")
	port := gatewaytest.FreePort(t)
	rg := gatewaytest.Start(t, "--datadir", dd, "--debug")
	putPathStubs(t, rg, port, 1500)
	rg.Stop() // the folder whole
	rg.Restart()
	for range 3 {
		httpStep("http", port, "/7")(t)
	}
	time.Sleep(500 * time.Millisecond) // matches are written every 100 ms
	rg.Kill()
	rg.Restart()
	httpStep("http", port, "/7")(t) // while the folder may still be written
	want := strings.Repeat("stub 7: GET /7 -> s7; ", 4)
	want = want[:len(want)-2]
	waitMatches := func(when string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			got := matchesStep(&rg, port)(t)
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: matches %q, want %q", when, got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitMatches("after kill -9 and a restart")
	time.Sleep(500 * time.Millisecond)
	rg.Stop()
	rg.Restart()
	waitMatches("after a clean restart")
}
