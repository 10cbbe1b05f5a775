package imposter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/grpcproto"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
)

// Spec is one imposter definition, validated as mb validates it: what mb
// refuses is refused with mb's words, and what mb ignores is kept (a stub
// prints as it was given) or dropped (an imposter field mb does not print),
// and named in Ignored. It keeps the JSON it came from, as JSON.parse and
// mb's upcasting left it, so that GET shows what mb would store.
type Spec struct {
	Protocol string
	// Custom is the protofile's protocol, for a custom one; CustomFields
	// are the definition's own fields, which its process gets.
	Custom         *CustomProtocol
	CustomFields   json.RawMessage
	Port           int // 0 until bound when none was given
	Host           string
	Name           string
	RecordRequests bool
	AllowCORS      bool
	Key, Cert      string
	MutualAuth     bool
	// Mode is a tcp imposter's "text" or "binary" (its data is base64).
	Mode string
	// WS is a ws or wss imposter's limits.
	WS WSLimits
	// GRPC is a grpc imposter's services, compiled.
	GRPC *grpcproto.Set
	Flow FlowSpec
	// ProxyKeepAlive is `_rift.proxyKeepAlive`: proxied answers keep the
	// client's connection open unless the upstream's answer says
	// Connection itself, where mb (and riftgate by default) closes it.
	ProxyKeepAlive bool
	// MaxRecorded is _rift.maxRecordedRequests: the imposter's own cap on
	// its recorded requests (0: none), or nil for the process's.
	MaxRecorded *int64
	// RecordKey names where the imposter's recorded requests are kept
	// (gateway/reqlog): the same key after a restart finds them again.
	// Empty, the port names them.
	RecordKey string
	Stubs     []*StubSpec
	// DefaultResponse holds the `is` fields used when no stub matches.
	DefaultResponse json.RawMessage
	// EndOfRequestResolver is kept for rendering; http imposters never use it.
	EndOfRequestResolver json.RawMessage
	// Ignored names the fields of the definition that mb ignores
	// ("colour", "stubs[0].responses[1].note"), for one warning per
	// imposter.
	Ignored []string

	header object // the definition without stubs and runtime fields
}

// StubSpec is one stub as stored.
type StubSpec struct {
	// ID is the stub's id in the configuration (0 for a stub not stored
	// yet): stable across edits of other stubs.
	ID uint64
	// Refs are the modules the stub names, as the configuration resolved
	// them when the stub was made.
	Refs config.Refs
	// Key is the stub's place in the configuration's order (zero for a
	// stub not stored yet); recordings are added to a running table by it.
	Key config.Key
	// Recorded marks a stub a proxy recorded: its `is` responses are
	// compiled where they are first answered (lazyResponse).
	Recorded              bool
	Predicates            []json.RawMessage
	Responses             []*ResponseSpec
	ScenarioName          string
	RequiredScenarioState string
	NewScenarioState      string
	// Ignored names the fields mb ignores, relative to the stub.
	Ignored []string

	// json is the stub as stored. Predicates and each response's JSON
	// are parts of it: a stub's JSON is kept once, however many hold it
	// (the configuration's StubDoc too).
	json json.RawMessage
}

// ResponseSpec is one entry of a stub's responses.
type ResponseSpec struct {
	Kind  string          // is, proxy, inject, fault or wasm
	Value json.RawMessage // the value under Kind
	// Repeat is how many times the response comes before the next one,
	// as mb's repeat loop counts it (0 drops it from the cycle).
	Repeat    int
	Behaviors json.RawMessage // the `behaviors` array

	// json is the response as stored (upcast); Value and Behaviors are
	// parts of it.
	json json.RawMessage
}

