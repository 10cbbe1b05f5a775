package plugins

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"
)

func sampleInput(f Flow) *Input {
	return &Input{
		Method:      "POST",
		Path:        "/orders",
		Query:       []Pair{{"b", "2"}, {"a", "1"}, {"b", "3"}},
		Headers:     []Pair{{"Host", "example.test"}, {"Accept", "a/b"}, {"Accept", "c/d"}},
		Body:        []byte(`{"id":1}`),
		FlowID:      "i4545:abc",
		RequestFrom: Str("127.0.0.1:50000"),
		Config:      []byte(`{"greeting":"hi"}`),
		Flow:        f,
	}
}

func TestGoodGuestUsesEveryImport(t *testing.T) {
	h, logs := newTestHost(t, Limits{})
	info := register(t, h, "good", "good", Limits{})
	if want := []string{"handle", "noresp"}; !slices.Equal(info.Entry, want) {
		t.Fatalf("entry points %v, want %v", info.Entry, want)
	}
	f := newMemFlow()
	_ = f.Put(context.Background(), []byte("gone"), []byte("x"))
	in := sampleInput(f)
	var enc encoder
	wantReq := slices.Clone(enc.encodeRequest(in))

	for i := uint64(1); i <= 3; i++ {
		out, err := h.Call(context.Background(), "good", "handle", in)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if out.Result != 0 || !out.Wrote || out.Unavailable {
			t.Fatalf("call %d: output %+v", i, out)
		}
		r := out.Response
		if r.Status != 201 || !slices.Equal(r.Headers, []Pair{{"x-guest", "wat"}}) {
			t.Fatalf("call %d: response %d %v", i, r.Status, r.Headers)
		}
		body := r.Body
		if got := binary.LittleEndian.Uint64(body); got != i {
			t.Fatalf("call %d: guest counted %d", i, got)
		}
		cl := int(binary.LittleEndian.Uint32(body[8:]))
		if got := body[12 : 12+cl]; !bytes.Equal(got, in.Config) {
			t.Fatalf("config_read gave %q", got)
		}
		if got := body[12+cl:]; !bytes.Equal(got, wantReq) {
			t.Fatalf("request_read gave\n%x, want\n%x", got, wantReq)
		}
	}
	if e, ok := f.get("count"); !ok || binary.LittleEndian.Uint64(e.val) != 3 {
		t.Fatalf("flow count = %v %v", e, ok)
	}
	if e, _ := f.get("config"); !bytes.Equal(e.val, in.Config) {
		t.Fatalf("flow config = %q", e.val)
	}
	if _, ok := f.get("gone"); ok {
		t.Fatal("flow_delete did not delete")
	}
	if !strings.Contains(logs.String(), "level=DEBUG msg=init module=good") {
		t.Fatalf("_initialize's log line missing from:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "level=INFO msg=handled module=good") {
		t.Fatalf("guest log line missing from:\n%s", logs)
	}

	// No config reads as null, and a missing key's delete returns 1 (the
	// guest accepts it).
	in.Config = nil
	out, err := h.Call(context.Background(), "good", "handle", in)
	if err != nil {
		t.Fatal(err)
	}
	if cl := binary.LittleEndian.Uint32(out.Response.Body[8:]); string(out.Response.Body[12:12+cl]) != "null" {
		t.Fatalf("nil config read as %q", out.Response.Body[12:12+cl])
	}

	out, err = h.Call(context.Background(), "good", "noresp", in)
	if err != nil || out.Result != 7 || out.Wrote {
		t.Fatalf("noresp: %+v, %v", out, err)
	}
	_, err = h.Call(context.Background(), "good", "rift_abi_v1", in)
	wantKind(t, err, KindNoExport)
	_, err = h.Call(context.Background(), "nope", "handle", in)
	wantKind(t, err, KindNoModule)

	st := h.Stats()
	if len(st) != 1 || st[0].Calls != 6 || st[0].Errors["no_export"] != 1 || st[0].Hash != info.Hash {
		t.Fatalf("stats %+v", st)
	}
}

func TestFlowUnavailable(t *testing.T) {
	h, _ := newTestHost(t, Limits{})
	register(t, h, "good", "good", Limits{})
	f := newMemFlow()
	f.unavailable = true
	out, err := h.Call(context.Background(), "good", "handle", sampleInput(f))
	if err != nil {
		t.Fatal(err)
	}
	if out.Result != statusUnavailable || !out.Unavailable || out.Wrote {
		t.Fatalf("output %+v, want result 3 and Unavailable", out)
	}
	// No flow at all answers UNAVAILABLE too.
	out, err = h.Call(context.Background(), "good", "handle", sampleInput(nil))
	if err != nil || !out.Unavailable || out.Result != statusUnavailable {
		t.Fatalf("nil flow: %+v, %v", out, err)
	}
	if st := h.Stats(); st[0].Unavailable != 2 {
		t.Fatalf("unavailable count %d, want 2", st[0].Unavailable)
	}
}

// TestHostileGuests runs each hostile guest and checks its error, that its
// instance is discarded, and that the host and another module stay healthy.
func TestHostileGuests(t *testing.T) {
	h, _ := newTestHost(t, Limits{})
	register(t, h, "tiny", "tiny_a", Limits{})
	tests := []struct {
		file  string
		lim   Limits
		kind  Kind
		msg   string
		check func(t *testing.T, out Output, took time.Duration)
	}{
		{file: "loop", lim: Limits{Deadline: 100 * time.Millisecond}, kind: KindTimeout, msg: "deadline of 100ms passed",
			check: func(t *testing.T, _ Output, took time.Duration) {
				// ABI section 7 promises about 200 ms past the deadline; the
				// bound is loose because this machine is shared and noisy.
				if took > 2*time.Second {
					t.Errorf("loop stopped after %s", took)
				}
			}},
		{file: "membomb", lim: Limits{MemoryPages: 33}, kind: KindMemory, msg: "limit of 33 pages"},
		{file: "trap", kind: KindTrap, msg: "unreachable"},
		{file: "recurse", kind: KindTrap, msg: "stack overflow"},
		{file: "huge", lim: Limits{MaxResponseBytes: 100_000}, kind: KindResponse, msg: "over the limit of 100000 bytes",
			check: func(t *testing.T, out Output, _ time.Duration) {
				if out.Result != statusTooLarge || out.Wrote {
					t.Errorf("huge: output %+v, want result 4 and no response", out)
				}
			}},
		{file: "huge", kind: KindResponse, msg: "want a map"}, // under the default limit: 200000 zero bytes are no envelope
	}
	for i, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			name := fmt.Sprintf("%s-%d", tc.file, i)
			register(t, h, name, tc.file, tc.lim)
			for range 2 { // the second call runs on a fresh instance
				start := time.Now()
				out, err := h.Call(context.Background(), name, "handle", sampleInput(newMemFlow()))
				took := time.Since(start)
				e := wantKind(t, err, tc.kind)
				if !strings.Contains(e.Error(), tc.msg) {
					t.Errorf("error %q does not say %q", e, tc.msg)
				}
				if tc.check != nil {
					tc.check(t, out, took)
				}
			}
			st := statsOf(t, h, name)
			if tc.kind != KindResponse && (st.Discarded != 2 || st.InstancesLive != 0) {
				t.Errorf("stats %+v: want 2 discarded and none live", st)
			}
			if st.Errors[tc.kind.String()] != 2 {
				t.Errorf("stats %+v: want 2 %s errors", st, tc.kind)
			}
			out, err := h.Call(context.Background(), "tiny", "handle", sampleInput(nil))
			if err != nil || out.Response.Status != 200 {
				t.Fatalf("healthy module after %s: %+v, %v", tc.file, out, err)
			}
		})
	}
}

