package e2e_test

// The differential harness: request sequences run against a live mb 2.9.1
// and riftgate side by side, comparing every answer (status, the headers
// that matter, the body) and, where a step asks, the stored imposter as
// GET /imposters/:id shows it plain, ?replayable=true and
// ?removeProxies=true. The only differences allowed are mbdiff's list.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
	"github.com/riftgate/riftgate/gateway/mbdiff"
	"github.com/riftgate/riftgate/gateway/message"
)

// dcase is one request sequence. Texts may name the case's imposter ports
// ({a}, {b}, {c}), the admin port ({admin}) and the raw upstream ({up}).
type dcase struct {
	name string
	// noInjection runs the case on servers started without --allowInjection.
	noInjection bool
	// flags are more options both servers start with (--debug).
	flags []string
	// files are written into each server's working directory first.
	files map[string]string
	// volatile lists JSON keys whose values vary between runs, beyond the
	// usual ones (timestamps, addresses, response times).
	volatile []string
	// pending names unfinished work that makes the case fail now; it runs,
	// must fail, and is logged until the work lands.
	pending string
	steps   []dstep
}

// dstep is one request: to the admin API, or to an imposter ("a", "b").
type dstep struct {
	to                   string
	method, target, body string
	headers              [][2]string
	// stored compares the imposters of the case, in their three forms,
	// after this step.
	stored bool
	// statusOnly compares the status alone (a body holding an mb stack or
	// other detail nobody could match).
	statusOnly bool
	// sleep waits before the step.
	sleep time.Duration
	// file, when set, writes body into the server's working directory
	// under that name instead of sending a request.
	file string
	// stat, when set, compares whether that path (in the server's working
	// directory) exists, instead of sending a request.
	stat string
}

func admin(method, target, body string) dstep {
	return dstep{method: method, target: target, body: body}
}

func call(imp, method, target, body string, headers ...[2]string) dstep {
	return dstep{to: imp, method: method, target: target, body: body, headers: headers}
}

func post(imposter string) dstep {
	return dstep{method: "POST", target: "/imposters", body: imposter, stored: true}
}

func (s dstep) andStored() dstep { s.stored = true; return s }

func (s dstep) onlyStatus() dstep { s.statusOnly = true; return s }

func writeFile(name, content string) dstep { return dstep{file: name, body: content} }

// fileState compares whether a file or folder is there.
func fileState(name string) dstep { return dstep{stat: name} }

// system is one server under comparison.
type system struct {
	name string
	in   *gatewaytest.Instance
}

type pair struct{ mb, rg *system }

var (
	pairsMu sync.Mutex
)

func startPair(t *testing.T, args ...string) *pair {
	t.Helper()
	pairsMu.Lock()
	defer pairsMu.Unlock()
	return &pair{
		mb: &system{name: "mb", in: gatewaytest.StartMountebank(t, args...)},
		rg: &system{name: "riftgate", in: gatewaytest.Start(t, args...)},
	}
}

// run runs the cases, each on fresh imposter ports of both servers.
func runDifferential(t *testing.T, cases []dcase) {
	up := newRawUpstream(t)
	pairs := map[string]*pair{} // by their servers' options
	for _, c := range cases {
		args := c.flags
		if !c.noInjection {
			args = append([]string{"--allowInjection"}, args...)
		}
		p := pairs[strings.Join(args, " ")]
		if p == nil {
			p = startPair(t, args...)
			pairs[strings.Join(args, " ")] = p
		}
		t.Run(c.name, func(t *testing.T) {
			failures := c.run(t, p, up)
			switch {
			case c.pending != "" && len(failures) == 0:
				t.Errorf("passes, but is marked pending on %s: remove the mark", c.pending)
			case c.pending != "":
				t.Logf("PENDING %s: differs from mb as expected until then:\n%s", c.pending, strings.Join(failures, "\n"))
			default:
				for _, f := range failures {
					t.Error(f)
				}
			}
		})
	}
}

// env is one server's values for a case's placeholders.
type env struct {
	sys   *system
	ports map[string]int
	up    string
}

func (e *env) expand(s string) string {
	s = strings.ReplaceAll(s, "{admin}", strconv.Itoa(e.sys.in.Port))
	s = strings.ReplaceAll(s, "{up}", e.up)
	for name, p := range e.ports {
		s = strings.ReplaceAll(s, "{"+name+"}", strconv.Itoa(p))
	}
	return s
}

