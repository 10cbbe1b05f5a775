// Package examples_test runs the example plugins, built from source by
// `make wasm`, in riftgate's real plugin host against the real single-node
// flow store (host_test.go), and in the real riftgate binary over HTTP with
// each example's imposter file (e2e_test.go).
package examples_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/riftgate/riftgate/flowshard"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/flowlocal"
	"github.com/riftgate/riftgate/plugins"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	hostDone() // the shared host's goroutines end here, before the leak check
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// wasmDir is where the Makefile puts built modules.
func wasmDir(t testing.TB) string {
	if d := os.Getenv("RIFTGATE_WASM_DIR"); d != "" {
		return d
	}
	d, err := filepath.Abs(filepath.Join("..", "build", "wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// modulePath returns build/wasm/examples/<name>.wasm, failing the test when
// it has not been built.
func modulePath(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(wasmDir(t), "examples", name+".wasm")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("example module %s missing (%v): run make wasm", p, err)
	}
	return p
}

// One host for the whole package: a Go guest takes about a second to
// compile, so each module is compiled once per test process.
var (
	hostOnce sync.Once
	host     *plugins.Host
	hostErr  error
	hostDone = func() {}
)

func sharedHost(t testing.TB) *plugins.Host {
	t.Helper()
	hostOnce.Do(func() {
		dir, err := os.MkdirTemp("", "riftgate-examples-cache-")
		if err != nil {
			hostErr = err
			return
		}
		host, hostErr = plugins.NewHost(context.Background(), plugins.Config{
			CacheDir: dir,
			Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		hostDone = func() {
			if host != nil {
				_ = host.Close(context.Background())
			}
			_ = os.RemoveAll(dir)
		}
	})
	if hostErr != nil {
		t.Fatal(hostErr)
	}
	return host
}

// register loads examples/<name> into the shared host under its name.
func register(t testing.TB, name string) *plugins.Host {
	t.Helper()
	h := sharedHost(t)
	wasm, err := os.ReadFile(modulePath(t, name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Register(context.Background(), name, wasm, plugins.Limits{}); err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
	return h
}

// newStore opens a real flowshard in the test's temp dir, in memory
// durability, behind the engine's flow seam.
func newStore(t testing.TB) flow.Store {
	t.Helper()
	sh, err := flowshard.Open(filepath.Join(t.TempDir(), "flow.db"), flowshard.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sh.Close(context.Background()); err != nil {
			t.Errorf("close flowshard: %v", err)
		}
	})
	return flowlocal.Store{Shard: sh}
}

// seamFlow is the per-call flow handle over a flow.Store, the glue the
// engine also has: one flow id, memory durability.
type seamFlow struct {
	s  flow.Store
	id string
}

var policy = flow.Policy{Durability: flow.Memory}

func (f seamFlow) Get(ctx context.Context, key []byte) ([]byte, uint64, error) {
	e, err := f.s.Get(ctx, f.id, string(key), nil)
	return e.Value, e.Version.V, flowHostErr(err)
}

func (f seamFlow) Put(ctx context.Context, key, value []byte) error {
	_, err := f.s.Put(ctx, f.id, string(key), value, policy)
	return flowHostErr(err)
}

func (f seamFlow) CAS(ctx context.Context, key []byte, expect uint64, value []byte) error {
	_, err := f.s.CAS(ctx, f.id, string(key), expect, value, policy)
	return flowHostErr(err)
}

func (f seamFlow) Delete(ctx context.Context, key []byte) error {
	return flowHostErr(f.s.Delete(ctx, f.id, string(key), policy))
}

// storeFlow is a seamFlow that counts operations, so that tests can check
// what a plugin asked for.
type storeFlow struct {
	seamFlow

	mu   sync.Mutex
	ops  map[string]int
	down bool // every operation fails with flow.ErrUnavailable, as an unreachable owner does
}

func newFlow(s flow.Store, id string) *storeFlow {
	return &storeFlow{seamFlow: seamFlow{s, id}, ops: map[string]int{}}
}

// count records op and reports whether the store is reachable.
func (f *storeFlow) count(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops[op]++
	if f.down {
		return flowHostErr(flow.ErrUnavailable)
	}
	return nil
}

func (f *storeFlow) opCount(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops[op]
}

func (f *storeFlow) Get(ctx context.Context, key []byte) ([]byte, uint64, error) {
	if err := f.count("get"); err != nil {
		return nil, 0, err
	}
	return f.seamFlow.Get(ctx, key)
}

func (f *storeFlow) Put(ctx context.Context, key, value []byte) error {
	if err := f.count("put"); err != nil {
		return err
	}
	return f.seamFlow.Put(ctx, key, value)
}

func (f *storeFlow) CAS(ctx context.Context, key []byte, expect uint64, value []byte) error {
	if err := f.count("cas"); err != nil {
		return err
	}
	return f.seamFlow.CAS(ctx, key, expect, value)
}

func (f *storeFlow) Delete(ctx context.Context, key []byte) error {
	if err := f.count("delete"); err != nil {
		return err
	}
	return f.seamFlow.Delete(ctx, key)
}

// flowHostErr is what the plugin host expects of a Flow: its own errors for
// a missing key and a CAS mismatch; anything else reads as UNAVAILABLE.
func flowHostErr(err error) error {
	switch {
	case errors.Is(err, flow.ErrNotFound):
		return plugins.ErrFlowNotFound
	case errors.Is(err, flow.ErrVersionMismatch):
		return plugins.ErrFlowMismatch
	}
	return err
}

// value reads a key straight from the store, as an inject script would.
func (f *storeFlow) value(t testing.TB, key string) (string, bool) {
	t.Helper()
	e, err := f.s.Get(context.Background(), f.id, key, nil)
	if errors.Is(err, flow.ErrNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(e.Value), true
}
