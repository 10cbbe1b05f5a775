// Package behavior compiles and runs Mountebank's response behaviors: the
// ordered "behaviors" array of mb 2.x and the legacy "_behaviors" object
// (converted to the ordered form as mb's compatibility.js does). wait, copy
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
	"fmt"
	"math"
	"strconv"
	"strings"
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
// JSON.stringify's. A Binary body is left alone.
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
}

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

// Behaviors is a response's compiled behaviors. A nil *Behaviors has none
// and a repeat of 1. It is safe for concurrent use.
type Behaviors struct {
	steps    []step
	repeat   int
	warnings []string
}

// Repeat is how many times the engine serves the response before moving
// on: mb's `response.repeat || 1`, compared as a number (so "3" is 3).
func (b *Behaviors) Repeat() int {
	if b == nil {
		return 1
	}
	return b.repeat
}

// Empty reports whether there is nothing to run.
func (b *Behaviors) Empty() bool { return b == nil || len(b.steps) == 0 }

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

// Compile compiles the behaviors of one stub response (the whole response
// object: "is"/"proxy"/... with "behaviors", "_behaviors" and "repeat").
func Compile(response json.RawMessage, opts Options) (*Behaviors, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(response, &obj); err != nil {
		return nil, mberr.New(mberr.BadData, "a response must be an object").WithSource(source(response))
	}
	list, repeat, err := upcast(obj)
	if err != nil {
		return nil, err
	}
	b := &Behaviors{repeat: 1}
	if repeat != nil {
		if b.repeat, err = repeatOf(repeat, response); err != nil {
			return nil, err
		}
	}
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

// upcast returns the ordered behaviors and the repeat value, converting the
// legacy _behaviors object when there is neither "behaviors" nor "repeat",
// in mb's fixed order: wait, lookup, copy, shellTransform, decorate.
func upcast(obj map[string]json.RawMessage) ([]json.RawMessage, json.RawMessage, error) {
	repeat := obj["repeat"]
	if raw, ok := obj["behaviors"]; ok {
		var list []json.RawMessage
		if isNull(raw) {
			return nil, repeat, nil
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, nil, mberr.New(mberr.BadData, "behaviors must be an array").WithSource(source(raw))
		}
		return list, repeat, nil
	}
	legacy, ok := obj["_behaviors"]
	if !ok || repeat != nil {
		return nil, repeat, nil
	}
	var old map[string]json.RawMessage
	if err := json.Unmarshal(legacy, &old); err != nil || old == nil {
		return nil, repeat, nil // mb upcasts only an object
	}
	var list []json.RawMessage
	for _, key := range []string{"wait", "lookup", "copy", "shellTransform", "decorate"} {
		v, ok := old[key]
		if !ok {
			continue
		}
		var arr []json.RawMessage
		if json.Unmarshal(v, &arr) == nil {
			for _, e := range arr {
				list = append(list, single(key, e))
			}
			continue
		}
		list = append(list, single(key, v))
	}
	return list, old["repeat"], nil
}

func single(key string, v json.RawMessage) json.RawMessage {
	k, _ := json.Marshal(key)
	return json.RawMessage(fmt.Sprintf("{%s:%s}", k, v))
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func source(raw json.RawMessage) any {
	if json.Valid(raw) {
		return json.RawMessage(bytes.Clone(raw))
	}
	return string(raw)
}

var repeatError = `"repeat" field must be an integer greater than 0`

// repeatOf validates repeat as mb's dryRunValidator does and returns how
// many times mb's loop (`repeats < response.repeat`) serves the response.
func repeatOf(raw json.RawMessage, response json.RawMessage) (int, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, mberr.New(mberr.BadData, repeatError).WithSource(source(response))
	}
	switch v := v.(type) {
	case nil:
		return 1, mberr.New(mberr.BadData, repeatError).WithSource(source(response))
	case float64:
		if v <= 0 {
			return 0, mberr.New(mberr.BadData, repeatError).WithSource(source(response))
		}
		return int(math.Ceil(v)), nil
	case string:
		if n, ok := parseInt(v); ok && n <= 0 {
			return 0, mberr.New(mberr.BadData, repeatError).WithSource(source(response))
		}
		if v == "" {
			return 1, nil // "" || 1
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f <= 0 {
			return 0, nil // NaN: mb's loop never serves it
		}
		return int(math.Ceil(f)), nil
	}
	return 0, mberr.New(mberr.BadData, repeatError).WithSource(source(response))
}

// parseInt is JavaScript's parseInt(s, 10): optional space and sign, then
// the longest run of digits.
func parseInt(s string) (int, bool) {
	s = strings.TrimLeft(s, " \t\n\r\v\f")
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	n, digits := 0, 0
	for digits < len(s) && s[digits] >= '0' && s[digits] <= '9' {
		if n < math.MaxInt32 {
			n = n*10 + int(s[digits]-'0')
		}
		digits++
	}
	if digits == 0 {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}
