package imposter

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/hashidx"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/meter"
	"github.com/riftgate/riftgate/gateway/ptree"
	"github.com/valyala/fasthttp"
)

// Matcher is a compiled set of predicates.
type Matcher interface {
	Match(r *message.Request) bool
}

// Behaviors is a compiled behaviors list, applied to a response in order.
type Behaviors interface {
	Apply(ctx context.Context, req *message.Request, resp *message.Response) error
}

// Responder produces a response for the kinds the engine does not build
// itself (proxy, inject, wasm).
type Responder interface {
	Respond(ctx context.Context, call *Call) (*message.Response, error)
}

// Call is one request on its way through a stub. It is valid only until
// Respond returns (the imposter reuses it, as it reuses the request): a
// responder keeps what it needs, never the Call, and may return only its
// Scratch.
type Call struct {
	Imposter *Imposter
	Request  *message.Request
	Stub     *Stub
	FlowID   string
	// Session is the connection of a WebSocket request, nil for the
	// protocols whose requests stand alone.
	Session *Session

	matched   time.Duration // the meters' reading when the request was matched; 0 if none
	behaviors Behaviors
	scratch   *message.Response // the imposter's, if it lends one
	scratched bool              // Scratch was called
	room      *[]byte           // the imposter's body room, if it lends one
}

// Matched is when the request was matched (the clock the meters read
// once), zero if the imposter did not say: a responder's deadline may
// count from it. It is made on demand, since most responders never ask.
func (c *Call) Matched() time.Time {
	if c.matched == 0 {
		return time.Time{}
	}
	return meter.Time(c.matched)
}

// BodyRoom is a buffer a Responder may copy its response's body into,
// keeping the slice in it: it lives until the request is answered, and the
// next request reuses its room.
func (c *Call) BodyRoom() *[]byte {
	if c.room == nil {
		c.room = new([]byte)
	}
	return c.room
}

// Scratch is a response a Responder may fill and return instead of
// allocating one: it lives until the request is answered.
func (c *Call) Scratch() *message.Response {
	if c.scratch == nil {
		c.scratch = new(message.Response)
	}
	c.scratched = true
	return c.scratch
}

// ShowsResponse reports whether the response object a responder makes is
// looked at as mb holds it (message.Response.MB): by --debug's match, or
// by a decorator or shellTransform among the response's behaviors. A
// responder that would have to render it (an inject's answer) does so
// only then.
func (c *Call) ShowsResponse() bool {
	r, ok := c.behaviors.(interface{ ReadsResponse() bool })
	return c.Imposter.opts.RecordMatches || ok && r.ReadsResponse()
}

// HasBehaviors reports whether the response has behaviors to apply.
func (c *Call) HasBehaviors() bool { return c.behaviors != nil }

// ApplyBehaviors runs the response's behaviors on resp now, for a responder
// that must record what they produce (a proxy); a responder whose compiler
// says it handles behaviors must call it. ran is false when the response
// has none, so resp is as it was.
func (c *Call) ApplyBehaviors(ctx context.Context, resp *message.Response) (ran bool, err error) {
	if c.behaviors == nil {
		return false, nil
	}
	return true, c.behaviors.Apply(ctx, c.Request, resp)
}

// BehaviorHandler is implemented by a Responder that applies its response's
// behaviors itself, through Call.ApplyBehaviors.
type BehaviorHandler interface {
	HandlesBehaviors() bool
}

// Build is what a compile hook compiles for: the imposter, the stub, and
// the configuration the stub is compiled against, which holds the modules
// it names. Compiling changes nothing outside the compiled stub.
type Build struct {
	Imposter *Imposter
	Stub     *StubSpec
	Config   *config.State // nil when the stub names no module
}

// Compiler turns the JSON of predicates, behaviors and non-`is` responses
// into their compiled forms. The gateway wires it to the predicate, behavior,
// proxy, inject and plugin packages; a nil hook refuses what it would
// compile.
type Compiler struct {
	Predicates func(raws []json.RawMessage, b Build) (Matcher, error)
	// PathKeys returns the paths of which a request must have one to
	// match, compared without regard to ASCII case, or nil when the
	// matcher requires none. It must never exclude a request the matcher
	// accepts.
	PathKeys func(m Matcher) []message.PathKey
	// Behaviors compiles the behaviors of a response, given the whole
	// response object (mb's behaviors read its `is` fields).
	Behaviors  func(response json.RawMessage, b Build) (Behaviors, error)
	Responders map[string]func(raw json.RawMessage, b Build) (Responder, error)
	// EndOfRequest compiles a tcp imposter's endOfRequestResolver inject
	// (the data it sees is a string in text mode, bytes in binary mode);
	// nil refuses it as mb does without --allowInjection.
	EndOfRequest func(src string, binary bool, imp *Imposter) (EndOfRequest, error)
	// AllowInjection is mb's --allowInjection: without it, a stub that
	// holds JavaScript or a shell command is refused as mb refuses it.
	AllowInjection bool
}

// Stub is a compiled stub. Its responses cycle; the position is shared by
// every table the stub appears in, and Continue hands it to a recompiled
// copy, so an admin change elsewhere does not reset it.
type Stub struct {
	Spec    *StubSpec
	matcher Matcher
	// set is the stub's responses; a proxyAlways recording swaps in one
	// with a response more, sharing the rest (Extension).
	set   atomic.Pointer[responseSet]
	pos   atomic.Uint64
	paths []message.PathKey // Compiler.PathKeys'
	// onOpen: a ws imposter's stub that answers the handshake (its
	// predicates name type "open").
	onOpen bool

	// seen is what the stub matched under --debug, made at its first
	// match: a recording holds many stubs, most never matched.
	seen atomic.Pointer[matchLog]
}

