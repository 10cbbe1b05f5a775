package loadtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Scenario is a request sequence that every virtual user runs in order, over
// and over, until the run ends. It is read from a JSON file (see README.md).
type Scenario struct {
	Name string `json:"name,omitempty"`
	// FlowIDHeader names the header that carries the virtual user's flow id;
	// "" means X-Flow-Id. Set NoFlowHeader to send none.
	FlowIDHeader string `json:"flowIdHeader,omitempty"`
	NoFlowHeader bool   `json:"noFlowHeader,omitempty"`
	// FlowIDPrefix starts every flow id; "" means a prefix unique to the run,
	// so that a rerun does not meet the flows of the previous one.
	FlowIDPrefix string `json:"flowIdPrefix,omitempty"`
	// FlowPerIteration gives a virtual user a new flow id each time it starts
	// the sequence again, instead of one flow id for the whole run.
	FlowPerIteration bool   `json:"flowPerIteration,omitempty"`
	Steps            []Step `json:"steps"`
	// Ramp, when set, is the run's load profile (see Ramp); the -ramp-rate
	// and -ramp-users flags take its place.
	Ramp *Ramp `json:"ramp,omitempty"`
	// Thresholds are pass/fail conditions on the whole run, or on a step
	// named by a STEP: prefix (see threshold).
	Thresholds []string `json:"thresholds,omitempty"`
}

// Step is one request of a scenario. Path, header values and body may use
// the template variables {{flowId}}, {{vu}} and {{iter}}.
type Step struct {
	Name    string            `json:"name,omitempty"`
	Method  string            `json:"method,omitempty"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers,omitempty"`
	// Body is a JSON string (sent as is) or any other JSON value (sent as
	// its compact JSON text).
	Body json.RawMessage `json:"body,omitempty"`
	// ExpectStatus, when non-zero, makes any other status count as an error
	// of kind "status".
	ExpectStatus int `json:"expectStatus,omitempty"`
	// Checks are assertions on the step's responses (see check), counted
	// apart from errors.
	Checks []string `json:"checks,omitempty"`
	// Thresholds are conditions on this step's requests alone.
	Thresholds []string `json:"thresholds,omitempty"`
}

// Limits of a scenario file: it is read whole, and every step is compiled
// for every virtual user.
const (
	maxScenarioBytes = 1 << 20
	maxSteps         = 1000
)

// ParseScenario reads and validates a scenario file's JSON.
func ParseScenario(data []byte) (*Scenario, error) {
	if len(data) > maxScenarioBytes {
		return nil, fmt.Errorf("scenario: %d bytes, more than the %d allowed", len(data), maxScenarioBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Scenario
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	if dec.More() {
		return nil, errors.New("scenario: trailing data after the JSON object")
	}
	if _, err := s.compile(); err != nil {
		return nil, err
	}
	return &s, nil
}

// compiledStep is a Step with its templates split and its body decoded, ready
// to be rendered without allocating.
type compiledStep struct {
	method       []byte
	path         tmpl
	headers      []compiledHeader
	body         tmpl
	expectStatus int
	checks       []*check
	checkBase    int // the index of checks[0] among all the scenario's checks
}

type compiledHeader struct {
	key   []byte
	value tmpl
}

func (s *Scenario) flowHeader() string {
	switch {
	case s.NoFlowHeader:
		return ""
	case s.FlowIDHeader == "":
		return "X-Flow-Id"
	default:
		return s.FlowIDHeader
	}
}

// compile checks the scenario and splits its steps' templates. extra are
// checks every step makes besides its own (the -check flag).
func (s *Scenario) compile(extra ...string) ([]compiledStep, error) {
	if len(s.Steps) == 0 {
		return nil, errors.New("scenario: no steps")
	}
	if len(s.Steps) > maxSteps {
		return nil, fmt.Errorf("scenario: %d steps, more than the %d allowed", len(s.Steps), maxSteps)
	}
	if h := s.flowHeader(); h != "" && !isToken(h) {
		return nil, fmt.Errorf("scenario: flowIdHeader %q is not a valid header name", h)
	}
	if !validFlowText(s.FlowIDPrefix) {
		return nil, fmt.Errorf("scenario: flowIdPrefix %q: only letters, digits and -_.: are allowed", s.FlowIDPrefix)
	}
	if s.Ramp != nil {
		if err := s.Ramp.validate(); err != nil {
			return nil, fmt.Errorf("scenario: %w", err)
		}
	}
	out := make([]compiledStep, len(s.Steps))
	nChecks := 0
	for i, st := range s.Steps {
		c, err := st.compile(extra)
		if err != nil {
			return nil, fmt.Errorf("scenario: step %d (%s): %w", i+1, st.Name, err)
		}
		c.checkBase = nChecks
		nChecks += len(c.checks)
		out[i] = c
	}
	if _, err := s.thresholds(nil); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	return out, nil
}

func (st Step) compile(extra []string) (compiledStep, error) {
	var c compiledStep
	method := st.Method
	if method == "" {
		method = "GET"
	}
	if !isToken(method) {
		return c, fmt.Errorf("method %q is not an HTTP token", method)
	}
	c.method = []byte(method)
	if !strings.HasPrefix(st.Path, "/") {
		return c, fmt.Errorf("path %q must start with /", st.Path)
	}
	var err error
	if c.path, err = parseTemplate(st.Path); err != nil {
		return c, fmt.Errorf("path: %w", err)
	}
	for _, p := range c.path {
		if strings.IndexFunc(p.lit, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
			return c, fmt.Errorf("path %q contains whitespace or a control character", st.Path)
		}
	}
	for k, v := range st.Headers {
		if !isToken(k) {
			return c, fmt.Errorf("header name %q is not an HTTP token", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return c, fmt.Errorf("header %s: value contains a line break or NUL", k)
		}
		t, err := parseTemplate(v)
		if err != nil {
			return c, fmt.Errorf("header %s: %w", k, err)
		}
		c.headers = append(c.headers, compiledHeader{key: []byte(k), value: t})
	}
	// Map order is random; a fixed order keeps requests identical run to run.
	sortHeaders(c.headers)
	body, err := decodeBody(st.Body)
	if err != nil {
		return c, err
	}
	if c.body, err = parseTemplate(body); err != nil {
		return c, fmt.Errorf("body: %w", err)
	}
	if st.ExpectStatus != 0 && (st.ExpectStatus < 100 || st.ExpectStatus > 599) {
		return c, fmt.Errorf("expectStatus %d is not an HTTP status", st.ExpectStatus)
	}
	c.expectStatus = st.ExpectStatus
	if c.checks, err = parseChecks(append(slices.Clip(st.Checks), extra...)); err != nil {
		return c, err
	}
	if len(c.checks) > maxChecksPerStep {
		return c, fmt.Errorf("%d checks, more than the %d allowed", len(c.checks), maxChecksPerStep)
	}
	return c, nil
}

// thresholds compiles the scenario's thresholds, its steps' own, and extra
// (the -threshold flag), in that order.
func (s *Scenario) thresholds(extra []string) ([]*threshold, error) {
	var out []*threshold
	add := func(texts []string, step int) error {
		for _, text := range texts {
			t, err := parseThreshold(text, s.Steps)
			if err != nil {
				return err
			}
			if step >= 0 {
				if t.step >= 0 && t.step != step {
					return fmt.Errorf("step %d's threshold %q names another step", step+1, text)
				}
				t.step = step
			}
			out = append(out, t)
		}
		return nil
	}
	if err := add(s.Thresholds, -1); err != nil {
		return nil, err
	}
	for i, st := range s.Steps {
		if err := add(st.Thresholds, i); err != nil {
			return nil, err
		}
	}
	if err := add(extra, -1); err != nil {
		return nil, err
	}
	return out, nil
}

func sortHeaders(h []compiledHeader) {
	for i := 1; i < len(h); i++ {
		for j := i; j > 0 && bytes.Compare(h[j].key, h[j-1].key) < 0; j-- {
			h[j], h[j-1] = h[j-1], h[j]
		}
	}
}

func decodeBody(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("body: %w", err)
		}
		return s, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", fmt.Errorf("body: %w", err)
	}
	return buf.String(), nil
}

// isToken reports whether s is an RFC 9110 token (method, header name).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validFlowText keeps flow ids safe to put in a path, a header and JSON.
func validFlowText(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.:", c) >= 0) {
			return false
		}
	}
	return len(s) <= 64
}