// FlowSpec is `_rift.flowState`: where a request's flow id comes from and
// how its writes are kept.
type FlowSpec struct {
	Header string // "" means the imposter's port is the flow id
	// Query names a query parameter that holds the flow id ("query:<name>");
	// Connection makes each connection its own flow ("connection": a
	// WebSocket imposter's; others fall back on the port).
	Query      string
	Connection bool
	// CyclesPerFlow: a stub's responses cycle per flow (`cycles: "flow"`),
	// not per stub as mb's do.
	CyclesPerFlow bool
	Fleet         bool // contextScope "fleet": ids are shared by every imposter
	Policy        flow.Policy
	configured    bool
}

// The fields mb reads or prints (and riftgate's own): any other is
// ignored, as mb ignores it, and named in a warning.
var (
	imposterFields = set("protocol", "port", "host", "name", "recordRequests", "numberOfRequests",
		"requests", "stubs", "defaultResponse", "allowCORS", "key", "cert", "mutualAuth",
		"rejectUnauthorized", "ca", "ciphers", "endOfRequestResolver", "mode", "_links", "_rift")
	stubFields = set("predicates", "responses", "scenarioName", "requiredScenarioState", "newScenarioState",
		"name", "recordMatches", "_links", "matches")
	responseKinds  = []string{"is", "proxy", "inject", "fault", "wasm"}
	responseFields = set("is", "proxy", "inject", "fault", "wasm", "repeat", "behaviors", "_behaviors")
	isFields       = set("statusCode", "headers", "body", "_mode", "_proxyResponseTime", "data")
	faults         = set("CONNECTION_RESET_BY_PEER", "RANDOM_DATA_THEN_CLOSE")
)

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// ParseSpec decodes and validates one imposter definition. Every error is
// an *mberr.Error, or an mberr.List when mb would name several.
func ParseSpec(data []byte) (*Spec, error) {
	obj, _, err := canonicalObject(data)
	if err != nil {
		// An array or a scalar has no protocol, as mb sees it.
		return nil, mberr.New(mberr.BadData, "'protocol' is a required field")
	}
	s := &Spec{}
	if errs := parseHeader(s, obj); len(errs) > 0 {
		return nil, errs.Err()
	}
	if raw := obj.get("stubs"); raw != nil && !isNull(raw) {
		// Parts of obj, which is canonical already: each stub is read as
		// it is, not made canonical again.
		stubs, ok := message.Elements(raw)
		if !ok {
			// mb crashes on this; riftgate refuses it.
			return nil, mberr.New(mberr.BadData, "'stubs' must be an array")
		}
		var errs mberr.List
		for i, r := range stubs {
			st, err := parseStub(r, s.Protocol, true)
			if err != nil {
				errs = append(errs, mberr.All(err)...)
				continue
			}
			for _, f := range st.Ignored {
				s.Ignored = append(s.Ignored, fmt.Sprintf("stubs[%d].%s", i, f))
			}
			s.Stubs = append(s.Stubs, st)
		}
		if len(errs) > 0 {
			return nil, errs.Err()
		}
	}
	for _, f := range obj {
		if !imposterFields[f.Key] && !(s.IsWS() && wsFields[f.Key]) && !(s.IsGRPC() && grpcFields[f.Key]) {
			s.Ignored = append(s.Ignored, f.Key)
		}
	}
	if s.Custom != nil {
		s.Ignored = customIgnored(s.Ignored)
	}
	s.header = obj.without("stubs", "requests", "numberOfRequests", "_links")
	return s, nil
}

// canonicalObject reads data as JSON.parse would, and re-encodes each value
// as JSON.stringify prints it: a stored definition shows what mb would show
// (escapes, numbers, a repeated key's last value). It returns the
// canonical bytes too, a buffer of its own that obj's values are parts of.
func canonicalObject(data []byte) (object, []byte, error) {
	canon, err := message.CanonicalJSON(bytes.TrimSpace(data))
	if err != nil {
		return nil, nil, err
	}
	obj, err := decodeObject(canon)
	return obj, canon, err
}

