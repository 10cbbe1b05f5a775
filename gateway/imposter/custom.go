package imposter

// Custom protocols, as mb's --protofile defines them: a protocol is a
// command (createCommand) that riftgate starts for each imposter, with the
// imposter's configuration as its last argument. The process serves the
// port itself and, for every request, POSTs {"request": {...}} to the
// callback URL; the imposter matches it against its stubs through the
// shared engine (predicates, cycles, recording) and answers
// {"response": {...}}.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/nodehost"
)

// CustomProtocol is one entry of the protofile.
type CustomProtocol struct {
	CreateCommand string `json:"createCommand"`
}

// customProtocols are the protofile's, set once at start (SetCustomProtocols).
var customProtocols atomic.Pointer[map[string]CustomProtocol]

// SetCustomProtocols installs the protofile's protocols for every imposter
// created from now on. Built-in protocols are not replaced (see
// docs/mountebank-differences.md).
func SetCustomProtocols(m map[string]CustomProtocol) { customProtocols.Store(&m) }

func customProtocol(name string) (CustomProtocol, bool) {
	m := customProtocols.Load()
	if m == nil {
		return CustomProtocol{}, false
	}
	p, ok := (*m)[name]
	return p, ok
}

// customCommonFields are the fields mb keeps from the process's arguments
// (its customFieldsFor): the rest of the definition is the protocol's.
var customCommonFields = map[string]bool{"protocol": true, "port": true, "name": true, "recordRequests": true, "stubs": true, "defaultResponse": true}

// parseCustom keeps a custom protocol's own fields, handed to its process.
func parseCustom(s *Spec, p CustomProtocol, obj object) {
	s.Custom = &p
	var b bytes.Buffer
	for _, f := range obj {
		if customCommonFields[f.Key] {
			continue
		}
		if b.Len() == 0 {
			b.WriteByte('{')
		} else {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.Key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(f.Value)
	}
	if b.Len() == 0 {
		b.WriteByte('{')
	}
	b.WriteByte('}')
	s.CustomFields = b.Bytes()
}

// customIgnored drops from ignored what a custom protocol does not
// ignore: the definition's own fields (its process gets them), and the
// fields of its is responses and defaultResponse (its process reads them).
func customIgnored(ignored []string) []string {
	out := ignored[:0]
	for _, f := range ignored {
		if !strings.Contains(f, ".") || strings.HasPrefix(f, "defaultResponse.") || strings.Contains(f, ".is.") {
			continue
		}
		out = append(out, f)
	}
	return out
}

// customStartTimeout bounds how long a protocol's process may take to
// print its first line (its metadata) before the imposter is refused.
const customStartTimeout = 30 * time.Second

// customServer runs a custom protocol's process; it serves no listener.
type customServer struct {
	log      *slog.Logger
	cmd      *exec.Cmd
	cancel   context.CancelFunc
	exited   chan struct{}
	closing  atomic.Bool
	started  atomic.Bool // it printed its metadata: an exit now is a crash
	metadata object

	// The proxies handed to the process and not yet answered, by key, as
	// mb's resolver keeps them for the process's lifetime (an answer that
	// never comes keeps its entry, as in mb).
	mu      sync.Mutex
	nextKey int
	proxies map[string]*pendingProxy
}

// customListener stands for the port a custom protocol's process binds:
// riftgate binds nothing there, and Accept waits until Close. Binding it
// starts the process, so that a command that fails refuses the imposter
// as mb does, before the configuration changes; Close ends a process no
// imposter took.
type customListener struct {
	addr   *net.TCPAddr
	once   sync.Once
	closed chan struct{}
	srv    *customServer // nil only if a test made it: Serve then starts one
	taken  atomic.Bool
}

func (l *customListener) Accept() (net.Conn, error) { <-l.closed; return nil, net.ErrClosed }
func (l *customListener) Addr() net.Addr            { return l.addr }
func (l *customListener) Close() error {
	l.once.Do(func() {
		close(l.closed)
		if l.srv != nil && !l.taken.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = l.srv.shutdown(ctx)
		}
	})
	return nil
}

