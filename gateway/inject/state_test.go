package inject

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/riftgate/riftgate/gateway/message"
	"pgregory.net/rapid"
)

// FuzzStateRoundTrip checks the flow ⇄ state conversion: a value loaded
// and left alone is either not written back, or written once in the
// canonical JSON form that means the same value, after which it is stable.
func FuzzStateRoundTrip(f *testing.F) {
	for _, seed := range []struct{ k, v string }{
		{"count", "3"}, {"obj", `{"a": [1, 2.50, "x"]}`}, {"text", "plain"},
		{"s", `"quoted"`}, {"big", "1e400"}, {"bad", "\xff\xfe"}, {"__proto__", `{"x":1}`},
		{"ws", " true "}, {"esc", `"\u00e9\/"`}, {"", "null"}, {"dup", `{"a":1,"a":2}`},
	} {
		f.Add(seed.k, []byte(seed.v))
	}
	v := newVM(slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		snap := &snapshot{}
		snap.add(key, value)
		if len(snap.keys) == 0 {
			if utf8.ValidString(key) {
				t.Fatalf("key %q dropped", key)
			}
			return
		}
		if !json.Valid([]byte(snap.texts[0])) {
			t.Fatalf("valueText(%q) = %q is not JSON", value, snap.texts[0])
		}
		state, err := v.stateObject(snap)
		if err != nil {
			t.Fatalf("stateObject: %v", err)
		}
		ws, err := v.diff(snap, state)
		if err != nil {
			t.Fatalf("diff: %v", err)
		}
		if len(ws) > 1 {
			t.Fatalf("writes %+v", ws)
		}
		final := snap.texts[0]
		if len(ws) == 1 {
			if !ws[0].set || ws[0].key != key {
				t.Fatalf("write %+v", ws[0])
			}
			final = ws[0].value
			// Same meaning, as far as Go can tell.
			var a, b any
			if json.Unmarshal([]byte(snap.texts[0]), &a) == nil && json.Unmarshal([]byte(final), &b) == nil && !reflect.DeepEqual(a, b) {
				t.Fatalf("value %s came back as %s", snap.texts[0], final)
			}
		}
		// Stable from then on.
		snap2 := &snapshot{keys: []string{key}, texts: []string{final}}
		state2, err := v.stateObject(snap2)
		if err != nil {
			t.Fatal(err)
		}
		if ws2, err := v.diff(snap2, state2); err != nil || len(ws2) != 0 {
			t.Fatalf("second round wrote %+v, %v (from %q)", ws2, err, final)
		}
		// A value that is not JSON reaches the script as that text.
		if !json.Valid(value) {
			var s string
			if err := json.Unmarshal([]byte(final), &s); err != nil {
				t.Fatalf("non-JSON value %q stored as %s", value, final)
			}
		}
	})
}

// TestStateModel runs random sequences of state edits through a script
// and the real flow store, and compares the flow with a Go model.
func TestStateModel(t *testing.T) {
	store := newStore(t)
	e := newEngine(t, Options{Flows: store})
	p, err := e.Response(`function (config) {
		for (const [op, k, v] of JSON.parse(config.request.body)) {
			if (op === 'set') { config.state[k] = v; } else { delete config.state[k]; }
		}
		return {};
	}`)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		id := fmt.Sprintf("i1:model%d", n)
		model := map[string]any{}
		keys := rapid.SampledFrom([]string{"a", "b", "c", "count", "x y"})
		vals := rapid.OneOf(
			rapid.Just[any](nil), rapid.Just[any](true),
			rapid.Map(rapid.IntRange(-1000, 1000), func(i int) any { return float64(i) }),
			rapid.Map(rapid.String(), func(s string) any { return s }),
			rapid.Map(rapid.SliceOfN(rapid.IntRange(0, 9), 0, 3), func(s []int) any {
				out := make([]any, len(s))
				for i, x := range s {
					out[i] = float64(x)
				}
				return out
			}),
		)
		calls := rapid.IntRange(1, 4).Draw(rt, "calls")
		for range calls {
			ops := [][]any{}
			for range rapid.IntRange(0, 5).Draw(rt, "ops") {
				k := keys.Draw(rt, "key")
				if rapid.Bool().Draw(rt, "set") {
					v := vals.Draw(rt, "value")
					ops = append(ops, []any{"set", k, v})
					model[k] = v
				} else {
					ops = append(ops, []any{"delete", k})
					delete(model, k)
				}
			}
			body, _ := json.Marshal(ops)
			if _, err := p.Respond(ctx, Env{Request: &message.Request{Method: "POST", Body: body}, FlowID: id}); err != nil {
				rt.Fatal(err)
			}
		}
		got := map[string]any{}
		snap, err := store.Load(ctx, id)
		if err != nil {
			rt.Fatal(err)
		}
		for _, ent := range snap {
			k := ent.Key
			var v any
			if err := json.Unmarshal(ent.Value, &v); err != nil {
				rt.Fatalf("%s = %q: %v", k, ent.Value, err)
			}
			got[k] = v
		}
		if !reflect.DeepEqual(got, model) {
			rt.Fatalf("flow %v, model %v", got, model)
		}
	})
}

// TestStateGoldenBytes pins what a script's state values are stored as:
// JSON.stringify's text, the format plugins and other scripts read.
func TestStateGoldenBytes(t *testing.T) {
	store := newStore(t)
	e := newEngine(t, Options{Flows: store})
	respond(t, e, `function (config) {
		const s = config.state;
		s.int = 3; s.float = 2.50; s.neg0 = -0; s.big = 1e21; s.str = 'é"\n<'; s.t = true; s.n = null;
		s.arr = [1, 'a', null, undefined]; s.obj = { b: 1, a: { c: [] } }; s.date = new Date(0); s.nan = NaN;
		s.undef = undefined; s.fn = function () {};
		return {};
	}`, Env{Request: testRequest(), FlowID: "i1:golden"})
	want := map[string]string{
		"int": `3`, "float": `2.5`, "neg0": `0`, "big": `1e+21`, "str": `"é\"\n<"`, "t": `true`, "n": `null`,
		"arr": `[1,"a",null,null]`, "obj": `{"b":1,"a":{"c":[]}}`, "date": `"1970-01-01T00:00:00.000Z"`, "nan": `null`,
	}
	ctx := context.Background()
	snap, err := store.Load(ctx, "i1:golden")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap) != len(want) {
		t.Errorf("keys %v", snap)
	}
	for k, w := range want {
		ent, err := store.Get(ctx, "i1:golden", k)
		if err != nil || string(ent.Value) != w {
			t.Errorf("%s = %q, %v; want %q", k, ent.Value, err, w)
		}
	}
}