func parseHeader(s *Spec, obj object) mberr.List {
	var errs mberr.List
	// mb checks the port, then the protocol, and reports both.
	if raw := obj.get("port"); raw != nil && !isNull(raw) {
		p, ok := message.WholeNumber(raw)
		if !ok || p <= 0 || p >= 65536 {
			errs = append(errs, mberr.New(mberr.BadData, "invalid value for 'port'"))
		}
		s.Port = int(p)
	}
	proto := obj.get("protocol")
	switch s.Protocol = jsString(proto); {
	case proto == nil || isNull(proto):
		errs = append(errs, mberr.New(mberr.BadData, "'protocol' is a required field"))
	case s.IsHTTP():
	case s.Protocol == "tcp" || s.Protocol == "smtp":
		if err := parseTCPSMTP(s, obj); err != nil {
			errs = append(errs, mberr.As(err))
		}
	case s.IsWS():
		if err := parseWS(s, obj); err != nil {
			errs = append(errs, mberr.As(err))
		}
	case s.IsGRPC():
		if err := parseGRPC(s, obj); err != nil {
			errs = append(errs, mberr.As(err))
		}
	default:
		if p, ok := customProtocol(s.Protocol); ok {
			parseCustom(s, p, obj)
			break
		}
		errs = append(errs, mberr.New(mberr.BadData, fmt.Sprintf("the %s protocol is not yet supported", s.Protocol)))
	}
	if len(errs) > 0 {
		return errs
	}
	// mb takes these as JavaScript would: a name is shown as given, flags
	// are truthy or not.
	s.Name = jsString(obj.get("name"))
	if raw := obj.get("host"); isString(raw) {
		s.Host = jsString(raw)
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"key", &s.Key}, {"cert", &s.Cert}} {
		if raw := obj.get(f.key); isString(raw) {
			*f.dst = jsString(raw)
		}
	}
	s.RecordRequests = truthy(obj.get("recordRequests"))
	s.AllowCORS = truthy(obj.get("allowCORS"))
	s.MutualAuth = truthy(obj.get("mutualAuth"))
	if raw := obj.get("defaultResponse"); truthy(raw) {
		s.DefaultResponse = raw
		if o, err := decodeObject(raw); err == nil {
			for _, f := range o {
				if !isFields[f.Key] {
					s.Ignored = append(s.Ignored, "defaultResponse."+f.Key)
				}
			}
		}
	}
	s.EndOfRequestResolver = obj.get("endOfRequestResolver")
	if raw := obj.get("_rift"); raw != nil {
		if err := parseRift(raw, s); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// HeaderJSON returns the imposter's definition without its stubs, as
// stored, with its port.
func (s *Spec) HeaderJSON() json.RawMessage { return mustJSON(s.header.with("port", raw(s.Port))) }

// JSON returns the stub as stored.
func (s *StubSpec) JSON() json.RawMessage { return s.json }

// ParseStub decodes and validates one stub, as mb's dry run would.
func ParseStub(data []byte) (*StubSpec, error) { return ParseStubFor(data, "") }

// ParseStubFor is ParseStub for a stub of an imposter of protocol, which
// mb's upcasting needs: a tcp proxy's old `to: {host, port}` becomes the
// tcp:// URL it stands for.
func ParseStubFor(data []byte, protocol string) (*StubSpec, error) {
	return parseStub(data, protocol, false)
}

// parseStub is ParseStubFor; canonical says data is canonical JSON
// already (a part of what canonicalObject made).
func parseStub(data []byte, protocol string, canonical bool) (*StubSpec, error) {
	var obj object
	var canon []byte
	var err error
	if canonical {
		obj, err = decodeObject(data)
	} else {
		obj, canon, err = canonicalObject(data)
	}
	if err != nil {
		return nil, mberr.New(mberr.BadData, "each stub must be a JSON object").WithSource(json.RawMessage(data))
	}
	src := func() json.RawMessage { return mustJSON(obj) } // for errors only
	st := &StubSpec{}
	if raw := obj.get("predicates"); raw != nil && !isNull(raw) {
		if err := elements(raw, &st.Predicates); err != nil {
			return nil, mberr.New(mberr.BadData, "'predicates' must be an array").WithSource(src())
		}
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"scenarioName", &st.ScenarioName}, {"requiredScenarioState", &st.RequiredScenarioState}, {"newScenarioState", &st.NewScenarioState}} {
		if err := str(obj, f.key, f.dst); err != nil {
			return nil, err
		}
	}
	if st.ScenarioName == "" && (st.RequiredScenarioState != "" || st.NewScenarioState != "") {
		return nil, mberr.New(mberr.BadData, "'requiredScenarioState' and 'newScenarioState' need a 'scenarioName'").WithSource(src())
	}
	var responses []json.RawMessage
	if elements(obj.get("responses"), &responses) != nil || len(responses) == 0 {
		return nil, mberr.New(mberr.BadData, "'responses' must be a non-empty array").WithSource(src())
	}
	var upcast []json.RawMessage
	var repeatErrs mberr.List
	for i, r := range responses {
		rs, ignored, err := parseResponse(r, protocol)
		if err != nil {
			repeatErrs = append(repeatErrs, mberr.All(err)...)
			continue
		}
		for _, f := range ignored {
			st.Ignored = append(st.Ignored, fmt.Sprintf("responses[%d].%s", i, f))
		}
		st.Responses = append(st.Responses, rs)
		upcast = append(upcast, rs.json)
	}
	if len(repeatErrs) > 0 {
		return nil, repeatErrs.Err()
	}
	// mb's dry run stops at the first response it cannot resolve.
	for _, rs := range st.Responses {
		if err := rs.check(); err != nil {
			return nil, err
		}
	}
	for _, f := range obj {
		if !stubFields[f.Key] {
			st.Ignored = append(st.Ignored, f.Key)
		}
	}
	if canon == nil {
		canon = data
	}
	st.share(stubDoc(canon, obj, responses, upcast, !canonical))
	return st, nil
}