func statsOf(t *testing.T, h *Host, name string) ModuleStats {
	t.Helper()
	for _, s := range h.Stats() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no stats for %s", name)
	return ModuleStats{}
}

// TestOutOfBoundsEveryImport passes a range outside memory to every host
// import that takes one; none may touch memory or the flow.
func TestOutOfBoundsEveryImport(t *testing.T) {
	h, _ := newTestHost(t, Limits{})
	register(t, h, "oob", "oob", Limits{})
	tests := []struct {
		imp, export string
		want        int32
	}{
		{"request_read", "request_read", -statusBadMemory},
		{"request_read", "request_read_wrap", -statusBadMemory},
		{"request_read", "request_read_negcap", -statusBadMemory},
		{"config_read", "config_read", -statusBadMemory},
		{"flow_get", "flow_get_key", -statusBadMemory},
		{"flow_get", "flow_get_buf", -statusBadMemory},
		{"flow_get", "flow_get_ver", -statusBadMemory},
		{"flow_put", "flow_put_key", statusBadMemory},
		{"flow_put", "flow_put_val", statusBadMemory},
		{"flow_cas", "flow_cas_key", statusBadMemory},
		{"flow_cas", "flow_cas_val", statusBadMemory},
		{"flow_delete", "flow_delete", statusBadMemory},
		{"response_write", "response_write", statusBadMemory},
		{"log", "log", 0},
	}
	// Every import that takes a pointer is covered (now_ms takes none).
	covered := map[string]bool{}
	for _, tc := range tests {
		covered[tc.imp] = true
	}
	for _, f := range hostFuncs {
		if len(f.params) > 0 && !covered[f.name] {
			t.Errorf("host import %s has no out-of-bounds case", f.name)
		}
	}
	f := newMemFlow()
	for _, tc := range tests {
		t.Run(tc.export, func(t *testing.T) {
			out, err := h.Call(context.Background(), "oob", tc.export, sampleInput(f))
			if err != nil {
				t.Fatal(err)
			}
			if out.Result != tc.want || out.Wrote {
				t.Fatalf("result %d wrote %v, want %d", out.Result, out.Wrote, tc.want)
			}
		})
	}
	if n := f.opCount(); n != 0 {
		t.Fatalf("the flow saw %d operations", n)
	}
}

