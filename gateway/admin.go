package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/ui"
)

// adminHandler is Mountebank's REST API on --port.
func (g *gateway) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", g.home)
	mux.HandleFunc("GET /imposters", g.listImposters)
	mux.HandleFunc("POST /imposters", g.postImposter)
	mux.HandleFunc("PUT /imposters", g.putImposters)
	mux.HandleFunc("DELETE /imposters", g.deleteImposters)
	mux.HandleFunc("GET /imposters/{id}", g.withImposter(g.getImposter))
	mux.HandleFunc("DELETE /imposters/{id}", g.deleteImposter)
	mux.HandleFunc("DELETE /imposters/{id}/savedRequests", g.withImposter(g.deleteSavedRequests))
	mux.HandleFunc("DELETE /imposters/{id}/savedProxyResponses", g.withImposter(g.deleteSavedProxyResponses))
	// mb 2.9.1 routes this to what savedProxyResponses does, not to savedRequests.
	mux.HandleFunc("DELETE /imposters/{id}/requests", g.withImposter(g.deleteSavedProxyResponses))
	mux.HandleFunc("PUT /imposters/{id}/stubs", g.withImposter(g.putStubs))
	mux.HandleFunc("POST /imposters/{id}/stubs", g.withImposter(g.postStub))
	mux.HandleFunc("PUT /imposters/{id}/stubs/{index}", g.withImposter(g.putStub))
	mux.HandleFunc("DELETE /imposters/{id}/stubs/{index}", g.withImposter(g.deleteStub))
	mux.HandleFunc("POST /imposters/{id}/_requests", g.withImposter(g.customRequest))
	mux.HandleFunc("POST /imposters/{id}/_requests/{key}", g.withImposter(g.customProxyResponse))
	mux.HandleFunc("GET /config", g.getConfig)
	mux.HandleFunc("GET /logs", g.withLogStream(g.getLogs))
	mux.HandleFunc("GET /metrics", g.metrics)
	g.engine.routes(mux)
	if c := g.opts.Cluster; c != nil && c.Admin != nil {
		mux.Handle("/cluster", c.Admin)
		mux.Handle("/cluster/", c.Admin)
	}
	if g.opts.Pprof {
		// Go's profiler, for finding where a slow request goes; off by
		// default, and behind the admin API's bind address and --apikey.
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	}
	// The least specific pattern: what no route takes, whatever the method.
	mux.HandleFunc("/", expressNotFound)
	return g.guard(mux)
}

// expressNotFound answers a request no route takes as mb's Express does:
// 404 with its error page, where Go's mux would answer 405 for a known path
// with another method, or a text 404.
func expressNotFound(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusNotFound)
	msg := html.EscapeString("Cannot " + r.Method + " " + r.URL.EscapedPath())
	_, _ = io.WriteString(w, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Error</title>\n</head>\n<body>\n<pre>"+msg+"</pre>\n</body>\n</html>\n")
}

