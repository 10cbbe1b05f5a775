package imposter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
)

// Spec is one imposter definition, validated. It keeps the JSON it came from
// so that GET shows what was stored, field for field.
type Spec struct {
	Protocol       string
	Port           int // 0 until bound when none was given
	Host           string
	Name           string
	RecordRequests bool
	AllowCORS      bool
	Key, Cert      string
	MutualAuth     bool
	// Mode is a tcp imposter's "text" or "binary" (its data is base64).
	Mode  string
	Flow  FlowSpec
	Stubs []*StubSpec
	// DefaultResponse holds the `is` fields used when no stub matches.
	DefaultResponse json.RawMessage
	// EndOfRequestResolver is kept for rendering; http imposters never use it.
	EndOfRequestResolver json.RawMessage

	header object // the definition without stubs and runtime fields
}

// StubSpec is one stub as stored.
type StubSpec struct {
	// ID is the stub's id in the configuration (0 for a stub not stored
	// yet): stable across edits of other stubs.
	ID uint64
	// Refs are the modules the stub names, as the configuration resolved
	// them when the stub was made.
	Refs                  config.Refs
	Predicates            []json.RawMessage
	Responses             []*ResponseSpec
	ScenarioName          string
	RequiredScenarioState string
	NewScenarioState      string

	obj object
}

// ResponseSpec is one entry of a stub's responses.
type ResponseSpec struct {
	Kind      string          // is, proxy, inject, fault or wasm
	Value     json.RawMessage // the value under Kind
	Repeat    int
	Behaviors json.RawMessage // the `behaviors` array, or the legacy `_behaviors` object

	obj object
}

// FlowSpec is `_rift.flowState`: where a request's flow id comes from and
// how its writes are kept.
type FlowSpec struct {
	Header     string // "" means the imposter's port is the flow id
	Fleet      bool   // contextScope "fleet": ids are shared by every imposter
	Policy     flow.Policy
	configured bool
}

// Known fields, so that a typo is an error rather than a silently ignored
// setting. They include every field mb itself prints, so `mb save` files load.
var (
	imposterFields = set("protocol", "port", "host", "name", "recordRequests", "numberOfRequests",
		"requests", "stubs", "defaultResponse", "allowCORS", "key", "cert", "mutualAuth",
		"rejectUnauthorized", "ca", "ciphers", "endOfRequestResolver", "_links", "_rift", "mode")
	stubFields     = set("predicates", "responses", "scenarioName", "requiredScenarioState", "newScenarioState", "_links", "matches")
	responseKinds  = set("is", "proxy", "inject", "fault", "wasm")
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
// an *mberr.Error in mb's words.
func ParseSpec(data []byte) (*Spec, error) {
	data = bytes.TrimSpace(data)
	obj, err := decodeObject(data)
	if err != nil {
		return nil, mberr.New(mberr.BadData, "imposter must be a JSON object: "+err.Error())
	}
	if err := unknownFields(obj, imposterFields, "imposter"); err != nil {
		return nil, err
	}
	s := &Spec{}
	if err := parseHeader(s, obj); err != nil {
		return nil, err
	}
	if raw := obj.get("stubs"); raw != nil && !isNull(raw) {
		var stubs []json.RawMessage
		if err := json.Unmarshal(raw, &stubs); err != nil {
			return nil, mberr.New(mberr.BadData, "'stubs' must be an array")
		}
		for _, r := range stubs {
			st, err := ParseStub(r)
			if err != nil {
				return nil, err
			}
			s.Stubs = append(s.Stubs, st)
		}
	}
	s.header = obj.without("stubs", "requests", "numberOfRequests", "_links")
	return s, nil
}

func parseHeader(s *Spec, obj object) error {
	if err := str(obj, "protocol", &s.Protocol); err != nil {
		return err
	}
	switch s.Protocol {
	case "":
		return mberr.New(mberr.BadData, "'protocol' is a required field")
	case "http", "https":
	case "tcp", "smtp":
		if err := parseTCPSMTP(s, obj); err != nil {
			return err
		}
	default:
		return mberr.New(mberr.BadData, fmt.Sprintf("the %s protocol is not yet supported", s.Protocol))
	}
	if raw := obj.get("port"); raw != nil && !isNull(raw) {
		p, ok := message.WholeNumber(raw)
		if !ok || p <= 0 || p >= 65536 {
			return mberr.New(mberr.BadData, "invalid value for 'port'")
		}
		s.Port = int(p)
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"host", &s.Host}, {"name", &s.Name}, {"key", &s.Key}, {"cert", &s.Cert}} {
		if err := str(obj, f.key, f.dst); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		key string
		dst *bool
	}{{"recordRequests", &s.RecordRequests}, {"allowCORS", &s.AllowCORS}, {"mutualAuth", &s.MutualAuth}} {
		if err := boolean(obj, f.key, f.dst); err != nil {
			return err
		}
	}
	if raw := obj.get("defaultResponse"); raw != nil && !isNull(raw) {
		if err := checkIs(raw); err != nil {
			return err
		}
		s.DefaultResponse = raw
	}
	s.EndOfRequestResolver = obj.get("endOfRequestResolver")
	if raw := obj.get("_rift"); raw != nil {
		if err := parseRift(raw, &s.Flow); err != nil {
			return err
		}
	}
	return nil
}