func TestRegisterRefusesBadModules(t *testing.T) {
	h, _ := newTestHost(t, Limits{})
	tests := []struct {
		file string
		msg  string
	}{
		{"bad_noabi", "does not export rift_abi_v1 () -> (): not an ABI v1 module"},
		{"bad_marker", "rift_abi_v1 has type (i32) -> (), want () -> ()"},
		{"bad_nomemory", `does not export a memory named "memory"`},
		{"bad_noentry", "exports no entry point of type (i32) -> i32"},
		{"bad_start", "exports _start"},
		{"bad_import", "imports env.abort: only rift_v1 and wasi_snapshot_preview1 may be imported"},
		{"bad_sig", "imports rift_v1.flow_put as (i32 i32) -> (i32), want (i32 i32 i32 i32) -> (i32)"},
		{"bad_unknown", "imports rift_v1.flow_scan, which this host does not provide"},
		{"bad_init", "_initialize: "},
		{"bad_startfn", "outside a call"},
		{"bad_reserved", `exports "riftgate.stop", a name the host reserves`},
		{"bad_startloop", "start function: deadline of 1s passed"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			_, err := h.Register(context.Background(), tc.file, loadWasm(t, tc.file), Limits{})
			if !errors.Is(err, ErrInvalidModule) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want ErrInvalidModule saying %q", err, tc.msg)
			}
			if _, ok := h.Module(tc.file); ok {
				t.Fatal("refused module is registered")
			}
		})
	}
	_, err := h.Register(context.Background(), "junk", []byte("\x00asm\x01\x00\x00\x00\xff"), Limits{})
	if !errors.Is(err, ErrInvalidModule) || !strings.Contains(err.Error(), "does not compile") {
		t.Fatalf("junk: %v", err)
	}
	_, err = h.Register(context.Background(), "toobig", loadWasm(t, "tiny_a"), Limits{MemoryPages: 70000})
	if err == nil {
		t.Fatal("memory limit over 4 GiB accepted")
	}
	if len(h.Modules()) != 0 || len(h.compiled) != 0 {
		t.Fatalf("refused modules left state: %v, %d compiled", h.Modules(), len(h.compiled))
	}
	// A module over its memory limit at start is refused by the compiler.
	_, err = h.Register(context.Background(), "big", loadWasm(t, "huge"), Limits{MemoryPages: 2})
	if !errors.Is(err, ErrInvalidModule) {
		t.Fatalf("a module needing 4 pages under a 2-page limit: %v", err)
	}
}

// TestHostAddsFunctions checks ABI v1's promise: a host that grows rift_v1
// keeps running v1 guests that do not import the new functions.
func TestHostAddsFunctions(t *testing.T) {
	saved := hostFuncs
	t.Cleanup(func() { hostFuncs = saved })
	hostFuncs = append(slices.Clip(saved), hostFunc{
		name: "future_feature", params: []api.ValueType{i32}, results: []api.ValueType{i32},
		fn: func(_ *callState, _ context.Context, _ api.Module, stack []uint64) { stack[0] = 0 },
	})
	h, _ := newTestHost(t, Limits{})
	register(t, h, "good", "good", Limits{})
	out, err := h.Call(context.Background(), "good", "handle", sampleInput(newMemFlow()))
	if err != nil || out.Response.Status != 201 {
		t.Fatalf("v1 guest on a grown host: %+v, %v", out, err)
	}
}