// guard refuses what a hostile web page sends through a browser
// (adminguard.go), applies --origin and --apikey to every admin request,
// serves the web UI to browsers (gateway/ui), and logs each request.
func (g *gateway) guard(next http.Handler) http.Handler {
	browser := newBrowserGuard(g.opts)
	pages := ui.New()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !browser.check(w, r) {
			return
		}
		if pages.Serve(w, r) {
			return
		}
		if g.opts.Origin != "" && r.Header.Get("Origin") == g.opts.Origin {
			w.Header().Set("Access-Control-Allow-Origin", g.opts.Origin)
			if r.Method == http.MethodOptions {
				w.Header().Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE")
				w.Header().Set("Access-Control-Allow-Headers", r.Header.Get("Access-Control-Request-Headers"))
				w.WriteHeader(http.StatusOK)
				return
			}
		}
		if g.opts.APIKey != "" && r.Header.Get("x-api-key") != g.opts.APIKey {
			writeErr(w, mberr.New(mberr.Unauthorized,
				"If you set the apiKey option, make sure you are sending the correct apiKey in the x-api-key header."))
			return
		}
		g.log.Info(r.Method + " " + r.URL.RequestURI())
		if r.ProtoAtLeast(1, 1) && !r.Close {
			// As mb's server says it; Go leaves HTTP/1.1's default unsaid.
			w.Header().Set("Connection", "keep-alive")
		}
		if c := g.opts.Cluster; c != nil && c.Consistent != nil && r.Method == http.MethodGet && flag(r, "consistent") {
			// Answered from this node's copy, once it is confirmed current.
			if err := c.Consistent(r.Context()); err != nil {
				writeErr(w, err)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// baseURL is the admin API's address as the client named it, for _links.
func baseURL(r *http.Request) string { return "http://" + r.Host }

func (g *gateway) home(w http.ResponseWriter, r *http.Request) {
	b := baseURL(r)
	// In mb's order, which a map would lose.
	writeRaw(w, http.StatusOK, json.RawMessage(fmt.Sprintf(
		`{"_links":{"imposters":{"href":%q},"config":{"href":%q},"logs":{"href":%q}}}`,
		b+"/imposters", b+"/config", b+"/logs")))
}

// flag reads a boolean query parameter as mb does: only "true" is true.
func flag(r *http.Request, name string) bool {
	return strings.EqualFold(r.URL.Query().Get(name), "true")
}

func view(r *http.Request) imposter.View {
	v := imposter.View{
		BaseURL:       baseURL(r),
		Replayable:    flag(r, "replayable"),
		RemoveProxies: flag(r, "removeProxies"),
	}
	return v
}

// stubWindow is the window of stubs GET /imposters/:id is asked for with
// riftgate's stubOffset and stubLimit (mb ignores both and shows every
// stub), or nil.
func stubWindow(r *http.Request) *imposter.Window {
	q := r.URL.Query()
	if !q.Has("stubOffset") && !q.Has("stubLimit") {
		return nil
	}
	off, _ := strconv.Atoi(q.Get("stubOffset"))
	lim, err := strconv.Atoi(q.Get("stubLimit"))
	if err != nil {
		lim = defaultStubLimit
	}
	return &imposter.Window{Offset: off, Limit: lim}
}

// defaultStubLimit is the window of stubs stubOffset alone shows.
const defaultStubLimit = 100

func (g *gateway) listImposters(w http.ResponseWriter, r *http.Request) {
	v := view(r)
	v.List = !v.Replayable && !v.RemoveProxies
	g.writeImposterList(w, r, http.StatusOK, g.snapshot(), v)
}

func (g *gateway) postImposter(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	if !json.Valid(body) {
		writeErr(w, mberr.New(mberr.InvalidJSON, "Unable to parse body as JSON").WithSource(string(body)))
		return
	}
	m := g.maker()
	defer m.done()
	doc, err := m.imposter(body)
	if err == nil {
		cmd := m.command(&config.Command{Op: config.OpCreateImposter, Imposters: []config.ImposterDoc{doc}})
		_, ours := g.get(doc.Port)
		if _, err = g.submit(r.Context(), cmd); ours && isAddrInUse(err) {
			err = g.submitWhenFreed(r.Context(), doc.Port, cmd, err)
		}
	}
	imp, ok := g.get(doc.Port)
	if err == nil && !ok {
		err = mberr.New(mberr.CannotStartServer, "the imposter was created and is gone")
	}
	if err != nil {
		g.log.Error("error creating imposter: " + err.Error())
		writeErr(w, err)
		return
	}
	w.Header().Set("Location", baseURL(r)+"/imposters/"+strconv.Itoa(imp.Port()))
	g.writeImposter(w, r, http.StatusCreated, imp, imposter.View{BaseURL: baseURL(r)}, nil)
}

// freedWithin is how long a POST /imposters whose port an imposter of
// ours holds waits for a change to delete it.
const freedWithin = 250 * time.Millisecond

// submitWhenFreed submits cmd again, which err refused because an imposter
// of ours holds port, once that imposter is deleted, for up to
// freedWithin; it returns the last answer's error. mb takes requests in
// the order they arrive, one at a time: a suite that sends DELETE
// /imposters without waiting for it, then POSTs an imposter on a port the
// delete frees (mb's own does), gets the port. Here each connection has a
// goroutine, and the POST may be taken first. A freed port's listener may
// take a moment more to close: the submit is tried again until then.
func (g *gateway) submitWhenFreed(ctx context.Context, port int, cmd *config.Command, err error) error {
	deadline := time.Now().Add(freedWithin)
	for {
		if _, held := g.get(port); !held {
			if _, err = g.submit(ctx, cmd); !isAddrInUse(err) {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Millisecond):
		}
		if !time.Now().Before(deadline) {
			return err
		}
	}
}

// isAddrInUse reports whether err is mb's EADDRINUSE.
func isAddrInUse(err error) bool {
	return err != nil && mberr.As(err).Code == mberr.AddressInUseCode
}

// putImposters replaces every imposter, in one command: a bad definition
// changes nothing, flows included.
func (g *gateway) putImposters(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	raws, err := impostersField(body)
	if err != nil {
		writeErr(w, err)
		return
	}
	m := g.maker()
	defer m.done()
	cmd := &config.Command{Op: config.OpReplaceAll, Imposters: make([]config.ImposterDoc, 0, len(raws))}
	for _, raw := range raws {
		doc, err := m.imposter(raw)
		if err != nil {
			writeErr(w, err)
			return
		}
		cmd.Imposters = append(cmd.Imposters, doc)
	}
	if _, err := g.submit(r.Context(), m.command(cmd)); err != nil {
		writeErr(w, err)
		return
	}
	g.writeImposterList(w, r, http.StatusOK, g.snapshot(), imposter.View{BaseURL: baseURL(r), List: true})
}

func (g *gateway) deleteImposters(w http.ResponseWriter, r *http.Request) {
	v := view(r)
	// Replayable unless asked otherwise, as mb keeps it for old clients.
	v.Replayable = !strings.EqualFold(r.URL.Query().Get("replayable"), "false")
	// Rendered (and the requests' snapshots taken) before they go; the
	// snapshots read the requests after.
	imps := g.snapshot()
	a := &answer{g: g}
	list := make([]json.RawMessage, len(imps))
	for i, imp := range imps {
		list[i] = a.imposter(imp, v, nil)
	}
	if _, err := g.submit(r.Context(), &config.Command{Op: config.OpReplaceAll}); err != nil {
		a.close()
		writeErr(w, err)
		return
	}
	a.write(r.Context(), w, http.StatusOK, impostersDoc(list))
}

// withImposter resolves {id} or answers mb's 404.
func (g *gateway) withImposter(h func(http.ResponseWriter, *http.Request, *imposter.Imposter)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		port, err := strconv.Atoi(r.PathValue("id"))
		imp, ok := g.get(port)
		if err != nil || !ok {
			writeErr(w, mberr.New(mberr.NoSuchResource, config.MsgNoImposter))
			return
		}
		h(w, r, imp)
	}
}

// customRequest is a custom protocol's callback: its process's request,
// answered through the imposter's stubs.
func (g *gateway) customRequest(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	customCallback(w, r, imp, imp.RespondCustom)
}

// customProxyResponse is a custom protocol's process handing back the
// answer to a proxy it was given (mb's postProxyResponse).
func (g *gateway) customProxyResponse(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	customCallback(w, r, imp, func(ctx context.Context, body []byte) ([]byte, error) {
		return imp.ResolveCustomProxy(ctx, r.PathValue("key"), body)
	})
}

// customCallback answers a custom protocol's process with what answer
// makes of its body; an imposter of another protocol is not found.
func customCallback(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter, answer func(context.Context, []byte) ([]byte, error)) {
	if !imp.IsCustom() {
		writeErr(w, mberr.New(mberr.NoSuchResource, config.MsgNoImposter))
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	out, err := answer(r.Context(), body)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeRaw(w, http.StatusOK, out)
}

func (g *gateway) getImposter(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	v := view(r)
	v.Stubs = stubWindow(r)
	g.writeImposter(w, r, http.StatusOK, imp, v, g.recordings(r))
}

// recordings returns the cluster's recordings, unless there is no cluster
// or the request asks for this node's own view (?local=true).
func (g *gateway) recordings(r *http.Request) Recordings {
	if c := g.opts.Cluster; c != nil && c.Recordings != nil && !flag(r, "local") {
		return c.Recordings
	}
	return nil
}

func (g *gateway) deleteImposter(w http.ResponseWriter, r *http.Request) {
	v := view(r) // as GET shows it, requests and all, as mb answers
	port, err := strconv.Atoi(r.PathValue("id"))
	if err != nil {
		writeRaw(w, http.StatusOK, json.RawMessage(`{}`))
		return
	}
	// An imposter the configuration holds but that did not start (it no
	// longer compiles) is deleted too; it answers as an absent one does.
	// The answer (with a snapshot of the requests) is taken before it
	// goes, and written after.
	out := json.RawMessage(`{}`)
	a := &answer{g: g}
	if imp, ok := g.get(port); ok {
		out = a.imposter(imp, v, nil)
	} else if g.config.State().Imposter(port) == nil {
		writeRaw(w, http.StatusOK, out)
		return
	}
	if _, err := g.submit(r.Context(), &config.Command{Op: config.OpDeleteImposter, Port: port}); err != nil {
		a.close()
		writeErr(w, err)
		return
	}
	a.write(r.Context(), w, http.StatusOK, out)
}

func (g *gateway) deleteSavedRequests(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	imp.ResetRequests()
	if g.mirror != nil {
		g.mirror.clearRequests(imp.Port())
	}
	if rc := g.recordings(r); rc != nil {
		if err := rc.Clear(r.Context(), imp.Port()); err != nil {
			writeErr(w, err)
			return
		}
	}
	w.Header().Add("Vary", "Accept") // mb negotiates this answer's type
	g.writeImposter(w, r, http.StatusOK, imp, imposter.View{BaseURL: baseURL(r)}, nil)
}

func (g *gateway) deleteSavedProxyResponses(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	w.Header().Add("Vary", "Accept") // mb negotiates this answer's type
	g.editStubs(w, r, imp, &config.Command{Op: config.OpDropRecorded})
}

func (g *gateway) putStubs(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req struct {
		Stubs json.RawMessage `json:"stubs"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeErr(w, mberr.New(mberr.InvalidJSON, "Unable to parse body as JSON").WithSource(string(body)))
		return
	}
	if req.Stubs == nil || string(req.Stubs) == "null" {
		writeErr(w, mberr.New(mberr.BadData, "'stubs' is a required field"))
		return
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(req.Stubs, &raws); err != nil {
		writeErr(w, mberr.New(mberr.BadData, "'stubs' must be an array"))
		return
	}
	m := g.maker()
	stubs, err := m.stubs(raws, imp.Spec().Protocol)
	if err != nil {
		writeErr(w, err)
		return
	}
	g.editStubs(w, r, imp, m.command(&config.Command{Op: config.OpReplaceStubs, Stubs: stubs}))
}

func (g *gateway) postStub(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req struct {
		Index *json.Number    `json:"index"`
		Stub  json.RawMessage `json:"stub"`
		// Stubs is riftgate's: many stubs inserted in one command, in
		// order (mb refuses a body without "stub").
		Stubs []json.RawMessage `json:"stubs"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeErr(w, mberr.New(mberr.InvalidJSON, "Unable to parse body as JSON").WithSource(string(body)))
		return
	}
	if req.Stub == nil && len(req.Stubs) > 0 {
		g.postStubs(w, r, imp, req.Index, req.Stubs)
		return
	}
	if req.Stub == nil {
		writeErr(w, mberr.New(mberr.BadData, "must contain 'stub' field"))
		return
	}
	at := -1
	if req.Index != nil {
		n, err := strconv.Atoi(req.Index.String())
		if err != nil || n < 0 {
			writeErr(w, mberr.New(mberr.BadData, config.MsgIndex))
			return
		}
		at = n
	}
	m := g.maker()
	stubs, err := m.stubs([]json.RawMessage{req.Stub}, imp.Spec().Protocol)
	if err != nil {
		writeErr(w, err)
		return
	}
	g.editStubs(w, r, imp, m.command(&config.Command{Op: config.OpInsertStub, Index: at, Stubs: stubs}))
}

// postStubs is POST /imposters/:id/stubs with {"stubs": [...]}: the
// stubs inserted at index (at the end without one) in one command. It is
// how `riftgate replay` loads an imposter whose stubs do not fit one
// admin body. It answers {"port", "added", "numberOfStubs"} rather than
// the whole imposter, which for that imposter would be the largest answer
// of all, once per part.
func (g *gateway) postStubs(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter, index *json.Number, raws []json.RawMessage) {
	at := -1
	if index != nil {
		n, err := strconv.Atoi(index.String())
		if err != nil || n < 0 {
			writeErr(w, mberr.New(mberr.BadData, config.MsgIndex))
			return
		}
		at = n
	}
	m := g.maker()
	stubs, err := m.stubs(raws, imp.Spec().Protocol)
	if err != nil {
		writeErr(w, err)
		return
	}
	if _, err := g.submit(r.Context(), m.command(&config.Command{Op: config.OpInsertStubs, Port: imp.Port(), Index: at, Stubs: stubs})); err != nil {
		writeErr(w, err)
		return
	}
	n := 0
	if now, ok := g.get(imp.Port()); ok {
		n = len(now.Stubs())
	}
	writeRaw(w, http.StatusOK, json.RawMessage(fmt.Sprintf(`{"port":%d,"added":%d,"numberOfStubs":%d}`, imp.Port(), len(stubs), n)))
}

// stubIndex reads {index}; one that is not a number is out of range.
func stubIndex(r *http.Request) int {
	i, err := strconv.Atoi(r.PathValue("index"))
	if err != nil {
		return -1
	}
	return i
}

func (g *gateway) putStub(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	m := g.maker()
	stubs, err := m.stubs([]json.RawMessage{body}, imp.Spec().Protocol)
	if err != nil {
		writeErr(w, err)
		return
	}
	g.editStubs(w, r, imp, m.command(&config.Command{Op: config.OpReplaceStub, Index: stubIndex(r), Stubs: stubs}))
}

func (g *gateway) deleteStub(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	g.editStubs(w, r, imp, &config.Command{Op: config.OpDeleteStub, Index: stubIndex(r)})
}

// editStubs submits a command on imp's stubs and answers with the imposter
// as the command left it.
func (g *gateway) editStubs(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter, cmd *config.Command) {
	cmd.Port = imp.Port()
	if _, err := g.submit(r.Context(), cmd); err != nil {
		writeErr(w, err)
		return
	}
	if now, ok := g.get(imp.Port()); ok {
		imp = now
	}
	g.writeImposter(w, r, http.StatusOK, imp, imposter.View{BaseURL: baseURL(r)}, nil)
}

func (g *gateway) getConfig(w http.ResponseWriter, r *http.Request) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	cwd, _ := os.Getwd()
	options := g.opts.Config
	if options == nil {
		options = json.RawMessage(`{}`)
	}
	arch := runtime.GOARCH
	if arch == "amd64" {
		arch = "x64" // as Node names it
	}
	// mb's shape: the options as parsed, and the process as Node describes it.
	writeRaw(w, http.StatusOK, json.RawMessage(fmt.Sprintf(
		`{"version":%q,"options":%s,"process":{"nodeVersion":%q,"architecture":%q,"platform":%q,"rss":%d,"heapTotal":%d,"heapUsed":%d,"uptime":%g,"cwd":%q}}`,
		Version, options, runtime.Version(), arch, runtime.GOOS, ms.Sys, ms.HeapSys, ms.HeapAlloc,
		time.Since(g.started).Seconds(), cwd)))
}

func (g *gateway) getLogs(w http.ResponseWriter, r *http.Request) {
	start, end := 0, -1
	if s, err := strconv.Atoi(r.URL.Query().Get("startIndex")); err == nil {
		start = s
	}
	if e, err := strconv.Atoi(r.URL.Query().Get("endIndex")); err == nil {
		end = e
	}
	switch {
	case g.opts.NoLogfile:
		// mb reads its logfile for this page; with --nologfile there is none.
		writeJSON(w, http.StatusOK, map[string]any{"logs": []map[string]string{{"level": "error", "message": "No logfile"}}})
	case g.opts.LogFile != "":
		writeRaw(w, http.StatusOK, logFileEntries(g.opts.LogFile, g.opts.LogFileJSON, start, end))
	default:
		writeJSON(w, http.StatusOK, map[string]any{"logs": g.logs.slice(start, end)})
	}
}

// logFileEntries answers GET /logs from the logfile, as mb does: its JSON
// lines as an array, sliced from start to end (inclusive; -1 is the last).
func logFileEntries(path string, isJSON bool, start, end int) json.RawMessage {
	one := func(msg string) json.RawMessage {
		return json.RawMessage(`{"logs":[{"level":"error","message":` + strconv.Quote(msg) + `}]}`)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return one("No logfile")
	}
	var entries []json.RawMessage
	for _, line := range bytes.Split(data, []byte("\n")) {
		if line = bytes.TrimSpace(line); len(line) == 0 {
			continue
		}
		if !isJSON || !json.Valid(line) {
			return one("This page only works for JSON file logging")
		}
		entries = append(entries, line)
	}
	if end < 0 || end >= len(entries) {
		end = len(entries) - 1
	}
	start = max(start, 0)
	if start > end+1 {
		start = end + 1
	}
	out, _ := json.Marshal(map[string]any{"logs": entries[start : end+1]})
	return out
}

// readBody reads a capped request body; past the cap it answers 413.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.ContentLength > maxAdminBody {
		writeErr(w, mberr.New(mberr.PayloadTooLarge, fmt.Sprintf("the body is over %d bytes", maxAdminBody)))
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeErr(w, mberr.New(mberr.PayloadTooLarge, fmt.Sprintf("the body is over %d bytes", tooBig.Limit)))
		} else {
			writeErr(w, mberr.New(mberr.BadData, "cannot read the body: "+err.Error()))
		}
		return nil, false
	}
	return body, true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		writeErr(w, err)
		return
	}
	writeBytes(w, status, bytes.TrimRight(b.Bytes(), "\n"))
}

// writeRaw indents already-encoded JSON as mb's admin API does.
func writeRaw(w http.ResponseWriter, status int, raw json.RawMessage) {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		writeErr(w, err)
		return
	}
	writeBytes(w, status, b.Bytes())
}

func writeBytes(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeErr(w http.ResponseWriter, err error) {
	w.Header().Del("Vary") // mb sends its errors without negotiating
	writeBytes(w, mberr.As(err).Status, indent(mberr.Body(mberr.All(err)...)))
}

func indent(b []byte) []byte {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return b
	}
	return out.Bytes()
}