// matchLog is what a stub matched, newest last.
type matchLog struct {
	mu sync.Mutex
	l  []json.RawMessage
}

// responseSet is a stub's compiled responses and their cycle.
type responseSet struct {
	responses []*response
	// cycle is the response index per position, repeats expanded; nil
	// when each response comes once, in order.
	cycle []uint32
	// cycleKey names the cycle for Options.Cycles ("c<port>:<stub id>"),
	// "" when every position of its cycle answers the same response.
	cycleKey string
	// added are the responses recordings added after Spec was parsed, as
	// stored (upcast), for the stub's JSON.
	added []json.RawMessage
}

// Continue makes s go on where from, an earlier compilation of the same
// stub, is: its position in the responses cycle and, under --debug, what it
// matched.
func (s *Stub) Continue(from *Stub) {
	s.pos.Store(from.pos.Load())
	if ml := from.seen.Load(); ml != nil {
		ml.mu.Lock()
		s.seen.Store(&matchLog{l: slices.Clone(ml.l)})
		ml.mu.Unlock()
	}
}

// MaxMatches bounds what a stub remembers under --debug.
const MaxMatches = 1000

// recordMatch keeps a request the stub matched and its answer, as mb's
// --debug does.
func (s *Stub) recordMatch(imp *Imposter, req *message.Request, r *response, resp *message.Response) {
	c := req.Clone()
	ts := c.Timestamp
	c.Timestamp = time.Time{} // mb's match shows its own timestamp, not the request's
	rb, _ := c.MarshalJSON()
	config := []byte("{}")
	if r.spec != nil && r.spec.json != nil {
		config = matchConfig(r.spec)
	}
	m := fmt.Sprintf(`{"timestamp":%q,"request":%s,"response":%s,"responseConfig":%s,"processingTime":%d}`,
		ts.UTC().Format("2006-01-02T15:04:05.000Z"), rb, imp.matchResponse(r, resp), config, time.Since(ts).Milliseconds())
	ml := s.seen.Load()
	if ml == nil {
		s.seen.CompareAndSwap(nil, &matchLog{})
		ml = s.seen.Load()
	}
	ml.mu.Lock()
	if len(ml.l) == MaxMatches {
		ml.l = ml.l[1:]
	}
	ml.l = append(ml.l, json.RawMessage(m))
	ml.mu.Unlock()
	if ml := imp.opts.Matches; ml != nil && s.Spec.ID != 0 {
		ml.Matched(imp.Port(), s.Spec.ID, ts, json.RawMessage(m))
	}
}

// MatchLog keeps what stubs matched beyond the process (Options.Matches).
type MatchLog interface {
	// Matched takes each match a stub records, made at at.
	Matched(port int, stub uint64, at time.Time, match json.RawMessage)
	// Earlier is what the stub matched before this process, oldest first.
	Earlier(port int, stub uint64) []json.RawMessage
}

// matchResponse is the response as a match shows it: mb records the
// object its resolver made (an `is` as given, a proxy's answer) and the
// http server's post-processing then edits its headers in place.
func (imp *Imposter) matchResponse(r *response, resp *message.Response) []byte {
	if !imp.spec.IsHTTP() {
		return imp.responseJSON(resp)
	}
	var obj []byte
	switch {
	case resp.MB != nil:
		obj = resp.MB
	case r.spec != nil && r.spec.Kind == "is":
		obj = r.spec.Value
	default:
		obj = []byte("{}") // what an inject or plugin answered is all it shows
	}
	v, err := message.DecodeJS(obj)
	o, ok := v.(*message.JSObject)
	if err != nil || !ok {
		return imp.responseJSON(resp)
	}
	if resp.MB == nil && resp != r.static {
		imp.overlay(o, resp)
	}
	if h, ok := o.Vals["headers"].(*message.JSObject); ok {
		postProcessHeaders(o, h)
	}
	return message.EncodeJS(o, "", false)
}

// overlay puts on o, the object a response started as, what the behaviors
// or the script made of it: each field o has, and each that differs from
// the default response. A body left as o's JSON object rendered it stays
// that object.
func (imp *Imposter) overlay(o *message.JSObject, resp *message.Response) {
	dflt := &message.Response{StatusCode: 200}
	if imp.dflt != nil && imp.dflt.static != nil {
		dflt = imp.dflt.static
	}
	put := func(k string, v any, isDefault bool) {
		if _, had := o.Vals[k]; !had {
			if isDefault {
				return
			}
			o.Keys = append(o.Keys, k)
		}
		o.Vals[k] = v
	}
	put("statusCode", float64(resp.StatusCode), resp.StatusCode == dflt.StatusCode)
	var hb bytes.Buffer
	message.WriteMultiMap(&hb, resp.Headers)
	hv, _ := message.DecodeJS(hb.Bytes())
	put("headers", hv, slices.Equal(resp.Headers, dflt.Headers))
	if b, ok := o.Vals["body"]; ok {
		if _, isStr := b.(string); !isStr && string(message.EncodeJS(b, "    ", false)) == string(resp.Body) {
			return
		}
	}
	body := string(resp.Body)
	if resp.Binary {
		// mb holds the base64 text, as given or as a copy left it.
		body = resp.BinaryString()
		put("_mode", "binary", dflt.Binary)
	}
	put("body", body, bytes.Equal(resp.Body, dflt.Body))
}

