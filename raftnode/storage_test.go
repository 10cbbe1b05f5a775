package raftnode

import (
	"errors"
	"os"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"
)

func ent(i, term uint64, data string) *pb.Entry {
	return &pb.Entry{Index: new(i), Term: new(term), Type: pb.EntryNormal.Enum(), Data: []byte(data)}
}

func openTestStorage(t *testing.T, dir string) *Storage {
	t.Helper()
	s, err := OpenStorage(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStorageContract(t *testing.T) {
	dir := t.TempDir()
	s := openTestStorage(t, dir)
	var ents []*pb.Entry
	for i := uint64(1); i <= 10; i++ {
		ents = append(ents, ent(i, 1+i/4, "payload-payload"))
	}
	if err := s.Save(&pb.HardState{Term: new(uint64(3)), Commit: new(uint64(8))}, ents, true); err != nil {
		t.Fatal(err)
	}
	// At least one entry even when the first alone exceeds maxSize.
	got, err := s.Entries(2, 9, 1)
	if err != nil || len(got) != 1 || got[0].GetIndex() != 2 {
		t.Fatalf("Entries past maxSize: %v %v", got, err)
	}
	size := uint64(proto.Size(ents[0]))
	if got, _ := s.Entries(2, 9, 3*size); len(got) != 3 {
		t.Fatalf("Entries(maxSize=3 entries) returned %d", len(got))
	}
	if _, err := s.CreateSnapshot(6, ents[5].GetTerm(), &pb.ConfState{Voters: []uint64{1}}, []byte("snap")); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(8); !errors.Is(err, ErrCompactBeyondSnapshot) {
		t.Fatalf("compact past the snapshot: %v", err)
	}
	if err := s.Compact(4); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(3); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("compact below the point: %v", err)
	}
	check := func(s *Storage) {
		t.Helper()
		first, _ := s.FirstIndex()
		last, _ := s.LastIndex()
		if first != 5 || last != 10 {
			t.Fatalf("first %d last %d", first, last)
		}
		// Term(FirstIndex()-1) answers for the compacted entry.
		if term, err := s.Term(4); err != nil || term != ents[3].GetTerm() {
			t.Fatalf("Term(first-1) = %d, %v", term, err)
		}
		if _, err := s.Term(3); !errors.Is(err, raft.ErrCompacted) {
			t.Fatalf("Term below: %v", err)
		}
		if _, err := s.Entries(4, 6, 100); !errors.Is(err, raft.ErrCompacted) {
			t.Fatalf("Entries at the compaction point: %v", err)
		}
		if _, err := s.Term(11); !errors.Is(err, raft.ErrUnavailable) {
			t.Fatalf("Term past last: %v", err)
		}
		hs, cs, _ := s.InitialState()
		if hs.GetCommit() != 8 || hs.GetTerm() != 3 || len(cs.GetVoters()) != 1 {
			t.Fatalf("initial state %v %v", hs, cs)
		}
	}
	check(s)
	// A conflicting append truncates the tail.
	if err := s.Save(nil, []*pb.Entry{ent(8, 9, "new")}, true); err != nil {
		t.Fatal(err)
	}
	if last, _ := s.LastIndex(); last != 8 {
		t.Fatalf("last after truncating append %d", last)
	}
	if err := s.Save(nil, []*pb.Entry{ent(9, 9, "x"), ent(10, 9, "y")}, true); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestStorage(t, dir)
	defer func() { _ = s.Close() }()
	check(s)
	if term, _ := s.Term(8); term != 9 {
		t.Fatalf("overwritten entry term %d after reopen", term)
	}
	// The fault hook fails snapshot writes without writing.
	s.FailSnapshotWrites(errors.New("disk full"))
	if err := s.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(20)), Term: new(uint64(9))}}); err == nil {
		t.Fatal("ApplySnapshot ignored the fault")
	}
	if last, _ := s.LastIndex(); last != 10 {
		t.Fatal("a failed ApplySnapshot changed the log")
	}
	s.FailSnapshotWrites(nil)
	if err := s.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(20)), Term: new(uint64(9)), ConfState: &pb.ConfState{Voters: []uint64{1, 2}}}}); err != nil {
		t.Fatal(err)
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	term, _ := s.Term(20)
	hs, cs, _ := s.InitialState()
	if first != 21 || last != 20 || term != 9 || hs.GetCommit() != 20 || len(cs.GetVoters()) != 2 {
		t.Fatalf("after ApplySnapshot: first %d last %d term %d hs %v cs %v", first, last, term, hs, cs)
	}
	// A crash right after the install: the raised commit was persisted with
	// the snapshot, so raft will not restart behind its first index.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestStorage(t, dir)
	if hs, _, _ := s.InitialState(); hs.GetCommit() != 20 || hs.GetTerm() != 9 {
		t.Fatalf("hard state after reopening an installed snapshot: %v", hs)
	}
}

