package inject

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/message"
)

// Env is what one script call is about.
type Env struct {
	Request *message.Request
	// FlowID names the flow that is the script's `state`; "" gives an
	// empty state that is not kept.
	FlowID string
	// Policy applies to the state's writes.
	Policy flow.Policy
}

// maxAttempts bounds how often a script runs for one request when its
// flow keeps changing under it (flow.Store.Commit refusing the writes).
const maxAttempts = 8

// ErrContended is wrapped, with flow.ErrUnavailable, by the error of a
// script whose flow changed under each of its runs.
var ErrContended = errors.New("inject: the flow changed under every run of the script")

// loaded is a flow as a script's state starts from: per key, in the
// snapshot's order, the JSON text the script sees and the value made of
// it, to tell afterwards what the script changed.
type loaded struct {
	snap  flow.Snapshot
	keys  []string
	texts []string
	vals  []goja.Value
}

// valueText is the JSON text of a stored value as a script sees it: the
// value itself when it is JSON, else the value as a JSON string (invalid
// UTF-8 becomes U+FFFD).
func valueText(raw []byte) string {
	if json.Valid(raw) {
		return string(bytes.TrimSpace(raw))
	}
	return string(message.AppendJSONString(nil, string(raw)))
}

// reset loads snap. A key that is not valid UTF-8 (a plugin may write one)
// cannot be a JavaScript property name without changing: scripts do not
// see it, so they can neither change nor delete it.
func (l *loaded) reset(snap flow.Snapshot) {
	l.snap = snap
	l.keys, l.texts = l.keys[:0], l.texts[:0]
	for _, en := range snap {
		if utf8.ValidString(en.Key) {
			l.keys = append(l.keys, en.Key)
			l.texts = append(l.texts, valueText(en.Value))
		}
	}
}

// stateObject builds the script's state: one property per key, its value
// made from the key's JSON. A value Go accepts as JSON but JavaScript's
// JSON.parse refuses (a number past float64, 1e400) reaches the script as
// its text, like any value that is not JSON.
func (v *vm) stateObject(l *loaded) (*goja.Object, error) {
	o := v.rt.NewObject()
	l.vals = l.vals[:0]
	for i, text := range l.texts {
		x, err := v.jsonValue(text)
		if err != nil {
			l.texts[i] = string(message.AppendJSONString(nil, text))
			x = v.rt.ToValue(text)
		}
		l.vals = append(l.vals, x)
		// Defined, not assigned: a key such as __proto__ is an own
		// property, as JSON.parse makes it.
		if err := o.DefineDataProperty(l.keys[i], x, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
			return nil, fmt.Errorf("inject: build state: %w", err)
		}
	}
	return o, nil
}

// jsonValue is JSON.parse(text), with the common scalars made in Go.
func (v *vm) jsonValue(text string) (goja.Value, error) {
	switch {
	case text == "true":
		return v.rt.ToValue(true), nil
	case text == "false":
		return v.rt.ToValue(false), nil
	case text == "null":
		return goja.Null(), nil
	case len(text) > 0 && (text[0] == '-' || '0' <= text[0] && text[0] <= '9'):
		// A JSON number (text is valid JSON) that is an integer a double
		// holds exactly; -0 is not one.
		if n, err := strconv.ParseInt(text, 10, 64); err == nil && n > -1<<53 && n < 1<<53 && text != "-0" {
			return v.rt.ToValue(n), nil
		}
	case len(text) > 1 && text[0] == '"' && plainString(text[1:len(text)-1]):
		return v.rt.ToValue(text[1 : len(text)-1]), nil
	}
	return v.fromJSON(text)
}

// plainString reports whether s, between a JSON string's quotes, has
// nothing to unescape and is ASCII.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// diff lists what the script changed: properties whose JSON differs from
// what was loaded, new properties, and removed ones. A property whose
// JSON is undefined (a function, undefined) counts as removed. A loaded
// value the script did not replace is compared without stringifying it
// when it is a scalar, which cannot have changed.
func (v *vm) diff(l *loaded, state *goja.Object) ([]flow.Write, error) {
	var ws []flow.Write
	keys := state.Keys()
	for _, k := range keys {
		x := state.Get(k)
		i := l.index(k)
		if _, isObj := x.(*goja.Object); i >= 0 && !isObj && x.SameAs(l.vals[i]) {
			continue
		}
		text, ok, err := v.propertyJSON(x)
		if err != nil {
			return nil, fmt.Errorf("state.%s: %w", k, err)
		}
		if !ok {
			if i >= 0 {
				ws = append(ws, flow.Write{Key: k, Delete: true})
			}
			continue
		}
		if i >= 0 && l.texts[i] == text {
			continue
		}
		ws = append(ws, flow.Write{Key: k, Value: []byte(text)})
	}
	for _, k := range l.keys {
		if !contains(keys, k) {
			ws = append(ws, flow.Write{Key: k, Delete: true})
		}
	}
	return ws, nil
}