// postProcessHeaders is what mb's http server does to a response's own
// headers before writing it: Connection: close unless one is set, and a
// Content-Length recomputed (as a number) for the body it writes.
func postProcessHeaders(o, h *message.JSObject) {
	get := func(name string) (string, bool) {
		for _, k := range h.Keys {
			if strings.EqualFold(k, name) {
				return k, true
			}
		}
		return "", false
	}
	set := func(name string, v any) {
		if k, ok := get(name); ok {
			h.Vals[k] = v
			return
		}
		h.Keys = append(h.Keys, name)
		h.Vals[name] = v
	}
	if _, ok := get("Connection"); !ok {
		set("Connection", "close")
	}
	if _, ok := get("Content-Length"); ok {
		var n int
		switch b := o.Vals["body"].(type) {
		case string:
			if o.Vals["_mode"] == "binary" {
				d, _ := base64.StdEncoding.DecodeString(b)
				n = len(d)
			} else {
				n = len(b)
			}
		case nil:
		default:
			n = len(message.EncodeJS(b, "    ", false))
		}
		set("Content-Length", float64(n))
	}
}

// matchConfig is the response's config as a match shows it: mb's resolver
// has set a proxy's default mode on it by then.
func matchConfig(rs *ResponseSpec) []byte {
	config := rs.json
	if rs.Kind != "proxy" {
		return config
	}
	v, err := message.DecodeJS(config)
	o, ok := v.(*message.JSObject)
	if err != nil || !ok {
		return config
	}
	p, ok := o.Vals["proxy"].(*message.JSObject)
	if !ok {
		return config
	}
	switch p.Vals["mode"] {
	case "proxyOnce", "proxyAlways", "proxyTransparent":
	default:
		if _, had := p.Vals["mode"]; !had {
			p.Keys = append(p.Keys, "mode")
		}
		p.Vals["mode"] = "proxyOnce"
	}
	return message.EncodeJS(o, "", false)
}

// Matches returns what the stub matched under --debug.
func (s *Stub) Matches() []json.RawMessage {
	ml := s.seen.Load()
	if ml == nil {
		return nil
	}
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return slices.Clone(ml.l)
}

// matchesOf is what st matched, oldest first: what Options.Matches kept
// from before this process, then st's own, the newest MaxMatches.
func (imp *Imposter) matchesOf(st *Stub) []json.RawMessage {
	m := st.Matches()
	if ml := imp.opts.Matches; ml != nil && st.Spec.ID != 0 {
		if earlier := ml.Earlier(imp.Port(), st.Spec.ID); len(earlier) > 0 {
			m = append(slices.Clone(earlier), m...)
		}
	}
	return m[max(0, len(m)-MaxMatches):]
}

// response is one compiled response of a stub.
type response struct {
	spec     *ResponseSpec
	static   *message.Response        // `is`, with defaults applied
	header   *fasthttp.ResponseHeader // static's, rendered once
	jsonBody bool                     // static.Body was a JSON object
	fault    string
	ws       *wsAnswer   // a ws imposter's static, compiled
	grpc     *grpcAnswer // a grpc imposter's static, compiled
	// upgrade: an http imposter's `is` with statusCode 101, which takes
	// the connection over as a WebSocket (ws_upgrade.go).
	upgrade   bool
	responder Responder
	behaviors Behaviors
	// handlesBehaviors: the responder applies behaviors itself.
	handlesBehaviors bool
	// lazy, when set, compiles the response where it is first answered
	// (at): the rest of the struct is then unset.
	lazy *lazyResponse
}

// lazyResponse is a response a proxy recorded, compiled where it is first
// answered: a proxyAlways stub holds hundreds of thousands and proxyOnce
// records a stub per request, most never answered while the proxy is
// there, and a compiled `is` (its rendered header above all) costs
// several times its JSON in memory and in the collector's time. The same
// JSON compiled when the proxy answered with it.
type lazyResponse struct {
	once sync.Once
	c    *Compiler
	b    Build // Config nil: an `is` names no module
	r    *response
}

func (l *lazyResponse) get(spec *ResponseSpec) *response {
	l.once.Do(func() {
		r, err := l.c.compileResponse(spec, l.b)
		if err != nil {
			// Its shape was checked, and the same JSON was answered when
			// it was recorded: not expected, but not to fail every request.
			l.b.Imposter.logger().Error("a recorded response does not compile; the default response answers instead", "err", err)
			r, err = l.c.compileResponse(emptyIs(), l.b)
			if err != nil {
				r = &response{spec: spec, static: &message.Response{StatusCode: 500}}
				r.header = RenderHeader(r.static)
			}
		}
		l.r, l.c, l.b = r, nil, Build{}
	})
	return l.r
}

// emptyIs is an empty `is`, which answers with the imposter's defaults.
func emptyIs() *ResponseSpec {
	return &ResponseSpec{Kind: "is", Value: json.RawMessage(`{}`), Repeat: 1, json: json.RawMessage(`{}`)}
}

// deferredResponse is a response and the state to compile it, in one
// allocation: a recording holds many of these.
type deferredResponse struct {
	response
	lazy lazyResponse
}

func (d *deferredResponse) init(c *Compiler, rs *ResponseSpec, imp *Imposter, spec *StubSpec) *response {
	d.response = response{spec: rs, lazy: &d.lazy}
	d.lazy = lazyResponse{c: c, b: Build{Imposter: imp, Stub: spec}}
	return &d.response
}

// deferred is rs, to be compiled where it is first answered.
func (c *Compiler) deferred(rs *ResponseSpec, imp *Imposter, spec *StubSpec) *response {
	return new(deferredResponse).init(c, rs, imp, spec)
}