// listenCustom starts the protocol's process on spec's port. For port 0
// riftgate picks a free port (by binding and letting go, since the process
// binds it itself) and hands the process that one.
func listenCustom(spec *Spec, opts Options, host string) (net.Listener, error) {
	l := &customListener{addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: spec.Port}, closed: make(chan struct{})}
	if spec.Port == 0 {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, mberr.New(mberr.CannotStartServer, err.Error())
		}
		l.addr.Port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		picked := *spec
		picked.Port = l.addr.Port
		spec = &picked
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	srv, err := startCustom(spec, opts, log.With("imposter", scopeOf(spec)))
	if err != nil {
		return nil, err
	}
	l.srv = srv
	return l, nil
}

// customServerFor takes the process ln started, or starts it.
func (imp *Imposter) customServerFor(ln net.Listener) (*customServer, error) {
	if l, ok := ln.(*customListener); ok && l.srv != nil {
		l.taken.Store(true)
		return l.srv, nil
	}
	return startCustom(imp.spec, imp.opts, imp.log)
}

// startCustom starts the protocol's process, as mb's outOfProcessCreate:
// createCommand split on spaces, then the configuration as JSON; the first
// line it prints is its metadata, each later "level message" line is
// logged, and what it writes to stderr is logged as an error.
func startCustom(spec *Spec, opts Options, log *slog.Logger) (*customServer, error) {
	p := spec.Custom
	words := strings.Fields(p.CreateCommand)
	if len(words) == 0 {
		return nil, mberr.New(mberr.CannotStartServer, fmt.Sprintf("Invalid configuration for protocol %q: cannot run %q", spec.Protocol, p.CreateCommand))
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(spec.CustomFields, &cfg); err != nil {
		cfg = map[string]json.RawMessage{}
	}
	cfg["port"] = json.RawMessage(strconv.Itoa(spec.Port))
	cfg["callbackURLTemplate"] = mustMarshal(opts.CustomCallbackTemplate)
	cfg["loglevel"] = mustMarshal(opts.CustomLogLevel)
	cfg["allowInjection"] = mustMarshal(opts.Compiler != nil && opts.Compiler.AllowInjection)
	if spec.DefaultResponse != nil {
		cfg["defaultResponse"] = spec.DefaultResponse
	}
	if h := cmp.Or(spec.Host, opts.DefaultHost); h != "" {
		cfg["host"] = mustMarshal(h) // mb gives the imposter --host when it names none
	}
	arg, _ := json.Marshal(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := nodehost.Command(ctx, words[0], append(words[1:], string(arg))...)
	// A pipe of our own rather than StdoutPipe: Wait then does not close it
	// under the reader, which reads to the end what the process printed
	// before it exited.
	stdout, w, err := os.Pipe()
	if err != nil {
		cancel()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = w, logWriter{log}
	err = cmd.Start()
	w.Close()
	if err != nil {
		stdout.Close()
		cancel()
		return nil, mberr.New(mberr.CannotStartServer, fmt.Sprintf("Invalid configuration for protocol %q: cannot run %q", spec.Protocol, p.CreateCommand)).WithSource(mustMarshal(p.CreateCommand))
	}
	s := &customServer{log: log, cmd: cmd, cancel: cancel, exited: make(chan struct{})}
	first := make(chan []byte, 1)
	go func() {
		defer stdout.Close()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		n := 0
		for sc.Scan() {
			if n == 0 {
				first <- bytes.Clone(sc.Bytes())
			}
			n++
			s.logLine(sc.Text()) // mb logs the metadata line too, if it reads as one
		}
		close(first)
	}()
	var exitErr error
	go func() {
		exitErr = cmd.Wait()
		close(s.exited)
		if s.started.Load() && !s.closing.Load() {
			log.Error("Uh oh! I've crashed! Expect subsequent requests to fail.")
		}
	}()
	timer := time.NewTimer(customStartTimeout)
	defer timer.Stop()
	select {
	case line, ok := <-first:
		if !ok {
			<-s.exited
			return nil, mberr.New(mberr.CannotStartServer, fmt.Sprintf("%q start command failed (%v)", spec.Protocol, exitErr)).WithSource(mustMarshal(p.CreateCommand))
		}
		s.metadata = metadataOf(line)
		s.started.Store(true)
		return s, nil
	case <-timer.C:
		s.closing.Store(true)
		cancel()
		<-s.exited
		return nil, mberr.New(mberr.CannotStartServer, fmt.Sprintf("%q start command printed nothing in %v", spec.Protocol, customStartTimeout)).WithSource(mustMarshal(p.CreateCommand))
	}
}

// metadataOf is the process's first line as mb reads it: a JSON object,
// else none; mb drops its port and encoding from what it shows.
func metadataOf(line []byte) object {
	o, err := decodeObject(line)
	if err != nil {
		return nil
	}
	return o.without("port", "encoding")
}

// withMetadata adds a custom protocol's metadata to the imposter's JSON,
// as mb's imposterPrinter adds it, each key over what is there.
func (imp *Imposter) withMetadata(o object) object {
	cs, ok := imp.srv.(*customServer)
	if !ok {
		return o
	}
	for _, f := range cs.metadata {
		o = o.with(f.Key, f.Value)
	}
	return o
}

// logLine logs a "level message" line of the process, as mb does.
func (s *customServer) logLine(line string) {
	level, rest, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok {
		return
	}
	rest = strings.TrimSpace(rest)
	switch level {
	case "debug":
		s.log.Debug(rest)
	case "info":
		s.log.Info(rest)
	case "warn":
		s.log.Warn(rest)
	case "error":
		s.log.Error(rest)
	}
}

type logWriter struct{ log *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Error(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (s *customServer) serve(ln net.Listener) error {
	_, err := ln.Accept() // waits for Stop
	return err
}

// shutdown ends the process (SIGTERM, as mb's kill), then its group.
func (s *customServer) shutdown(ctx context.Context) error {
	s.closing.Store(true)
	select {
	case <-s.exited:
		s.cancel()
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM) // it may be gone already
	select {
	case <-s.exited:
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
	}
	s.cancel() // the rest of its group, and it if it ignored SIGTERM
	<-s.exited
	return nil
}

func mustMarshal(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// CustomProxy is a custom protocol's proxy response: mb hands the proxy
// to the protocol's process, which calls the upstream itself and posts
// the answer back (Imposter.ResolveCustomProxy).
type CustomProxy interface {
	// CustomConfig is the proxy object as mb hands it to the process.
	CustomConfig() json.RawMessage
	// ResolveCustom applies the response's behaviors to the process's
	// answer, records it as the proxy's mode says, and returns it.
	ResolveCustom(ctx context.Context, call *Call, proxied json.RawMessage) (json.RawMessage, error)
}

// pendingProxy is a proxy handed to the process, waiting for its answer.
type pendingProxy struct {
	st    *Stub
	r     *response
	req   *message.Request
	start time.Time
}

// callbackURL is the process's callback URL for this imposter.
func (imp *Imposter) callbackURL() string {
	return strings.Replace(imp.opts.CustomCallbackTemplate, ":port", strconv.Itoa(imp.Port()), 1)
}

// RespondCustom answers a custom protocol's callback: body is
// {"request": {...}}, the answer {"response": {...}}, or, for a proxy,
// {"proxy", "request", "callbackURL"} as mb answers an out-of-process
// protocol.
func (imp *Imposter) RespondCustom(ctx context.Context, body []byte) ([]byte, error) {
	req, err := message.ParseCustomCallback(body)
	if err != nil {
		return nil, mberr.New(mberr.InvalidJSON, err.Error())
	}
	req.Timestamp = time.Now()
	st, r, err := imp.choose(ctx, req)
	if err != nil {
		return nil, err
	}
	// Scripts, behaviors and the proxy see the request as the process
	// sent it: mb stamps only the copy it records.
	call := req.Clone()
	call.Timestamp = time.Time{}
	var b bytes.Buffer
	switch {
	case r == nil:
		b.WriteString(`{"response":{}}`)
	case r.spec != nil && r.spec.Kind == "fault":
		// mb hands the process the response object itself.
		b.WriteString(`{"response":`)
		b.Write(r.spec.json)
		b.WriteByte('}')
		imp.recordCustomMatch(st, req, r, r.spec.json)
	case r.responder != nil && isCustomProxy(r.responder):
		cs, ok := imp.srv.(*customServer)
		if !ok {
			return nil, mberr.New(mberr.NoSuchResource, "the imposter's process is not running")
		}
		key := cs.hold(&pendingProxy{st: st, r: r, req: call, start: time.Now()})
		b.WriteString(`{"proxy":`)
		b.Write(r.responder.(CustomProxy).CustomConfig())
		b.WriteString(`,"request":`)
		b.Write(compactJSON(call.Raw))
		b.WriteString(`,"callbackURL":`)
		b.Write(mustMarshal(imp.callbackURL() + "/" + key))
		b.WriteByte('}')
	default:
		resp, err := imp.compute(ctx, &Call{Imposter: imp, Request: call, Stub: st}, r)
		if err != nil {
			return nil, err
		}
		out := []byte(`{}`)
		if resp != nil && len(resp.Body) > 0 {
			out = resp.Body
		}
		b.WriteString(`{"response":`)
		b.Write(out)
		b.WriteByte('}')
		imp.recordCustomMatch(st, req, r, out)
	}
	return b.Bytes(), nil
}

// recordCustomMatch is --debug's match of a custom protocol's stub: the
// response object the process is handed (a proxy's, once resolved), as
// mb records an out-of-process answer.
func (imp *Imposter) recordCustomMatch(st *Stub, req *message.Request, r *response, answer []byte) {
	if st != nil && imp.opts.RecordMatches {
		st.recordMatch(imp, req, r, &message.Response{Body: answer})
	}
}

func isCustomProxy(r Responder) bool {
	_, ok := r.(CustomProxy)
	return ok
}

func compactJSON(raw []byte) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// ResolveCustomProxy takes the process's answer to the proxy it was handed
// under key, body {"proxyResponse": {...}}: as mb, it adds
// _proxyResponseTime, runs the response's behaviors, records the result
// as the proxy's mode says and answers it (not wrapped in a response).
func (imp *Imposter) ResolveCustomProxy(ctx context.Context, key string, body []byte) ([]byte, error) {
	cs, _ := imp.srv.(*customServer)
	var p *pendingProxy
	if cs != nil {
		p = cs.pending(key)
	}
	if p == nil {
		imp.log.Error("Invalid proxy resolution key: " + key)
		return nil, mberr.New(mberr.NoSuchResource, "invalid proxy resolution key").WithSource(imp.callbackURL() + "/" + key)
	}
	var in struct {
		ProxyResponse json.RawMessage `json:"proxyResponse"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, mberr.New(mberr.InvalidJSON, fmt.Sprintf("proxy resolution body: %v", err))
	}
	proxied, err := decodeObject(in.ProxyResponse)
	if err != nil {
		// mb fails setting _proxyResponseTime on what is not an object.
		return nil, mberr.New(mberr.BadData, "proxyResponse must be an object").WithSource(string(in.ProxyResponse))
	}
	proxied = proxied.with("_proxyResponseTime", mustMarshal(time.Since(p.start).Milliseconds()))
	out, err := p.r.responder.(CustomProxy).ResolveCustom(ctx, &Call{Imposter: imp, Request: p.req, Stub: p.st, behaviors: p.r.behaviors}, mustJSON(proxied))
	if err != nil {
		return nil, fmt.Errorf("custom proxy resolution %s: %w", key, err)
	}
	cs.release(key)
	m := p.req.Clone()
	m.Timestamp = p.start // the match's time: when the proxy was handed out
	imp.recordCustomMatch(p.st, m, p.r, out)
	return out, nil
}

// hold keeps p until the process answers it, under a key of its own.
func (s *customServer) hold(p *pendingProxy) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proxies == nil {
		s.proxies = map[string]*pendingProxy{}
	}
	key := strconv.Itoa(s.nextKey)
	s.nextKey++
	s.proxies[key] = p
	return key
}

func (s *customServer) pending(key string) *pendingProxy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proxies[key]
}

func (s *customServer) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.proxies, key)
}

// IsCustom reports whether the imposter's protocol is a custom one.
func (imp *Imposter) IsCustom() bool { return imp.spec.Custom != nil }
