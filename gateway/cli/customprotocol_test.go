package cli_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