// recordedStub is a recorded stub with one deferrable response, in one
// allocation. A recording holds hundreds of thousands of stubs, most of
// them never matched again, and every object they hold is marked at every
// collection: the collector's cost grew with the recording until it set
// the rate. So a recorded stub holds its spec, its response's, its
// predicate and its path key, copied in so that the objects its parse
// made are the collector's to free; its predicates, compiled to check and
// index it, are dropped; and what it needs to answer (its compiled
// predicates, its response set) is made where it is first asked (warm).
// It stays within 512 bytes, where the collector scans objects span by
// span (TestRecordedStubHoldsFewObjects).
type recordedStub struct {
	Stub
	once   sync.Once
	c      *Compiler // until warm
	imp    *Imposter
	m      Matcher // once warm
	spec   StubSpec
	rspec  ResponseSpec
	rspecs [1]*ResponseSpec
	preds  [1]json.RawMessage
	path   [1]message.PathKey
}

// recordedAnswer is what a recorded stub makes where it is first asked.
type recordedAnswer struct {
	set  responseSet
	one  [1]*response
	resp deferredResponse
}

// compileRecorded compiles b's stub as a recordedStub, or returns nil when
// it is not one (not recorded, or its response is not deferrable, which
// only an http imposter's is: no WebSocket handshake to tell).
func (c *Compiler) compileRecorded(b Build) *Stub {
	if s := b.Stub; !s.Recorded || len(s.Responses) != 1 || s.Responses[0].Repeat != 1 ||
		!deferrable(b.Imposter, s.Responses[0]) || c.Predicates == nil {
		return nil
	}
	m, err := c.Predicates(b.Stub.Predicates, b)
	if err != nil {
		return nil // compileStub reports it
	}
	// Config left out: a recording names no module, and each stub would
	// keep the configuration it was made in.
	rec := &recordedStub{c: c, imp: b.Imposter, spec: *b.Stub, rspec: *b.Stub.Responses[0]}
	spec := &rec.spec
	rec.rspecs[0] = &rec.rspec
	spec.Responses = rec.rspecs[:]
	if len(spec.Predicates) == 1 {
		rec.preds[0] = spec.Predicates[0]
		spec.Predicates = rec.preds[:]
	}
	st := &rec.Stub
	st.Spec = spec
	if c.PathKeys != nil {
		st.paths = c.PathKeys(m)
		if len(st.paths) == 1 {
			// A copy of the text: it is a part of the parse's buffers.
			rec.path[0] = message.PathKey{Text: strings.Clone(st.paths[0].Text), Prefix: st.paths[0].Prefix}
			st.paths = rec.path[:]
		}
	}
	st.matcher = rec
	return st
}

// warm compiles the stub's predicates and makes its response set, once,
// and returns the set.
func (rec *recordedStub) warm() *responseSet {
	rec.once.Do(func() {
		b := Build{Imposter: rec.imp, Stub: &rec.spec}
		m, err := rec.c.Predicates(rec.spec.Predicates, b)
		if err != nil {
			// They compiled when the stub was made: not expected, but a
			// stub that cannot say must not answer.
			rec.imp.logger().Error("a recorded stub's predicates do not compile; it matches nothing", "err", err)
			m = matchNothing{}
		}
		a := &recordedAnswer{}
		a.one[0] = a.resp.init(rec.c, &rec.rspec, rec.imp, &rec.spec)
		a.set.responses = a.one[:]
		a.set.cycleKey = cycleKey(rec.imp, &rec.spec, &a.set)
		rec.m, rec.c = m, nil
		rec.set.Store(&a.set)
	})
	return rec.set.Load()
}

// Match compiles the stub's predicates where they are first asked.
func (rec *recordedStub) Match(r *message.Request) bool {
	rec.warm()
	return rec.m.Match(r)
}

type matchNothing struct{}

func (matchNothing) Match(*message.Request) bool { return false }

// deferrable reports whether rs can be compiled where it is first
// answered: a plain `is` of an http imposter that is not a WebSocket
// handshake (a stub that upgrades is known by its compiled responses).
func deferrable(imp *Imposter, rs *ResponseSpec) bool {
	if rs.Kind != "is" || rs.Behaviors != nil || imp == nil || !imp.spec.IsHTTP() {
		return false
	}
	m, err := message.Members(rs.Value, "statusCode")
	if err != nil {
		return false
	}
	code, _ := message.StatusCode(m[0])
	return code != 101
}

// maxCycle bounds the expanded response cycle; mb expands repeats the same way.
const maxCycle = 1 << 16

func (c *Compiler) compileStub(b Build) (*Stub, error) {
	spec := b.Stub
	if !c.AllowInjection {
		if err := injectionProblems(spec).Err(); err != nil {
			return nil, err
		}
	}
	if rec := c.compileRecorded(b); rec != nil {
		return rec, nil
	}
	st := &Stub{Spec: spec, onOpen: b.Imposter != nil && b.Imposter.spec.IsWS() && onOpen(spec.Predicates)}
	set := &responseSet{responses: make([]*response, 0, len(spec.Responses))}
	if c.Predicates != nil {
		m, err := c.Predicates(spec.Predicates, b)
		if err != nil {
			return nil, err
		}
		st.matcher = m
		if c.PathKeys != nil {
			st.paths = c.PathKeys(m)
		}
	} else if len(spec.Predicates) > 0 {
		return nil, mberr.New(mberr.BadData, "predicates are not supported")
	}
	identity := true
	for _, rs := range spec.Responses {
		var r *response
		if spec.Recorded && deferrable(b.Imposter, rs) {
			r = c.deferred(rs, b.Imposter, spec)
		} else {
			var err error
			if r, err = c.compileResponse(rs, b); err != nil {
				return nil, withStubSource(err, spec)
			}
		}
		set.responses = append(set.responses, r)
		identity = identity && rs.Repeat == 1
	}
	if !identity {
		// mb expands repeats into the cycle; so does riftgate, bounded.
		for i, rs := range spec.Responses {
			for range rs.Repeat {
				if len(set.cycle) >= maxCycle {
					return nil, mberr.New(mberr.BadData, "too many repeated responses in one stub (the limit is 65536)")
				}
				set.cycle = append(set.cycle, uint32(i))
			}
		}
		if len(set.cycle) == 0 {
			// Every response repeats zero times: mb then answers as a stub
			// without responses does, with an empty `is`.
			r, err := c.compileResponse(emptyIs(), b)
			if err != nil {
				return nil, err
			}
			set.cycle = []uint32{uint32(len(set.responses))}
			set.responses = append(set.responses, r)
		}
	}
	set.cycleKey = cycleKey(b.Imposter, spec, set)
	st.set.Store(set)
	return st, nil
}

