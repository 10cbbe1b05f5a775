package nodehost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func writeModule(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.js")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFormatterBounded: a module that never ends, or that spawns children,
// ends when the call's context does, its whole process group with it.
func TestFormatterBounded(t *testing.T) {
	if _, err := Path(); err != nil {
		t.Fatal(err)
	}
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	for _, tc := range []struct{ name, src, ready string }{
		{"busy loop", `module.exports = { load: () => { for (;;) {} } };`, ""},
		{"never settles", `module.exports = { load: () => new Promise(() => setInterval(() => {}, 10)) };`, ""},
		{"a child that outlives it", `const cp = require('child_process'), fs = require('fs');
module.exports = { load: () => { const c = cp.spawn('sleep', ['300'], { detached: false });
	fs.writeFileSync(` + strconv.Quote(pidfile) + `, String(c.pid)); return new Promise(() => {}); } };`, pidfile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := Formatter(ctx, writeModule(t, tc.src), "load", &bytes.Buffer{}, map[string]any{})
				done <- err
			}()
			// The module is running (its child started, when it has one).
			time.Sleep(time.Second)
			for deadline := time.Now().Add(30 * time.Second); tc.ready != ""; time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(tc.ready); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the module never started its child")
				}
			}
			cancel()
			start := time.Now()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "node ended before answering") {
					t.Fatalf("err = %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("still running 10 s after its context ended")
			}
			t.Logf("ended %v after its context", time.Since(start).Round(time.Millisecond))
		})
	}
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			break
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the module's child %d outlived it", pid)
		}
	}
}

// TestFormatterAnswers: arguments go in as JSON, the awaited result comes
// back, and what the module prints goes to the log, not into the answer.
func TestFormatterAnswers(t *testing.T) {
	m := writeModule(t, `module.exports = { save: async (o, x) => { console.log('noise'); console.error('more'); return { got: [o.a, x.b] }; } };`)
	var logw bytes.Buffer
	out, err := Formatter(context.Background(), m, "save", &logw, map[string]any{"a": 1}, map[string]any{"b": "two"})
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"got":[1,"two"]}` {
		t.Fatalf("answer %s", out)
	}
	if !strings.Contains(logw.String(), "noise") || !strings.Contains(logw.String(), "more") {
		t.Fatalf("log %q", logw.String())
	}
}

// TestHeapBounded: a module that allocates without end fails alone.
func TestHeapBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates the heap limit")
	}
	m := writeModule(t, `module.exports = { load: () => { const a = []; for (;;) { a.push(new Array(1e6).fill(1)); } } };`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Formatter(ctx, m, "load", &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "node ended before answering") {
		t.Fatalf("err = %v", err)
	}
}

// BenchmarkFormatterCall is one load on node: its start-up is the cost.
func BenchmarkFormatterCall(b *testing.B) {
	p := filepath.Join(b.TempDir(), "m.js")
	if err := os.WriteFile(p, []byte(`module.exports = { load: () => ({ imposters: [] }) };`), 0o644); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		if _, err := Formatter(context.Background(), p, "load", &bytes.Buffer{}, map[string]any{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRepository drives a small repository module of mb's interface
// through every call riftgate makes, and its errors.
func TestRepository(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store.json")
	module := filepath.Join(dir, "repo.js")
	src := `const fs = require('fs');
module.exports = { create: (config, logger) => {
	const file = config.store, read = () => (fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {});
	const write = x => fs.writeFileSync(file, JSON.stringify(x));
	logger.info('opened ' + file);
	return {
		add: async imposter => { const x = read(); x[imposter.port] = imposter.creationRequest; write(x); return imposter; },
		del: async port => { const x = read(); if (port === 13) { throw new Error('unlucky'); } delete x[port]; write(x); },
		all: async () => Object.values(read()),
		loadAll: async protocols => { for (const d of Object.values(read())) { await protocols[d.protocol].createImposterFrom(d); } }
	};
} };`
	if err := os.WriteFile(module, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var logw bytes.Buffer
	r, err := OpenRepository(module, map[string]any{"store": store}, &syncWriter{w: &logw})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, imp := range []string{`{"protocol":"http","port":1,"stubs":[]}`, `{"protocol":"tcp","port":2}`} {
		if err := r.Add(ctx, json.RawMessage(imp)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Delete(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(ctx, 13); err == nil || !strings.Contains(err.Error(), "unlucky") {
		t.Fatalf("a failing del: %v", err)
	}
	all, err := r.All(ctx)
	if err != nil || len(all) != 1 {
		t.Fatalf("all: %s %v", all, err)
	}
	loaded, err := r.LoadAll(ctx)
	if err != nil || len(loaded) != 1 || !strings.Contains(string(loaded[0]), `"port":1`) {
		t.Fatalf("loadAll: %s %v", loaded, err)
	}
	r.Close()
	if !strings.Contains(logw.String(), "info opened") {
		t.Fatalf("the module's logger: %q", logw.String())
	}
	if _, err := OpenRepository(filepath.Join(dir, "none.js"), nil, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "Cannot find module") {
		t.Fatalf("a missing module: %v", err)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