// TestStorageMatchesMemoryStorage drives raft.db and raft's own
// MemoryStorage with the same random appends, snapshots, compactions,
// snapshot installs and reopens, and checks that they answer alike.
func TestStorageMatchesMemoryStorage(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp("", "raftnode-prop")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		s, err := OpenStorage(dir)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { _ = s.Close() }()
		mem := raft.NewMemoryStorage()
		term := uint64(1)
		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				first, _ := mem.FirstIndex()
				last, _ := mem.LastIndex()
				// Start anywhere from the first kept index to just past the
				// end: overwriting a suffix, as a new leader would.
				from := rapid.Uint64Range(first, last+1).Draw(rt, "from")
				n := rapid.IntRange(1, 8).Draw(rt, "n")
				if rapid.Bool().Draw(rt, "newTerm") {
					term++
				}
				var ents []*pb.Entry
				for i := range uint64(n) {
					ents = append(ents, ent(from+i, term, rapid.StringN(0, 40, -1).Draw(rt, "data")))
				}
				if err := mem.Append(ents); err != nil {
					rt.Fatal(err)
				}
				if err := s.Save(&pb.HardState{Term: new(term)}, ents, rapid.Bool().Draw(rt, "sync")); err != nil {
					rt.Fatal(err)
				}
			},
			"snapshotAndCompact": func(rt *rapid.T) {
				snap, _ := mem.Snapshot()
				last, _ := mem.LastIndex()
				if last <= snap.GetMetadata().GetIndex() {
					rt.Skip("nothing new to snapshot")
				}
				i := rapid.Uint64Range(snap.GetMetadata().GetIndex()+1, last).Draw(rt, "at")
				tm, _ := mem.Term(i)
				if _, err := mem.CreateSnapshot(i, &pb.ConfState{Voters: []uint64{1}}, []byte("s")); err != nil {
					rt.Fatal(err)
				}
				if _, err := s.CreateSnapshot(i, tm, &pb.ConfState{Voters: []uint64{1}}, []byte("s")); err != nil {
					rt.Fatal(err)
				}
				first, _ := mem.FirstIndex()
				if i < first {
					return
				}
				c := rapid.Uint64Range(first, i).Draw(rt, "compact")
				if err := mem.Compact(c); err != nil {
					rt.Fatal(err)
				}
				if err := s.Compact(c); err != nil {
					rt.Fatal(err)
				}
			},
			"installSnapshot": func(rt *rapid.T) {
				last, _ := mem.LastIndex()
				term++
				snap := &pb.Snapshot{Data: []byte("i"), Metadata: &pb.SnapshotMetadata{
					Index: new(last + rapid.Uint64Range(0, 5).Draw(rt, "ahead")), Term: new(term),
					ConfState: &pb.ConfState{Voters: []uint64{1, 2}}}}
				cur, _ := mem.Snapshot()
				if snap.GetMetadata().GetIndex() <= cur.GetMetadata().GetIndex() {
					rt.Skip("snapshot not newer")
				}
				if err := mem.ApplySnapshot(snap); err != nil {
					rt.Fatal(err)
				}
				if err := s.ApplySnapshot(snap); err != nil {
					rt.Fatal(err)
				}
			},
			"reopen": func(rt *rapid.T) {
				if err := s.Close(); err != nil {
					rt.Fatal(err)
				}
				if s, err = OpenStorage(dir); err != nil {
					rt.Fatal(err)
				}
			},
			"": func(rt *rapid.T) { compareStorage(rt, s, mem) },
		})
	})
}

func compareStorage(rt *rapid.T, s *Storage, mem *raft.MemoryStorage) {
	mf, _ := mem.FirstIndex()
	ml, _ := mem.LastIndex()
	sf, _ := s.FirstIndex()
	sl, _ := s.LastIndex()
	if mf != sf || ml != sl {
		rt.Fatalf("first/last: raft.db (%d,%d) memory (%d,%d)", sf, sl, mf, ml)
	}
	for i := mf - 1; i <= ml; i++ {
		mt, merr := mem.Term(i)
		st, serr := s.Term(i)
		if mt != st || (merr == nil) != (serr == nil) {
			rt.Fatalf("Term(%d): raft.db %d %v memory %d %v", i, st, serr, mt, merr)
		}
	}
	if mf <= ml {
		lo := rapid.Uint64Range(mf, ml).Draw(rt, "lo")
		hi := rapid.Uint64Range(lo+1, ml+1).Draw(rt, "hi")
		max := rapid.Uint64Range(0, 200).Draw(rt, "maxSize")
		me, merr := mem.Entries(lo, hi, max)
		se, serr := s.Entries(lo, hi, max)
		if merr != nil || serr != nil || len(me) != len(se) || len(se) == 0 {
			rt.Fatalf("Entries(%d,%d,%d): raft.db %d %v memory %d %v", lo, hi, max, len(se), serr, len(me), merr)
		}
		for i := range me {
			if !proto.Equal(me[i], se[i]) {
				rt.Fatalf("entry %d differs", me[i].GetIndex())
			}
		}
	}
	msnap, _ := mem.Snapshot()
	ssnap, _ := s.Snapshot()
	if msnap.GetMetadata().GetIndex() != ssnap.GetMetadata().GetIndex() || msnap.GetMetadata().GetTerm() != ssnap.GetMetadata().GetTerm() {
		rt.Fatalf("snapshot: raft.db %v memory %v", ssnap.GetMetadata(), msnap.GetMetadata())
	}
}
