package raftnode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// StorageFile is the name of the Raft store inside a data directory.
const StorageFile = "raft.db"

// storageFormat is the on-disk layout version, stored under metaVersion so a
// later layout can migrate from it.
const storageFormat byte = 1

var (
	bucketMeta = []byte("meta")
	bucketLog  = []byte("log") // big-endian index -> proto Entry

	metaVersion   = []byte("version")
	metaHardState = []byte("hardstate") // proto HardState
	metaConfState = []byte("confstate") // proto ConfState of the latest snapshot
	metaSnapshot  = []byte("snapshot")  // proto Snapshot
	metaOffset    = []byte("offset")    // index(8) | term(8) of the compaction point
)

// marshalOpts makes stored bytes reproducible (golden tests pin them).
var marshalOpts = proto.MarshalOptions{Deterministic: true}

// Storage is the durable Raft log, hard state and snapshot store in one
// bbolt file. It implements raft.Storage. All writes come from one goroutine
// (the group's Ready loop or a test); reads may come from any.
type Storage struct {
	db *bolt.DB

	// wmu serialises writers (and bbolt's NoSync toggle). Save writes
	// without holding mu, so raft's reads are not stalled behind an fsync:
	// raft never reads back entries it is still appending.
	wmu sync.Mutex
	// mu guards the cached fields below; whole-log rewrites (snapshots,
	// compaction) hold it for the write as well.
	mu sync.RWMutex
	// offIndex/offTerm identify the entry just before the first one kept;
	// raft asks for its term (Term(FirstIndex()-1)).
	offIndex, offTerm uint64
	last              uint64
	hard              *pb.HardState
	snap              *pb.Snapshot
	snapFault         error
}

// OpenStorage opens or creates dir/raft.db.
func OpenStorage(dir string) (*Storage, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("raftnode: create data dir: %w", err)
	}
	db, err := bolt.Open(filepath.Join(dir, StorageFile), 0o600, nil)
	if err != nil {
		return nil, fmt.Errorf("raftnode: open %s: %w", StorageFile, err)
	}
	s := &Storage{db: db, hard: &pb.HardState{}, snap: &pb.Snapshot{}}
	if err := s.load(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Storage) load() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		log, err := tx.CreateBucketIfNotExists(bucketLog)
		if err != nil {
			return err
		}
		switch v := meta.Get(metaVersion); {
		case v == nil:
			if err := meta.Put(metaVersion, []byte{storageFormat}); err != nil {
				return err
			}
		case len(v) != 1 || v[0] != storageFormat:
			return fmt.Errorf("raftnode: %s has format %x, want %d", StorageFile, v, storageFormat)
		}
		if b := meta.Get(metaHardState); b != nil {
			if err := proto.Unmarshal(b, s.hard); err != nil {
				return fmt.Errorf("raftnode: decode hard state: %w", err)
			}
		}
		if b := meta.Get(metaSnapshot); b != nil {
			if err := proto.Unmarshal(b, s.snap); err != nil {
				return fmt.Errorf("raftnode: decode snapshot: %w", err)
			}
		}
		if b := meta.Get(metaOffset); len(b) == 16 {
			s.offIndex = binary.BigEndian.Uint64(b)
			s.offTerm = binary.BigEndian.Uint64(b[8:])
		}
		s.last = s.offIndex
		if k, _ := log.Cursor().Last(); k != nil {
			s.last = binary.BigEndian.Uint64(k)
		}
		return nil
	})
}

// Close closes the bbolt file.
func (s *Storage) Close() error { return s.db.Close() }

// FailSnapshotWrites makes every later snapshot write return err without
// writing anything (nil restores normal operation). It exists so the
// conformance suite can prove that installs persist before they swap.
func (s *Storage) FailSnapshotWrites(err error) {
	s.mu.Lock()
	s.snapFault = err
	s.mu.Unlock()
}

func indexKey(i uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], i)
	return k[:]
}

// InitialState implements raft.Storage.
func (s *Storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	cs := s.snap.GetMetadata().GetConfState()
	if cs == nil {
		cs = &pb.ConfState{}
	}
	return proto.Clone(s.hard).(*pb.HardState), proto.Clone(cs).(*pb.ConfState), nil
}