// cycleKey is the name of a stub's cycle for Options.Cycles, or "" when
// every position answers the same response (or the stub is not stored).
func cycleKey(imp *Imposter, spec *StubSpec, set *responseSet) string {
	varied := len(set.responses) > 1
	if set.cycle != nil {
		varied = slices.ContainsFunc(set.cycle, func(i uint32) bool { return i != set.cycle[0] })
	}
	if spec.ID == 0 || !varied {
		return ""
	}
	return "c" + strconv.Itoa(imp.Port()) + ":" + strconv.FormatUint(spec.ID, 10)
}

// Extension is responses to add to a compiled stub (a proxyAlways
// recording joined it), compiled by Extend and added by Commit.
type Extension struct {
	imp   *Imposter
	st    *Stub
	rs    []*response
	specs []*ResponseSpec
}

// Extend compiles raws, responses to add to st, taking the modules they
// name from cfg; parsed, when not nil, holds beside each what it was
// already parsed into (a *ResponseSpec, parsed for this imposter's
// protocol), or nil. Nothing changes until Commit.
func (imp *Imposter) Extend(st *Stub, raws []json.RawMessage, parsed []any, cfg *config.State) (*Extension, error) {
	c := imp.opts.Compiler
	if c == nil {
		c = &Compiler{}
	}
	x := &Extension{imp: imp, st: st}
	for i, raw := range raws {
		var rs *ResponseSpec
		var err error
		if i < len(parsed) {
			rs, _ = parsed[i].(*ResponseSpec)
		}
		if rs == nil {
			if rs, _, err = parseResponse(raw, imp.spec.Protocol); err == nil {
				err = rs.check()
			}
		}
		if err != nil {
			return nil, err
		}
		var r *response
		if deferrable(imp, rs) {
			r = c.deferred(rs, imp, st.Spec)
		} else if r, err = c.compileResponse(rs, Build{Imposter: imp, Stub: st.Spec, Config: cfg}); err != nil {
			return nil, withStubSource(err, st.Spec)
		}
		x.rs, x.specs = append(x.rs, r), append(x.specs, rs)
	}
	return x, nil
}

// Commit adds the responses to the stub: requests that come after answer
// from the longer cycle, where the stub's position goes on. It shares the
// responses the stub has (appending where the lists have room), so it
// costs O(1) amortized whatever their number. Commits of one stub must not
// run at once (the reconciler's commits never do).
func (x *Extension) Commit() {
	old := x.st.responses()
	ns := &responseSet{responses: append(old.responses, x.rs...), cycle: old.cycle, added: old.added}
	for _, rs := range x.specs {
		ns.added = append(ns.added, rs.json)
		if ns.cycle == nil && rs.Repeat != 1 {
			// The cycle is no longer the identity: spell it out, once.
			ns.cycle = make([]uint32, len(old.responses), len(old.responses)+1)
			for i := range ns.cycle {
				ns.cycle[i] = uint32(i)
			}
		}
	}
	if ns.cycle != nil {
		first := len(old.responses)
		for i, rs := range x.specs {
			for range rs.Repeat {
				ns.cycle = append(ns.cycle, uint32(first+i))
			}
		}
	}
	ns.cycleKey = cycleKey(x.imp, x.st.Spec, ns)
	x.st.set.Store(ns)
}

// withStubSource gives an error of mb's dry run that names no source the
// stub's JSON, as a string, as mb's dry run does.
func withStubSource(err error, spec *StubSpec) error {
	var e *mberr.Error
	if errors.As(err, &e) && e.Source == nil && e.Raw == nil {
		return e.WithSource(string(spec.JSON()))
	}
	return err
}

const (
	injectionDisabled = "JavaScript injection is not allowed unless mb is run with the --allowInjection flag"
	shellDisabled     = "Shell execution is not allowed unless mb is run with the --allowInjection flag"
)

// injectionProblems are mb's refusals of a stub without --allowInjection:
// one for any JavaScript it holds (response inject, decorate, a wait
// function, predicateGenerators inject, predicate inject, addDecorateBehavior)
// and one for shellTransform, each naming the whole stub.
func injectionProblems(spec *StubSpec) mberr.List {
	js, shell := false, false
	for _, rs := range spec.Responses {
		if rs.Kind == "inject" {
			js = true
		}
		var behaviors []map[string]json.RawMessage
		if rs.Behaviors != nil {
			_ = json.Unmarshal(rs.Behaviors, &behaviors)
		}
		for _, b := range behaviors {
			if d := b["decorate"]; d != nil && !isWasm(d) {
				js = true
			}
			if w := b["wait"]; isString(w) {
				js = true
			}
			if b["shellTransform"] != nil {
				shell = true
			}
		}
		if rs.Kind == "proxy" {
			var p struct {
				PredicateGenerators []map[string]json.RawMessage `json:"predicateGenerators"`
				AddDecorateBehavior json.RawMessage              `json:"addDecorateBehavior"`
			}
			_ = json.Unmarshal(rs.Value, &p)
			for _, g := range p.PredicateGenerators {
				js = js || truthy(g["inject"])
			}
			js = js || truthy(p.AddDecorateBehavior)
		}
	}
	for _, p := range spec.Predicates {
		if m, err := message.Members(p, "inject"); err == nil && truthy(m[0]) {
			js = true
		}
	}
	var errs mberr.List
	if js {
		errs = append(errs, mberr.New(mberr.InvalidInjection, injectionDisabled).WithSource(spec.JSON()))
	}
	if shell {
		errs = append(errs, mberr.New(mberr.InvalidInjection, shellDisabled).WithSource(spec.JSON()))
	}
	return errs
}

