package imposter

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"regexp"
	"time"

	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
)

// isFieldsRaw is an `is` object with its fields still raw.
type isFieldsRaw struct {
	StatusCode json.RawMessage `json:"statusCode"`
	Headers    json.RawMessage `json:"headers"`
	Body       json.RawMessage `json:"body"`
	Mode       string          `json:"_mode"`
}

var nonBase64 = regexp.MustCompile(`[^A-Za-z0-9=+/]+`)

// buildIs computes the response an `is` gives, with the imposter's
// defaultResponse filling what the stub leaves out, as mb's postProcess
// does: each of statusCode, headers (as a whole), body and _mode falls back
// on its own.
func buildIs(stubIs, defaults json.RawMessage) (*message.Response, bool, error) {
	var s, d isFieldsRaw
	if len(stubIs) > 0 {
		if err := json.Unmarshal(stubIs, &s); err != nil {
			return nil, false, err
		}
	}
	if len(defaults) > 0 {
		if err := json.Unmarshal(defaults, &d); err != nil {
			return nil, false, err
		}
	}
	r := &message.Response{StatusCode: 200}
	if v := pick(s.StatusCode, d.StatusCode); v != nil {
		if code, ok := statusCode(v); ok {
			r.StatusCode = code
		}
	}
	if v := pick(s.Headers, d.Headers); v != nil {
		h, err := headerPairs(v)
		if err != nil {
			return nil, false, err
		}
		r.Headers = h
	}
	mode := s.Mode
	if mode == "" {
		mode = d.Mode
	}
	r.Binary = mode == "binary"
	body, isJSON := bodyBytes(pick(s.Body, d.Body))
	if r.Binary {
		dec, err := base64.StdEncoding.DecodeString(nonBase64.ReplaceAllString(string(body), ""))
		if err != nil {
			return nil, false, errors.New("binary body is not valid base64")
		}
		body, isJSON = dec, false
	}
	r.Body = body
	return r, isJSON, nil
}

// buildIs computes the response an `is` gives in the imposter's protocol.
func (imp *Imposter) buildIs(stubIs, defaults json.RawMessage) (*message.Response, bool, error) {
	if imp.spec.Protocol == "tcp" {
		// A tcp response is its own data; the defaultResponse's fills an
		// empty one only when it is written, as mb's tcp server does.
		if stubIs == nil {
			stubIs = defaults
		}
		return buildData(stubIs, imp.spec.Mode == "binary"), false, nil
	}
	return buildIs(stubIs, defaults)
}

// pick returns the stub's value unless it is missing or falsy, in which case
// the default's, as JavaScript's `a || b` would.
func pick(v, def json.RawMessage) json.RawMessage {
	if falsy(v) {
		if falsy(def) {
			return nil
		}
		return def
	}
	return v
}

func falsy(v json.RawMessage) bool {
	switch string(bytes.TrimSpace(v)) {
	case "", "null", "false", "0", `""`:
		return true
	}
	return false
}

// bodyBytes renders a body as mb sends it: strings as they are, objects and
// arrays as JSON.stringify(body, null, 4), other scalars as their text.
func bodyBytes(raw json.RawMessage) (b []byte, isJSON bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, false
	}
	switch raw[0] {
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		return []byte(s), false
	case '{', '[':
		return indentJSON(raw, "    "), true
	default:
		return bytes.Clone(raw), false
	}
}

// indentJSON re-indents JSON the way JSON.stringify does (no HTML escaping,
// "key": value).
func indentJSON(raw json.RawMessage, indent string) []byte {
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", indent); err != nil {
		return bytes.Clone(raw)
	}
	return out.Bytes()
}

// headerPairs reads a headers object whose values are strings, numbers or
// arrays of them.
func headerPairs(raw json.RawMessage) ([]message.KV, error) {
	if bytes.TrimSpace(raw)[0] != '{' {
		return nil, errors.New("headers must be an object")
	}
	return message.ReadMultiMap(raw)
}

// secs converts whole seconds to a duration.
func secs(n int64) time.Duration { return time.Duration(n) * time.Second }

// BuildResponse computes the response an `is`-shaped object gives in the
// imposter's protocol (what an inject script returns), with its
// defaultResponse filling what it leaves out.
func (imp *Imposter) BuildResponse(is json.RawMessage) (*message.Response, error) {
	r, _, err := imp.buildIs(is, imp.spec.DefaultResponse)
	if err != nil {
		return nil, mberr.New(mberr.BadData, "invalid response: "+err.Error()).WithSource(is)
	}
	return r, nil
}
