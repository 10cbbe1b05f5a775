package inject

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

// snapshot is a flow as loaded for a script: its keys in order, and for
// each the JSON text the script's state was built from.
type snapshot struct {
	keys  []string
	texts []string
}

// valueText is the JSON text of a stored value as a script sees it: the
// value itself when it is JSON, else the value as a JSON string (invalid
// UTF-8 becomes U+FFFD).
func valueText(raw []byte) string {
	if json.Valid(raw) {
		return string(bytes.TrimSpace(raw))
	}
	return quote(string(raw))
}

// quote is s as a JSON string.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// objectText joins a snapshot into the text of one JSON object, so that
// the runtime builds the state with a single JSON.parse.
func (s *snapshot) objectText() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range s.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k) // a string always encodes
		b.Write(kb)
		b.WriteByte(':')
		b.WriteString(s.texts[i])
	}
	b.WriteByte('}')
	return b.String()
}

// load reads a flow for a script.
func (e *Engine) load(ctx context.Context, flowID string) (*snapshot, error) {
	s := &snapshot{}
	if flowID == "" || e.flows == nil {
		return s, nil
	}
	snap, err := e.flows.Load(ctx, flowID)
	if err != nil {
		return nil, fmt.Errorf("inject: load state of %q: %w", flowID, err)
	}
	for _, en := range snap {
		s.add(en.Key, en.Value)
	}
	return s, nil
}

// add puts one stored entry in the snapshot. A key that is not valid UTF-8
// (a plugin may write one) cannot be a JavaScript property name without
// changing: scripts do not see it, so they can neither change nor delete it.
func (s *snapshot) add(key string, value []byte) {
	if !utf8.ValidString(key) {
		return
	}
	s.keys = append(s.keys, key)
	s.texts = append(s.texts, valueText(value))
}

// write is one change a script made to its state; delete when !set.
type write struct {
	key   string
	value string
	set   bool
}

// stateObject builds the script's state from a snapshot. A value that Go
// accepts as JSON but goja's JSON.parse refuses (a number past float64,
// 1e400) reaches the script as its text, like any value that is not JSON.
func (v *vm) stateObject(s *snapshot) (*goja.Object, error) {
	x, err := v.fromJSON(s.objectText())
	if err == nil {
		return x.ToObject(v.rt), nil
	}
	for i, text := range s.texts {
		if _, err := v.fromJSON(text); err != nil {
			s.texts[i] = quote(text)
		}
	}
	if x, err = v.fromJSON(s.objectText()); err != nil {
		return nil, fmt.Errorf("inject: build state: %w", err)
	}
	return x.ToObject(v.rt), nil
}

// diff lists what the script changed: properties whose JSON differs from
// what was loaded, new properties, and removed ones. A property whose
// JSON is undefined (a function, undefined) counts as removed.
func (v *vm) diff(s *snapshot, state *goja.Object) ([]write, error) {
	var ws []write
	had := make(map[string]string, len(s.keys))
	for i, k := range s.keys {
		had[k] = s.texts[i]
	}
	seen := make(map[string]bool, len(s.keys))
	for _, k := range state.Keys() {
		text, ok, err := v.propertyJSON(state.Get(k))
		if err != nil {
			return nil, fmt.Errorf("state.%s: %w", k, err)
		}
		if !ok {
			continue
		}
		seen[k] = true
		if old, existed := had[k]; existed && old == text {
			continue
		}
		ws = append(ws, write{key: k, value: text, set: true})
	}
	for _, k := range s.keys {
		if !seen[k] {
			ws = append(ws, write{key: k})
		}
	}
	return ws, nil
}

// propertyJSON is JSON.stringify of one state value; ok is false when the
// result is undefined. A throw (a cycle, a BigInt) is an error.
func (v *vm) propertyJSON(x goja.Value) (string, bool, error) {
	s, err := v.stringify(goja.Undefined(), x)
	if err != nil {
		return "", false, err
	}
	if goja.IsUndefined(s) {
		return "", false, nil
	}
	return s.String(), true, nil
}

// save applies a script's changes to its flow.
func (e *Engine) save(ctx context.Context, env Env, ws []write) error {
	if env.FlowID == "" || e.flows == nil {
		return nil
	}
	for _, w := range ws {
		var err error
		if w.set {
			_, err = e.flows.Put(ctx, env.FlowID, w.key, []byte(w.value), env.Policy)
		} else if err = e.flows.Delete(ctx, env.FlowID, w.key, env.Policy); errors.Is(err, flow.ErrNotFound) {
			err = nil
		}
		if errors.Is(err, flow.ErrTooLarge) || errors.Is(err, flow.ErrBadKey) {
			// The script's doing: an mb-shaped error, still matching
			// the flow error.
			return scriptErr{fmt.Errorf("state.%s: %w", w.key, err)}
		}
		if err != nil {
			return fmt.Errorf("inject: save state.%s of %q: %w", w.key, env.FlowID, err)
		}
	}
	return nil
}

// withState runs body with the flow of env locked and loaded as state, and
// saves what body changed. The state is saved after a script throws too,
// as mb keeps an imposter state a failing script had already changed; it
// is not saved after a timeout, when the runtime can no longer be asked.
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
	var ws []write
	var bodyErr error
	err = e.run(ctx, func(v *vm) error {
		state, err := v.stateObject(snap)
		if err != nil {
			return err
		}
		bodyErr = body(v, state)
		var ie *goja.InterruptedError
		if errors.As(bodyErr, &ie) {
			return bodyErr
		}
		if ws, err = v.diff(snap, state); err != nil {
			return scriptErr{err}
		}
		return bodyErr
	})
	if len(ws) > 0 {
		if serr := e.save(ctx, env, ws); serr != nil {
			return serr
		}
	}
	return err
}