// isWasm reports whether a value is riftgate's {"wasm": ...}, which is no
// JavaScript.
func isWasm(raw json.RawMessage) bool {
	var o map[string]json.RawMessage
	return json.Unmarshal(raw, &o) == nil && o["wasm"] != nil
}

// endOfRequestResolverProblem is mb's refusal of an endOfRequestResolver
// that injects JavaScript without --allowInjection.
func endOfRequestResolverProblem(spec *Spec, allowInjection bool) *mberr.Error {
	var r map[string]json.RawMessage
	if allowInjection || json.Unmarshal(spec.EndOfRequestResolver, &r) != nil || !truthy(r["inject"]) {
		return nil
	}
	return mberr.New(mberr.InvalidInjection, injectionDisabled).WithSource(spec.EndOfRequestResolver)
}

func (c *Compiler) compileResponse(rs *ResponseSpec, b Build) (*response, error) {
	r := &response{spec: rs}
	switch rs.Kind {
	case "is":
		resp, isJSON, err := b.Imposter.buildIs(rs.Value, b.Imposter.spec.DefaultResponse)
		if err != nil {
			return nil, mberr.New(mberr.BadData, err.Error()).WithSource(rs.json)
		}
		if b.Imposter.spec.IsHTTP() {
			resp.MB = rs.Value // mb's object is the is as given, defaults filled in only when it is written
		}
		if b.Imposter.spec.IsWS() {
			if r.ws, err = wsAnswerOf(resp.Body); err != nil {
				return nil, mberr.New(mberr.BadData, err.Error()).WithSource(rs.json)
			}
		}
		if b.Imposter.spec.IsGRPC() {
			if r.grpc, err = grpcAnswerOf(b.Imposter.spec.GRPC, resp.Body); err != nil {
				return nil, mberr.New(mberr.BadData, err.Error()).WithSource(rs.json)
			}
		}
		if b.Imposter.spec.IsHTTP() && resp.StatusCode == 101 {
			// The handshake's answer: the is as a ws response object
			// (subprotocol, headers, a greeting).
			r.upgrade = true
			if r.ws, err = wsAnswerOf(rs.Value); err != nil {
				return nil, mberr.New(mberr.BadData, err.Error()).WithSource(rs.json)
			}
		}
		r.static, r.jsonBody, r.header = resp, isJSON, RenderHeader(resp)
	case "fault":
		_ = json.Unmarshal(rs.Value, &r.fault)
		if !faults[r.fault] {
			// mb ignores a fault it does not know and answers as usual.
			r.fault = ""
			resp, isJSON, err := b.Imposter.buildIs(nil, b.Imposter.spec.DefaultResponse)
			if err != nil {
				return nil, err
			}
			r.static, r.jsonBody, r.header = resp, isJSON, RenderHeader(resp)
		}
	default:
		mk := c.Responders[rs.Kind]
		if mk == nil {
			return nil, unsupported(rs)
		}
		resp, err := mk(rs.Value, b)
		if err != nil {
			return nil, err
		}
		r.responder = resp
		if bh, ok := resp.(BehaviorHandler); ok {
			r.handlesBehaviors = bh.HandlesBehaviors()
		}
	}
	if rs.Behaviors != nil {
		if c.Behaviors == nil {
			return nil, mberr.New(mberr.BadData, "behaviors are not supported").WithSource(rs.json)
		}
		bs, err := c.Behaviors(rs.json, b)
		if err != nil {
			return nil, err
		}
		r.behaviors = bs
	}
	return r, nil
}

func unsupported(rs *ResponseSpec) error {
	if rs.Kind == "inject" {
		return mberr.New(mberr.InvalidInjection, injectionDisabled).WithSource(rs.json)
	}
	return mberr.New(mberr.BadData, "the "+rs.Kind+" response type is not supported").WithSource(rs.json)
}

// next returns the stub's next response, advancing its cycle.
func (s *Stub) next() *response { return s.at(s.pos.Add(1) - 1) }

// at is the response at position pos of the cycle.
func (s *Stub) at(pos uint64) *response {
	rs := s.responses()
	var r *response
	if rs.cycle == nil {
		r = rs.responses[pos%uint64(len(rs.responses))]
	} else {
		r = rs.responses[rs.cycle[pos%uint64(len(rs.cycle))]]
	}
	if r.lazy != nil {
		return r.lazy.get(r.spec)
	}
	return r
}

// object is the stub as stored: its spec, with the responses recordings
// added since.
func (s *Stub) object() object {
	obj, _ := decodeObject(s.Spec.json) // ParseStub made it
	set := s.set.Load()                 // nil: a recorded stub not asked yet, which has added nothing
	if set == nil || len(set.added) == 0 {
		return obj
	}
	var rs []json.RawMessage
	_ = json.Unmarshal(obj.get("responses"), &rs) // ParseStub made it a list
	return obj.with("responses", raw(append(rs, set.added...)))
}

// cycleKey names the stub's cycle for Options.Cycles, or "".
func (s *Stub) cycleKey() string { return s.responses().cycleKey }

