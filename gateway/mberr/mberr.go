// Package mberr holds Mountebank's error codes and the `{"errors":[...]}`
// body the admin API and imposters answer with.
package mberr

import (
	"encoding/json"
	"errors"
	"net/http"
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
	// Status is the HTTP status the error is answered with.
	Status int `json:"-"`
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
	return &Error{Code: "internal error", Message: err.Error(), Status: http.StatusInternalServerError}
}

// Body renders errs compactly as `{"errors":[...]}`. A source that is not
// valid JSON (raw bytes a client sent) is shown as a string.
func Body(errs ...*Error) []byte {
	type body struct {
		Errors []*Error `json:"errors"`
	}
	b, err := json.Marshal(body{errs})
	if err == nil {
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
	b, _ = json.Marshal(body{fixed})
	return b
}
