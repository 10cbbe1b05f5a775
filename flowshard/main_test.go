package flowshard

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The crash tests re-execute this binary as the child that gets killed.
	if mode := os.Getenv(crashEnv); mode != "" {
		os.Exit(crashChild(mode))
	}
	goleak.VerifyTestMain(m)
}

// clock is a settable clock for TTL tests.
type clock struct{ ms atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ms.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	return c
}

func (c *clock) now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *clock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }
func (c *clock) opts(o Options) Options  { o.Now = c.now; return o }
func dbPath(t testing.TB) string         { return filepath.Join(t.TempDir(), "flow.db") }
func syncP() Policy                      { return Policy{Durability: Sync, MIdx: 3, Origin: 7} }
func pol(d Durability, ttl time.Duration) Policy {
	return Policy{Durability: d, TTL: ttl, MIdx: 3, Origin: 7}
}

// open opens a store that the test closes at its end.
func open(t testing.TB, path string, o Options) *Store {
	t.Helper()
	s, err := Open(path, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// reopen closes s and opens path again.
func reopen(t testing.TB, s *Store, path string, o Options) *Store {
	t.Helper()
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return open(t, path, o)
}