func (l *loaded) index(key string) int {
	for i, k := range l.keys {
		if k == key {
			return i
		}
	}
	return -1
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// propertyJSON is JSON.stringify of one state value; ok is false when the
// result is undefined. A throw (a cycle, a BigInt) is an error. Scalars
// are rendered in Go, as JSON.stringify renders them.
func (v *vm) propertyJSON(x goja.Value) (string, bool, error) {
	if _, isObj := x.(*goja.Object); isObj {
		return v.objectJSON(x)
	}
	switch e := x.Export().(type) {
	case nil:
		if goja.IsNull(x) {
			return "null", true, nil
		}
		return "", false, nil // undefined
	case bool:
		return strconv.FormatBool(e), true, nil
	case int64:
		return strconv.FormatInt(e, 10), true, nil
	case float64:
		if math.IsNaN(e) || math.IsInf(e, 0) {
			return "null", true, nil
		}
		return x.String(), true, nil // JavaScript's number text
	case string:
		if isASCII(e) { // a lone surrogate, which Go cannot hold, is not
			return string(message.AppendJSONString(nil, e)), true, nil
		}
	}
	return v.objectJSON(x)
}

// objectJSON is JSON.stringify(x); ok is false when that is undefined.
func (v *vm) objectJSON(x goja.Value) (string, bool, error) {
	s, err := v.stringify(goja.Undefined(), x)
	if err != nil {
		return "", false, err
	}
	if goja.IsUndefined(s) {
		return "", false, nil
	}
	return s.String(), true, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// load reads a flow for a script: the whole flow at one instant.
func (e *Engine) load(ctx context.Context, flowID string) (flow.Snapshot, error) {
	if flowID == "" || e.flows == nil {
		return nil, nil
	}
	snap, err := e.flows.Load(ctx, flowID)
	if err != nil {
		return nil, fmt.Errorf("inject: load state of %q: %w", flowID, err)
	}
	return snap, nil
}

// commit applies a script's changes to its flow, all or none, only if
// the flow is still the snapshot the script started from. On a conflict it
// returns the flow as it is now, and ok false.
func (e *Engine) commit(ctx context.Context, env Env, l *loaded, ws []flow.Write) (now flow.Snapshot, ok bool, err error) {
	if env.FlowID == "" || e.flows == nil || len(ws) == 0 {
		return nil, true, nil
	}
	now, err = e.flows.Commit(ctx, env.FlowID, l.snap.Versions(), ws, env.Policy)
	switch {
	case err == nil:
		return nil, true, nil
	case errors.Is(err, flow.ErrVersionMismatch):
		return now, false, nil
	case errors.Is(err, flow.ErrTooLarge), errors.Is(err, flow.ErrBadKey):
		// The script's doing: an mb-shaped error, still matching the
		// flow error.
		return nil, false, scriptErr{fmt.Errorf("state: %w", err)}
	}
	return nil, false, fmt.Errorf("inject: save state of %q: %w", env.FlowID, err)
}

// withState runs body with the flow of env loaded as state, and commits
// what body changed. If the flow changed in the meantime (another node, a
// plugin or a script on another runtime wrote it), nothing is written and
// body runs again on the flow as it is now, at most maxAttempts times:
// the answer a request gets is always computed from the state its writes
// were made to. The state is saved after a script throws too, as mb keeps
// an imposter state a failing script had already changed; it is not saved
// after a timeout, when the runtime can no longer be asked.
//
// Scripts on one flow also take turns on this node (lockFlow), so that
// they do not make each other run again; correctness does not rest on it.
func (e *Engine) withState(ctx context.Context, env Env, body func(v *vm, state *goja.Object) error) error {
	unlock, err := e.lockFlow(ctx, env.FlowID)
	if err != nil {
		return err
	}
	defer unlock()
	snap, err := e.load(ctx, env.FlowID)
	if err != nil {
		return err
	}
	var l loaded
	for range maxAttempts {
		var ws []flow.Write
		var bodyErr error
		err = e.run(ctx, func(v *vm) error {
			l.reset(snap)
			state, err := v.stateObject(&l)
			if err != nil {
				return err
			}
			bodyErr = body(v, state)
			var ie *goja.InterruptedError
			if errors.As(bodyErr, &ie) {
				return bodyErr
			}
			if ws, err = v.diff(&l, state); err != nil {
				return scriptErr{err}
			}
			return bodyErr
		})
		if len(ws) == 0 {
			return err
		}
		now, ok, cerr := e.commit(ctx, env, &l, ws)
		if cerr != nil {
			return cerr
		}
		if ok {
			return err
		}
		snap = now
	}
	return fmt.Errorf("%w: %w (%d runs)", flow.ErrUnavailable, ErrContended, maxAttempts)
}
