package cli_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// sendLine sends one line to a line-protocol imposter and reads its reply.
func sendLine(t *testing.T, port int, line string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 5*time.Second)
	if err != nil {
		return "DIAL: " + err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	reply, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "READ: " + err.Error()
	}
	return strings.TrimSpace(reply)
}

// TestCustomProtocolAsMountebank runs a custom protocol (testdata's line
// protocol, started through --protofile's createCommand) on mb and on
// riftgate: the same stubs (predicates on the protocol's own fields,
// response cycles, the defaultResponse the process is handed) answer the
// same lines, requests are recorded, a command that fails is refused, and
// deleting the imposter ends its process.
func TestCustomProtocolAsMountebank(t *testing.T) {
	script, err := filepath.Abs("testdata/lineproto.js")
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{"GET a", "GET b", "GET c", "PUT x y", "PUT y", "DEL z", "get a"}
	got := map[string]string{}
	for name, bin := range map[string]string{"mb": mbBinary(t), "riftgate": gatewaytest.Binary(t)} {
		dir := t.TempDir()
		protos := fmt.Sprintf(`{"line":{"createCommand":"node %s"},"broken":{"createCommand":"node -e process.exit(3)"},"absent":{"createCommand":"/no/such/command"}}`, script)
		if err := os.WriteFile(filepath.Join(dir, "protocols.json"), []byte(protos), 0o644); err != nil {
			t.Fatal(err)
		}
		port, imp := gatewaytest.FreePort(t), gatewaytest.FreePort(t)
		p := startProc(t, dir, bin, "start", "--port", strconv.Itoa(port), "--host", "127.0.0.1", "--nologfile", "--pidfile", "a.pid")
		waitForFile(t, p, filepath.Join(dir, "a.pid"))
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		def := fmt.Sprintf(`{"protocol":"line","port":%d,"greeting":"hello","recordRequests":true,"defaultResponse":{"reply":"DEFAULT"},
			"stubs":[
				{"predicates":[{"equals":{"verb":"GET"}}],"responses":[{"is":{"reply":"ONE"}},{"is":{"reply":"TWO"}}]},
				{"predicates":[{"contains":{"arg":"x"}},{"deepEquals":{"tags":["y","x"]}}],"responses":[{"is":{"reply":"XY"}}]},
				{"predicates":[{"equals":{"verb":"put"},"caseSensitive":false}],"responses":[{"is":{"reply":"PUT"}}]}
			]}`, imp)
		code, body := gatewaytest.Do(t, http.MethodPost, base+"/imposters", def, nil)
		if code != http.StatusCreated {
			t.Fatalf("%s POST: %d %s", name, code, body)
		}
		var answers []string
		for _, l := range lines {
			answers = append(answers, l+" -> "+sendLine(t, imp, l))
		}
		code, body = gatewaytest.Do(t, http.MethodGet, fmt.Sprintf("%s/imposters/%d", base, imp), nil, nil)
		var shown struct {
			NumberOfRequests int              `json:"numberOfRequests"`
			Requests         []map[string]any `json:"requests"`
		}
		if err := json.Unmarshal(body, &shown); err != nil || code != 200 {
			t.Fatalf("%s GET imposter: %d %s", name, code, body)
		}
		// The imposter as GET shows it, without what differs by run.
		var whole map[string]any
		if err := json.Unmarshal(body, &whole); err != nil {
			t.Fatal(err)
		}
		delete(whole, "requests")
		delete(whole, "_links")
		if stubs, ok := whole["stubs"].([]any); ok {
			for _, st := range stubs {
				delete(st.(map[string]any), "_links")
			}
		}
		wholeJSON, _ := json.Marshal(whole)
		var recorded []string
		for _, r := range shown.Requests {
			if _, ok := r["timestamp"]; !ok {
				t.Errorf("%s: a recorded request has no timestamp: %v", name, r)
			}
			delete(r, "timestamp")
			b, _ := json.Marshal(r)
			recorded = append(recorded, string(b))
		}
		failed := func(proto string) string {
			code, body := gatewaytest.Do(t, http.MethodPost, base+"/imposters", fmt.Sprintf(`{"protocol":%q,"port":%d}`, proto, gatewaytest.FreePort(t)), nil)
			var e struct {
				Errors []struct{ Code string } `json:"errors"`
			}
			_ = json.Unmarshal(body, &e)
			codes := ""
			for _, x := range e.Errors {
				codes += x.Code
			}
			return fmt.Sprintf("%d %s", code, codes)
		}
		// Port 0: the imposter gets a port, and its process serves it.
		code, body = gatewaytest.Do(t, http.MethodPost, base+"/imposters", `{"protocol":"line","stubs":[{"responses":[{"is":{"reply":"ANY"}}]}]}`, nil)
		var zero struct{ Port int }
		if err := json.Unmarshal(body, &zero); code != http.StatusCreated || err != nil || zero.Port == 0 {
			t.Fatalf("%s POST port 0: %d %s", name, code, body)
		}
		answers = append(answers, "port 0 -> "+sendLine(t, zero.Port, "X"))
		failedZero := func() string {
			code, body := gatewaytest.Do(t, http.MethodPost, base+"/imposters", `{"protocol":"broken"}`, nil)
			return fmt.Sprintf("%d %v", code, strings.Contains(string(body), "cannot start server"))
		}()
		got[name] = "broken on port 0: " + failedZero + "\n" + fmt.Sprintf("answers:\n%s\nnumberOfRequests %d\nrequests:\n%s\nimposter: %s\nbroken: %s\nabsent: %s\nunknown: %s\n",
			strings.Join(answers, "\n"), shown.NumberOfRequests, strings.Join(recorded, "\n"),
			strings.ReplaceAll(string(wholeJSON), strconv.Itoa(imp), "PORT"), failed("broken"), failed("absent"), failed("nosuch"))
		if code, body := gatewaytest.Do(t, http.MethodDelete, fmt.Sprintf("%s/imposters/%d", base, imp), nil, nil); code != 200 {
			t.Fatalf("%s DELETE: %d %s", name, code, body)
		}
		closed := false
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(imp), time.Second)
			if err != nil {
				closed = true
				break
			}
			c.Close()
		}
		if !closed {
			t.Errorf("%s: the protocol's process still serves after DELETE", name)
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.exitCode(t)
	}
	t.Logf("mb:\n%s", got["mb"])
	if got["mb"] != got["riftgate"] {
		t.Fatalf("riftgate differs from mb:\nmb:\n%s\nriftgate:\n%s", got["mb"], got["riftgate"])
	}
}