// stubDoc is the stub's JSON as stored: obj (decoded from data, which is
// canonical) with its responses upcast and without `_links` and `matches`.
// Where that changes nothing it is data itself when owned (a buffer of
// its own with little room to spare: the stub keeps it), else a copy of it
// (a part of a whole imposter's JSON, not to be kept alive by one stub),
// as re-encoding would make it.
func stubDoc(data []byte, obj object, responses, upcast []json.RawMessage, owned bool) json.RawMessage {
	same := obj.get("_links") == nil && obj.get("matches") == nil
	for i := 0; same && i < len(responses); i++ {
		same = bytes.Equal(responses[i], upcast[i])
	}
	switch {
	case same && owned && cap(data)-len(data) <= len(data)/8:
		return data
	case same:
		return bytes.Clone(data)
	}
	return mustJSON(obj.with("responses", raw(upcast)).without("_links", "matches"))
}

// elements reads a JSON array's elements into dst, as parts of raw where
// the scanner reads it, else as json.Unmarshal does (and errs).
func elements(raw json.RawMessage, dst *[]json.RawMessage) error {
	if es, ok := message.Elements(raw); ok {
		*dst = es
		return nil
	}
	return json.Unmarshal(raw, dst)
}

// share makes doc the stub's JSON and its predicates and responses parts
// of it, in place of the copies they were parsed into.
func (st *StubSpec) share(doc json.RawMessage) {
	st.json = doc[:len(doc):len(doc)]
	m, ok := message.Within(doc, "predicates", "responses")
	if !ok {
		return
	}
	if preds, ok := message.Elements(m[0]); ok && len(preds) == len(st.Predicates) {
		st.Predicates = preds
	}
	if rs, ok := message.Elements(m[1]); ok && len(rs) == len(st.Responses) {
		for i, r := range st.Responses {
			r.share(rs[i])
		}
	}
}

