// Package proxy is Mountebank's `proxy` response: forward the request to a
// real upstream over a pooled keep-alive client, and record what came back
// as a new stub (proxyOnce, proxyAlways) or nothing (proxyTransparent).
//
// proxyOnce calls the upstream exactly once per signature, the predicates
// the recording would get: concurrent first requests go through Claims, one
// wins and calls, the others wait and replay what it recorded.
package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"google.golang.org/grpc"
)

// InjectGenerator runs a predicateGenerator's `inject` function on the
// request object and returns the predicates it made.
type InjectGenerator func(src string, request map[string]any) ([]json.RawMessage, error)

// Recorder keeps what a proxy recorded.
type Recorder interface {
	// Record adds the recording to the configuration and returns once it
	// is durable and served. On an error nothing was recorded (the proxy
	// stub is gone, or the change could not be kept); the Recorder has
	// said why in the log, and the request still gets its answer.
	Record(ctx context.Context, r Recording) error
}

// Recording is one upstream answer to record.
type Recording struct {
	Port     int
	Protocol string // the imposter's
	Anchor   uint64 // the proxy stub's id
	Once     bool   // proxyOnce: before the anchor; else proxyAlways
	// Stub is `{"predicates": [...], "responses": [the recorded one]}`.
	Stub []byte
	// Signature is config.Signature of the predicates.
	Signature string
}

// Factory makes proxy responders; the engine keeps one.
type Factory struct {
	Claims   Claims
	Recorder Recorder
	// Inject runs predicateGenerator injections; nil refuses them.
	Inject InjectGenerator
	// Timeout bounds one upstream call.
	Timeout time.Duration

	mu    sync.Mutex
	pools map[string]*httpPool
	// grpcConns are the client connections of grpc proxies, by upstream.
	grpcConns map[string]*grpc.ClientConn
}

// spec is the `proxy` object.
type spec struct {
	To                  string            `json:"to"`
	Mode                string            `json:"mode"`
	PredicateGenerators []json.RawMessage `json:"predicateGenerators"`
	AddWaitBehavior     bool              `json:"addWaitBehavior"`
	AddDecorateBehavior string            `json:"addDecorateBehavior"`
	InjectHeaders       json.RawMessage   `json:"injectHeaders"`
	Cert                string            `json:"cert"`
	Key                 string            `json:"key"`
	Ciphers             string            `json:"ciphers"`
	SecureProtocol      string            `json:"secureProtocol"`
	Passphrase          string            `json:"passphrase"`
	// Keepalive leaves a tcp proxy's upstream connection open after the
	// answer, as mb's tcp proxy does.
	Keepalive bool `json:"keepalive"`
	// AnswerWaitMs and AnswerQuietMs bound a ws proxy's answer: how long
	// to wait for its first message, and the quiet after one that ends it.
	AnswerWaitMs  int64 `json:"answerWaitMs"`
	AnswerQuietMs int64 `json:"answerQuietMs"`
}

// Responder is one compiled proxy response.
type Responder struct {
	f      *Factory
	spec   spec
	gens   []*generator
	up     upstream
	pool   *httpPool    // an http upstream's connections
	host   string       // the Host header the upstream gets
	inject []message.KV // injectHeaders, in order
	// unreachable: `to` is no http or https URL, which mb accepts and
	// cannot call.
	unreachable bool
}

// upstream is what differs between proxying an http and a tcp imposter's
// requests: the call, and mb's `is` form of what came back. Claims,
// behaviors and recording are the Responder's, shared by both.
type upstream interface {
	// call sends the call's request upstream and returns mb's `is` object
	// for the answer, with _proxyResponseTime; its errors are mb's.
	call(ctx context.Context, c *imposter.Call) (json.RawMessage, error)
	// response builds the response a recorded `is` gives.
	response(is json.RawMessage) (*message.Response, error)
	// isJSON renders a response after behaviors as an `is` object,
	// keeping orig's fields when behaviors left them alone.
	isJSON(r *message.Response, orig json.RawMessage) json.RawMessage
}

