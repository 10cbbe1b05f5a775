package configlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/riftgate/riftgate/gateway/config"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

func create(port int) *config.Command {
	return &config.Command{Op: config.OpCreateImposter, Imposters: []config.ImposterDoc{{
		Port: port, Header: []byte(`{"protocol":"http","port":` + strconv.Itoa(port) + `}`),
		Stubs: []config.StubDoc{{JSON: []byte(`{"responses":[{"is":{}}]}`)}},
	}}}
}

func open(t *testing.T, path string, rec config.Reconciler) *Log {
	t.Helper()
	l, err := Open(Options{Path: path, Reconciler: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func encoded(t *testing.T, s *config.State) []byte {
	b, err := config.EncodeState(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recorder is a reconciler that remembers what it was asked and can fail.
type recorder struct {
	fail      error
	committed int
	aborted   int
}

type plan struct{ r *recorder }

func (p plan) Commit() { p.r.committed++ }
func (p plan) Abort()  { p.r.aborted++ }

func (r *recorder) Follow(context.Context, *config.State, *config.State) {}

func (r *recorder) Prepare(_ context.Context, prev, next *config.State, _ config.Result) (config.Plan, error) {
	if r.fail != nil {
		return nil, r.fail
	}
	return plan{r}, nil
}

func TestReplayAcrossReopenAndCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.db")
	l := open(t, path, nil)
	for i := range CompactEvery + 5 {
		port := 1 + i%50
		if _, err := l.Submit(ctx, &config.Command{Op: config.OpDeleteImposter, Port: port}); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Submit(ctx, create(port)); err != nil {
			t.Fatal(err)
		}
	}
	want := encoded(t, l.State())
	if l.snapIndex == 0 {
		t.Fatalf("no compaction after %d commands", l.index)
	}
	l.Close()
	again := open(t, path, nil)
	if !bytes.Equal(encoded(t, again.State()), want) {
		t.Fatal("reopening gives another state")
	}
	if again.index != l.index {
		t.Fatalf("index %d after reopen, was %d", again.index, l.index)
	}
	// The log holds only what follows the snapshot.
	n := 0
	_ = again.db.View(func(tx *bolt.Tx) error { n = tx.Bucket(logBucket).Stats().KeyN; return nil })
	if uint64(n) != again.index-again.snapIndex {
		t.Fatalf("%d commands kept past the snapshot at %d of %d", n, again.snapIndex, again.index)
	}
}

func TestRefusedAndFailedCommandsLeaveNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.db")
	rec := &recorder{}
	l := open(t, path, rec)
	if _, err := l.Submit(ctx, create(1)); err != nil || rec.committed != 1 {
		t.Fatalf("submit: %v, %d commits", err, rec.committed)
	}
	before := encoded(t, l.State())
	// Refused by Apply: the reconciler is not even asked.
	res, err := l.Submit(ctx, create(1))
	if err != nil || res.Err == nil || rec.committed != 1 || rec.aborted != 0 {
		t.Fatalf("refused: %+v %v", res, err)
	}
	// Refused by the reconciler (a port another process holds).
	rec.fail = errors.New("port in use")
	if _, err := l.Submit(ctx, create(2)); err == nil {
		t.Fatal("a failed Prepare was acknowledged")
	}
	rec.fail = nil
	// The disk fails: the plan is aborted.
	l.db.Close()
	if _, err := l.Submit(ctx, create(3)); err == nil || rec.aborted != 1 || rec.committed != 1 {
		t.Fatalf("a failed write: %v, %d aborted, %d committed", err, rec.aborted, rec.committed)
	}
	if !bytes.Equal(encoded(t, l.State()), before) {
		t.Fatal("a failed command changed the state")
	}
	l.db = nil
	if again := open(t, path, nil); !bytes.Equal(encoded(t, again.State()), before) {
		t.Fatal("a failed command reached the disk")
	}
}

func TestCommandCap(t *testing.T) {
	l := open(t, "", nil)
	big := create(1)
	big.Imposters[0].Stubs[0].JSON = bytes.Repeat([]byte(" "), MaxCommandBytes)
	if _, err := l.Submit(ctx, big); err == nil {
		t.Fatal("an oversized command was taken")
	}
}

// The file's layout: meta/format is 1, and each command is under its
// big-endian index in its wire form.
func TestFileLayoutIsPinned(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.db")
	l := open(t, path, nil)
	cmd := create(4545)
	if _, err := l.Submit(ctx, cmd); err != nil {
		t.Fatal(err)
	}
	l.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want, _ := config.EncodeCommand(cmd)
	err = db.View(func(tx *bolt.Tx) error {
		if f := tx.Bucket([]byte("meta")).Get([]byte("format")); !bytes.Equal(f, []byte{1}) {
			t.Errorf("format %x", f)
		}
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], 1)
		if got := tx.Bucket([]byte("log")).Get(k[:]); !bytes.Equal(got, want) {
			t.Errorf("command 1 stored as %x", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
