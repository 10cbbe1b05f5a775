// Package conformance checks a Raft state-machine adapter against the
// contract every adapter owes the Ready loop: the applied state tracks the
// last entry; a boot restores from the snapshot and resumes after it; a
// snapshot is point-in-time; an install is persisted before it swaps and is
// durable; a failed install leaves the state untouched; membership survives
// a restart; blank and membership entries still answer; snapshot ids are
// path-safe.
//
// It takes any adapter behind the small Adapter interface, so a consumer
// with its own adapter is held to the same properties. ForApp runs it over
// raftnode's own StateMachine for any AppStateMachine.
package conformance

import (
	"bytes"
	"errors"
	"regexp"
	"slices"
	"testing"

	"github.com/riftgate/riftgate/raftnode"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Adapter is what the suite drives.
type Adapter interface {
	// ApplyEntries applies committed entries and returns the indexes it
	// answered, in order.
	ApplyEntries(ents []*pb.Entry) (answered []uint64, err error)
	// Applied is the index and term of the last applied entry.
	Applied() (index, term uint64)
	Membership() raftnode.Membership
	// Snapshot builds and persists a snapshot of the applied state.
	Snapshot() (*pb.Snapshot, error)
	// InstallSnapshot replaces the state with a snapshot's.
	InstallSnapshot(*pb.Snapshot) error
	// Fingerprint is a deterministic encoding of the application state.
	Fingerprint() ([]byte, error)
	Close() error
}

// Harness supplies adapters to the suite.
type Harness struct {
	// Open opens an adapter over dir, restoring what it persisted there.
	Open func(t testing.TB, dir string) Adapter
	// FailSnapshotWrites makes a's storage fail every snapshot write with
	// err (nil restores it). Without it the persist-before-swap check
	// cannot tell the orders apart and is skipped.
	FailSnapshotWrites func(a Adapter, err error)
	// Command is the entry payload of test command i; different i must
	// change the state differently.
	Command func(i int) []byte
}

var errInjected = errors.New("conformance: injected snapshot write failure")

// RunAll runs every check as a subtest.
func RunAll(t *testing.T, h Harness) {
	t.Run("AppliedTracksLastEntry", func(t *testing.T) { appliedTracksLastEntry(t, h) })
	t.Run("BootRestoreResumesAfterSnapshot", func(t *testing.T) { bootRestore(t, h) })
	t.Run("SnapshotIsPointInTime", func(t *testing.T) { pointInTime(t, h) })
	t.Run("InstallPersistsBeforeSwap", func(t *testing.T) { persistBeforeSwap(t, h) })
	t.Run("InstalledSnapshotIsDurable", func(t *testing.T) { installDurable(t, h) })
	t.Run("FailedInstallLeavesStateUntouched", func(t *testing.T) { failedInstall(t, h) })
	t.Run("MembershipSurvivesRestart", func(t *testing.T) { membershipRestart(t, h) })
	t.Run("BlankAndMembershipEntriesAnswer", func(t *testing.T) { blankAndMembership(t, h) })
	t.Run("SnapshotIDsArePathSafe", func(t *testing.T) { pathSafeIDs(t, h) })
}

// log builds entries from..to (inclusive) at term: commands, with a blank
// entry at every fifth index.
func (h Harness) log(from, to, term uint64) []*pb.Entry {
	var out []*pb.Entry
	for i := from; i <= to; i++ {
		e := &pb.Entry{Index: new(i), Term: new(term), Type: pb.EntryNormal.Enum()}
		if i%5 != 0 {
			e.Data = h.Command(int(i))
		}
		out = append(out, e)
	}
	return out
}

func confEntry(t testing.TB, index, term uint64, typ pb.ConfChangeType, name string) *pb.Entry {
	data, err := raftnode.ConfChangeEntryData(typ, raftnode.NodeIDFromName(name), name, "http://"+name+".invalid/raft")
	if err != nil {
		t.Fatal(err)
	}
	return &pb.Entry{Index: new(index), Term: new(term), Type: pb.EntryConfChangeV2.Enum(), Data: data}
}

func open(t *testing.T, h Harness, dir string) Adapter {
	t.Helper()
	a := h.Open(t, dir)
	t.Cleanup(func() { _ = a.Close() })
	return a
}

func apply(t *testing.T, a Adapter, ents []*pb.Entry) []uint64 {
	t.Helper()
	got, err := a.ApplyEntries(ents)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return got
}

func fingerprint(t *testing.T, a Adapter) []byte {
	t.Helper()
	fp, err := a.Fingerprint()
	if err != nil {
		t.Fatalf("fingerprint: %v", err)
	}
	return fp
}

func wantApplied(t *testing.T, a Adapter, index, term uint64) {
	t.Helper()
	if i, tm := a.Applied(); i != index || tm != term {
		t.Fatalf("applied (%d, %d), want (%d, %d)", i, tm, index, term)
	}
}

func appliedTracksLastEntry(t *testing.T, h Harness) {
	a := open(t, h, t.TempDir())
	wantApplied(t, a, 0, 0)
	apply(t, a, h.log(1, 4, 1))
	wantApplied(t, a, 4, 1)
	apply(t, a, h.log(5, 7, 2)) // 5 is blank
	wantApplied(t, a, 7, 2)
	// A replay of applied entries changes nothing.
	before := fingerprint(t, a)
	apply(t, a, h.log(3, 7, 2))
	wantApplied(t, a, 7, 2)
	if !bytes.Equal(before, fingerprint(t, a)) {
		t.Fatal("replaying applied entries changed the state")
	}
}

func bootRestore(t *testing.T, h Harness) {
	dir := t.TempDir()
	a := h.Open(t, dir)
	apply(t, a, h.log(1, 6, 1))
	if _, err := a.Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	want := fingerprint(t, a)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := open(t, h, dir)
	wantApplied(t, b, 6, 1)
	if !bytes.Equal(want, fingerprint(t, b)) {
		t.Fatal("restored state differs from the snapshot's")
	}
	apply(t, b, h.log(7, 8, 1))
	wantApplied(t, b, 8, 1)
}

func pointInTime(t *testing.T, h Harness) {
	a := open(t, h, t.TempDir())
	apply(t, a, h.log(1, 3, 1))
	at3 := fingerprint(t, a)
	snap, err := a.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	apply(t, a, h.log(4, 9, 1))
	if bytes.Equal(at3, fingerprint(t, a)) {
		t.Fatal("commands 4..9 did not change the state; the check would prove nothing")
	}
	if md := snap.GetMetadata(); md.GetIndex() != 3 || md.GetTerm() != 1 {
		t.Fatalf("snapshot at (%d, %d), want (3, 1)", md.GetIndex(), md.GetTerm())
	}
	b := open(t, h, t.TempDir())
	if err := b.InstallSnapshot(snap); err != nil {
		t.Fatalf("install: %v", err)
	}
	if !bytes.Equal(at3, fingerprint(t, b)) {
		t.Fatal("snapshot taken at 3 does not hold the state at 3")
	}
	wantApplied(t, b, 3, 1)
}

// source returns a snapshot at index 6 and the state it holds.
func source(t *testing.T, h Harness) (*pb.Snapshot, []byte) {
	a := open(t, h, t.TempDir())
	apply(t, a, h.log(1, 6, 1))
	snap, err := a.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return snap, fingerprint(t, a)
}

func persistBeforeSwap(t *testing.T, h Harness) {
	if h.FailSnapshotWrites == nil {
		t.Skip("harness cannot fail snapshot writes; persist-first and swap-first look the same")
	}
	snap, _ := source(t, h)
	b := open(t, h, t.TempDir())
	apply(t, b, h.log(1, 2, 1))
	before := fingerprint(t, b)
	h.FailSnapshotWrites(b, errInjected)
	if err := b.InstallSnapshot(snap); err == nil {
		t.Fatal("install succeeded although the snapshot could not be persisted")
	}
	if !bytes.Equal(before, fingerprint(t, b)) {
		t.Fatal("install swapped the state before persisting the snapshot")
	}
	wantApplied(t, b, 2, 1)
	h.FailSnapshotWrites(b, nil)
}

func installDurable(t *testing.T, h Harness) {
	snap, want := source(t, h)
	dir := t.TempDir()
	b := h.Open(t, dir)
	if err := b.InstallSnapshot(snap); err != nil {
		t.Fatalf("install: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	c := open(t, h, dir)
	wantApplied(t, c, 6, 1)
	if !bytes.Equal(want, fingerprint(t, c)) {
		t.Fatal("installed snapshot did not survive a restart")
	}
}

func failedInstall(t *testing.T, h Harness) {
	snap, _ := source(t, h)
	b := open(t, h, t.TempDir())
	apply(t, b, h.log(1, 3, 1))
	before := fingerprint(t, b)
	corrupt := &pb.Snapshot{Metadata: snap.GetMetadata(), Data: append([]byte("not a snapshot"), snap.GetData()...)}
	if err := b.InstallSnapshot(corrupt); err == nil {
		t.Fatal("a corrupt snapshot installed")
	}
	truncated := &pb.Snapshot{Metadata: snap.GetMetadata(), Data: snap.GetData()[:len(snap.GetData())/2]}
	if err := b.InstallSnapshot(truncated); err == nil {
		t.Fatal("a truncated snapshot installed")
	}
	if !bytes.Equal(before, fingerprint(t, b)) {
		t.Fatal("a failed install changed the state")
	}
	wantApplied(t, b, 3, 1)
	// The storage was not touched either: the good snapshot still installs.
	if err := b.InstallSnapshot(snap); err != nil {
		t.Fatalf("install after failures: %v", err)
	}
}

func membershipRestart(t *testing.T, h Harness) {
	dir := t.TempDir()
	a := h.Open(t, dir)
	apply(t, a, []*pb.Entry{
		confEntry(t, 1, 1, pb.ConfChangeAddNode, "m1"),
		confEntry(t, 2, 1, pb.ConfChangeAddLearnerNode, "m2"),
		confEntry(t, 3, 1, pb.ConfChangeAddLearnerNode, "m3"),
		confEntry(t, 4, 1, pb.ConfChangeAddNode, "m2"),
		confEntry(t, 5, 1, pb.ConfChangeRemoveNode, "m3"),
	})
	apply(t, a, h.log(6, 7, 1))
	want := a.Membership()
	if !slices.Equal(want.Learners(), nil) || len(want.Voters()) != 2 || !want.WasRemoved(raftnode.NodeIDFromName("m3")) || want.Index != 5 {
		t.Fatalf("membership after changes: %+v", want)
	}
	if _, err := a.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := open(t, h, dir)
	got := b.Membership()
	if !slices.Equal(got.Members, want.Members) || !slices.Equal(got.Removed, want.Removed) || got.Index != want.Index {
		t.Fatalf("membership after restart %+v, want %+v", got, want)
	}
}

func blankAndMembership(t *testing.T, h Harness) {
	a := open(t, h, t.TempDir())
	ents := []*pb.Entry{
		{Index: new(uint64(1)), Term: new(uint64(1)), Type: pb.EntryNormal.Enum()},
		confEntry(t, 2, 1, pb.ConfChangeAddNode, "m1"),
		{Index: new(uint64(3)), Term: new(uint64(1)), Type: pb.EntryNormal.Enum(), Data: h.Command(3)},
		{Index: new(uint64(4)), Term: new(uint64(2)), Type: pb.EntryNormal.Enum()},
	}
	got := apply(t, a, ents)
	if !slices.Equal(got, []uint64{1, 2, 3, 4}) {
		t.Fatalf("answered %v, want every entry 1..4", got)
	}
	wantApplied(t, a, 4, 2)
}

var pathSafe = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

func pathSafeIDs(t *testing.T, h Harness) {
	a := open(t, h, t.TempDir())
	seen := map[string]bool{}
	for i := uint64(1); i <= 3; i++ {
		apply(t, a, h.log(i*3-2, i*3, i))
		snap, err := a.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		id := raftnode.SnapshotID(snap.GetMetadata())
		if !pathSafe.MatchString(id) || id == "." || id == ".." || seen[id] {
			t.Fatalf("snapshot id %q is not a fresh path-safe name", id)
		}
		seen[id] = true
	}
}