func TestSameBytesReuseCompilation(t *testing.T) {
	h, _ := newTestHost(t, Limits{})
	a := register(t, h, "x", "tiny_a", Limits{})
	register(t, h, "y", "tiny_a", Limits{})
	if len(h.compiled) != 1 {
		t.Fatalf("%d compilations for one module", len(h.compiled))
	}
	v := (*h.modules.Load())["x"]
	again := register(t, h, "x", "tiny_a", Limits{})
	if (*h.modules.Load())["x"] != v || again.Hash != a.Hash {
		t.Fatal("registering the same bytes again replaced the module")
	}
	// Other limits need another runtime, so another compilation.
	register(t, h, "z", "tiny_a", Limits{MemoryPages: 2})
	if len(h.compiled) != 2 || len(h.runtimes) != 2 {
		t.Fatalf("%d compilations, %d runtimes", len(h.compiled), len(h.runtimes))
	}
	if err := h.Unregister(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	if err := h.Unregister(context.Background(), "y"); err != nil {
		t.Fatal(err)
	}
	if len(h.compiled) != 1 {
		t.Fatalf("%d compilations after unregistering both users", len(h.compiled))
	}
	if err := h.Unregister(context.Background(), "y"); !errors.Is(err, ErrUnknownModule) {
		t.Fatalf("second unregister: %v", err)
	}
}

// TestSwapWhileInFlight replaces a module while a call runs on it: the call
// finishes on the old version, new calls run the new one, and the old
// version's instances close when the call returns.
func TestSwapWhileInFlight(t *testing.T) {
	h, _ := newTestHost(t, Limits{})
	register(t, h, "m", "slow", Limits{PoolSize: 1})
	var wg sync.WaitGroup
	var slowOut Output
	var slowErr error
	e := h.Entry("m", "handle") // finds the slow version first
	wg.Go(func() {
		slowOut, slowErr = e.Call(context.Background(), sampleInput(nil))
	})
	// Wait until the slow call holds the only instance.
	old := (*h.modules.Load())["m"]
	for len(old.idle) != 0 {
		time.Sleep(time.Millisecond)
	}
	register(t, h, "m", "tiny_b", Limits{PoolSize: 1})
	out, err := h.Call(context.Background(), "m", "handle", sampleInput(nil))
	if err != nil || out.Response.Status != 202 {
		t.Fatalf("new version: %+v, %v", out, err)
	}
	// The entry moves to the new version at once, rather than wait for the
	// old one's only instance.
	if out, err := e.Call(context.Background(), sampleInput(nil)); err != nil || out.Response.Status != 202 {
		t.Fatalf("entry after the swap: %+v, %v", out, err)
	}
	if old.refs.n.Load() == 0 {
		t.Fatal("old version closed while its call was in flight")
	}
	wg.Wait()
	if slowErr != nil || slowOut.Response.Status != 201 {
		t.Fatalf("in-flight call: %+v, %v", slowOut, slowErr)
	}
	if n := old.refs.n.Load(); n != 0 {
		t.Fatalf("old version has %d references after its last call", n)
	}
	if st := statsOf(t, h, "m"); st.InstancesLive != 1 {
		t.Fatalf("%d instances live, want the new version's one", st.InstancesLive)
	}
}

// TestEntryFollowsItsName: an Entry found once calls whatever module its
// name holds now: none, one, its replacement, none again once
// unregistered, and nothing once the host closes; it never keeps a
// replaced version alive.
func TestEntryFollowsItsName(t *testing.T) {
	h, _ := newTestHost(t, Limits{})
	ctx := context.Background()
	e, missing := h.Entry("m", "handle"), h.Entry("m", "nope")
	call := func(e *Entry) (Output, error) { return e.Call(ctx, sampleInput(nil)) }
	_, err := call(e)
	wantKind(t, err, KindNoModule)
	register(t, h, "m", "tiny_a", Limits{})
	if out, err := call(e); err != nil || out.Response.Status != 200 {
		t.Fatalf("first module: %+v, %v", out, err)
	}
	_, err = call(missing)
	wantKind(t, err, KindNoExport)
	old := (*h.modules.Load())["m"]
	register(t, h, "m", "tiny_b", Limits{})
	if out, err := call(e); err != nil || out.Response.Status != 202 {
		t.Fatalf("after the swap: %+v, %v", out, err)
	}
	if n := old.refs.n.Load(); n != 0 {
		t.Fatalf("the replaced version has %d references", n)
	}
	if err := h.Unregister(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	_, err = call(e)
	wantKind(t, err, KindNoModule)
	register(t, h, "m", "tiny_a", Limits{})
	if out, err := call(e); err != nil || out.Response.Status != 200 {
		t.Fatalf("registered again: %+v, %v", out, err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = call(e)
	wantKind(t, err, KindClosed)
}

func TestPoolBoundsConcurrency(t *testing.T) {
	h, _ := newTestHost(t, Limits{})
	register(t, h, "good", "good", Limits{PoolSize: 2})
	f := newMemFlow()
	const workers, calls = 16, 100
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range calls {
				out, err := h.Call(context.Background(), "good", "handle", sampleInput(f))
				if err == nil && out.Result != 0 {
					err = errors.New("nonzero result")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Every increment went through flow_get + flow_cas; none may be lost.
	if e, _ := f.get("count"); binary.LittleEndian.Uint64(e.val) != workers*calls {
		t.Fatalf("count %d, want %d", binary.LittleEndian.Uint64(e.val), workers*calls)
	}
	st := statsOf(t, h, "good")
	if st.InstancesLive > 2 || st.Instantiated > 2 {
		t.Fatalf("pool of 2 grew: %+v", st)
	}
}

func TestCallerCancelWhileWaiting(t *testing.T) {
	h, _ := newTestHost(t, Limits{})
	register(t, h, "m", "slow", Limits{PoolSize: 1})
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = h.Call(context.Background(), "m", "handle", sampleInput(nil)) })
	v := (*h.modules.Load())["m"]
	for len(v.idle) != 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := h.Call(ctx, "m", "handle", sampleInput(nil))
	wantKind(t, err, KindCanceled)
	wg.Wait()
}

// TestCallerCancelStopsRunningCall: a caller that gives up stops a guest
// that would never return (the watchdog sees the caller's context end), the
// call fails as canceled, and the module serves the next call on a fresh
// instance.
func TestCallerCancelStopsRunningCall(t *testing.T) {
	h, _ := newTestHost(t, Limits{})
	register(t, h, "loop", "loop", Limits{Deadline: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := h.Call(ctx, "loop", "handle", sampleInput(nil))
	wantKind(t, err, KindCanceled)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the call stopped %s after it began", took)
	}
	if st := statsOf(t, h, "loop"); st.Discarded != 1 {
		t.Fatalf("the stopped instance was not discarded: %+v", st)
	}
}

// TestDeadlineCountsFromStart: a caller that says when it began on the
// request (Input.Start) has the deadline count from then, not from the
// call: a guest called 59.9 s into its minute stops within moments.
func TestDeadlineCountsFromStart(t *testing.T) {
	h, _ := newTestHost(t, Limits{})
	register(t, h, "loop", "loop", Limits{Deadline: time.Minute})
	in := sampleInput(nil)
	in.Start = time.Now().Add(-time.Minute + 100*time.Millisecond)
	start := time.Now()
	_, err := h.Call(context.Background(), "loop", "handle", in)
	wantKind(t, err, KindTimeout)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the call stopped %s after it began", took)
	}
}

// TestFlowOperationsRunAtTheRequestsTime: the flow imports' context tells
// the flow store when the request began (flowshard.OpTimer), so that the
// store reads no clock; a call without Input.Start tells nothing.
func TestFlowOperationsRunAtTheRequestsTime(t *testing.T) {
	h, _ := newTestHost(t, Limits{})
	register(t, h, "good", "good", Limits{})
	f := newMemFlow()
	in := sampleInput(f)
	in.Start = time.Now().Add(-time.Second)
	for _, start := range []time.Time{in.Start, {}} {
		in.Start, f.opTimes = start, nil
		if _, err := h.Call(context.Background(), "good", "handle", in); err != nil {
			t.Fatal(err)
		}
		if len(f.opTimes) == 0 || !f.opTimes[0].Equal(start) {
			t.Fatalf("the flow was read at %v, want %v", f.opTimes, start)
		}
	}
}

func TestRecycle(t *testing.T) {
	h, _ := newTestHost(t, Limits{})
	register(t, h, "good", "good", Limits{RecycleAfter: 3, PoolSize: 1})
	f := newMemFlow()
	for range 10 {
		if _, err := h.Call(context.Background(), "good", "handle", sampleInput(f)); err != nil {
			t.Fatal(err)
		}
	}
	st := statsOf(t, h, "good")
	if st.Recycled != 3 || st.Instantiated != 4 || st.InstancesLive != 1 {
		t.Fatalf("stats %+v: want 3 recycled, 4 made, 1 live", st)
	}
	if e, _ := f.get("count"); binary.LittleEndian.Uint64(e.val) != 10 {
		t.Fatal("state kept in the flow was lost across recycling")
	}
}

func TestWASIIsEmptyAndLogsOutput(t *testing.T) {
	h, logs := newTestHost(t, Limits{})
	register(t, h, "wasi", "wasi", Limits{})
	out, err := h.Call(context.Background(), "wasi", "handle", sampleInput(nil))
	if err != nil || out.Result != 0 {
		t.Fatalf("wasi guest: %+v, %v (result is its environment count)", out, err)
	}
	if !strings.Contains(logs.String(), `level=DEBUG msg="plugin output" module=wasi stream=stdout text="hello from wasi"`) {
		t.Fatalf("stdout not logged:\n%s", logs)
	}
}

func TestDiskCacheAndClose(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	h, err := NewHost(ctx, Config{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Register(ctx, "good", loadWasm(t, "good"), Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		t.Fatalf("cache dir empty after compiling: %v", err)
	}
	_, err = h.Call(ctx, "good", "handle", sampleInput(nil))
	wantKind(t, err, KindClosed)
	if _, err := h.Register(ctx, "good", loadWasm(t, "good"), Limits{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("register after close: %v", err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatalf("second close: %v", err)
	}

	// A second host starts warm from the same directory.
	h2, err := NewHost(ctx, Config{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h2.Close(ctx) }()
	if _, err := h2.Register(ctx, "good", loadWasm(t, "good"), Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h2.Call(ctx, "good", "handle", sampleInput(newMemFlow())); err != nil {
		t.Fatal(err)
	}
}

// TestCloseStopsCallsInFlight: Close waits until its context ends, then
// stops a call that would never return.
func TestCloseStopsCallsInFlight(t *testing.T) {
	ctx := context.Background()
	h, err := NewHost(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Register(ctx, "loop", loadWasm(t, "loop"), Limits{Deadline: time.Minute}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := h.Call(ctx, "loop", "handle", sampleInput(nil))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := h.Close(cctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("call in flight at Close returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("call in flight survived Close")
	}
}

// otherCtx is a context that is not one of the standard library's, like
// *fasthttp.RequestCtx: context.WithTimeout watches it from a goroutine.
type otherCtx struct {
	context.Context
	done chan struct{}
}

func (c otherCtx) Done() <-chan struct{} { return c.done }

// TestForeignParentContext runs concurrent calls under a parent context of
// a foreign type; with -race this checks that nothing the host reuses
// between calls is reachable from a goroutine that outlives a call.
func TestForeignParentContext(t *testing.T) {
	h, _ := newTestHost(t, Limits{})
	register(t, h, "good", "good", Limits{PoolSize: 2})
	ctx := otherCtx{Context: context.Background(), done: make(chan struct{})}
	f := newMemFlow()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if _, err := h.Call(ctx, "good", "handle", sampleInput(f)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestLoopingGuestDoesNotHoldUpTheGarbageCollector: Go cannot preempt a
// goroutine inside compiled WebAssembly, so a guest that never left the JIT
// would stall every stop-the-world, and with it the whole process (watchdog
// included), until it returned. The stop check leaves the JIT every
// fuelPerExit iterations; without that, this test hangs until go test's
// -timeout.
func TestLoopingGuestDoesNotHoldUpTheGarbageCollector(t *testing.T) {
	h, _ := newTestHost(t, Limits{})
	register(t, h, "loop", "loop", Limits{Deadline: 3 * time.Second})
	done := make(chan error, 1)
	go func() {
		_, err := h.Call(context.Background(), "loop", "handle", sampleInput(nil))
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	gc := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		runtime.GC()
		gc <- time.Since(start)
	}()
	select {
	case d := <-gc:
		t.Logf("a collection beside a looping guest took %v", d)
	case <-time.After(2 * time.Second):
		t.Fatal("the garbage collector waited for the looping guest")
	}
	select {
	case err := <-done:
		t.Fatalf("the loop returned before its deadline: %v", err)
	default:
	}
	var pe *Error
	if err := <-done; !errors.As(err, &pe) || pe.Kind != KindTimeout {
		t.Fatalf("loop ended with %v, want a timeout", err)
	}
}

// TestRepeatedResponseIsDecodedOnce: an instance decodes a response envelope
// it decoded last only once, and a new envelope's decoding never changes a
// response handed out before.
// fixedCaller registers the fixed guest with one instance and returns
// what calls an export of it with in and returns the response it wrote.
func fixedCaller(t *testing.T, in *Input) func(export string) Response {
	h, _ := newTestHost(t, Limits{})
	register(t, h, "m", "fixed", Limits{PoolSize: 1})
	return func(export string) Response {
		t.Helper()
		out, err := h.Call(context.Background(), "m", export, in)
		if err != nil || !out.Wrote {
			t.Fatalf("%s: %v %+v", export, err, out)
		}
		return out.Response
	}
}

func TestRepeatedResponseIsDecodedOnce(t *testing.T) {
	call := fixedCaller(t, &Input{})
	want := Response{Status: 200, Headers: []Pair{{"x", "y"}}, Body: []byte("hi")}
	same := func(r Response) bool {
		return r.Status == want.Status && slices.Equal(r.Headers, want.Headers) && bytes.Equal(r.Body, want.Body)
	}
	first := call("handle")
	second := call("handle")
	if !same(first) || !same(second) {
		t.Fatalf("answered %+v, then %+v", first, second)
	}
	if &first.Headers[0] != &second.Headers[0] || &first.Body[0] != &second.Body[0] {
		t.Error("the repeated envelope was decoded again")
	}
	if n := testing.AllocsPerRun(100, func() { call("handle") }); n != 0 {
		t.Errorf("a repeated answer costs %v allocations", n)
	}
	if r := call("other"); r.Status != 404 || r.Headers != nil || r.Body != nil {
		t.Fatalf("other answered %+v", r)
	}
	// The body is decoded afresh; the header pairs, which nothing
	// modifies, may be the ones decoded before.
	if third := call("handle"); !same(first) || !same(third) || &third.Body[0] == &first.Body[0] {
		t.Fatalf("after another envelope: first %+v, then %+v", first, third)
	}
}

// TestBodyRoom: a body decoded afresh goes into the caller's room; an
// envelope repeated is decoded into a body of the instance's own, which is
// kept, so what is shared never aliases a room the caller reuses.
func TestBodyRoom(t *testing.T) {
	var room []byte
	call := fixedCaller(t, &Input{BodyRoom: &room})
	first := call("handle")
	if string(first.Body) != "hi" || len(room) == 0 || &first.Body[0] != &room[0] {
		t.Fatalf("the first answer %q was not decoded into the room %q", first.Body, room)
	}
	second := call("handle")
	if string(second.Body) != "hi" || &second.Body[0] == &room[0] {
		t.Fatalf("the repeated answer %q is in the room", second.Body)
	}
	copy(room, "XX") // the caller reuses its room
	if third := call("handle"); string(third.Body) != "hi" || &third.Body[0] != &second.Body[0] {
		t.Fatalf("the kept answer was %q, at another body", third.Body)
	}
	if n := testing.AllocsPerRun(100, func() { call("handle") }); n != 0 {
		t.Errorf("a repeated answer costs %v allocations", n)
	}
	call("other")
	if again := call("handle"); &again.Body[0] != &room[0] || string(again.Body) != "hi" {
		t.Fatalf("after another envelope the answer %q was not in the room", again.Body)
	}
}

// A call waiting for the only instance gets it when the call holding it
// returns, though the instance goes back to the pool's hot slot when no
// one waits: with two callers taking turns on one instance, neither may
// starve. A lost hand-off shows as a caller's deadline.
func TestPoolHandsItsOnlyInstanceToAWaitingCall(t *testing.T) {
	h, _ := newTestHost(t, Limits{})
	register(t, h, "one", "good", Limits{PoolSize: 1})
	f := newMemFlow()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for range 500 {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := h.Call(ctx, "one", "handle", sampleInput(f))
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if st := statsOf(t, h, "one"); st.InstancesLive != 1 {
		t.Errorf("%d instances live, want 1", st.InstancesLive)
	}
}