// httpUpstream is an http or https upstream.
type httpUpstream struct {
	p   *Responder
	imp *imposter.Imposter // nil in tests without one
}

func (h httpUpstream) call(ctx context.Context, c *imposter.Call) (json.RawMessage, error) {
	is, err := h.p.call(ctx, c.Request)
	if err != nil {
		return nil, unreachable(h.p.spec.To, err)
	}
	return is, nil
}

func (h httpUpstream) response(is json.RawMessage) (*message.Response, error) {
	if h.imp == nil {
		return isResponse(is)
	}
	return h.imp.BuildResponse(is)
}

func (h httpUpstream) isJSON(r *message.Response, orig json.RawMessage) json.RawMessage {
	// Compared with the response orig built before behaviors, built the
	// same way: a body mb records as a falsy JSON value (0, false, null)
	// answers empty, and is still recorded as that value.
	again, err := h.response(orig)
	return isJSON(r, orig, again, err)
}

// New compiles a `proxy` response, refusing only what mb's dry run
// refuses: no `to`, or an http `to` with a path. The errors carry no
// source, so that the stub names the stub, as mb's do.
func (f *Factory) New(raw json.RawMessage, b imposter.Build) (imposter.Responder, error) {
	imp := b.Imposter
	if imp != nil && imp.IsCustom() {
		return f.newCustom(raw)
	}
	s, err := parseSpec(raw)
	if err != nil {
		return nil, err
	}
	if imp != nil && imp.Spec().Protocol == "tcp" {
		return f.newTCP(s, raw, imp)
	}
	if imp != nil && imp.Spec().IsWS() {
		return f.newWS(s, raw, imp)
	}
	if imp != nil && imp.Spec().IsGRPC() {
		return f.newGRPC(s, raw, imp)
	}
	if err := checkTo(s.To); err != nil {
		return nil, err
	}
	u, urlErr := url.Parse(s.To)
	if urlErr == nil && strings.HasPrefix(u.Scheme, "http") && u.Path != "" && u.Path != "/" {
		return nil, mberr.New(mberr.BadData, fmt.Sprintf("proxy.to must not contain a path '%s'", u.Path))
	}
	p, err := f.responder(s, raw)
	if err != nil {
		return nil, err
	}
	p.inject, _ = message.ReadMultiMap(s.InjectHeaders)
	p.up = httpUpstream{p, imp}
	if urlErr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// mb takes it, and fails each request that reaches it.
		p.unreachable = true
		return p, nil
	}
	if p.pool, err = f.pool(u, s); err != nil {
		return nil, mberr.New(mberr.InvalidProxy, err.Error()).WithSource(raw)
	}
	p.host = hostHeader(u)
	return p, nil
}

// parseSpec reads each field mb reads, as far as it has the type mb
// expects; mb ignores the rest, and so does riftgate.
func parseSpec(raw json.RawMessage) (spec, error) {
	var s spec
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(raw, &fields) // a proxy that is not an object has no `to`
	to := fields["to"]
	if to == nil || string(to) == "null" {
		return s, mberr.New(mberr.BadData, "Missing to")
	}
	if json.Unmarshal(to, &s.To) != nil {
		// mb's proxies use String(to): "[object Object]" for an object.
		v, err := message.DecodeJS(to)
		if err != nil {
			return s, mberr.New(mberr.BadData, "Missing to")
		}
		s.To = message.JSString(v)
	}
	parseFields(fields, &s)
	return s, nil
}

// parseFields reads the proxy's fields other than `to`, each as far as it
// has the type mb expects.
func parseFields(fields map[string]json.RawMessage, s *spec) {
	for k, dst := range map[string]any{"mode": &s.Mode, "addWaitBehavior": &s.AddWaitBehavior,
		"addDecorateBehavior": &s.AddDecorateBehavior, "cert": &s.Cert, "key": &s.Key, "ciphers": &s.Ciphers,
		"secureProtocol": &s.SecureProtocol, "passphrase": &s.Passphrase, "keepalive": &s.Keepalive,
		"answerWaitMs": &s.AnswerWaitMs, "answerQuietMs": &s.AnswerQuietMs} {
		if v, ok := fields[k]; ok {
			_ = json.Unmarshal(v, dst)
		}
	}
	_ = json.Unmarshal(fields["predicateGenerators"], &s.PredicateGenerators)
	s.InjectHeaders = fields["injectHeaders"]
}