// Entries implements raft.Storage: [lo, hi) limited to maxSize bytes, but
// always at least one entry.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if lo <= s.offIndex {
		return nil, raft.ErrCompacted
	}
	if hi > s.last+1 || lo > hi {
		return nil, fmt.Errorf("raftnode: entries [%d,%d) outside (%d,%d]: %w", lo, hi, s.offIndex, s.last, raft.ErrUnavailable)
	}
	if lo == hi {
		return nil, nil
	}
	var out []*pb.Entry
	var size uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLog).Cursor()
		want := lo
		for k, v := c.Seek(indexKey(lo)); k != nil && want < hi; k, v = c.Next() {
			if binary.BigEndian.Uint64(k) != want {
				return fmt.Errorf("raftnode: log hole at %d: %w", want, raft.ErrUnavailable)
			}
			e := &pb.Entry{}
			if err := proto.Unmarshal(v, e); err != nil {
				return fmt.Errorf("raftnode: decode entry %d: %w", want, err)
			}
			size += uint64(proto.Size(e))
			if len(out) > 0 && size > maxSize {
				return nil
			}
			out = append(out, e)
			want++
		}
		if len(out) == 0 {
			return fmt.Errorf("raftnode: entry %d missing: %w", lo, raft.ErrUnavailable)
		}
		return nil
	})
	return out, err
}

// Term implements raft.Storage, including Term(FirstIndex()-1).
func (s *Storage) Term(i uint64) (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch {
	case i < s.offIndex:
		return 0, raft.ErrCompacted
	case i == s.offIndex:
		return s.offTerm, nil
	case i > s.last:
		return 0, raft.ErrUnavailable
	}
	var term uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLog).Get(indexKey(i))
		if v == nil {
			return raft.ErrUnavailable
		}
		e := &pb.Entry{}
		if err := proto.Unmarshal(v, e); err != nil {
			return fmt.Errorf("raftnode: decode entry %d: %w", i, err)
		}
		term = e.GetTerm()
		return nil
	})
	return term, err
}

// LastIndex implements raft.Storage.
func (s *Storage) LastIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.last, nil
}

// FirstIndex implements raft.Storage.
func (s *Storage) FirstIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.offIndex + 1, nil
}

// Snapshot implements raft.Storage.
func (s *Storage) Snapshot() (*pb.Snapshot, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return proto.Clone(s.snap).(*pb.Snapshot), nil
}

// update runs fn in one bbolt transaction, fsynced only when sync is set.
// Callers hold s.wmu, which also serialises the NoSync toggle.
func (s *Storage) update(sync bool, fn func(tx *bolt.Tx) error) error {
	s.db.NoSync = !sync
	return s.db.Update(fn)
}

// Save persists a Ready's hard state and entries in one transaction,
// truncating any conflicting tail. It fsyncs only when mustSync is set.
func (s *Storage) Save(hs *pb.HardState, ents []*pb.Entry, mustSync bool) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.RLock()
	off, last := s.offIndex, s.last
	s.mu.RUnlock()
	// Entries at or below the compaction point are already covered by the
	// snapshot.
	for len(ents) > 0 && ents[0].GetIndex() <= off {
		ents = ents[1:]
	}
	if len(ents) > 0 && ents[0].GetIndex() > last+1 {
		return fmt.Errorf("raftnode: append at %d leaves a gap after %d", ents[0].GetIndex(), last)
	}
	hsEmpty := raft.IsEmptyHardState(hs)
	if hsEmpty && len(ents) == 0 {
		return nil
	}
	err := s.update(mustSync, func(tx *bolt.Tx) error {
		if !hsEmpty {
			b, err := marshalOpts.Marshal(hs)
			if err != nil {
				return err
			}
			if err := tx.Bucket(bucketMeta).Put(metaHardState, b); err != nil {
				return err
			}
		}
		if len(ents) == 0 {
			return nil
		}
		log := tx.Bucket(bucketLog)
		// Raft overwrites a conflicting suffix: drop everything from the
		// first new index on before writing.
		c := log.Cursor()
		for k, _ := c.Seek(indexKey(ents[0].GetIndex())); k != nil; k, _ = c.Seek(indexKey(ents[0].GetIndex())) {
			if err := log.Delete(k); err != nil {
				return err
			}
		}
		for _, e := range ents {
			b, err := marshalOpts.Marshal(e)
			if err != nil {
				return err
			}
			if err := log.Put(indexKey(e.GetIndex()), b); err != nil {
				return err
			}
		}
		last = ents[len(ents)-1].GetIndex()
		return nil
	})
	if err != nil {
		return fmt.Errorf("raftnode: save ready: %w", err)
	}
	s.mu.Lock()
	if !hsEmpty {
		s.hard = proto.Clone(hs).(*pb.HardState)
	}
	s.last = last
	s.mu.Unlock()
	return nil
}

// ErrSnapOutOfDate reports a snapshot older than the one already stored.
var ErrSnapOutOfDate = raft.ErrSnapOutOfDate