// sentinels stand for each port in normalized answers, as numbers, so that
// JSON stays JSON. They lie below gatewaytest.FreePort's range: a sentinel
// that could be a real port would be replaced again by the next port's
// pattern (normalizePorts goes through the ports in no set order).
var sentinels = map[string]string{"admin": "9000", "a": "9001", "b": "9002", "c": "9003"}

func (e *env) normalizePorts(s string) string {
	all := map[string]int{"admin": e.sys.in.Port}
	for k, v := range e.ports {
		all[k] = v
	}
	for name, p := range all {
		s = regexp.MustCompile(`\b`+strconv.Itoa(p)+`\b`).ReplaceAllString(s, sentinels[name])
	}
	_, upPort, _ := net.SplitHostPort(strings.TrimPrefix(e.up, "http://"))
	return strings.ReplaceAll(s, "127.0.0.1:"+upPort, "UPSTREAM")
}

func (c dcase) run(t *testing.T, p *pair, up *rawUpstream) []string {
	var failures []string
	envs := map[string]*env{}
	for _, sys := range []*system{p.mb, p.rg} {
		e := &env{sys: sys, ports: map[string]int{}, up: up.URL}
		// a < b < c on both servers, since lists are ordered by port.
		var free []int
		for seen := map[int]bool{}; len(free) < 3; {
			if p := gatewaytest.FreePort(t); !seen[p] {
				seen[p] = true
				free = append(free, p)
			}
		}
		sort.Ints(free)
		for i, name := range []string{"a", "b", "c"} {
			e.ports[name] = free[i]
		}
		for name, content := range c.files {
			if err := os.WriteFile(filepath.Join(sys.in.Dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		envs[sys.name] = e
	}
	defer func() {
		for _, e := range envs {
			for _, port := range e.ports {
				gatewaytest.Do(t, "DELETE", fmt.Sprintf("%s/imposters/%d", e.sys.in.URL, port), nil, nil)
			}
		}
	}()
	volatile := map[string]bool{}
	for _, k := range append([]string{"timestamp", "requestFrom", "ip", "_proxyResponseTime", "Date", "date",
		"stack", "processingTime"}, c.volatile...) {
		volatile[k] = true
	}
	for i, st := range c.steps {
		time.Sleep(st.sleep)
		if st.file != "" {
			for _, e := range envs {
				path := filepath.Join(e.sys.in.Dir, e.expand(st.file))
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(st.body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		var got [2]*mbdiff.Answer
		for j, sys := range []*system{p.mb, p.rg} {
			if st.stat != "" {
				_, err := os.Stat(filepath.Join(sys.in.Dir, envs[sys.name].expand(st.stat)))
				got[j] = &mbdiff.Answer{StatusLine: fmt.Sprintf("FILE %s there: %v", st.stat, err == nil)}
				continue
			}
			a, err := envs[sys.name].send(st)
			if err != nil {
				a = &mbdiff.Answer{StatusLine: "ERROR " + errorKind(err)}
			}
			got[j] = a
		}
		where := fmt.Sprintf("step %d %s %s %s", i+1, st.to, st.method, st.target)
		failures = append(failures, compareAnswers(where, got[0], got[1], envs, volatile, st.statusOnly)...)
		if !st.stored {
			continue
		}
		for _, name := range []string{"a", "b", "c"} {
			for _, q := range []string{"", "?replayable=true", "?removeProxies=true"} {
				var a [2]*mbdiff.Answer
				for j, sys := range []*system{p.mb, p.rg} {
					e := envs[sys.name]
					a[j], _ = e.send(admin("GET", fmt.Sprintf("/imposters/%d%s", e.ports[name], q), ""))
				}
				if a[0] == nil || a[0].Status() == 404 && a[1] != nil && a[1].Status() == 404 {
					continue
				}
				failures = append(failures, compareAnswers(where+fmt.Sprintf(", then imposter %s%s", name, q), a[0], a[1], envs, volatile, false)...)
			}
		}
	}
	return failures
}

// send sends a step's request as raw bytes on a fresh connection.
func (e *env) send(st dstep) (*mbdiff.Answer, error) {
	port := e.sys.in.Port
	if st.to != "" {
		port = e.ports[st.to]
	}
	r := mbdiff.Request{Method: st.method, Target: e.expand(st.target), Body: e.expand(st.body)}
	r.Headers = append(r.Headers, [2]string{"Host", "localhost:" + strconv.Itoa(port)})
	for _, h := range st.headers {
		r.Headers = append(r.Headers, [2]string{h[0], e.expand(h[1])})
	}
	if st.to == "" && r.Body != "" {
		r.Headers = append(r.Headers, [2]string{"Content-Type", "application/json"})
	}
	if e.sys.name == "riftgate" {
		mbdiff.ReconcileRequest(&r)
	}
	return sendRaw(port, r)
}

func sendRaw(port int, r mbdiff.Request) (*mbdiff.Answer, error) {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", r.Method, r.Target)
	hasLength := false
	for _, h := range r.Headers {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
		hasLength = hasLength || strings.EqualFold(h[0], "content-length")
	}
	if !hasLength && (r.Body != "" || r.Method == "POST" || r.Method == "PUT") {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(r.Body))
	}
	b.WriteString("\r\n")
	b.WriteString(r.Body)
	if _, err := c.Write(b.Bytes()); err != nil {
		return nil, err
	}
	return mbdiff.ReadAnswer(c, r.Method)
}

// ignoredHeaders vary by nature (Date), or are Node's alone (Keep-Alive);
// Content-Length follows the bodies, which are compared, volatile values
// and all.
var ignoredHeaders = map[string]bool{"date": true, "keep-alive": true, "content-length": true}

func compareAnswers(where string, mb, rg *mbdiff.Answer, envs map[string]*env, volatile map[string]bool, statusOnly bool) []string {
	if mb == nil || rg == nil {
		return []string{where + ": no answer"}
	}
	used := mbdiff.ReconcileAnswer(mb, rg)
	want := normalizeAnswer(mb, envs["mb"], volatile)
	got := normalizeAnswer(rg, envs["riftgate"], volatile)
	if statusOnly {
		want, got = mb.StatusLine, rg.StatusLine
	}
	if want == got {
		return nil
	}
	note := ""
	if len(used) > 0 {
		note = fmt.Sprintf(" (after the listed differences %v)", used)
	}
	return []string{fmt.Sprintf("%s differs%s (- mb, + riftgate):\n%s", where, note, mbdiff.LineDiff(want, got))}
}

// normalizeAnswer renders an answer for comparison: the status, the header
// fields that matter, sorted (names lowercased; Vary awaited where
// mbdiff.Awaiting says), and the body with ports named and volatile JSON
// values replaced.
func normalizeAnswer(a *mbdiff.Answer, e *env, volatile map[string]bool) string {
	var hs []string
	for _, h := range a.Headers {
		name := strings.ToLower(h[0])
		if ignoredHeaders[name] || mbdiff.Awaiting[h[0]+": "+h[1]] != "" {
			continue
		}
		hs = append(hs, name+": "+e.normalizePorts(h[1]))
	}
	sort.Strings(hs)
	body := e.normalizePorts(string(a.Body))
	if v, err := message.DecodeJS([]byte(body)); err == nil && len(bytes.TrimSpace(a.Body)) > 0 {
		body = string(message.EncodeJS(scrub(v, volatile), "  ", false))
	}
	return a.StatusLine + "\n" + strings.Join(hs, "\n") + "\n\n" + body
}

// scrub replaces the values of volatile keys.
func scrub(v any, volatile map[string]bool) any {
	switch v := v.(type) {
	case *message.JSObject:
		for _, k := range v.Keys {
			if volatile[k] {
				v.Vals[k] = "VOLATILE"
			} else {
				v.Vals[k] = scrub(v.Vals[k], volatile)
			}
		}
	case []any:
		for i := range v {
			v[i] = scrub(v[i], volatile)
		}
	}
	return v
}

// mountebank starts the reference, mb 2.9.1, with --allowInjection and
// args, and returns its admin URL.
func mountebank(t *testing.T, args ...string) string {
	t.Helper()
	return gatewaytest.StartMountebank(t, append([]string{"--allowInjection"}, args...)...).URL
}

// errorKind names how a request failed without the addresses: EOF (the
// server closed the connection), connection reset, or the error.
func errorKind(err error) string {
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	}
	return err.Error()
}
