package mbdocs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/riftgate/riftgate/gateway/message"
	"io"
	"net"
	"net/smtp"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/riftgate/riftgate/gateway/mbdiff"
)

// DocPort is the admin port the pages name (<%= port %> renders to it).
const DocPort = 2525

// Target is the server a scenario runs against.
type Target struct {
	// Ports maps each port a scenario names to the port to use: the admin
	// port 2525 to the server's, imposter ports to free ones. A port the
	// map lacks is used as is.
	Ports map[int]int
	// Dir is the server's working directory, where file steps write.
	Dir string
	// Timeout bounds each step.
	Timeout time.Duration
	// Differences allows the deliberate differences of mbdiff: requests and
	// answers are reconciled by them. Off for mb itself.
	Differences bool
	// Awaiting lists header lines ("Vary: Accept") the server does not send
	// yet because the work that adds them has not landed: an expected line
	// the answer lacks is dropped and reported in Result.Awaited, and one
	// the answer has is reported in Result.Arrived.
	Awaiting map[string]bool
}

// Result is what one step answered.
type Result struct {
	Step        *Step
	Answer      string   // the answer as mb's docs test formats it
	Differences []string // the IDs of the mbdiff differences it was reconciled by
	Awaited     []string // Target.Awaiting lines the answer lacked
	Arrived     []string // Target.Awaiting lines the answer had
}