// ResponseParts implements config.ResponseParts: each response as a part
// of the stub's JSON, and its *ResponseSpec.
func (st *StubSpec) ResponseParts() ([]json.RawMessage, []any) {
	raws, parsed := make([]json.RawMessage, len(st.Responses)), make([]any, len(st.Responses))
	for i, rs := range st.Responses {
		raws[i], parsed[i] = rs.json, rs
	}
	return raws, parsed
}

// share makes j, the response's JSON as stored, the one its Value and
// Behaviors are parts of.
func (rs *ResponseSpec) share(j json.RawMessage) {
	rs.json = j
	kind := rs.Kind
	if kind == "" || kind == "multiple" {
		return
	}
	if m, ok := message.Within(j, kind, "behaviors"); ok && m[0] != nil {
		rs.Value = m[0]
		if rs.Behaviors != nil {
			rs.Behaviors = m[1]
		}
	}
}

// parseResponse decodes one response, upcasting mb's legacy `_behaviors`
// object into the `behaviors` array (and `repeat`) as mb stores it.
func parseResponse(data []byte, protocol string) (*ResponseSpec, []string, error) {
	obj, err := decodeObject(bytes.TrimSpace(data))
	if err != nil {
		return nil, nil, mberr.New(mberr.BadData, "unrecognized response type").WithSource(json.RawMessage(data))
	}
	obj = upcastBehaviors(obj)
	if protocol == "tcp" {
		obj = upcastTCPProxy(obj)
	}
	rs := &ResponseSpec{}
	var kinds []string
	for _, k := range responseKinds {
		if v := obj.get(k); truthy(v) {
			kinds = append(kinds, k)
			if rs.Kind == "" {
				rs.Kind, rs.Value = k, v
			}
		}
	}
	if len(kinds) > 1 {
		rs.Kind = "multiple"
	}
	n, ok := repeatCount(obj.get("repeat"))
	if !ok {
		return nil, nil, mberr.New(mberr.BadData, `"repeat" field must be an integer greater than 0`).WithSource(mustJSON(obj))
	}
	rs.Repeat = n
	if raw := obj.get("behaviors"); raw != nil && !isNull(raw) {
		rs.Behaviors = raw
	}
	var ignored []string
	for _, f := range obj {
		if !responseFields[f.Key] || (f.Key == "_behaviors") {
			ignored = append(ignored, f.Key)
		}
	}
	if rs.Kind == "is" {
		if o, err := decodeObject(rs.Value); err == nil {
			for _, f := range o {
				if !isFields[f.Key] {
					ignored = append(ignored, "is."+f.Key)
				}
			}
		}
	}
	rs.share(mustJSON(obj))
	return rs, ignored, nil
}

// check is what mb's dry run finds wrong with a response.
func (rs *ResponseSpec) check() error {
	switch rs.Kind {
	case "":
		return mberr.New(mberr.BadData, "unrecognized response type").WithSource(rs.json)
	case "multiple":
		return mberr.New(mberr.BadData, "each response object must have only one response type").WithSource(rs.json)
	}
	return nil
}

// upcastTCPProxy is mb's compatibility.upcast of a tcp proxy: a `to`
// object with a truthy host and port becomes "tcp://host:port", each
// part as JavaScript's template string renders it.
func upcastTCPProxy(obj object) object {
	proxy, err := decodeObject(obj.get("proxy"))
	if err != nil {
		return obj
	}
	to, err := decodeObject(proxy.get("to"))
	if err != nil || !truthy(to.get("host")) || !truthy(to.get("port")) {
		return obj
	}
	url := "tcp://" + jsString(to.get("host")) + ":" + jsString(to.get("port"))
	return obj.with("proxy", mustJSON(proxy.with("to", raw(url))))
}

