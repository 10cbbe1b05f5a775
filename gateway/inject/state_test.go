package inject

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
	"github.com/dop251/goja"
	"github.com/riftgate/riftgate/gateway/flow"
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
		state := v.state(flow.Snapshot{{Key: key, Entry: flow.Entry{Value: value, Version: flow.Version{V: 1}}}})
		l := &v.st.l
		if len(l.keys) == 0 {
			if utf8.ValidString(key) {
				t.Fatalf("key %q dropped", key)
			}
			return
		}
		if !json.Valid([]byte(l.texts[0])) {
			t.Fatalf("valueText(%q) = %q is not JSON", value, l.texts[0])
		}
		loadedText := l.texts[0]
		state.Get(key) // as a script that reads it
		w := &writes{}
		if err := v.diff(w); err != nil {
			t.Fatalf("diff: %v", err)
		}
		ws := w.values()
		if len(ws) > 1 {
			t.Fatalf("writes %+v", ws)
		}
		// What the script sees is what JSON.parse makes of the text.
		parsed, err := v.fromJSON(l.texts[0])
		if err == nil {
			if got, want := mustJSON(t, v, state.Get(key)), mustJSON(t, v, parsed); got != want {
				t.Fatalf("state.%s is %s, JSON.parse gives %s", key, got, want)
			}
		}
		final := l.texts[0]
		if len(ws) == 1 {
			if ws[0].Delete || ws[0].Key != key {
				t.Fatalf("write %+v", ws[0])
			}
			final = string(ws[0].Value)
			// Same meaning, as far as Go can tell.
			var a, b any
			if json.Unmarshal([]byte(loadedText), &a) == nil && json.Unmarshal([]byte(final), &b) == nil && !reflect.DeepEqual(a, b) {
				t.Fatalf("value %s came back as %s", loadedText, final)
			}
		}
		// Stable from then on.
		v.state(flow.Snapshot{{Key: key, Entry: flow.Entry{Value: []byte(final), Version: flow.Version{V: 2}}}}).Get(key)
		w2 := &writes{}
		if err := v.diff(w2); err != nil || len(w2.ws) != 0 {
			t.Fatalf("second round wrote %+v, %v (from %q)", w2.ws, err, final)
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

func mustJSON(t *testing.T, v *vm, x goja.Value) string {
	t.Helper()
	s, _, err := v.propertyJSON(x)
	if err != nil {
		t.Fatal(err)
	}
	return s
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
		ent, err := store.Get(ctx, "i1:golden", k, nil)
		if err != nil || string(ent.Value) != w {
			t.Errorf("%s = %q, %v; want %q", k, ent.Value, err, w)
		}
	}
}

// racing is a store on which another writer gets in first: before the
// first n Commits it applies, it writes the key itself, as another node or
// a plugin writing the flow between a script's load and its commit would.
type racing struct {
	flow.Store
	mu      sync.Mutex
	n       int
	key     string
	commits int
}

func (r *racing) Commit(ctx context.Context, id string, base []flow.KeyVersion, ws []flow.Write, p flow.Policy) (flow.Snapshot, error) {
	r.mu.Lock()
	r.commits++
	if r.n > 0 {
		r.n--
		e, err := r.Store.Get(ctx, id, r.key, nil)
		n := 0
		if err == nil {
			n, _ = strconv.Atoi(string(e.Value))
		}
		if _, err := r.Store.Put(ctx, id, r.key, []byte(strconv.Itoa(n+100)), p); err != nil {
			r.mu.Unlock()
			return nil, err
		}
	}
	r.mu.Unlock()
	return r.Store.Commit(ctx, id, base, ws, p)
}

const counter = `function (config) {
	config.state.count = (config.state.count || 0) + 1;
	return { body: String(config.state.count) };
}`