// Ports lists the ports a scenario names: the admin port, every imposter
// port and every port a request is sent to, in increasing order.
func (s *Scenario) Ports() []int {
	seen := map[int]bool{}
	for _, st := range s.Steps {
		texts := []string{st.Text}
		if st.Expect != nil {
			texts = append(texts, st.Expect.Text)
		}
		for _, t := range texts {
			for _, m := range portRef.FindAllStringSubmatch(t, -1) {
				for _, g := range m[1:] {
					if n, err := strconv.Atoi(g); err == nil && n > 0 && n < 65536 {
						seen[n] = true
					}
				}
			}
		}
		if p, err := strconv.Atoi(st.Attrs["port"]); err == nil {
			seen[p] = true
		}
	}
	out := make([]int, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Ints(out)
	return out
}

// portRef finds ports where the pages name them: host:port, "port": N,
// /imposters/N, and netcat's "nc localhost N".
var portRef = regexp.MustCompile(`(?:localhost|127\.0\.0\.1):(\d+)|"port":\s*(\d+)|/imposters/(\d+)|nc localhost (\d+)`)

// mapPorts rewrites every port of the map in text, as a whole number.
func (t *Target) mapPorts(text string) string {
	if len(t.Ports) == 0 {
		return text
	}
	return number.ReplaceAllStringFunc(text, func(s string) string {
		n, _ := strconv.Atoi(s)
		if p, ok := t.Ports[n]; ok {
			return strconv.Itoa(p)
		}
		return s
	})
}

var number = regexp.MustCompile(`\b\d{2,5}\b`)

// Run runs the scenario's steps in order and checks each answer the page
// asserts. It stops at the first step that fails. A request to the admin API
// whose answer the page does not assert must still succeed: a refused
// imposter fails where it is created, not in a later step.
func (t *Target) Run(ctx context.Context, s *Scenario) ([]Result, error) {
	var out []Result
	for i, st := range s.Steps {
		res := Result{Step: st}
		ans, raw, err := t.run(ctx, st, &res)
		if err != nil {
			return out, fmt.Errorf("step %d (%s) %s: %w", i+1, st.Type, firstLine(st.Text), err)
		}
		var want *Expectation
		if st.Expect != nil {
			want = &Expectation{Text: t.mapPorts(st.Expect.Text), Partial: st.Expect.Partial}
			for _, v := range st.Expect.Volatile {
				want.Volatile = append(want.Volatile, t.mapPorts(v))
			}
		}
		if ans == nil && raw != "" {
			if a, ok := mbdiff.ParseAnswer(raw); ok {
				ans, raw = a, ""
			}
		}
		if w, ok := mbdiff.ParseAnswer(wantText(want)); ok && ans != nil {
			if t.Differences {
				res.Differences = append(res.Differences, mbdiff.ReconcileAnswer(w, ans)...)
			}
			for _, h := range w.Headers {
				line := h[0] + ": " + h[1]
				if !t.Awaiting[line] {
					continue
				}
				if v, ok := ans.Get(h[0]); ok && v == h[1] {
					res.Arrived = append(res.Arrived, line)
				} else {
					res.Awaited = append(res.Awaited, line)
					want.Text = strings.Replace(want.Text, "\n"+line+"\n", "\n", 1)
				}
			}
		}
		switch {
		case ans != nil && st.Type == "http":
			res.Answer = formatHTTP(ans)
		case ans != nil:
			res.Answer = ans.Text()
		default:
			res.Answer = raw
		}
		out = append(out, res)
		if want == nil {
			if st.Type == "http" && t.isAdmin(st) && ans != nil && ans.Status()/100 != 2 {
				return out, fmt.Errorf("step %d (%s) %s: the admin API answered %q", i+1, st.Type, firstLine(st.Text), res.Answer)
			}
			continue
		}
		if err := want.Check(res.Answer); err != nil {
			return out, fmt.Errorf("step %d (%s) %s: %w", i+1, st.Type, firstLine(st.Text), err)
		}
	}
	return out, nil
}

func wantText(e *Expectation) string {
	if e == nil {
		return ""
	}
	return e.Text
}

func (t *Target) isAdmin(st *Step) bool {
	r, err := parseHTTP(st.Text)
	return err == nil && r.port == DocPort
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// run runs one step: an HTTP step answers with an Answer, others with the
// text they print.
func (t *Target) run(ctx context.Context, st *Step, res *Result) (*mbdiff.Answer, string, error) {
	timeout := t.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	text := t.mapPorts(st.Text)
	switch st.Type {
	case "http":
		r, err := parseHTTP(text)
		if err != nil {
			return nil, "", err
		}
		if t.Differences {
			res.Differences = append(res.Differences, mbdiff.ReconcileRequest(&r.Request)...)
		}
		a, err := httpStep(ctx, r)
		return a, "", err
	case "exec":
		out, err := t.execStep(ctx, text)
		return nil, out, err
	case "file":
		return nil, "", t.fileStep(st, text)
	case "smtp":
		port, err := strconv.Atoi(st.Attrs["port"])
		if err != nil {
			return nil, "", fmt.Errorf("smtp step without a port")
		}
		return nil, "", smtpStep(ctx, t.mapPort(port), text)
	}
	return nil, "", fmt.Errorf("unknown step type %q", st.Type)
}

func (t *Target) mapPort(p int) int {
	if q, ok := t.Ports[p]; ok {
		return q
	}
	return p
}

// httpRequest is a request as mb's docs test reads it from a page.
type httpRequest struct {
	mbdiff.Request
	port int
}

func parseHTTP(text string) (*httpRequest, error) {
	ls := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	first := strings.Split(ls[0], " ")
	if len(first) < 2 {
		return nil, fmt.Errorf("bad request line %q", ls[0])
	}
	r := &httpRequest{Request: mbdiff.Request{Method: first[0], Target: first[1]}}
	i := 1
	for ; i < len(ls); i++ {
		if strings.TrimSpace(ls[i]) == "" {
			break
		}
		k, v, _ := strings.Cut(ls[i], ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		r.Headers = append(r.Headers, [2]string{k, v})
		if strings.EqualFold(k, "host") {
			_, p, ok := strings.Cut(v, ":")
			n, err := strconv.Atoi(strings.TrimSpace(p))
			if !ok || err != nil {
				return nil, fmt.Errorf("host header %q names no port", v)
			}
			r.port = n
		}
	}
	if r.port == 0 {
		return nil, errors.New("request without a Host header")
	}
	if i < len(ls) {
		r.Body = strings.TrimSpace(strings.Join(ls[i:], "\n"))
	}
	return r, nil
}

// httpStep sends the request as the docs test's Node client sends it: the
// page's headers in order, then accept and Content-Type when the page gives
// none, Connection: keep-alive, and a chunked body.
func httpStep(ctx context.Context, r *httpRequest) (*mbdiff.Answer, error) {
	hasAccept, hasCT := false, false
	for _, h := range r.Headers {
		hasAccept = hasAccept || strings.EqualFold(h[0], "accept")
		hasCT = hasCT || h[0] == "Content-Type" // the Node client checks this exact spelling
	}
	if !hasAccept {
		r.Headers = append(r.Headers, [2]string{"accept", "application/json"})
	}
	if r.Body != "" && !hasCT {
		r.Headers = append(r.Headers, [2]string{"Content-Type", "application/json"})
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", r.Method, r.Target)
	for _, h := range r.Headers {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	b.WriteString("Connection: keep-alive\r\n")
	if r.Body != "" {
		fmt.Fprintf(&b, "Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(r.Body), r.Body)
	} else {
		b.WriteString("\r\n")
	}
	if _, err := conn.Write(b.Bytes()); err != nil {
		return nil, err
	}
	return mbdiff.ReadAnswer(conn, r.Method)
}

// formatHTTP writes an answer as mb's docs test does: the status line,
// each header once (Node's lowercased names proper-cased, repeated ones
// joined), a blank line and the body, a JSON body pretty-printed.
func formatHTTP(a *mbdiff.Answer) string {
	var b strings.Builder
	b.WriteString(a.StatusLine)
	contentType := ""
	for _, h := range nodeHeaders(a.Headers) {
		if h[0] == "keep-alive" {
			continue // the docs test leaves it out: Node versions differ
		}
		if h[0] == "content-type" {
			contentType = h[1]
		}
		fmt.Fprintf(&b, "\n%s: %s", properCase(h[0]), h[1])
	}
	if len(a.Body) > 0 {
		b.WriteString("\n\n")
		s := string(a.Body)
		if strings.HasPrefix(contentType, "application/json") {
			if v, err := message.DecodeJS(a.Body); err == nil {
				s = string(message.EncodeJS(v, "  ", false))
			}
		}
		b.WriteString(s)
	}
	return b.String()
}

// nodeHeaders are the fields as Node's response.headers holds them:
// lowercased names in the order first seen, repeats joined with ", "
// (set-cookie with ","), and for the fields Node keeps once, the first.
func nodeHeaders(fields [][2]string) [][2]string {
	var out [][2]string
	index := map[string]int{}
	for _, kv := range fields {
		name := strings.ToLower(kv[0])
		i, seen := index[name]
		switch {
		case !seen:
			index[name] = len(out)
			out = append(out, [2]string{name, kv[1]})
		case singleton[name]:
		case name == "set-cookie":
			out[i][1] += "," + kv[1]
		default:
			out[i][1] += ", " + kv[1]
		}
	}
	return out
}

var singleton = map[string]bool{"content-type": true, "content-length": true, "user-agent": true,
	"referer": true, "host": true, "authorization": true, "proxy-authorization": true,
	"if-modified-since": true, "if-unmodified-since": true, "from": true, "location": true,
	"max-forwards": true, "retry-after": true, "etag": true, "last-modified": true, "server": true,
	"age": true, "expires": true}

func properCase(name string) string {
	parts := strings.Split(name, "-")
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "-")
}

// netcat is "… | nc localhost PORT" at the end of a command.
var netcat = regexp.MustCompile(`(?s)^(.*)\|\s*nc localhost (\d+)\s*$`)

// execStep runs a shell command from the page and answers with its output.
// A command that pipes into netcat runs its first part in the shell and
// sends what it printed over TCP, as `nc -q1` would: write, close the
// sending side, and read until the server closes or a second passes
// without data.
func (t *Target) execStep(ctx context.Context, text string) (string, error) {
	if m := netcat.FindStringSubmatch(text); m != nil {
		data, err := t.shell(ctx, m[1])
		if err != nil {
			return "", err
		}
		port, _ := strconv.Atoi(m[2])
		return tcpExchange(ctx, port, data)
	}
	out, err := t.shell(ctx, text)
	return string(out), err
}

func (t *Target) shell(ctx context.Context, script string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = t.Dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%q: %w: %s", script, err, stderr.String())
	}
	return out, nil
}

func tcpExchange(ctx context.Context, port int, data []byte) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := conn.Write(data); err != nil {
		return "", err
	}
	_ = conn.(*net.TCPConn).CloseWrite()
	var got bytes.Buffer
	buf := make([]byte, 64<<10)
	for {
		deadline := time.Now().Add(time.Second)
		if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
			deadline = dl
		}
		_ = conn.SetReadDeadline(deadline)
		n, err := conn.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			var ne net.Error
			if errors.Is(err, io.EOF) || (errors.As(err, &ne) && ne.Timeout()) {
				return got.String(), nil
			}
			return got.String(), err
		}
	}
}

// fileStep writes (or, with delete='true', removes) a file the page names.
func (t *Target) fileStep(st *Step, text string) error {
	name := st.Attrs["filename"]
	if name == "" {
		return errors.New("file step without a filename")
	}
	if st.Attrs["delete"] == "true" {
		return os.Remove(name)
	}
	return os.WriteFile(name, []byte(text), 0o644)
}

// smtpStep sends the page's message: header lines (From, To, Cc, Bcc,
// Subject), a blank line, the text.
func smtpStep(ctx context.Context, port int, text string) error {
	ls := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	var from string
	var rcpt []string
	var head bytes.Buffer
	i := 0
	for ; i < len(ls); i++ {
		if strings.TrimSpace(ls[i]) == "" {
			break
		}
		k, v, _ := strings.Cut(ls[i], ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch strings.ToLower(k) {
		case "from":
			from = address(v)
		case "to", "cc", "bcc":
			rcpt = append(rcpt, address(v))
		}
		if !strings.EqualFold(k, "bcc") {
			fmt.Fprintf(&head, "%s: %s\r\n", k, v)
		}
	}
	body := strings.ReplaceAll(strings.TrimSpace(strings.Join(ls[i:], "\n")), "\n", "\r\n")
	msg := head.String() + "\r\n" + body + "\r\n"
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	c, err := smtp.NewClient(conn, "localhost")
	if err != nil {
		return err
	}
	if err := c.Mail(from); err != nil {
		return err
	}
	for _, r := range rcpt {
		if err := c.Rcpt(r); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// address is the mailbox of `"Name" <addr>` or a bare address.
func address(v string) string {
	if i, j := strings.LastIndex(v, "<"), strings.LastIndex(v, ">"); i >= 0 && j > i {
		return v[i+1 : j]
	}
	return v
}