// customSystem starts bin (mb or riftgate) with testdata's line protocol
// in its protofile, and returns its admin URL.
func customSystem(t *testing.T, bin string, args ...string) string {
	t.Helper()
	script, err := filepath.Abs("testdata/lineproto.js")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "protocols.json"), []byte(fmt.Sprintf(`{"line":{"createCommand":"node %s"}}`, script)), 0o644); err != nil {
		t.Fatal(err)
	}
	port := gatewaytest.FreePort(t)
	p := startProc(t, dir, bin, append([]string{"start", "--port", strconv.Itoa(port), "--host", "127.0.0.1", "--nologfile", "--pidfile", "a.pid"}, args...)...)
	waitForFile(t, p, filepath.Join(dir, "a.pid"))
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.exitCode(t)
	})
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

// proxyTimes are the proxy's response times, which differ by run.
var proxyTimes = regexp.MustCompile(`"_proxyResponseTime":\s*\d+`)

// storedStubs is an imposter's stubs as GET shows them, without what
// differs by run (links, the proxy's times, the ports).
func storedStubs(t *testing.T, base string, port int, ports map[int]string) string {
	t.Helper()
	code, body := gatewaytest.Do(t, http.MethodGet, fmt.Sprintf("%s/imposters/%d", base, port), nil, nil)
	if code != http.StatusOK {
		t.Fatalf("GET imposter %d: %d %s", port, code, body)
	}
	var whole struct {
		Stubs []map[string]any `json:"stubs"`
	}
	if err := json.Unmarshal(body, &whole); err != nil {
		t.Fatal(err)
	}
	for _, st := range whole.Stubs {
		delete(st, "_links")
	}
	b, _ := json.MarshalIndent(whole.Stubs, "", " ")
	s := proxyTimes.ReplaceAllString(string(b), `"_proxyResponseTime":T`)
	for p, name := range ports {
		s = strings.ReplaceAll(s, strconv.Itoa(p), name)
	}
	return s
}