// upcastBehaviors is mb's compatibility.upcast for one response: a
// shellTransform string in `_behaviors` becomes an array, and `_behaviors`
// becomes the `behaviors` array in mb's old execution order, with `repeat`
// moved beside it, when the response has neither `behaviors` nor `repeat`.
func upcastBehaviors(obj object) object {
	legacy, err := decodeObject(obj.get("_behaviors"))
	if err != nil {
		return obj
	}
	if st := legacy.get("shellTransform"); st != nil && isString(st) {
		legacy = legacy.with("shellTransform", raw([]json.RawMessage{st}))
		obj = obj.with("_behaviors", mustJSON(legacy))
	}
	if obj.get("behaviors") != nil || obj.get("repeat") != nil {
		return obj
	}
	var behaviors []json.RawMessage
	for _, key := range []string{"wait", "lookup", "copy", "shellTransform", "decorate"} {
		v := legacy.get(key)
		if v == nil {
			continue
		}
		var each []json.RawMessage
		if json.Unmarshal(v, &each) != nil {
			each = []json.RawMessage{v}
		}
		for _, e := range each {
			behaviors = append(behaviors, mustJSON(object{{Key: key, Value: e}}))
		}
	}
	if behaviors == nil {
		behaviors = []json.RawMessage{}
	}
	out := object{}
	for _, f := range obj {
		if f.Key != "_behaviors" {
			out = append(out, f)
		}
	}
	if r := legacy.get("repeat"); r != nil {
		out = append(out, field{Key: "repeat", Value: r})
	}
	return append(out, field{Key: "behaviors", Value: raw(behaviors)})
}

func parseRift(raw json.RawMessage, s *Spec) *mberr.Error {
	fs := &s.Flow
	var rift struct {
		ProxyKeepAlive      bool         `json:"proxyKeepAlive"`
		MaxRecordedRequests *json.Number `json:"maxRecordedRequests"`
		FlowState           *struct {
			FlowIDSource string `json:"flowIdSource"`
			ContextScope string `json:"contextScope"`
			TTLSeconds   *int64 `json:"ttlSeconds"`
			Durability   string `json:"durability"`
			Cycles       string `json:"cycles"`
		} `json:"flowState"`
	}
	// _rift is riftgate's own, so it is checked strictly: a typo here
	// would silently change where state is kept.
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&rift); err != nil {
		return mberr.New(mberr.BadData, "invalid _rift: "+err.Error()).WithSource(raw)
	}
	s.ProxyKeepAlive = rift.ProxyKeepAlive
	if n := rift.MaxRecordedRequests; n != nil {
		v, err := n.Int64()
		if err != nil || v < 0 {
			return mberr.New(mberr.BadData, "_rift.maxRecordedRequests must be a whole number of requests, 0 for no cap").WithSource(raw)
		}
		s.MaxRecorded = &v
	}
	f := rift.FlowState
	if f == nil {
		return nil
	}
	fs.configured = true
	switch src := f.FlowIDSource; {
	case src == "" || src == "imposter_port":
	case strings.HasPrefix(src, "header:") && len(src) > len("header:"):
		fs.Header = src[len("header:"):]
	case strings.HasPrefix(src, "metadata:") && len(src) > len("metadata:"):
		// A gRPC request's metadata are its headers.
		fs.Header = src[len("metadata:"):]
	case strings.HasPrefix(src, "query:") && len(src) > len("query:"):
		fs.Query = src[len("query:"):]
	case src == "connection":
		fs.Connection = true
	default:
		return mberr.New(mberr.BadData, `_rift.flowState.flowIdSource must be "imposter_port", "header:<name>", "metadata:<name>", "query:<name>" or "connection"`).WithSource(raw)
	}
	switch f.Cycles {
	case "", "stub":
	case "flow":
		fs.CyclesPerFlow = true
	default:
		return mberr.New(mberr.BadData, `_rift.flowState.cycles must be "stub" or "flow"`).WithSource(raw)
	}
	switch f.ContextScope {
	case "", "imposter":
	case "fleet":
		fs.Fleet = true
	default:
		return mberr.New(mberr.BadData, `_rift.flowState.contextScope must be "imposter" or "fleet"`).WithSource(raw)
	}
	if f.TTLSeconds != nil {
		if *f.TTLSeconds <= 0 || *f.TTLSeconds > math.MaxInt32 {
			return mberr.New(mberr.BadData, "_rift.flowState.ttlSeconds must be a positive number of seconds").WithSource(raw)
		}
		fs.Policy.TTL = secs(*f.TTLSeconds)
	}
	switch f.Durability {
	case "", "memory":
		fs.Policy.Durability = flow.Memory
	case "async":
		fs.Policy.Durability = flow.Async
	case "sync":
		fs.Policy.Durability = flow.Sync
	default:
		return mberr.New(mberr.BadData, `_rift.flowState.durability must be "memory", "async" or "sync"`).WithSource(raw)
	}
	return nil
}