// hostHeader is the Host mb's proxy sends: the upstream's name, with its
// port unless it is the scheme's default.
func hostHeader(u *url.URL) string {
	if p := u.Port(); p == "" || (u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443") {
		if strings.Contains(u.Hostname(), ":") {
			return "[" + u.Hostname() + "]"
		}
		return u.Hostname()
	}
	return u.Host
}

// responder checks what every proxy shares (mode, addDecorateBehavior,
// predicateGenerators) and returns the Responder without its upstream.
func (f *Factory) responder(s spec, raw json.RawMessage) (*Responder, error) {
	switch s.Mode {
	case "proxyOnce", "proxyAlways", "proxyTransparent":
	default:
		s.Mode = "proxyOnce" // as mb makes any other mode
	}
	gens, err := parseGenerators(s.PredicateGenerators)
	if err != nil {
		return nil, err
	}
	return &Responder{f: f, spec: s, gens: gens}, nil
}

// pool returns the keep-alive connections for an upstream and TLS
// settings, shared by every stub that proxies there.
func (f *Factory) pool(u *url.URL, s spec) (*httpPool, error) {
	addr := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			addr = net.JoinHostPort(u.Hostname(), "443")
		} else {
			addr = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	key := strings.Join([]string{u.Scheme, addr, s.Cert, s.Key, s.Ciphers, s.SecureProtocol}, "\x00")
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.pools[key]; ok {
		return p, nil
	}
	var cfg *tls.Config
	if u.Scheme == "https" {
		// mb does not verify upstream certificates (rejectUnauthorized: false).
		cfg = &tls.Config{InsecureSkipVerify: true, ServerName: u.Hostname()} //nolint:gosec // as mb
		if s.Cert != "" || s.Key != "" {
			key, err := decryptKey(s.Key, s.Passphrase)
			if err != nil {
				return nil, err
			}
			pair, err := tls.X509KeyPair([]byte(s.Cert), key)
			if err != nil {
				return nil, fmt.Errorf("proxy cert/key: %w", err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		if v, ok := tlsVersions[s.SecureProtocol]; ok {
			cfg.MinVersion, cfg.MaxVersion = v, v
		}
	}
	if f.pools == nil {
		f.pools = map[string]*httpPool{}
	}
	p := newHTTPPool(addr, cfg, f.timeout())
	f.pools[key] = p
	return p, nil
}

// tlsVersions maps OpenSSL's secureProtocol method names that pin a version.
var tlsVersions = map[string]uint16{
	"TLSv1_method": tls.VersionTLS10, "TLSv1_1_method": tls.VersionTLS11,
	"TLSv1_2_method": tls.VersionTLS12, "TLSv1_3_method": tls.VersionTLS13,
}

func (f *Factory) timeout() time.Duration {
	if f.Timeout > 0 {
		return f.Timeout
	}
	return 30 * time.Second
}

// Close drops idle upstream connections.
func (f *Factory) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pools {
		p.close()
	}
	for k, cc := range f.grpcConns {
		cc.Close()
		delete(f.grpcConns, k)
	}
}

// HandlesBehaviors says the proxy applies its response's behaviors itself,
// before recording, so the recording holds what they produced, as mb's does.
func (p *Responder) HandlesBehaviors() bool { return true }

// Respond implements imposter.Responder.
func (p *Responder) Respond(ctx context.Context, call *imposter.Call) (*message.Response, error) {
	if p.spec.Mode != "proxyOnce" {
		resp, _, err := p.forward(ctx, call)
		return resp, err
	}
	preds, err := generate(p.gens, call.Request, p.f.Inject)
	if err != nil {
		return nil, err
	}
	sig := config.Signature(preds)
	key := ClaimKey(call.Imposter.Port(), sig)
	for {
		token, won, err := p.f.Claims.Acquire(ctx, key)
		if err != nil {
			return nil, claimErr(err)
		}
		if !won {
			resp, ok, err := call.Imposter.Replay(ctx, call.Request)
			if err != nil || ok {
				return resp, err
			}
			// The recording is gone (its stub was deleted): proxy again.
			if err := p.f.Claims.Forget(ctx, key); err != nil {
				return nil, claimErr(err)
			}
			continue
		}
		resp, is, err := p.forward(ctx, call)
		if err != nil {
			// A release that fails leaves the claim to its owner, which
			// forgets Pending claims when it restarts.
			_ = p.f.Claims.Release(ctx, key, token)
			return nil, err
		}
		if err := p.record(ctx, call, preds, sig, is, true); err != nil {
			// Not kept, so not served: the next request calls the
			// upstream again. This one has its answer.
			_ = p.f.Claims.Release(ctx, key, token)
			return resp, nil
		}
		// The stub is recorded whatever this says: the request answers,
		// and a claim left Pending ends with its owner's restart, after
		// which requests replay the recording.
		_ = p.f.Claims.Recorded(ctx, key, token)
		return resp, nil
	}
}

// ClaimKey is the claim of a proxyOnce recording: the imposter's port and
// the signature of the predicates it records.
func ClaimKey(port int, signature string) string { return strconv.Itoa(port) + "|" + signature }

// claimErr is what a request gets when its proxyOnce claim cannot be
// arbitrated: 503, and the upstream is not called.
func claimErr(err error) error {
	return mberr.New(mberr.FlowUnavailable, "proxyOnce claim: "+flow.Describe(err))
}

// forward calls the upstream, applies behaviors, and for proxyAlways
// records. It returns the response and its `is` form, which is nil where
// nothing reads it (a proxyTransparent's plain answer).
func (p *Responder) forward(ctx context.Context, call *imposter.Call) (*message.Response, json.RawMessage, error) {
	resp, is, err := p.answer(ctx, call)
	if err != nil {
		return nil, nil, err
	}
	if p.spec.Mode == "proxyAlways" {
		preds, err := generate(p.gens, call.Request, p.f.Inject)
		if err != nil {
			return nil, nil, err
		}
		// A recording that was not kept is not served; this answer stands.
		_ = p.record(ctx, call, preds, config.Signature(preds), is, false)
	}
	return resp, is, nil
}

// answer calls the upstream and applies behaviors.
func (p *Responder) answer(ctx context.Context, call *imposter.Call) (resp *message.Response, is json.RawMessage, err error) {
	if p.plain(call) {
		// Nothing reads mb's object of this answer: the response is
		// made from the answer as the `is` would build it (a body the
		// defaultResponse would fill takes the `is` path below), and
		// the `is` only for a recording.
		a, ms, err := p.fetch(ctx, call.Request)
		if err != nil {
			return nil, nil, unreachable(p.spec.To, err)
		}
		if resp, ok := plainResponse(a, len(call.Imposter.Spec().DefaultResponse) > 0); ok {
			if p.spec.Mode != "proxyTransparent" {
				is = upstreamIs(a, ms)
			}
			return resp, is, nil
		}
		is = upstreamIs(a, ms)
	} else if is, err = p.up.call(ctx, call); err != nil {
		return nil, nil, err
	}
	if resp, err = p.up.response(is); err != nil {
		return nil, nil, err
	}
	resp.MB = is // what a decorator sees: mb's object, the body as JSON.parse read it
	ran, err := call.ApplyBehaviors(ctx, resp)
	if err != nil {
		return nil, nil, err
	}
	if ran {
		// Rendering the `is` again builds a response from it again,
		// which is worth it only where behaviors may have changed resp.
		is = p.up.isJSON(resp, is)
		resp.MB = is
	}
	return resp, is, nil
}

// plain reports whether the call's answer may skip its `is` form: an http
// upstream, and no behaviors or --debug match to read mb's object.
func (p *Responder) plain(call *imposter.Call) bool {
	h, ok := p.up.(httpUpstream)
	return ok && h.imp != nil && !call.HasBehaviors() && !call.ShowsResponse()
}

var errBadURL = errors.New("not an http or https URL")

// unreachable is mb's error for an upstream it cannot call, which the
// imposter answers with a 500.
func unreachable(to string, err error) error {
	quoted, _ := json.Marshal(to)
	switch errKind(err) {
	case "bad url", "connect":
		return mberr.New(mberr.InvalidProxy, "Unable to connect to "+string(quoted))
	case "resolve":
		return mberr.New(mberr.InvalidProxy, "Cannot resolve "+string(quoted))
	}
	return mberr.New(mberr.InvalidProxy, "Unable to connect to "+string(quoted)+": "+err.Error())
}

// call sends the request upstream and returns mb's `is` object for the
// answer, with _proxyResponseTime.
func (p *Responder) call(ctx context.Context, r *message.Request) (json.RawMessage, error) {
	a, ms, err := p.fetch(ctx, r)
	if err != nil {
		return nil, err
	}
	return upstreamIs(a, ms), nil
}

// fetch sends the request upstream and returns its answer and how long it
// took in milliseconds.
func (p *Responder) fetch(ctx context.Context, r *message.Request) (*answer, int64, error) {
	if p.unreachable {
		return nil, 0, errBadURL
	}
	req := writeRequest(r, p.host, p.inject)
	start := time.Now()
	a, err := p.pool.do(ctx, req, r.Method == "HEAD")
	if err != nil {
		return nil, 0, err
	}
	return a, elapsedMs(time.Since(start)), nil
}

// elapsedMs is a call's time in whole milliseconds, rounded up: a call
// takes time, and a _proxyResponseTime of 0 would make addWaitBehavior
// add nothing, where mb, which never answers within a millisecond, adds a
// wait.
func elapsedMs(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// upstreamIs renders an upstream's answer as mb records it: headers as
// received (a repeated name's values in an array), a body that parses as
// JSON as that value, binary content as base64.
func upstreamIs(a *answer, elapsedMs int64) json.RawMessage {
	var headers bytes.Buffer
	message.WriteMultiMap(&headers, a.headers)
	var bodyJSON []byte
	mode := "text"
	switch canonical, err := message.CanonicalJSON(a.body); {
	case a.binary():
		mode = "binary"
		bodyJSON, _ = json.Marshal(a.body) // base64
	case err == nil:
		bodyJSON = canonical
	default:
		bodyJSON = message.AppendJSONString(nil, string(a.body))
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"statusCode":%d,"headers":%s,"body":%s,"_mode":%q,"_proxyResponseTime":%d}`,
		a.status, headers.Bytes(), bodyJSON, mode, elapsedMs)
	return b.Bytes()
}

// binary reports whether mb records the answer's body as base64. A body
// that is not UTF-8 is kept as bytes too, where mb would replace what
// does not decode; docs/mountebank-differences.md.
func (a *answer) binary() bool {
	encoding, contentType := "", ""
	for _, h := range a.headers {
		if encoding == "" && strings.EqualFold(h.Name, "content-encoding") {
			encoding = h.Value
		}
		if contentType == "" && strings.EqualFold(h.Name, "content-type") {
			contentType = h.Value
		}
	}
	return isBinary(encoding, contentType) || !utf8.Valid(a.body)
}

// plainResponse is the response that upstreamIs(a)'s `is` builds on an
// http imposter, made without writing that JSON and reading it back
// (TestPlainResponseIsTheIsResponse holds the two alike). The `is` always
// has its status, headers and mode, so an imposter's defaultResponse
// (dflt) fills only a body the answer lacks (empty, or JSON JavaScript
// finds falsy). ok is false for such a body when there is a
// defaultResponse, and for a status mb would refuse to write, which the
// `is` answers with mb's error.
func plainResponse(a *answer, dflt bool) (r *message.Response, ok bool) {
	if a.status < 100 || a.status > 999 {
		return nil, false
	}
	r = &message.Response{StatusCode: a.status, Headers: groupHeaders(a.headers)}
	if a.binary() {
		// As a `_mode: "binary"` is: its base64 text, decoded.
		r.Binary, r.BinaryText = true, base64.StdEncoding.EncodeToString(a.body)
		r.Body = a.body
		return r, len(a.body) > 0 || !dflt
	}
	r.Body, _ = message.ProxiedBody(a.body)
	return r, r.Body != nil || !dflt
}

// distinctNames reports whether no name comes twice in kvs.
func distinctNames(kvs []message.KV) bool {
	for i := range kvs {
		for j := range i {
			if kvs[i].Name == kvs[j].Name {
				return false
			}
		}
	}
	return true
}

// groupHeaders orders an answer's header fields as its `is` object holds
// them: a repeated name's values together, where the name first came.
func groupHeaders(kvs []message.KV) []message.KV {
	if distinctNames(kvs) {
		return kvs
	}
	out := make([]message.KV, 0, len(kvs))
	for i, kv := range kvs {
		if slices.ContainsFunc(kvs[:i], func(o message.KV) bool { return o.Name == kv.Name }) {
			continue
		}
		for _, o := range kvs[i:] {
			if o.Name == kv.Name {
				out = append(out, o)
			}
		}
	}
	return out
}

var binaryEncodings = []string{"gzip", "br", "compress", "deflate"}

var binaryTypes = []string{"audio/", "application/epub+zip", "application/gzip", "application/java-archive",
	"application/msword", "application/octet-stream", "application/pdf", "application/rtf",
	"application/vnd.ms-excel", "application/vnd.ms-fontobject", "application/vnd.ms-powerpoint",
	"application/vnd.visio", "application/x-7z-compressed", "application/x-bzip", "application/x-bzip2",
	"application/x-rar-compressed", "application/x-tar", "application/zip", "font/", "image/", "model/", "video/"}

// isBinary follows mb's rule for recording a body as base64.
func isBinary(encoding, contentType string) bool {
	for _, e := range binaryEncodings {
		if strings.Contains(encoding, e) {
			return true
		}
	}
	for _, t := range binaryTypes {
		if strings.Contains(contentType, t) {
			return true
		}
	}
	return false
}

// isResponse builds the response a recorded `is` gives.
func isResponse(is json.RawMessage) (*message.Response, error) {
	var f struct {
		StatusCode int             `json:"statusCode"`
		Headers    json.RawMessage `json:"headers"`
		Body       json.RawMessage `json:"body"`
		Mode       string          `json:"_mode"`
	}
	if err := json.Unmarshal(is, &f); err != nil {
		return nil, err
	}
	h, err := message.ReadMultiMap(f.Headers)
	if err != nil {
		return nil, err
	}
	r := &message.Response{StatusCode: f.StatusCode, Headers: h, Binary: f.Mode == "binary"}
	body := bytes.TrimSpace(f.Body)
	switch {
	case r.Binary:
		_ = json.Unmarshal(body, &r.Body)
	case len(body) > 0 && body[0] == '"':
		var s string
		_ = json.Unmarshal(body, &s)
		r.Body = []byte(s)
	case len(body) > 0:
		var out bytes.Buffer
		_ = json.Indent(&out, body, "", "    ")
		r.Body = out.Bytes()
	}
	return r, nil
}

// isJSON renders a response after behaviors as an `is` object, keeping the
// recorded fields of orig (the body's JSON form, _proxyResponseTime) when
// behaviors left them alone: r is then again, the response orig built
// (err when it built none).
func isJSON(r *message.Response, orig json.RawMessage, again *message.Response, err error) json.RawMessage {
	if err == nil && again.StatusCode == r.StatusCode && bytes.Equal(again.Body, r.Body) &&
		len(again.Headers) == len(r.Headers) {
		same := true
		for i := range r.Headers {
			same = same && again.Headers[i] == r.Headers[i]
		}
		if same {
			return orig
		}
	}
	var headers bytes.Buffer
	message.WriteMultiMap(&headers, r.Headers)
	var body []byte
	mode := "text"
	if r.Binary {
		mode = "binary"
		body, _ = json.Marshal(r.Body)
	} else {
		body = message.AppendJSONString(nil, string(r.Body))
	}
	var f struct {
		T int64 `json:"_proxyResponseTime"`
	}
	_ = json.Unmarshal(orig, &f)
	return json.RawMessage(fmt.Sprintf(`{"statusCode":%d,"headers":%s,"body":%s,"_mode":%q,"_proxyResponseTime":%d}`,
		r.StatusCode, headers.Bytes(), body, mode, f.T))
}

// record stores the recording (its predicates and their config.Signature)
// as a configuration change: for proxyOnce, just before the proxy stub;
// for proxyAlways, as another response of the first later stub with the
// same predicates, or a new last stub (the command's Apply places it). It
// returns once the recorded stub is durable and in the imposter's table.
func (p *Responder) record(ctx context.Context, call *imposter.Call, preds []json.RawMessage, sig string, is json.RawMessage, once bool) error {
	// Put together, not marshalled: the recorder reads it as JSON.parse
	// would (and refuses it if a part is not JSON), so encoding/json's
	// compaction and escaping would be work undone.
	stub := append(make([]byte, 0, 40+len(is)+64*len(preds)), `{"predicates":[`...)
	for i, p := range preds {
		if i > 0 {
			stub = append(stub, ',')
		}
		stub = append(stub, p...)
	}
	stub = append(append(append(stub, `],"responses":[`...), p.recordedResponse(is)...), "]}"...)
	return p.f.Recorder.Record(ctx, Recording{
		Port: call.Imposter.Port(), Protocol: call.Imposter.Spec().Protocol, Anchor: call.Stub.Spec.ID, Once: once,
		Stub: stub, Signature: sig,
	})
}

// recordedResponse is the response a recording stores, as mb's
// newIsResponse makes it: the `is`, then the behaviors addWaitBehavior and
// addDecorateBehavior ask for.
func (p *Responder) recordedResponse(is json.RawMessage) json.RawMessage {
	var behaviors []string
	if p.spec.AddWaitBehavior {
		var f struct {
			T int64 `json:"_proxyResponseTime"`
		}
		_ = json.Unmarshal(is, &f)
		if f.T > 0 {
			behaviors = append(behaviors, fmt.Sprintf(`{"wait":%d}`, f.T))
		}
	}
	if p.spec.AddDecorateBehavior != "" {
		behaviors = append(behaviors, `{"decorate":`+string(message.AppendJSONString(nil, p.spec.AddDecorateBehavior))+`}`)
	}
	out := `{"is":` + string(is)
	if len(behaviors) > 0 {
		out += `,"behaviors":[` + strings.Join(behaviors, ",") + `]`
	}
	return json.RawMessage(out + "}")
}

// queryString encodes pairs as node's querystring.stringify does for mb's
// query object: names in first-seen order, a repeated name's values
// together, escaped like encodeURIComponent.
func queryString(kvs []message.KV) string {
	var b strings.Builder
	done := map[string]bool{}
	for _, kv := range kvs {
		if done[kv.Name] {
			continue
		}
		done[kv.Name] = true
		for _, o := range kvs {
			if o.Name != kv.Name {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('&')
			}
			b.WriteString(escapeComponent(o.Name))
			b.WriteByte('=')
			b.WriteString(escapeComponent(o.Value))
		}
	}
	return b.String()
}

func escapeComponent(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// decryptKey returns a PEM private key, decrypted with passphrase when it is
// a legacy encrypted PEM block ("Proc-Type: 4,ENCRYPTED"), which is what
// node's `passphrase` option opens for mb. PKCS#8-encrypted keys are refused.
func decryptKey(keyPEM, passphrase string) ([]byte, error) {
	block, _ := pem.Decode([]byte(keyPEM))
	//lint:ignore SA1019 legacy PEM encryption is what mb users have; it is the only format node's passphrase and Go both read
	if passphrase == "" || block == nil || !x509.IsEncryptedPEMBlock(block) {
		return []byte(keyPEM), nil
	}
	//lint:ignore SA1019 see above
	der, err := x509.DecryptPEMBlock(block, []byte(passphrase))
	if err != nil {
		return nil, fmt.Errorf("proxy key passphrase: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: der}), nil
}