// TestCustomProtocolResponsesAsMountebank runs the responses of a custom
// protocol that are not a plain is on mb and on riftgate: proxyOnce and
// proxyAlways (the protocol's process proxies to an upstream line imposter
// and posts the answer back to the callbackURL mb hands it), an inject, a
// fault, and the behaviors (decorate, copy, shellTransform, wait, repeat).
// Both answer the same lines and store the same stubs; without
// --allowInjection, both refuse the same stubs.
func TestCustomProtocolResponsesAsMountebank(t *testing.T) {
	got := map[string]string{}
	for _, name := range []string{"mb", "riftgate"} {
		bin := mbBinary(t)
		if name == "riftgate" {
			bin = gatewaytest.Binary(t)
		}
		base := customSystem(t, bin, "--allowInjection")
		up, once, always, beh := gatewaytest.FreePort(t), gatewaytest.FreePort(t), gatewaytest.FreePort(t), gatewaytest.FreePort(t)
		ports := map[int]string{up: "UP", once: "ONCE", always: "ALWAYS", beh: "BEH"}
		create := func(def string) {
			t.Helper()
			if code, body := gatewaytest.Do(t, http.MethodPost, base+"/imposters", def, nil); code != http.StatusCreated {
				t.Fatalf("%s POST %s: %d %s", name, def, code, body)
			}
		}
		create(fmt.Sprintf(`{"protocol":"line","port":%d,"stubs":[
			{"predicates":[{"equals":{"verb":"GET"}}],"responses":[{"is":{"reply":"UP-GET-1"}},{"is":{"reply":"UP-GET-2"}},{"is":{"reply":"UP-GET-3"}}]},
			{"responses":[{"is":{"reply":"UP-OTHER"}}]}]}`, up))
		// No mode: mb hands the process proxyOnce. The decorated answer
		// is what is recorded.
		create(fmt.Sprintf(`{"protocol":"line","port":%d,"stubs":[{"responses":[
			{"proxy":{"to":"127.0.0.1:%d","predicateGenerators":[{"matches":{"verb":true}}]},
			 "behaviors":[{"decorate":"function (config) { config.response.reply = config.response.reply + ' via ' + config.request.verb; }"}]}]}]}`, once, up))
		create(fmt.Sprintf(`{"protocol":"line","port":%d,"stubs":[{"responses":[
			{"proxy":{"to":"127.0.0.1:%d","mode":"proxyAlways","predicateGenerators":[{"matches":{"arg":true}}]}}]}]}`, always, up))
		shell := filepath.Join(t.TempDir(), "shell.js")
		if err := os.WriteFile(shell, []byte(`const r = JSON.parse(process.env.MB_RESPONSE); r.reply = 'SHELL ' + JSON.parse(process.env.MB_REQUEST).arg; console.log(JSON.stringify(r));`), 0o644); err != nil {
			t.Fatal(err)
		}
		create(fmt.Sprintf(`{"protocol":"line","port":%d,"stubs":[
			{"predicates":[{"equals":{"verb":"INJ"}}],"responses":[{"inject":"function (config) { return { reply: 'INJ ' + config.request.arg + ' ' + config.request.tags.length }; }"}]},
			{"predicates":[{"equals":{"verb":"COPY"}}],"responses":[{"is":{"reply":"copied ${ARG} and ${ARG}[2]","tags":["${ARG}[1]"]},
				"behaviors":[{"copy":{"from":"arg","into":"${ARG}","using":{"method":"regex","selector":"(\\w+)-(\\w+)"}}}]}]},
			{"predicates":[{"equals":{"verb":"DEC"}}],"responses":[{"is":{"reply":"dec"},
				"behaviors":[{"decorate":"function (config, response) { return { reply: response.reply.toUpperCase() + ' ' + config.request.size, tags: config.request.tags }; }"}]}]},
			{"predicates":[{"equals":{"verb":"SH"}}],"responses":[{"is":{"reply":"sh"},"behaviors":[{"shellTransform":"node %s"}]}]},
			{"predicates":[{"equals":{"verb":"WAIT"}}],"responses":[{"is":{"reply":"waited"},"behaviors":[{"wait":400}]}]},
			{"predicates":[{"equals":{"verb":"FLT"}}],"responses":[{"fault":"CONNECTION_RESET_BY_PEER","repeat":1}]},
			{"predicates":[{"equals":{"verb":"REP"}}],"responses":[{"is":{"reply":"R1"},"repeat":2},{"is":{"reply":"R2"}}]}]}`, beh, shell))

		var answers []string
		send := func(port int, line string) {
			answers = append(answers, fmt.Sprintf("%s %s -> %s", ports[port], line, sendLine(t, port, line)))
		}
		for _, l := range []string{"GET a", "GET b", "PUT c", "PUT d"} {
			send(once, l)
		}
		for _, l := range []string{"GET x", "GET x", "GET y", "DEL x"} {
			send(always, l)
		}
		for _, l := range []string{"INJ a b c", "COPY ab-cd", "DEC x", "SH q", "FLT", "REP", "REP", "REP"} {
			send(beh, l)
		}
		start := time.Now()
		send(beh, "WAIT")
		answers = append(answers, fmt.Sprintf("waited 400ms: %v", time.Since(start) >= 400*time.Millisecond))
		if name == "riftgate" {
			// A proxy resolution key no proxy was handed out under: mb
			// crashes (an unhandled rejection ends its process),
			// riftgate answers mb's error (docs/mountebank-differences.md).
			code, body := gatewaytest.Do(t, http.MethodPost, fmt.Sprintf("%s/imposters/%d/_requests/99", base, once), `{"proxyResponse":{"reply":"late"}}`, nil)
			if code != http.StatusNotFound || !strings.Contains(string(body), "invalid proxy resolution key") {
				t.Errorf("unknown proxy resolution key: %d %s", code, body)
			}
		}
		got[name] = strings.Join(answers, "\n") +
			"\nproxyOnce stubs: " + storedStubs(t, base, once, ports) +
			"\nproxyAlways stubs: " + storedStubs(t, base, always, ports)

		// Without --allowInjection, what holds JavaScript or a shell
		// command is refused.
		plain := customSystem(t, bin)
		for _, resp := range []string{
			`{"inject":"function () { return {}; }"}`,
			`{"is":{},"behaviors":[{"decorate":"function () {}"}]}`,
			`{"is":{},"behaviors":[{"shellTransform":"cat"}]}`,
			`{"is":{"reply":"W"},"behaviors":[{"wait":1}]}`,
		} {
			code, body := gatewaytest.Do(t, http.MethodPost, plain+"/imposters",
				fmt.Sprintf(`{"protocol":"line","port":%d,"stubs":[{"responses":[%s]}]}`, gatewaytest.FreePort(t), resp), nil)
			var e struct {
				Errors []struct{ Code, Message string } `json:"errors"`
			}
			_ = json.Unmarshal(body, &e)
			got[name] += fmt.Sprintf("\nno injection, %s: %d %+v", resp, code, e.Errors)
		}
	}
	t.Logf("mb:\n%s", got["mb"])
	if got["mb"] != got["riftgate"] {
		t.Fatalf("riftgate differs from mb:\nmb:\n%s\nriftgate:\n%s", got["mb"], got["riftgate"])
	}
}