// responses is the stub's response set; a recorded stub makes its own
// where it is first asked.
func (s *Stub) responses() *responseSet {
	if rs := s.set.Load(); rs != nil {
		return rs
	}
	return s.matcher.(*recordedStub).warm()
}

// Cycles keeps the positions of stubs' response cycles. A single node's is
// each stub's own counter (Options.Cycles nil). A cluster keeps a stub's
// position in flow state owned like a flow, under the cycle's key, so that
// the stub cycles through its responses once across every node; a stub
// with one response never asks.
type Cycles interface {
	// Next returns the position to answer at in the cycle named key, and
	// advances it; p is the imposter's flow policy.
	Next(ctx context.Context, key string, p flow.Policy) (uint64, error)
}

// matches reports whether the stub's predicates accept r.
func (s *Stub) matches(r *message.Request) bool {
	return s.matcher == nil || s.matcher.Match(r)
}

// accepts reports whether s's predicates accept r and allow (when not nil)
// lets s through.
func (s *Stub) accepts(r *message.Request, allow func(*Stub) bool) bool {
	return s.matches(r) && (allow == nil || allow(s))
}

// table is an immutable, indexed list of stubs. Admin changes build a new
// table and swap it in, so the request path never takes a lock.
type table struct {
	stubs []*Stub
	// keys are the stubs' places in the configuration's order, which
	// added stubs (extra) are merged by; nil when there are none.
	keys []config.Key
	// byPath maps the hash of a lowercased path to the stubs (by index, in
	// order) that can only match that path; byPrefix does the same for the
	// stubs that can only match paths starting with a given text, by the
	// text's length. A hash collision only adds candidates: each
	// candidate's own predicates decide.
	byPath   map[uint64][]int32
	byPrefix map[int]map[uint64][]int32
	// prefixLens lists byPrefix's lengths, shortest first.
	prefixLens []int
	// rest lists, in order, the stubs without a path hint.
	rest []int32
	// scenarios says whether any stub takes part in a scenario, which moves
	// matching off the lock-free path and onto the flow store.
	scenarios bool
	// extra holds the stubs recordings added since the table was built,
	// nil when there are none: adding one copies O(log n) of it and
	// nothing of the rest.
	extra *extra
	// opens is a ws imposter's table of the stubs that answer the
	// handshake (Stub.onOpen), nil when none does.
	opens *table
}

// extra is the stubs recordings added to a table, ordered among the
// table's own by their configuration keys.
type extra struct {
	all ptree.Map[config.Key, *Stub]
	// byPath holds, under the hash of a lowercased exact path, the keys of
	// the added stubs that can only match it; rest lists the others, in
	// order.
	byPath hashidx.Index[config.Key]
	rest   []*Stub
}

// pathStubs returns, in order, the added stubs indexed under the path
// hash h. A path has one stub or a few, and the request path asks on
// every request: one stub is the tree's own memory (View), not a copy.
func (x *extra) pathStubs(h uint64) []*Stub {
	var l []*Stub
	x.byPath.Each(h, func(k config.Key) bool {
		if l == nil {
			l = x.all.View(k)
		} else {
			l = append(l, x.all.View(k)...) // l's capacity is its length: a copy
		}
		return true
	})
	if len(l) > 1 {
		slices.SortFunc(l, func(a, b *Stub) int { return a.Spec.Key.Compare(b.Spec.Key) })
	}
	return l
}

// withAdded returns t with stubs added at their keys (Spec.Key, set
// before the stub is published and never after); t must have keys.
func (t *table) withAdded(stubs []*Stub) *table {
	n := *t
	x := &extra{all: ptree.New[config.Key, *Stub](config.Key.Compare)}
	if t.extra != nil {
		*x = *t.extra
	}
	// The versions between the stubs of one batch are kept by no one: the
	// batch's later Sets change in place the nodes its earlier ones made.
	e := &ptree.Edit{}
	for _, s := range stubs {
		x.all = x.all.SetIn(e, s.Spec.Key, s)
		n.scenarios = n.scenarios || s.Spec.ScenarioName != ""
		if len(s.paths) == 1 && !s.paths[0].Prefix && isASCII(s.paths[0].Text) {
			x.byPath = x.byPath.Add(lowerHash(s.paths[0].Text), s.Spec.Key)
			continue
		}
		x.rest = insertByKey(x.rest, s)
	}
	n.extra = x
	return &n
}

// insertByKey returns l, ordered by key, with s added; l is not changed,
// and the list made shares nothing with it but when s goes last.
func insertByKey(l []*Stub, s *Stub) []*Stub {
	i := len(l)
	for i > 0 && l[i-1].Spec.Key.Compare(s.Spec.Key) > 0 {
		i--
	}
	if i == len(l) {
		return append(l[:len(l):len(l)], s)
	}
	return slices.Insert(slices.Clip(l), i, s)
}

// all lists every stub of the table in order.
func (t *table) all() []*Stub {
	if t.extra == nil {
		return t.stubs
	}
	out := make([]*Stub, 0, len(t.stubs)+t.extra.all.Len())
	i := 0
	t.extra.all.Each(func(k config.Key, s *Stub) bool {
		for i < len(t.stubs) && t.keys[i].Compare(k) < 0 {
			out = append(out, t.stubs[i])
			i++
		}
		out = append(out, s)
		return true
	})
	return append(out, t.stubs[i:]...)
}

func newTable(stubs []*Stub, keys []config.Key) *table {
	t := indexTable(stubs, keys)
	var opens []*Stub
	var openKeys []config.Key
	for i, s := range stubs {
		if s.onOpen {
			opens = append(opens, s)
			if keys != nil {
				openKeys = append(openKeys, keys[i])
			}
		}
	}
	if len(opens) > 0 {
		t.opens = indexTable(opens, openKeys)
	}
	return t
}

