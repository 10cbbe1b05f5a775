// Package mbdiff is the one list of riftgate's deliberate differences from
// Mountebank 2.9.1, with the reason for each, and the HTTP answers the
// comparisons with mb see. The docs suite (gateway/mbdocs) and the
// differential harness (gateway/e2e) read the list, so that a difference is
// allowed where it is listed and nowhere else; docs/mountebank-differences.md
// explains each to users, and a test holds the two together.
package mbdiff

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/riftgate/riftgate/gateway/message"
)

// Answer is an HTTP response as sent: the status line, the header fields in
// order with their names as sent, and the body.
type Answer struct {
	StatusLine string // "HTTP/1.1 200 OK"
	Headers    [][2]string
	Body       []byte
}

// ReadAnswer reads one HTTP/1.1 answer to a request of method from r,
// keeping the header fields as they were sent: in order, spelled as sent.
func ReadAnswer(r io.Reader, method string) (*Answer, error) {
	var head bytes.Buffer // what net/http parses away
	resp, err := http.ReadResponse(bufio.NewReader(io.TeeReader(r, &head)), &http.Request{Method: method})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	a := &Answer{StatusLine: fmt.Sprintf("HTTP/1.1 %d %s", resp.StatusCode, http.StatusText(resp.StatusCode)), Body: body}
	fields, _, _ := bytes.Cut(head.Bytes(), []byte("\r\n\r\n"))
	for i, l := range strings.Split(string(fields), "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && i > 0 {
			a.Headers = append(a.Headers, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	return a, nil
}

// Status is the status code of the status line, 0 if it has none.
func (a *Answer) Status() int {
	f := strings.Fields(a.StatusLine)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// Get returns the first value of the named field, case-insensitively.
func (a *Answer) Get(name string) (string, bool) {
	for _, h := range a.Headers {
		if strings.EqualFold(h[0], name) {
			return h[1], true
		}
	}
	return "", false
}

// Del removes every field of that name.
func (a *Answer) Del(name string) {
	kept := a.Headers[:0]
	for _, h := range a.Headers {
		if !strings.EqualFold(h[0], name) {
			kept = append(kept, h)
		}
	}
	a.Headers = kept
}

// ParseAnswer reads an answer shown as text: a status line, header lines,
// a blank line and the body. ok is false when the text is not one.
func ParseAnswer(text string) (a *Answer, ok bool) {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	if !strings.HasPrefix(text, "HTTP/") {
		return nil, false
	}
	head, body, _ := strings.Cut(text, "\n\n")
	ls := strings.Split(head, "\n")
	a = &Answer{StatusLine: ls[0], Body: []byte(body)}
	for _, l := range ls[1:] {
		k, v, found := strings.Cut(l, ":")
		if !found {
			return nil, false
		}
		a.Headers = append(a.Headers, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
	}
	return a, true
}

// Text writes the answer back as text, as ParseAnswer reads it.
func (a *Answer) Text() string {
	var b strings.Builder
	b.WriteString(a.StatusLine)
	for _, h := range a.Headers {
		b.WriteString("\n" + h[0] + ": " + h[1])
	}
	if len(a.Body) > 0 {
		b.WriteString("\n\n")
		b.Write(a.Body)
	}
	return b.String()
}

// Request is an HTTP request a comparison sends to both servers.
type Request struct {
	Method, Target string
	Headers        [][2]string
	Body           string
}

// Difference is one deliberate difference.
type Difference struct {
	// ID names the difference; docs/mountebank-differences.md has a
	// section whose heading ends with it in backquotes.
	ID string
	// What riftgate does, and Why, briefly (the docs say more).
	What, Why string
	// Answer, for a difference that shows in HTTP answers, rewrites
	// riftgate's answer (got) into mb's (want) where the two differ only by
	// this difference, and reports whether it changed anything. want may be
	// a page's text, trimmed and with volatile values.
	Answer func(want, got *Answer) bool
	// Request, for a difference in what riftgate's admin API accepts,
	// rewrites a request mb accepts into the one riftgate needs, and reports
	// whether it changed anything.
	Request func(*Request) bool
}

// Differences is every deliberate difference.
var Differences = []*Difference{
	{
		ID:   "content-length",
		What: "an HTTP/1.0 request's answer carries a Content-Length where mb ends the body by closing the connection",
		Why:  "fasthttp frames every HTTP/1.0 body it sends with a length; both are the same message to an HTTP/1.0 client",
		Answer: func(want, got *Answer) bool {
			_, wl := want.Get("Content-Length")
			_, wt := want.Get("Transfer-Encoding")
			n, gl := got.Get("Content-Length")
			if wl || wt || !gl || n != strconv.Itoa(len(got.Body)) || len(want.Body) == 0 && len(got.Body) == 0 {
				return false
			}
			for i, h := range got.Headers {
				if strings.EqualFold(h[0], "Content-Length") {
					got.Headers = append(got.Headers[:i], got.Headers[i+1:]...)
					break
				}
			}
			return true
		},
	},
	{
		ID:   "error-stack",
		What: "an error an imposter answers with has no `stack`",
		Why:  "mb's is a Node stack trace through its own source files; riftgate's would mean nothing",
		Answer: func(want, got *Answer) bool {
			return editJSON(want, got, func(w, g *message.JSObject) bool {
				if _, ok := w.Vals["stack"]; !ok || g.Vals["stack"] != nil || g.Vals["name"] == nil {
					return false
				}
				objSet(g, "stack", w.Vals["stack"])
				return true
			})
		},
	},
	{
		ID: "mb-failures",
		What: "where mb fails on a request it accepted (a JSON number from a proxied upstream that sent a " +
			"Content-Length: mb answers 500 ERR_INVALID_ARG_TYPE), riftgate answers",
		Why: "these are mb's bugs, which no suite can depend on",
		Answer: func(want, got *Answer) bool {
			if want.Status() == 500 && strings.Contains(string(want.Body), `"ERR_INVALID_ARG_TYPE"`) &&
				strings.Contains(string(want.Body), "Received type number") {
				*got = Answer{StatusLine: want.StatusLine, Headers: append([][2]string(nil), want.Headers...), Body: want.Body}
				return true
			}
			// A response proxyAlways appended to a recording, which mb
			// mutates after answering with it: its Content-Length a
			// number, a Connection: close added.
			return editJSON(want, got, func(w, g *message.JSObject) bool {
				n, isNum := w.Vals["Content-Length"].(float64)
				c, _ := w.Vals["Connection"].(string)
				gn, _ := g.Vals["Content-Length"].(string)
				if !isNum || c != "close" || g.Vals["Connection"] != nil || gn != message.JSNumber(n) {
					return false
				}
				g.Vals["Content-Length"] = n
				objSet(g, "Connection", "close")
				return true
			})
		},
	},
	{
		ID:   "log-lines",
		What: "log lines name riftgate: [riftgate:2525] where mb writes [mb:2525], riftgate vX where mountebank vX",
		Why:  "riftgate is not mountebank; the rest of each line is mb's",
		Answer: func(want, got *Answer) bool {
			if !bytes.Contains(want.Body, []byte("[mb:")) || !bytes.Contains(got.Body, []byte("[riftgate:")) {
				return false
			}
			return editJSON(want, got, func(w, g *message.JSObject) bool {
				m, ok := g.Vals["message"].(string)
				if !ok || !strings.HasPrefix(m, "[riftgate:") {
					return false
				}
				m = "[mb:" + strings.TrimPrefix(m, "[riftgate:")
				g.Vals["message"] = strings.Replace(m, "] riftgate v", "] mountebank v", 1)
				return true
			})
		},
	},
	{
		ID:   "header-order",
		What: "header fields are sent in an order of riftgate's own",
		Why:  "HTTP gives the order of different fields no meaning (RFC 9110 §5.3); Go's HTTP servers write their own order",
		// The comparisons sort header lines; nothing to rewrite.
	},
	{
		ID:   "host-header",
		What: "the admin API refuses a Host header that is not a valid host, such as `localhost: 2525`, with 400",
		Why:  "Go's HTTP server validates Host as RFC 9112 §3.2 requires, before any handler runs",
		Request: func(r *Request) bool {
			changed := false
			for i, h := range r.Headers {
				if strings.EqualFold(h[0], "Host") && strings.ContainsAny(h[1], " \t") {
					r.Headers[i][1] = strings.Join(strings.Fields(h[1]), "")
					changed = true
				}
			}
			return changed
		},
	},
}

// editJSON walks two JSON bodies side by side (objects by key, arrays by
// index) and calls edit on each pair of objects; when edit changed got's,
// got's body is written again in its own layout, and its Content-Length
// follows.
func editJSON(want, got *Answer, edit func(w, g *message.JSObject) bool) bool {
	wv, err1 := message.DecodeJS(want.Body)
	gv, err2 := message.DecodeJS(got.Body)
	if err1 != nil || err2 != nil || len(bytes.TrimSpace(got.Body)) == 0 {
		return false
	}
	var walk func(w, g any) bool
	walk = func(w, g any) bool {
		changed := false
		switch w := w.(type) {
		case *message.JSObject:
			g, ok := g.(*message.JSObject)
			if !ok {
				return false
			}
			changed = edit(w, g)
			for _, k := range w.Keys {
				if gv, ok := g.Vals[k]; ok {
					changed = walk(w.Vals[k], gv) || changed
				}
			}
		case []any:
			g, ok := g.([]any)
			if !ok {
				return false
			}
			for i := 0; i < len(w) && i < len(g); i++ {
				changed = walk(w[i], g[i]) || changed
			}
		}
		return changed
	}
	if !walk(wv, gv) {
		return false
	}
	indent := ""
	if bytes.Contains(got.Body, []byte("\n  ")) {
		indent = "  "
	}
	got.Body = message.EncodeJS(gv, indent, false)
	for i, h := range got.Headers {
		if strings.EqualFold(h[0], "Content-Length") {
			got.Headers[i][1] = strconv.Itoa(len(got.Body))
		}
	}
	return true
}

func objSet(o *message.JSObject, key string, v any) {
	if _, ok := o.Vals[key]; !ok {
		o.Keys = append(o.Keys, key)
	}
	o.Vals[key] = v
}

// The differences that no comparison needs to rewrite: they show in what
// riftgate accepts, logs or stores, or in answers no comparison asks for.
func init() {
	for _, d := range []Difference{
		{ID: "xml-oddities", What: "an xpath reads a lone surrogate (&#xD800;) as U+FFFD, and an unbound prefix named like a JavaScript Object property as no namespace",
			Why: "Go strings are UTF-8; mb's namespace map is a plain object, whose prototype's functions are not namespaces"},
		{ID: "binary-body", What: "a proxied text body that is not UTF-8 is recorded as binary (base64)",
			Why: "mb replaces what does not decode, so replaying it would not send what the upstream sent"},
		{ID: "predicate-inject-errors", What: "a predicate inject that throws or does not compile matches nothing (mb: 500)",
			Why: "riftgate's predicates cannot fail a request; the error is logged"},
		{ID: "builtin-cert", What: "an https imposter without key and cert uses a certificate made at start",
			Why: "mb ships one fixed key pair; riftgate does not ship a private key",
			Answer: func(want, got *Answer) bool {
				return editJSON(want, got, func(w, g *message.JSObject) bool {
					wc, _ := w.Vals["cert"].(string)
					if !strings.Contains(wc, mbBuiltinCert) || g.Vals["cert"] == nil || g.Vals["key"] == nil {
						return false
					}
					g.Vals["cert"], g.Vals["key"] = w.Vals["cert"], w.Vals["key"]
					return true
				})
			}},
		{ID: "fault-reset", What: "CONNECTION_RESET_BY_PEER resets the connection (TCP RST)",
			Why: "mb 2.9.1 under current Node closes it normally (the client reads EOF), which is not the fault it names",
			Answer: func(want, got *Answer) bool {
				if want.StatusLine == "ERROR EOF" && got.StatusLine == "ERROR connection reset" {
					got.StatusLine = want.StatusLine
					return true
				}
				return false
			}},
		{ID: "ignored-fields-logged", What: "fields mb ignores are ignored and logged at warn, once per imposter",
			Why: "a typo then shows in the log; mb says nothing"},
		{ID: "keep-alive-header", What: "no Keep-Alive: timeout=5 header", Why: "Node's own; Go's servers keep connections their own way"},
		{ID: "debug-logs", What: "per-request log lines are at debug level", Why: "at tens of thousands of requests a second they are the bottleneck"},
		{ID: "caps", What: "bodies, flow keys and values are capped (413 past the cap)", Why: "an unbounded body is a way to exhaust memory"},
		{ID: "admin-loopback", What: "the admin API binds to 127.0.0.1 unless --host says otherwise", Why: "safe defaults"},
		{ID: "ciphers", What: "a proxy's OpenSSL cipher names are ignored; passphrase opens legacy PEM keys", Why: "Go's TLS picks ciphers itself"},
		{ID: "jsonpath-scripts", What: "a jsonpath script or filter ([(...)], [?(...)]) runs in a bare JavaScript runtime, with no way to the host, and for at most a second a selection",
			Why: "mb runs them in Node's vm module, which any selector can escape to the process (with or without --allowInjection); a selector is data, not a program"},
		{ID: "goja", What: "JavaScript runs on goja with the Node modules scripts use, not all of Node", Why: "no Node in the process"},
		{ID: "wasm-connection", What: "a plugin response keeps the connection open unless it sets Connection", Why: "mb's default applies to mb's own response types"},
		{ID: "home-json", What: "GET / gives a browser the web UI, not mb's documentation site", Why: "mb's HTML documentation site is not served"},
		{ID: "stop-wait", What: "stop waits 10 s for the process to end and exits 1 if it has not", Why: "mb's 1 s wait, after which it removes the pidfile and exits 0, lets a restart find its port held"},
		{ID: "formatter-path", What: "a relative --formatter path is resolved against the working directory", Why: "mb resolves it from its own install, where it finds nothing"},
		{ID: "custom-protocols", What: "custom protocols (--protofile) answer is responses only, without behaviors; the protofile is JSON; built-in protocol names stay built in",
			Why: "the first step of mb's out-of-process contract: proxy resolution, inject and behaviors on a protocol's free-form response are not built yet"},
		{ID: "imposters-repository", What: "--impostersRepository gets each committed change written through (del, then add) and is loaded at start; cycle positions, recorded requests and matches stay riftgate's",
			Why: "riftgate's configuration log stays the source of truth (the cluster depends on it); a call into node per request would cost more than serving it"},
		{ID: "tcp", What: "tcp imposters: unfinished upstream answers, keepalive proxies, non-string data, answer order, caps, binary-mode matches, the endOfRequestResolver's buffer",
			Why: "each where mb hangs, fails or grows without bound (the page's tcp section)"},
		{ID: "smtp", What: "smtp imposters: Go's mail parsing, messages without From, size cap, AUTH and STARTTLS",
			Why: "no mailparser in Go; mb hangs or grows without bound (the page's smtp section)"},
		{ID: "streamed-requests", What: "an admin answer holding recorded requests streams past 1 MiB (Transfer-Encoding: chunked, no Content-Length)",
			Why: "built whole, a million recorded requests took more memory than the requests themselves"},
		{ID: "datadir-files", What: "riftgate's own files sit in --datadir beside mb's imposter folders, and imposter.json keeps every stub field",
			Why: "the configuration log the cluster relies on stays the one durable truth; mb's layout is written as its mirror"},
		{ID: "datadir-positions", What: "a stub's position in its responses, and what proxy recordings add, reach the folder within 100 ms, not before the answer; imposter.json and meta.json that recordings made large wait nine times their last write",
			Why: "file writes per request are what mb pays, and lists of every stub or response rewritten every 100 ms made recording O(n); a kill -9 forgets at most that much (the recordings are in the log)"},
		{ID: "datadir-large", What: "a change to an imposter of more than 1,000 stubs reaches its folder after it answers, in the background; a stop waits 3 s for it, and the next start writes what is left",
			Why: "100,000 stubs are 300,000 files, about 15 s of writes: a replay answered only after them, and a stop that waited for them would not be prompt"},
		{ID: "datadir-delete", What: "a deleted imposter's folder loses its imposter.json and is renamed to .removed-<port>-<time> before DELETE answers; its files are removed in the background",
			Why: "an imposter of 100,000 recorded stubs is 300,000 files: removing them before answering held DELETE for tens of seconds"},
		{ID: "datadir-unreadable", What: "a datadir folder that cannot be read is said at error, not served and never written over; only folders named after their port are read",
			Why: "nothing already stored is lost, and a delete removes exactly <datadir>/<port>/; mb 2.9.1 opens the port of a folder named otherwise but reads its stubs from <port>/, and its first GET of that imposter ends the mb process"},
		{ID: "datadir-matches", What: "under --debug, each stub's matches/ folder keeps its newest 1,000 files (mb keeps every one), written within 100 ms of the match",
			Why: "a file per request without bound fills the disk under load; 1,000 is what a stub shows in memory"},
		{ID: "datadir-requests", What: "recorded requests are written to <port>/requests/ as mb's files when riftgate stops cleanly, not one by one",
			Why: "one file per request would cap what --mock can record; riftgate's own store keeps them meanwhile, kill -9 included"},
		{ID: "recorded-order", What: "requests served at once are recorded in time order: a later one's timestamp moves forward to the one recorded before it (by well under a millisecond)",
			Why: "the recorded requests stream in time order, merged across a cluster's nodes, which needs each node's log in that order"},
	} {
		Differences = append(Differences, &d)
	}
}

// Lookup returns the difference with that ID, or nil.
func Lookup(id string) *Difference {
	for _, d := range Differences {
		if d.ID == id {
			return d
		}
	}
	return nil
}

// ReconcileAnswer applies every answer difference to got, given want, and
// returns the IDs of those that changed it.
func ReconcileAnswer(want, got *Answer) []string {
	var used []string
	for _, d := range Differences {
		if d.Answer != nil && d.Answer(want, got) {
			used = append(used, d.ID)
		}
	}
	return used
}

// ReconcileRequest applies every request difference to r and returns the
// IDs of those that changed it.
func ReconcileRequest(r *Request) []string {
	var used []string
	for _, d := range Differences {
		if d.Request != nil && d.Request(r) {
			used = append(used, d.ID)
		}
	}
	return used
}

// Awaiting lists header lines mb sends that riftgate does not send yet,
// because the work that adds them has not landed, with who brings it. The
// comparisons do not count their absence, and must be told (by removing
// the entry) once riftgate sends them. It is not a list of deliberate
// differences: it empties.
var Awaiting = map[string]string{}

// mbBuiltinCert is in the base64 of the certificate mb ships for https
// imposters that name none.
const mbBuiltinCert = "MIIDMTCCAhkCFC1be7uOugfu2q1NmVapw9+SQ0skMA0GCSqGSIb3DQEBCwUAMFUx"

// LineDiff shows how b's lines differ from a's: a line only a has is marked
// "-", one only b has "+", with two lines of context around each change.
func LineDiff(a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	// lcs[i][j] is the length of the longest common subsequence of x[i:] and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		mark byte
		text string
	}
	var out []line
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			out = append(out, line{' ', x[i]})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, line{'-', x[i]})
			i++
		default:
			out = append(out, line{'+', y[j]})
			j++
		}
	}
	var b2 strings.Builder
	last := -1
	for k, l := range out {
		near := false
		for d := -2; d <= 2; d++ {
			if k+d >= 0 && k+d < len(out) && out[k+d].mark != ' ' {
				near = true
			}
		}
		if !near {
			continue
		}
		if last >= 0 && k > last+1 {
			b2.WriteString("  ...\n")
		}
		last = k
		b2.WriteByte(l.mark)
		b2.WriteString(" " + l.text + "\n")
	}
	return b2.String()
}
