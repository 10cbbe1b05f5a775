// Package behavior compiles and runs Mountebank's response behaviors: the
// ordered "behaviors" array of mb 2.x, into which the imposter package has
// upcast a legacy "_behaviors" object as mb's compatibility.js does. wait, copy
// and lookup run here; decorate, shellTransform and wait functions go
// through injection hooks, and riftgate's {"decorate": {"wasm": {...}}}
// through a plugin hook.
//
// Behaviors act on the response as the stub wrote it, before mb's defaults
// are added and before a JSON object body is stringified: see Response.
package behavior

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
)

// Response is what behaviors transform.
//
// Tokens are replaced in StatusText, in every header name and value, and in
// Body. When the stub's body is a JSON object the engine renders it first,
// as mb renders it after behaviors (JSON.stringify(body, null, 4)), and sets
// JSONBody: a body that holds a token is then parsed, replaced string by
// string and key by key as mb replaces the object (a renamed key moves to
// the end of its object), and written back in the same format. The result
// is byte for byte what mb sends, provided the engine's rendering is
// JSON.stringify's. A Binary body's tokens are replaced in the base64 text
// it came from (message.Response.BinaryText), which is then decoded.
type Response struct {
	*message.Response
	// StatusText is the stub's statusCode when it was given as a string
	// (possibly a token such as "${code}"); the engine parses it after
	// Apply. Empty when statusCode was a number.
	StatusText string
	JSONBody   bool
	// TCP marks a tcp imposter's response: Body is its data, which
	// scripts see as {data} (base64 when Binary).
	TCP bool
	// Object marks a response whose Body is the protocol's whole response
	// object, as JSON (a WebSocket imposter's {data, type, messages,
	// close, ...}): scripts see it as it is, and tokens are replaced in it
	// string by string (JSONBody is set with it).
	Object bool
	// Unset names the fields the stub's `is` did not give, which mb's
	// behaviors see as undefined (a decorator can set them); the engine
	// fills what is still unset from the defaults afterwards, as mb's
	// postProcess does after its behaviors.
	Unset Fields
}

// Fields is a set of a response's fields.
type Fields uint8

// The fields of a response that may be unset.
const (
	StatusField Fields = 1 << iota
	HeadersField
	BodyField
)

// Decorator rewrites a response in place: decorate, shellTransform and wasm
// decorate.
type Decorator interface {
	Decorate(ctx context.Context, req *message.Request, resp *Response) error
}

// Waiter computes a wait function's milliseconds.
type Waiter interface {
	WaitMillis(ctx context.Context, req *message.Request) (int, error)
}

// InjectHooks compile the behaviors that need JavaScript or a shell. A nil
// hook refuses the behavior as mb does without --allowInjection.
type InjectHooks struct {
	Decorate       func(src string) (Decorator, error)
	ShellTransform func(cmd string) (Decorator, error)
	Wait           func(src string) (Waiter, error)
}

// Options configure Compile.
type Options struct {
	Inject InjectHooks
	// Wasm compiles riftgate's {"decorate": {"wasm": {...}}}.
	Wasm func(spec json.RawMessage) (Decorator, error)
}

const (
	injectionDisabled = "JavaScript injection is not allowed unless mb is run with the --allowInjection flag"
	shellDisabled     = "Shell execution is not allowed unless mb is run with the --allowInjection flag"
)

// step is one compiled behavior.
type step interface {
	run(ctx context.Context, req *message.Request, resp *Response, sleep bool) (time.Duration, error)
}

// Behaviors is a response's compiled behaviors. A nil *Behaviors has none.
// It is safe for concurrent use.
type Behaviors struct {
	steps    []step
	warnings []string
}

// Empty reports whether there is nothing to run.
func (b *Behaviors) Empty() bool { return b == nil || len(b.steps) == 0 }

// ReadsResponse reports whether a step hands the whole response object to
// a script (a decorator or a shellTransform), which then sees the object
// mb holds (message.Response.MB) when the response has one.
func (b *Behaviors) ReadsResponse() bool {
	if b == nil {
		return false
	}
	for _, s := range b.steps {
		if _, ok := s.(decorateStep); ok {
			return true
		}
	}
	return false
}

// Warnings are problems mb only logs, such as an unreadable CSV file for a
// lookup (mb then leaves the tokens in place): the engine should log them.
func (b *Behaviors) Warnings() []string {
	if b == nil {
		return nil
	}
	return b.warnings
}

// Apply runs the behaviors in order, sleeping for waits (a wait returns
// ctx's error when ctx ends first).
func (b *Behaviors) Apply(ctx context.Context, req *message.Request, resp *Response) error {
	_, err := b.run(ctx, req, resp, true)
	return err
}

// ApplyDeferred runs the behaviors without sleeping and returns the total
// wait, so that the engine can delay the answer without holding a
// goroutine. Only decorators could tell the difference, by looking at the
// clock.
func (b *Behaviors) ApplyDeferred(ctx context.Context, req *message.Request, resp *Response) (time.Duration, error) {
	return b.run(ctx, req, resp, false)
}

func (b *Behaviors) run(ctx context.Context, req *message.Request, resp *Response, sleep bool) (time.Duration, error) {
	var total time.Duration
	if b == nil {
		return 0, nil
	}
	for _, s := range b.steps {
		d, err := s.run(ctx, req, resp, sleep)
		if err != nil {
			return total, err
		}
		total += d
	}
	return total, nil
}

// Compile compiles the behaviors of one stub response: the whole response
// object, as mb stores it (the imposter package has upcast a legacy
// `_behaviors` object into the `behaviors` array; one it left, mb never runs).
func Compile(response json.RawMessage, opts Options) (*Behaviors, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(response, &obj); err != nil {
		return nil, mberr.New(mberr.BadData, "a response must be an object").WithSource(source(response))
	}
	var list []json.RawMessage
	if raw, ok := obj["behaviors"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, mberr.New(mberr.BadData, "behaviors must be an array").WithSource(source(raw))
		}
	}
	b := &Behaviors{}
	for _, raw := range list {
		s, err := b.compileOne(raw, opts)
		if err != nil {
			return nil, err
		}
		if s != nil {
			b.steps = append(b.steps, s)
		}
	}
	return b, nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func source(raw json.RawMessage) any {
	if json.Valid(raw) {
		return json.RawMessage(bytes.Clone(raw))
	}
	return string(raw)
}