// ApplySnapshot persists snap (fsynced) and discards the whole log: after
// it, FirstIndex is snap's index + 1 and Term(snap index) is snap's term.
func (s *Storage) ApplySnapshot(snap *pb.Snapshot) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snapFault != nil {
		return fmt.Errorf("raftnode: apply snapshot: %w", s.snapFault)
	}
	idx, term := snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
	if idx <= s.snap.GetMetadata().GetIndex() {
		return ErrSnapOutOfDate
	}
	// The snapshot is committed by definition. Persisting the raised commit
	// in the same transaction keeps a crash before the next Save from
	// restarting raft with a commit index behind its first index.
	hard := s.hard
	if hard.GetCommit() < idx {
		hard = &pb.HardState{Term: new(max(hard.GetTerm(), term)), Vote: new(hard.GetVote()), Commit: new(idx)}
	}
	err := s.update(true, func(tx *bolt.Tx) error {
		if err := s.putSnapshot(tx, snap); err != nil {
			return err
		}
		hb, err := marshalOpts.Marshal(hard)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketMeta).Put(metaHardState, hb); err != nil {
			return err
		}
		if err := tx.DeleteBucket(bucketLog); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bucketLog); err != nil {
			return err
		}
		return putOffset(tx, idx, term)
	})
	if err != nil {
		return fmt.Errorf("raftnode: apply snapshot: %w", err)
	}
	s.snap = proto.Clone(snap).(*pb.Snapshot)
	s.offIndex, s.offTerm, s.last = idx, term, idx
	s.hard = hard
	return nil
}

// CreateSnapshot records a snapshot of the applied state at index (whose
// entry had term) without touching the log; Compact trims it separately.
func (s *Storage) CreateSnapshot(index, term uint64, cs *pb.ConfState, data []byte) (*pb.Snapshot, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snapFault != nil {
		return nil, fmt.Errorf("raftnode: create snapshot: %w", s.snapFault)
	}
	if index <= s.snap.GetMetadata().GetIndex() {
		return nil, ErrSnapOutOfDate
	}
	snap := &pb.Snapshot{
		Data:     data,
		Metadata: &pb.SnapshotMetadata{Index: new(index), Term: new(term), ConfState: proto.Clone(cs).(*pb.ConfState)},
	}
	if err := s.update(true, func(tx *bolt.Tx) error { return s.putSnapshot(tx, snap) }); err != nil {
		return nil, fmt.Errorf("raftnode: create snapshot: %w", err)
	}
	s.snap = snap
	return proto.Clone(snap).(*pb.Snapshot), nil
}

func (s *Storage) putSnapshot(tx *bolt.Tx, snap *pb.Snapshot) error {
	b, err := marshalOpts.Marshal(snap)
	if err != nil {
		return err
	}
	cs, err := marshalOpts.Marshal(pb.EnsureConfState(snap.GetMetadata().GetConfState()))
	if err != nil {
		return err
	}
	meta := tx.Bucket(bucketMeta)
	if err := meta.Put(metaSnapshot, b); err != nil {
		return err
	}
	return meta.Put(metaConfState, cs)
}

func putOffset(tx *bolt.Tx, index, term uint64) error {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:], index)
	binary.BigEndian.PutUint64(b[8:], term)
	return tx.Bucket(bucketMeta).Put(metaOffset, b[:])
}

// ErrCompactBeyondSnapshot reports a compaction that would drop entries no
// snapshot covers, which would leave a lagging follower unable to catch up.
var ErrCompactBeyondSnapshot = errors.New("raftnode: compaction past the latest snapshot")

// Compact discards entries up to and including index, which must be covered
// by the stored snapshot. Compacting at or below the current point is
// raft.ErrCompacted.
func (s *Storage) Compact(index uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if index <= s.offIndex {
		return raft.ErrCompacted
	}
	if index > s.snap.GetMetadata().GetIndex() || index > s.last {
		return ErrCompactBeyondSnapshot
	}
	var term uint64
	err := s.update(false, func(tx *bolt.Tx) error {
		log := tx.Bucket(bucketLog)
		v := log.Get(indexKey(index))
		if v == nil {
			return fmt.Errorf("raftnode: compact: entry %d missing", index)
		}
		e := &pb.Entry{}
		if err := proto.Unmarshal(v, e); err != nil {
			return err
		}
		term = e.GetTerm()
		c := log.Cursor()
		stop := indexKey(index)
		for k, _ := c.First(); k != nil && bytes.Compare(k, stop) <= 0; k, _ = c.First() {
			if err := log.Delete(k); err != nil {
				return err
			}
		}
		return putOffset(tx, index, term)
	})
	if err != nil {
		return fmt.Errorf("raftnode: compact: %w", err)
	}
	s.offIndex, s.offTerm = index, term
	return nil
}
