// Package mberr holds Mountebank's error codes and the `{"errors":[...]}`
// body the admin API and imposters answer with.
package mberr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Codes, as Mountebank 2.9.1 spells them.
const (
	BadData            = "bad data"
	InvalidInjection   = "invalid injection"
	ResourceConflict   = "resource conflict"
	InsufficientAccess = "insufficient access"
	InvalidProxy       = "invalid proxy"
	NoSuchResource     = "no such resource"
	InvalidJSON        = "invalid JSON"
	CannotStartServer  = "cannot start server"
	Unauthorized       = "unauthorized"
	// riftgate's own codes.
	PayloadTooLarge = "payload too large"
	PluginError     = "plugin error"
	FlowUnavailable = "flow unavailable"
	// ClusterUnavailable: the cluster cannot take or confirm a change now
	// (no leader, a lost quorum, an outcome the leader could not report).
	ClusterUnavailable = "cluster unavailable"
)

// Error is one entry of an errors body. Source, when set, is the offending
// JSON fragment, as mb includes it.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Source  any    `json:"source,omitempty"`
	// Data is mb's extra detail, such as the message a script threw.
	Data string `json:"data,omitempty"`
	// Name is the JavaScript error's name, which mb's imposters include
	// in the errors they answer a request with ("Error").
	Name string `json:"name,omitempty"`
	// Status is the HTTP status the error is answered with.
	Status int `json:"-"`
	// Raw, when set, is the whole error object as mb answers it, for the
	// errors mb passes on from Node as they are (a port in use).
	Raw json.RawMessage `json:"-"`
}

// InvalidURLCode is Node's code for a URL that new URL cannot parse.
const InvalidURLCode = "ERR_INVALID_URL"

// InvalidURL is Node's TypeError from new URL(input), as mb's dry run
// passes it on: its code and input, and (set with WithSource) the stub.
// It has no message, as Node's is not an own enumerable property.
func InvalidURL(input string) *Error {
	return &Error{Code: InvalidURLCode, Message: "Invalid URL", Data: input, Status: http.StatusBadRequest}
}

// MarshalJSON writes Raw when it is set, else the fields.
func (e *Error) MarshalJSON() ([]byte, error) {
	if e.Raw != nil {
		return e.Raw, nil
	}
	if e.Code == InvalidURLCode {
		return marshal(struct {
			Code   string `json:"code"`
			Input  string `json:"input"`
			Source any    `json:"source,omitempty"`
		}{e.Code, e.Data, e.Source})
	}
	type plain Error
	return marshal((*plain)(e))
}

// AddressInUseCode is the code of AddressInUse's error, Node's.
const AddressInUseCode = "EADDRINUSE"

// AddressInUse is mb 2.9.1's answer to an imposter on a port already
// taken: Node's listen error, passed on as it is, with a 400.
func AddressInUse(host string, port int) *Error {
	if host == "" {
		host = "::"
	}
	raw, _ := marshal(struct {
		Code    string `json:"code"`
		Errno   int    `json:"errno"`
		Syscall string `json:"syscall"`
		Address string `json:"address"`
		Port    int    `json:"port"`
	}{AddressInUseCode, -98, "listen", host, port})
	return &Error{Code: AddressInUseCode, Message: fmt.Sprintf("listen EADDRINUSE: address already in use %s:%d", host, port),
		Status: http.StatusBadRequest, Raw: raw}
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// New returns an error with the status mb uses for code.
func New(code, message string) *Error {
	return &Error{Code: code, Message: message, Status: statusFor(code)}
}

// WithSource returns e with the offending fragment attached.
func (e *Error) WithSource(src any) *Error {
	c := *e
	c.Source = src
	return &c
}

// Own reports whether code is one of riftgate's own, not mb's.
func Own(code string) bool {
	switch code {
	case PayloadTooLarge, PluginError, FlowUnavailable:
		return true
	}
	return false
}

func statusFor(code string) int {
	switch code {
	case ResourceConflict, CannotStartServer:
		return http.StatusBadRequest
	case NoSuchResource:
		return http.StatusNotFound
	case Unauthorized:
		return http.StatusUnauthorized
	case InsufficientAccess:
		return http.StatusForbidden
	case PayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case PluginError:
		return http.StatusInternalServerError
	case FlowUnavailable, ClusterUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusBadRequest
	}
}

// As returns err as an *Error, wrapping anything else as a 500 with its
// message, so that every failure reaches a client in mb's shape.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var l List
	if errors.As(err, &l) && len(l) > 0 {
		return l[0]
	}
	return &Error{Code: "internal error", Message: err.Error(), Status: http.StatusInternalServerError}
}

// List is several errors answered together, as mb answers every problem
// it finds in a request at once. Its status is its first error's.
type List []*Error

func (l List) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// Err returns the list as an error: nil when empty, the error itself when
// it has one.
func (l List) Err() error {
	switch len(l) {
	case 0:
		return nil
	case 1:
		return l[0]
	}
	return l
}

// All returns the errors err stands for: a List's, or err as one.
func All(err error) []*Error {
	var l List
	if errors.As(err, &l) {
		return l
	}
	return []*Error{As(err)}
}

// Body renders errs compactly as `{"errors":[...]}`. A source that is not
// valid JSON (raw bytes a client sent) is shown as a string.
func Body(errs ...*Error) []byte {
	type body struct {
		Errors []*Error `json:"errors"`
	}
	if b, err := marshal(body{errs}); err == nil {
		return b
	}
	fixed := make([]*Error, len(errs))
	for i, e := range errs {
		c := *e
		if raw, ok := c.Source.(json.RawMessage); ok && !json.Valid(raw) {
			c.Source = string(raw)
		}
		fixed[i] = &c
	}
	b, _ := marshal(body{fixed})
	return b
}

// marshal encodes as JSON.stringify does, without escaping <, > and &.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