// HeaderJSON returns the imposter's definition without its stubs, as
// stored, with its port.
func (s *Spec) HeaderJSON() json.RawMessage { return mustJSON(s.header.with("port", raw(s.Port))) }

// JSON returns the stub as stored.
func (s *StubSpec) JSON() json.RawMessage { return mustJSON(s.obj) }

// ParseStub decodes and validates one stub.
func ParseStub(data []byte) (*StubSpec, error) {
	obj, err := decodeObject(bytes.TrimSpace(data))
	if err != nil {
		return nil, mberr.New(mberr.BadData, "each stub must be a JSON object").WithSource(json.RawMessage(data))
	}
	if err := unknownFields(obj, stubFields, "stub"); err != nil {
		return nil, err
	}
	st := &StubSpec{}
	if raw := obj.get("predicates"); raw != nil && !isNull(raw) {
		if err := json.Unmarshal(raw, &st.Predicates); err != nil {
			return nil, mberr.New(mberr.BadData, "'predicates' must be an array").WithSource(json.RawMessage(data))
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
		return nil, mberr.New(mberr.BadData, "'requiredScenarioState' and 'newScenarioState' need a 'scenarioName'").WithSource(json.RawMessage(data))
	}
	raw := obj.get("responses")
	var responses []json.RawMessage
	if raw == nil || isNull(raw) {
		// mb gives a stub without responses one empty `is`.
		responses = []json.RawMessage{json.RawMessage(`{"is":{}}`)}
		obj = obj.with("responses", json.RawMessage(`[{"is":{}}]`))
	} else if err := json.Unmarshal(raw, &responses); err != nil || len(responses) == 0 {
		return nil, mberr.New(mberr.BadData, "'responses' must be a non-empty array").WithSource(json.RawMessage(data))
	}
	for _, r := range responses {
		rs, err := ParseResponse(r)
		if err != nil {
			return nil, err
		}
		st.Responses = append(st.Responses, rs)
	}
	st.obj = obj.without("_links", "matches")
	return st, nil
}

// ParseResponse decodes and validates one response.
func ParseResponse(data []byte) (*ResponseSpec, error) {
	src := json.RawMessage(data)
	obj, err := decodeObject(bytes.TrimSpace(data))
	if err != nil {
		return nil, mberr.New(mberr.BadData, "each response must be a JSON object").WithSource(src)
	}
	rs := &ResponseSpec{Repeat: 1, obj: obj}
	for _, f := range obj {
		if !responseFields[f.Key] {
			return nil, mberr.New(mberr.BadData, "unrecognized response type").WithSource(src)
		}
		if responseKinds[f.Key] {
			if rs.Kind != "" {
				return nil, mberr.New(mberr.BadData, "each response object must have only one response type").WithSource(src)
			}
			rs.Kind, rs.Value = f.Key, f.Value
		}
	}
	if rs.Kind == "" {
		rs.Kind, rs.Value = "is", json.RawMessage(`{}`)
	}
	switch rs.Kind {
	case "is":
		if err := checkIs(rs.Value); err != nil {
			return nil, err
		}
	case "fault":
		var f string
		if json.Unmarshal(rs.Value, &f) != nil || !faults[f] {
			return nil, mberr.New(mberr.BadData, "fault must be CONNECTION_RESET_BY_PEER or RANDOM_DATA_THEN_CLOSE").WithSource(src)
		}
	}
	if raw := obj.get("repeat"); raw != nil {
		n, ok := repeatCount(raw)
		if !ok {
			return nil, mberr.New(mberr.BadData, `"repeat" field must be an integer greater than 0`).WithSource(src)
		}
		rs.Repeat = n
	}
	if raw := obj.get("behaviors"); raw != nil && !isNull(raw) {
		rs.Behaviors = raw
	} else if raw := obj.get("_behaviors"); raw != nil && !isNull(raw) {
		rs.Behaviors = raw
		// The legacy object may carry repeat, as mb's compatibility layer reads it.
		var legacy struct {
			Repeat json.RawMessage `json:"repeat"`
		}
		if json.Unmarshal(raw, &legacy) == nil && legacy.Repeat != nil && obj.get("repeat") == nil {
			n, ok := repeatCount(legacy.Repeat)
			if !ok {
				return nil, mberr.New(mberr.BadData, `"repeat" field must be an integer greater than 0`).WithSource(src)
			}
			rs.Repeat = n
		}
	}
	return rs, nil
}

// checkIs validates the fields of an `is` response (or a defaultResponse).
func checkIs(raw json.RawMessage) error {
	obj, err := decodeObject(raw)
	if err != nil {
		return mberr.New(mberr.BadData, "'is' must be a JSON object").WithSource(raw)
	}
	for _, f := range obj {
		if !isFields[f.Key] {
			return mberr.New(mberr.BadData, fmt.Sprintf("unrecognized field %q in response", f.Key)).WithSource(raw)
		}
	}
	if v := obj.get("statusCode"); v != nil && !isNull(v) && !isToken(v) {
		if _, ok := message.StatusCode(v); !ok {
			return mberr.New(mberr.BadData, "statusCode must be a number between 100 and 999").WithSource(raw)
		}
	}
	if v := obj.get("headers"); v != nil && !isNull(v) {
		if _, err := message.ResponseHeaders(v); err != nil {
			return mberr.New(mberr.BadData, "headers must be an object of strings").WithSource(raw)
		}
	}
	if v := obj.get("_mode"); v != nil && !isNull(v) {
		var m string
		if json.Unmarshal(v, &m) != nil || (m != "text" && m != "binary") {
			return mberr.New(mberr.BadData, `_mode must be "text" or "binary"`).WithSource(raw)
		}
	}
	return nil
}

func parseRift(raw json.RawMessage, fs *FlowSpec) error {
	var rift struct {
		FlowState *struct {
			FlowIDSource string `json:"flowIdSource"`
			ContextScope string `json:"contextScope"`
			TTLSeconds   *int64 `json:"ttlSeconds"`
			Durability   string `json:"durability"`
		} `json:"flowState"`
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&rift); err != nil {
		return mberr.New(mberr.BadData, "invalid _rift: "+err.Error()).WithSource(raw)
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
	default:
		return mberr.New(mberr.BadData, `_rift.flowState.flowIdSource must be "imposter_port" or "header:<name>"`).WithSource(raw)
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

func unknownFields(obj object, known map[string]bool, what string) error {
	for _, f := range obj {
		if !known[f.Key] {
			return mberr.New(mberr.BadData, fmt.Sprintf("unrecognized field %q in %s", f.Key, what))
		}
	}
	return nil
}

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

func boolean(obj object, key string, dst *bool) error {
	raw := obj.get(key)
	if raw == nil || isNull(raw) {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return mberr.New(mberr.BadData, fmt.Sprintf("'%s' must be true or false", key))
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func repeatCount(raw json.RawMessage) (int, bool) {
	n, ok := message.WholeNumber(raw)
	if !ok || n <= 0 || n > math.MaxInt32 {
		return 0, false
	}
	return int(n), true
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