// TestJSProtofileAsMountebank: mb requires --protofile, so a protofile in
// JavaScript works there; riftgate reads one on node and serves its
// protocols as mb does. One that node cannot read defines none, on both.
func TestJSProtofileAsMountebank(t *testing.T) {
	script, err := filepath.Abs("testdata/lineproto.js")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for name, bin := range map[string]string{"mb": mbBinary(t), "riftgate": gatewaytest.Binary(t)} {
		dir := t.TempDir()
		js := fmt.Sprintf("const path = %q;\nmodule.exports = { ['li' + 'ne']: { createCommand: ['node', path].join(' ') } };\n", script)
		if err := os.WriteFile(filepath.Join(dir, "protocols.js"), []byte(js), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "broken.js"), []byte("module.exports = {"), 0o644); err != nil {
			t.Fatal(err)
		}
		var answers []string
		for _, protofile := range []string{"protocols.js", "broken.js"} {
			port, imp := gatewaytest.FreePort(t), gatewaytest.FreePort(t)
			p := startProc(t, dir, bin, "start", "--port", strconv.Itoa(port), "--host", "127.0.0.1", "--nologfile",
				"--pidfile", protofile+".pid", "--protofile", protofile)
			waitForFile(t, p, filepath.Join(dir, protofile+".pid"))
			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			code, _ := gatewaytest.Do(t, http.MethodPost, base+"/imposters",
				fmt.Sprintf(`{"protocol":"line","port":%d,"stubs":[{"responses":[{"is":{"reply":"JS"}}]}]}`, imp), nil)
			answers = append(answers, fmt.Sprintf("%s: POST %d", protofile, code))
			if code == http.StatusCreated {
				answers = append(answers, "GET a -> "+sendLine(t, imp, "GET a"))
			}
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			p.exitCode(t)
		}
		got[name] = strings.Join(answers, "\n")
	}
	want := "protocols.js: POST 201\nGET a -> JS\nbroken.js: POST 400"
	for name, g := range got {
		if g != want {
			t.Errorf("%s:\n%s\nwant\n%s", name, g, want)
		}
	}
}

