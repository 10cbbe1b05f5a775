package imposter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
)

// buildIs computes the response an `is` gives, with the imposter's
// defaultResponse filling what the stub leaves out, as mb's postProcess
// does: each of statusCode, headers (as a whole), body and _mode falls back
// on its own. What mb accepts but cannot send (a status that is no status,
// headers that are no object) becomes the 500 mb answers instead.
func buildIs(stubIs, defaults json.RawMessage) (*message.Response, bool, error) {
	stubIs, defaults = objectOrNothing(stubIs), objectOrNothing(defaults)
	if r := unsendable(stubIs, defaults); r != nil {
		return r, false, nil
	}
	s, err := message.ParseResponseFields(stubIs)
	if err != nil {
		return nil, false, err
	}
	d, err := message.ParseResponseFields(defaults)
	if err != nil {
		return nil, false, err
	}
	return s.Response(&d)
}

// objectOrNothing is raw when it is a JSON object: an `is` that is not
// one has no fields.
func objectOrNothing(raw json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '{' {
		return raw
	}
	return nil
}

// unsendable is mb's answer to an `is` Node refuses to write, or nil.
func unsendable(stubIs, defaults json.RawMessage) *message.Response {
	var s, d struct{ StatusCode, Headers json.RawMessage }
	_ = json.Unmarshal(stubIs, &s)
	_ = json.Unmarshal(defaults, &d)
	if v := pick(s.StatusCode, d.StatusCode); v != nil {
		if _, ok := message.StatusCode(v); !ok && !isToken(v) {
			return nodeError("ERR_HTTP_INVALID_STATUS_CODE", "RangeError", "Invalid status code: "+jsString(v))
		}
	}
	if v := pick(s.Headers, d.Headers); v != nil && bytes.TrimSpace(v)[0] != '{' {
		return nodeError("", "TypeError", fmt.Sprintf("Cannot create property 'Connection' on %s '%s'", jsType(v), jsString(v)))
	}
	return nil
}

// pick returns the stub's value unless it is missing or falsy, in which case
// the default's, as JavaScript's `a || b` would.
func pick(v, def json.RawMessage) json.RawMessage {
	if message.Falsy(v) {
		if message.Falsy(def) {
			return nil
		}
		return def
	}
	return v
}

// nodeError is the answer mb's server gives when Node refuses to write a
// response: a 500 holding the exception (riftgate gives no stack).
func nodeError(code, name, msg string) *message.Response {
	e := object{}
	if code != "" {
		e = append(e, field{Key: "code", Value: raw(code)})
	}
	e = append(e, field{Key: "message", Value: raw(msg)}, field{Key: "name", Value: raw(name)})
	return &message.Response{StatusCode: 500, Headers: []message.KV{{Name: "content-type", Value: "application/json"}},
		Body: []byte(`{"errors":[` + string(mustJSON(e)) + `]}`)}
}

func jsType(raw json.RawMessage) string {
	switch v, _ := message.DecodeJS(raw); v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	}
	return "object"
}

// buildIs computes the response an `is` gives in the imposter's protocol.
func (imp *Imposter) buildIs(stubIs, defaults json.RawMessage) (*message.Response, bool, error) {
	if imp.spec.IsWS() {
		// A response object is whole: the defaultResponse answers only
		// a message no stub matches.
		if stubIs == nil {
			stubIs = defaults
		}
		r, _, err := buildWS(stubIs)
		return r, false, err
	}
	if imp.spec.IsGRPC() {
		// As a ws response object, a grpc one is whole.
		if stubIs == nil {
			stubIs = defaults
		}
		if _, err := grpcAnswerOf(imp.spec.GRPC, stubIs); err != nil {
			return nil, false, err
		}
		return &message.Response{Body: bytes.Clone(bytes.TrimSpace(stubIs))}, false, nil
	}
	if imp.spec.Custom != nil {
		// A custom protocol's response is its process's object, as given;
		// its process applies the defaultResponse itself, so no match is
		// mb's empty is.
		if stubIs == nil || isNull(stubIs) {
			stubIs = json.RawMessage(`{}`)
		}
		return &message.Response{Body: bytes.Clone(bytes.TrimSpace(stubIs))}, false, nil
	}
	if imp.spec.Protocol == "tcp" {
		// A tcp response is its own data; the defaultResponse's fills an
		// empty one only when it is written, as mb's tcp server does. Its
		// data is then the last resort, rendered by its own rule.
		r := &message.Response{Binary: imp.spec.Mode == "binary"}
		switch {
		case stubIs != nil:
			message.SetTCPData(r, stubIs)
		case defaults != nil && !isNull(defaults):
			r.Body = message.TCPDefaultData(message.TCPDataMember(defaults), r.Binary)
		} // else mb's {data: ''}
		return r, false, nil
	}
	return buildIs(stubIs, defaults)
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