// TestStateCommitsAtomically: a script's writes reach the flow only if the
// flow is still what the script read; when it changed, the script runs
// again on the flow as it is, and the answer is the one its writes went
// with.
func TestStateCommitsAtomically(t *testing.T) {
	store := &racing{Store: newStore(t), n: 2, key: "count"}
	e := newEngine(t, Options{Flows: store})
	got := respond(t, e, counter, Env{Request: testRequest(), FlowID: "i1:race"})
	if got["body"] != "201" || store.commits != 3 {
		t.Fatalf("answered %v after %d commits, want 201 after 3 (two lost races)", got["body"], store.commits)
	}
	if ent, err := store.Get(context.Background(), "i1:race", "count", nil); err != nil || string(ent.Value) != "201" {
		t.Fatalf("count = %q, %v", ent.Value, err)
	}
	// A flow that changes under every run fails the request, with the
	// store's unavailability (503), and writes nothing of the script's.
	store.n = 1000
	p, _ := e.Response(counter)
	_, err := p.Respond(context.Background(), Env{Request: testRequest(), FlowID: "i1:hot"})
	if !errors.Is(err, ErrContended) || !errors.Is(err, flow.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrContended and ErrUnavailable", err)
	}
	if ent, _ := store.Get(context.Background(), "i1:hot", "count", nil); string(ent.Value) != strconv.Itoa(100*maxAttempts) {
		t.Fatalf("count = %q, want only the other writer's %d", ent.Value, 100*maxAttempts)
	}
}

// TestStateHoldsAcrossEngines: engines that share a store but not their
// local locks, as two nodes reaching one flow's owner do, lose no update:
// every answer is a distinct count, and the flow ends at their number.
func TestStateHoldsAcrossEngines(t *testing.T) {
	store := newStore(t)
	engines := []*Engine{newEngine(t, Options{Flows: store}), newEngine(t, Options{Flows: store})}
	const perWorker, workers = 25, 4
	var mu sync.Mutex
	seen := map[string]bool{}
	failed := 0
	var wg sync.WaitGroup
	for _, e := range engines {
		p, err := e.Response(counter)
		if err != nil {
			t.Fatal(err)
		}
		for range workers {
			wg.Go(func() {
				for range perWorker {
					f, err := p.Respond(context.Background(), Env{Request: testRequest(), FlowID: "i1:shared"})
					mu.Lock()
					if err != nil {
						failed++ // contended past maxAttempts: a 503, nothing written
					} else if seen[string(f.Body)] {
						t.Errorf("count %s answered twice", f.Body)
					} else {
						seen[string(f.Body)] = true
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	ent, err := store.Get(context.Background(), "i1:shared", "count", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := strconv.Atoi(string(ent.Value)); n != len(seen) || n+failed != len(engines)*workers*perWorker {
		t.Fatalf("count %d with %d answers and %d failures", n, len(seen), failed)
	}
	t.Logf("%d answers, %d contended", len(seen), failed)
}

// TestBusyFlowHoldsNoOtherFlowBack: scripts on one flow take turns, but a
// flow whose script is slow (as one whose owner went silent is, for a
// whole budget per request) delays no other flow, not even one whose id
// hashed to the same of the 256 lock stripes this engine used to have
// (issue 33: healthy flows paused about 4 s that way).
func TestBusyFlowHoldsNoOtherFlowBack(t *testing.T) {
	e := newEngine(t, Options{Flows: newStore(t), Timeout: 5 * time.Second, Runtimes: 4})
	busy, err := e.Response(`function (config) {
		config.state.n = 1;
		var end = Date.now() + 800;
		while (Date.now() < end) {}
		return { body: "busy" };
	}`)
	if err != nil {
		t.Fatal(err)
	}
	quick, err := e.Response(counter)
	if err != nil {
		t.Fatal(err)
	}
	const busyID = "i1:busy"
	stripe := func(id string) uint64 { return xxhash.Sum64String(id) % 256 }
	var others []string // flows that shared the busy flow's stripe, and two that did not
	for i := 0; len(others) < 3; i++ {
		id := "i1:other-" + strconv.Itoa(i)
		if stripe(id) == stripe(busyID) {
			others = append(others, id)
		}
	}
	others = append(others, "i1:plain-1", "i1:plain-2")

	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		close(started)
		if _, err := busy.Respond(context.Background(), Env{Request: testRequest(), FlowID: busyID}); err != nil {
			t.Errorf("busy flow: %v", err)
		}
	})
	<-started
	time.Sleep(100 * time.Millisecond) // the busy script holds its flow's lock
	for _, id := range others {
		begin := time.Now()
		if _, err := quick.Respond(context.Background(), Env{Request: testRequest(), FlowID: id}); err != nil {
			t.Errorf("%s: %v", id, err)
		}
		if took := time.Since(begin); took > 400*time.Millisecond {
			t.Errorf("%s answered after %v: it waited for the busy flow (same stripe: %v)", id, took, stripe(id) == stripe(busyID))
		}
	}
	wg.Wait()
}