// TestCustomProtocolMatchesAsMountebank: under --debug, a custom
// protocol's stubs keep what they matched as mb's do: the request the
// process sent, the response object it was handed (a proxy's once
// resolved) and the response's config.
func TestCustomProtocolMatchesAsMountebank(t *testing.T) {
	got := map[string]string{}
	for _, name := range []string{"mb", "riftgate"} {
		bin := mbBinary(t)
		if name == "riftgate" {
			bin = gatewaytest.Binary(t)
		}
		base := customSystem(t, bin, "--debug")
		up, imp := gatewaytest.FreePort(t), gatewaytest.FreePort(t)
		ports := map[int]string{up: "UP", imp: "IMP"}
		for _, def := range []string{
			fmt.Sprintf(`{"protocol":"line","port":%d,"stubs":[{"responses":[{"is":{"reply":"UPSTREAM"}}]}]}`, up),
			fmt.Sprintf(`{"protocol":"line","port":%d,"stubs":[
				{"predicates":[{"equals":{"verb":"GET"}}],"responses":[{"is":{"reply":"ONE"}},{"is":{"reply":"TWO"}}]},
				{"predicates":[{"equals":{"verb":"PUT"}}],"responses":[{"proxy":{"to":"127.0.0.1:%d","mode":"proxyTransparent"}}]},
				{"predicates":[{"equals":{"verb":"NONE"}}],"responses":[{"is":{"reply":"never"}}]}]}`, imp, up),
		} {
			if code, body := gatewaytest.Do(t, http.MethodPost, base+"/imposters", def, nil); code != http.StatusCreated {
				t.Fatalf("%s POST: %d %s", name, code, body)
			}
		}
		var answers []string
		for _, l := range []string{"GET a", "GET b", "PUT x", "DEL y"} {
			answers = append(answers, l+" -> "+sendLine(t, imp, l))
		}
		code, body := gatewaytest.Do(t, http.MethodGet, fmt.Sprintf("%s/imposters/%d", base, imp), nil, nil)
		if code != http.StatusOK {
			t.Fatalf("%s GET: %d %s", name, code, body)
		}
		var whole struct {
			Stubs []struct {
				Matches []map[string]any `json:"matches"`
			} `json:"stubs"`
		}
		if err := json.Unmarshal(body, &whole); err != nil {
			t.Fatal(err)
		}
		for i, st := range whole.Stubs {
			for _, m := range st.Matches {
				for _, k := range []string{"timestamp", "processingTime"} {
					if _, ok := m[k]; !ok {
						t.Errorf("%s: stub %d's match has no %s: %v", name, i, k, m)
					}
					delete(m, k)
				}
			}
			b, _ := json.Marshal(st.Matches)
			s := proxyTimes.ReplaceAllString(string(b), `"_proxyResponseTime":T`)
			for p, n := range ports {
				s = strings.ReplaceAll(s, strconv.Itoa(p), n)
			}
			answers = append(answers, fmt.Sprintf("stub %d matches %s", i, s))
		}
		got[name] = strings.Join(answers, "\n")
	}
	t.Logf("mb:\n%s", got["mb"])
	if got["mb"] != got["riftgate"] {
		t.Fatalf("riftgate differs from mb:\nmb:\n%s\nriftgate:\n%s", got["mb"], got["riftgate"])
	}
}
