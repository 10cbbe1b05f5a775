package plugins

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// wasmDir is where `make wasm` puts the test guests built from testdata.
func wasmDir() string {
	if d := os.Getenv("RIFTGATE_WASM_DIR"); d != "" {
		return d
	}
	abs, err := filepath.Abs(filepath.Join("..", "build", "wasm"))
	if err != nil {
		panic(err)
	}
	return abs
}

// loadWasm reads plugins/testdata/<name>.wat's compiled module.
func loadWasm(t testing.TB, name string) []byte {
	t.Helper()
	p := filepath.Join(wasmDir(), "plugins", name+".wasm")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("test module %s missing (%v): run `make wasm`", p, err)
	}
	return b
}

// logBuf collects log output so tests can check what guests logged.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// newTestHost makes a Host whose log goes to the returned buffer, closed
// when the test ends.
func newTestHost(t testing.TB, defaults Limits) (*Host, *logBuf) {
	t.Helper()
	lb := &logBuf{}
	log := slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := NewHost(context.Background(), Config{Logger: log, Defaults: defaults})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return h, lb
}

func register(t testing.TB, h *Host, name, file string, lim Limits) ModuleInfo {
	t.Helper()
	info, err := h.Register(context.Background(), name, loadWasm(t, file), lim)
	if err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
	return info
}

// memFlow is a flow for tests: a map with versions, counting operations.
// The flow store is not this package's component; this stands in for it
// behind the Flow interface.
type memFlow struct {
	mu          sync.Mutex
	m           map[string]memEntry
	v           uint64
	ops         int
	unavailable bool
	opTimes     []time.Time // what each Get's context said (flowshard.OpTimer), zero if nothing
}

type memEntry struct {
	val []byte
	ver uint64
}

func newMemFlow() *memFlow { return &memFlow{m: map[string]memEntry{}} }

func (f *memFlow) Get(ctx context.Context, key []byte) ([]byte, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops++
	var at time.Time
	if t, ok := ctx.(interface{ OpTime() (time.Time, bool) }); ok {
		at, _ = t.OpTime()
	}
	f.opTimes = append(f.opTimes, at)
	if f.unavailable {
		return nil, 0, ErrFlowUnavailable
	}
	e, ok := f.m[string(key)]
	if !ok {
		return nil, 0, ErrFlowNotFound
	}
	return e.val, e.ver, nil
}

func (f *memFlow) Put(_ context.Context, key, value []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops++
	if f.unavailable {
		return ErrFlowUnavailable
	}
	f.v++
	f.m[string(key)] = memEntry{val: bytes.Clone(value), ver: f.v}
	return nil
}

func (f *memFlow) CAS(_ context.Context, key []byte, expect uint64, value []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops++
	if f.unavailable {
		return ErrFlowUnavailable
	}
	if f.m[string(key)].ver != expect {
		return ErrFlowMismatch
	}
	f.v++
	f.m[string(key)] = memEntry{val: bytes.Clone(value), ver: f.v}
	return nil
}

func (f *memFlow) Delete(_ context.Context, key []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops++
	if f.unavailable {
		return ErrFlowUnavailable
	}
	if _, ok := f.m[string(key)]; !ok {
		return ErrFlowNotFound
	}
	delete(f.m, string(key))
	return nil
}

func (f *memFlow) opCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops
}

func (f *memFlow) get(key string) (memEntry, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.m[key]
	return e, ok
}

func wantKind(t testing.TB, err error, want Kind) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want a %s error, got nil", want)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *Error of kind %s, got %T: %v", want, err, err)
	}
	if e.Kind != want {
		t.Fatalf("want kind %s, got %s: %v", want, e.Kind, err)
	}
	return e
}
