package inject

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
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
// it when the script first read it (nil until then), to tell afterwards
// what the script changed.
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
	l.keys, l.texts, l.vals = l.keys[:0], l.texts[:0], l.vals[:0]
	for _, en := range snap {
		if utf8.ValidString(en.Key) {
			l.keys = append(l.keys, en.Key)
			l.texts = append(l.texts, valueText(en.Value))
			l.vals = append(l.vals, nil)
		}
	}
}

// stateView is the script's state: one property per loaded key, whose
// value is made from the key's JSON when the script first reads it, and
// the properties the script adds. Since the view sees every write and
// delete, what changed is known without enumerating the object afterwards,
// and keys the script never reads cost nothing. Building a plain object
// per run and enumerating it again were a fifth of a counter's request: a
// goja object costs a map as soon as it has a property. The view behaves
// as the plain object JSON.parse would make for reads, writes, deletes,
// enumeration (in a plain object's order) and JSON.stringify; like the
// config views it refuses accessor and read-only properties and cannot be
// frozen (docs/mountebank-differences.md). Values are plain objects.
type stateView struct {
	v *vm
	l loaded
	p props
}

func (s *stateView) reset(v *vm, snap flow.Snapshot) {
	s.v = v
	s.l.reset(snap)
	s.p.init(s.l.keys)
}

// drop lets go of what the run made.
func (s *stateView) drop() {
	s.l.snap = nil
	clear(s.l.vals)
	s.p.drop()
}

// field makes loaded key i's value. A value Go accepts as JSON but
// JavaScript's JSON.parse refuses (a number past float64, 1e400) reaches
// the script as its text, like any value that is not JSON.
func (s *stateView) field(i int) goja.Value {
	l := &s.l
	text := l.texts[i]
	x, err := s.v.jsonValue(text)
	if err != nil {
		l.texts[i] = string(message.AppendJSONString(nil, text))
		x = s.v.rt.ToValue(text)
	}
	l.vals[i] = x
	return x
}

func (s *stateView) Get(key string) goja.Value           { return s.p.get(key, s.field) }
func (s *stateView) Set(key string, val goja.Value) bool { return s.p.set(key, val) }
func (s *stateView) Has(key string) bool                 { return s.p.has(key) }
func (s *stateView) Delete(key string) bool              { return s.p.delete(key) }
func (s *stateView) Keys() []string                      { return s.p.keys() }

// state returns the run's state object over snap.
func (v *vm) state(snap flow.Snapshot) *goja.Object {
	v.st.reset(v, snap)
	return v.stObj
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

// diff adds to w what the script changed in the run's state: loaded keys
// it deleted, or whose value's JSON now differs from what was loaded, and
// the keys it added. A property whose JSON is undefined (a function,
// undefined) counts as removed. Keys never read are unchanged; a scalar
// read and not replaced cannot have changed; an object read may have been
// changed inside, and is compared by its JSON.
func (v *vm) diff(w *writes) error {
	l, p := &v.st.l, &v.st.p
	for i, k := range l.keys {
		x := p.vals[i]
		switch {
		case p.gone[i]:
			w.delete(k)
			continue
		case x == nil:
			continue
		}
		if _, isObj := x.(*goja.Object); !isObj && l.vals[i] != nil && x.SameAs(l.vals[i]) {
			continue
		}
		text, ok, err := v.propertyJSON(x)
		if err != nil {
			return fmt.Errorf("state.%s: %w", k, err)
		}
		switch {
		case !ok:
			w.delete(k)
		case l.texts[i] != text:
			w.put(k, text)
		}
	}
	for _, k := range p.extra {
		text, ok, err := v.propertyJSON(p.xvals[k])
		if err != nil {
			return fmt.Errorf("state.%s: %w", k, err)
		}
		if ok {
			w.put(k, text)
		}
	}
	return nil
}

// writes is what one request's script changed in its flow, and the
// versions the change is based on: recycled, as a counter's run would
// otherwise allocate both per request. Values are slices of buf.
type writes struct {
	ws   []flow.Write
	buf  []byte
	base []flow.KeyVersion
}

var writesPool = sync.Pool{New: func() any { return new(writes) }}

func (w *writes) reset() { clear(w.ws); w.ws, w.buf = w.ws[:0], w.buf[:0] }

func (w *writes) delete(k string) { w.ws = append(w.ws, flow.Write{Key: k, Delete: true}) }

// put adds a write of text. A value's slice is set once buf stops growing
// (a grown buf would leave earlier values behind), in values.
func (w *writes) put(k, text string) {
	w.buf = append(w.buf, text...)
	w.ws = append(w.ws, flow.Write{Key: k, Value: w.buf[len(w.buf)-len(text):]})
}

// values points every write's value into buf as it is now.
func (w *writes) values() []flow.Write {
	at := 0
	for i := range w.ws {
		if !w.ws[i].Delete {
			n := len(w.ws[i].Value)
			w.ws[i].Value = w.buf[at : at+n : at+n]
			at += n
		}
	}
	return w.ws
}

// versions is base's keys and versions, which a commit expects.
func (w *writes) versions(base flow.Snapshot) []flow.KeyVersion {
	w.base = w.base[:0]
	for _, e := range base {
		w.base = append(w.base, flow.KeyVersion{Key: e.Key, V: e.Version.V})
	}
	return w.base
}

func (w *writes) free() {
	w.reset()
	clear(w.base)
	w.base = w.base[:0]
	if cap(w.buf) > 64<<10 {
		w.buf = nil // do not keep a huge state's room
	}
	writesPool.Put(w)
}

// propertyJSON is JSON.stringify of one state value; ok is false when the
// result is undefined. A throw (a cycle, a BigInt) is an error. Scalars
// are rendered in Go, as JSON.stringify renders them.
func (v *vm) propertyJSON(x goja.Value) (string, bool, error) {
	switch s, k := scalar(x); k {
	case kindOmitted:
		return "", false, nil
	case kindNull, kindBool, kindNumber:
		return s, true, nil
	case kindString:
		if isASCII(s) { // a lone surrogate, which Go cannot hold, is not
			return string(message.AppendJSONString(nil, s)), true, nil
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
func (e *Engine) commit(ctx context.Context, env Env, base flow.Snapshot, w *writes) (now flow.Snapshot, ok bool, err error) {
	if env.FlowID == "" || e.flows == nil || len(w.ws) == 0 {
		return nil, true, nil
	}
	now, err = e.flows.Commit(ctx, env.FlowID, w.versions(base), w.values(), env.Policy)
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
	lock, err := e.lockFlow(ctx, env.FlowID)
	if err != nil {
		return err
	}
	defer e.unlockFlow(env.FlowID, lock)
	snap, err := e.load(ctx, env.FlowID)
	if err != nil {
		return err
	}
	w := writesPool.Get().(*writes)
	defer w.free()
	for range maxAttempts {
		w.reset()
		base := snap
		err = e.run(ctx, func(v *vm) error {
			bodyErr := body(v, v.state(base))
			if interrupted(bodyErr) != nil {
				return bodyErr
			}
			if err := v.diff(w); err != nil {
				return scriptErr{err}
			}
			return bodyErr
		})
		if len(w.ws) == 0 {
			return err
		}
		now, ok, cerr := e.commit(ctx, env, base, w)
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