// tmpl is a template split into literal text and variables, so rendering is
// appending into a reused buffer.
type tmpl []tmplPart

type tmplPart struct {
	lit string
	v   tmplVar // varNone for a literal
}

type tmplVar uint8

const (
	varNone tmplVar = iota
	varFlowID
	varVU
	varIter
)

var tmplVars = map[string]tmplVar{"flowId": varFlowID, "vu": varVU, "iter": varIter}

// parseTemplate splits s at {{name}}. A "{{" that does not open a known
// variable is an error rather than literal text, so typos show at once.
func parseTemplate(s string) (tmpl, error) {
	var t tmpl
	for s != "" {
		i := strings.Index(s, "{{")
		if i < 0 {
			t = append(t, tmplPart{lit: s})
			break
		}
		if i > 0 {
			t = append(t, tmplPart{lit: s[:i]})
		}
		rest := s[i+2:]
		j := strings.Index(rest, "}}")
		if j < 0 {
			return nil, fmt.Errorf("unclosed {{ at offset %d", i)
		}
		name := strings.TrimSpace(rest[:j])
		v, ok := tmplVars[name]
		if !ok {
			return nil, fmt.Errorf("unknown template variable %q (known: flowId, vu, iter)", name)
		}
		t = append(t, tmplPart{v: v})
		s = rest[j+2:]
	}
	return t, nil
}

// vars are the values of one virtual user's current iteration.
type vars struct {
	flowID []byte
	vu     int64
	iter   int64
}

func (t tmpl) render(dst []byte, v *vars) []byte {
	for _, p := range t {
		switch p.v {
		case varNone:
			dst = append(dst, p.lit...)
		case varFlowID:
			dst = append(dst, v.flowID...)
		case varVU:
			dst = strconv.AppendInt(dst, v.vu, 10)
		case varIter:
			dst = strconv.AppendInt(dst, v.iter, 10)
		}
	}
	return dst
}

// uses reports whether t contains variable v.
func (t tmpl) uses(v tmplVar) bool {
	for _, p := range t {
		if p.v == v {
			return true
		}
	}
	return false
}

// perIteration reports whether the step's bytes change from one iteration
// of a virtual user to the next; if not, they can be built once.
func (c *compiledStep) perIteration() bool {
	if c.path.uses(varIter) || c.body.uses(varIter) {
		return true
	}
	for _, h := range c.headers {
		if h.value.uses(varIter) {
			return true
		}
	}
	return false
}