// str reads riftgate's own string fields (scenarios), which are checked.
func str(obj object, key string, dst *string) error {
	raw := obj.get(key)
	if raw == nil || isNull(raw) {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return mberr.New(mberr.BadData, fmt.Sprintf("'%s' must be a string", key))
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func isString(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '"'
}

// truthy is JavaScript's Boolean(v) for a JSON value; a missing one is false.
func truthy(raw json.RawMessage) bool {
	switch string(bytes.TrimSpace(raw)) {
	case "", "null", "false", "0", `""`, "-0":
		return false
	}
	return true
}

// jsString is String(v) for a JSON value; a missing or null one is "".
func jsString(raw json.RawMessage) string {
	if raw == nil || isNull(raw) {
		return ""
	}
	v, err := message.DecodeJS(raw)
	if err != nil {
		return string(raw)
	}
	return message.JSString(v)
}

// repeatCount validates repeat as mb does (a number or a string, not zero
// or less) and counts it as mb's `for (j = 0; j < repeat; j++)` does: a
// missing or falsy repeat is once, a fraction rounds up, and a string
// that is not a number repeats nothing.
func repeatCount(raw json.RawMessage) (int, bool) {
	if raw == nil {
		return 1, true
	}
	v, err := message.DecodeJS(raw)
	if err != nil {
		return 0, false
	}
	var n float64
	switch v := v.(type) {
	case float64:
		if v <= 0 {
			return 0, false
		}
		n = v
	case string:
		if p, ok := message.ParseInt(v); ok && p <= 0 {
			return 0, false
		}
		if v == "" {
			return 1, true
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f <= 0 {
			return 0, true
		}
		n = f
	default:
		return 0, false
	}
	if n > maxCycle {
		n = maxCycle
	}
	return int(math.Ceil(n)), true
}

// isToken reports whether a value is a string holding a behavior token
// ("${code}"), which copy or lookup fills in before the response is sent.
func isToken(raw json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && strings.Contains(s, "${")
}

// parseTCPSMTP reads what only tcp and smtp imposters have: tcp's mode,
// checked as mb's tcpValidator checks it (any value but text and binary
// is refused; a falsy one is text).
func parseTCPSMTP(s *Spec, obj object) error {
	if s.Protocol != "tcp" {
		return nil
	}
	s.Mode = "text"
	raw := obj.get("mode")
	if raw == nil || message.Falsy(raw) {
		return nil
	}
	var m string
	if json.Unmarshal(raw, &m) != nil || (m != "text" && m != "binary") {
		return mberr.New(mberr.BadData, "'mode' must be one of ['text', 'binary']")
	}
	s.Mode = m
	return nil
}

// IsHTTP reports whether the imposter speaks http or https (its responses
// have a status, headers and a body, not a tcp data).
func (s *Spec) IsHTTP() bool { return s.Protocol == "http" || s.Protocol == "https" }