// indexTable indexes stubs, whose configuration keys are keys.
func indexTable(stubs []*Stub, keys []config.Key) *table {
	t := &table{stubs: stubs, keys: keys, byPath: make(map[uint64][]int32), byPrefix: make(map[int]map[uint64][]int32)}
	for i, s := range stubs {
		t.scenarios = t.scenarios || s.Spec.ScenarioName != ""
		if !indexable(s.paths) {
			t.rest = append(t.rest, int32(i))
			continue
		}
		for _, k := range s.paths {
			h := lowerHash(k.Text)
			if !k.Prefix {
				t.byPath[h] = addOnce(t.byPath[h], i)
				continue
			}
			n := len(k.Text)
			if t.byPrefix[n] == nil {
				t.byPrefix[n] = make(map[uint64][]int32)
				t.prefixLens = append(t.prefixLens, n)
			}
			t.byPrefix[n][h] = addOnce(t.byPrefix[n][h], i)
		}
	}
	slices.Sort(t.prefixLens)
	return t
}

// indexable reports whether a stub can be found by its path keys alone:
// it has some, none starts with nothing, and all are ASCII.
func indexable(keys []message.PathKey) bool {
	for _, k := range keys {
		if !isASCII(k.Text) || k.Prefix && k.Text == "" {
			return false
		}
	}
	return len(keys) > 0
}

// addOnce appends stub i to an ordered candidate list, unless another of
// its keys put it there already.
func addOnce(l []int32, i int) []int32 {
	if n := len(l); n > 0 && l[n-1] == int32(i) {
		return l
	}
	return append(l, int32(i))
}

// match returns the first stub, in order, whose predicates accept r and
// that allow (when not nil) lets through, or nil.
func (t *table) match(r *message.Request, allow func(*Stub) bool) *Stub {
	if t.extra != nil {
		return t.matchExtra(r, allow)
	}
	if !isASCII(r.Path) {
		// The index lowercases byte by byte, but a predicate lowercases
		// as JavaScript does, where some non-ASCII letters (the Kelvin
		// sign) become ASCII ones: scan every stub.
		for _, s := range t.stubs {
			if s.accepts(r, allow) {
				return s
			}
		}
		return nil
	}
	// The ordered candidate lists: the exact path's, each indexed start's,
	// and the unhinted stubs. Merging them keeps stub order; a stub with
	// several keys can be in more than one, and is tried once.
	var room [8][]int32
	lists := append(room[:0], t.byPath[lowerHash(r.Path)], t.rest)
	for _, n := range t.prefixLens {
		if n > len(r.Path) {
			break
		}
		if l := t.byPrefix[n][lowerHash(r.Path[:n])]; len(l) > 0 {
			lists = append(lists, l)
		}
	}
	tried := int32(-1)
	for {
		first := -1
		for k, l := range lists {
			if len(l) > 0 && (first < 0 || l[0] < lists[first][0]) {
				first = k
			}
		}
		if first < 0 {
			return nil
		}
		i := lists[first][0]
		lists[first] = lists[first][1:]
		if i == tried {
			continue
		}
		tried = i
		if s := t.stubs[i]; s.accepts(r, allow) {
			return s
		}
	}
}

// matchExtra is match for a table with added stubs: the candidate lists
// of the table's own index and of the added stubs, merged in key order.
func (t *table) matchExtra(r *message.Request, allow func(*Stub) bool) *Stub {
	if !isASCII(r.Path) {
		for _, s := range t.all() {
			if s.accepts(r, allow) {
				return s
			}
		}
		return nil
	}
	type list struct {
		own   []int32
		added []*Stub
	}
	var room [10]list
	h := lowerHash(r.Path)
	lists := append(room[:0], list{own: t.byPath[h]}, list{own: t.rest}, list{added: t.extra.rest})
	if l := t.extra.pathStubs(h); len(l) > 0 {
		lists = append(lists, list{added: l})
	}
	for _, n := range t.prefixLens {
		if n > len(r.Path) {
			break
		}
		if l := t.byPrefix[n][lowerHash(r.Path[:n])]; len(l) > 0 {
			lists = append(lists, list{own: l})
		}
	}
	head := func(l *list) (*Stub, config.Key) {
		if len(l.own) > 0 {
			return t.stubs[l.own[0]], t.keys[l.own[0]]
		}
		if len(l.added) > 0 {
			return l.added[0], l.added[0].Spec.Key
		}
		return nil, config.Key{}
	}
	var tried *Stub
	for {
		first, fs, fk := -1, (*Stub)(nil), config.Key{}
		for k := range lists {
			if s, key := head(&lists[k]); s != nil && (fs == nil || key.Compare(fk) < 0) {
				first, fs, fk = k, s, key
			}
		}
		if first < 0 {
			return nil
		}
		if l := &lists[first]; len(l.own) > 0 {
			l.own = l.own[1:]
		} else {
			l.added = l.added[1:]
		}
		if fs == tried {
			continue
		}
		tried = fs
		if fs.accepts(r, allow) {
			return fs
		}
	}
}

// lowerHash hashes the ASCII-lowercased path (or path hint) without
// allocating.
func lowerHash(p string) uint64 {
	var buf [256]byte
	if len(p) > len(buf) {
		return xxhash.Sum64String(asciiLower(p))
	}
	b := buf[:len(p)]
	for i := 0; i < len(p); i++ {
		c := p[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return xxhash.Sum64(b)
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// isASCII reports whether s has only ASCII bytes: only such hints are
// indexed, since requests are lowercased byte by byte.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
