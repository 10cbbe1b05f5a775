package flowshard

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Record is one key of a flow as replicas exchange it: its value, or
// (Deleted) the tombstone its delete left, with the version of that write
// and the time it has left to live.
type Record struct {
	Key     string
	Value   []byte // nil for a tombstone
	Version Version
	Deleted bool
	TTL     time.Duration // left to live; in Merge, 0 means Options.DefaultTTL
}

// RecordSet is records of one flow. In what Records returns, Durability is
// that of the flow's latest write; in Merge, it is how the records are
// written.
type RecordSet struct {
	FlowID     string
	Records    []Record
	Durability Durability
}

// Records returns the records of flowID's keys, tombstones included, in key
// order: all of them, or only those of keys when some are named (a key
// without a record is left out). It is what an owner pushes to its
// replicas after a write, and what adoption and anti-entropy copy. Unlike a
// read it does not wait for the flow's pending Sync commit: an owner pushes
// a Sync write to its replicas while its own commit runs.
func (s *Store) Records(ctx context.Context, flowID string, keys ...string) (RecordSet, error) {
	set := RecordSet{FlowID: flowID}
	if err := ctx.Err(); err != nil {
		return set, fmt.Errorf("flowshard: %w", err)
	}
	f, now, err := s.acquire(ctx, flowID, false, 0)
	if f == nil {
		return set, err
	}
	add := func(k string) {
		if e := s.current(f, k, now); e != nil {
			set.Records = append(set.Records, Record{
				Key: k, Value: cloneValue(e), Version: e.ver, Deleted: e.dead,
				TTL: time.Duration(e.expMs-now) * time.Millisecond,
			})
		}
	}
	if len(keys) == 0 {
		for k := range f.entries {
			add(k)
		}
	} else {
		for _, k := range keys {
			add(k)
		}
	}
	set.Durability = f.mode
	s.release(f)
	slices.SortFunc(set.Records, func(a, b Record) int { return cmp.Compare(a.Key, b.Key) })
	return set, nil
}

func cloneValue(e *entry) []byte {
	if e.dead {
		return nil
	}
	return append([]byte{}, e.value...)
}

// FencePrefix makes Merge leave alone, for d or until UnfencePrefix, the
// flows whose ids start with prefix: a set for one is skipped, as if all its
// records were older than what is stored. It is how a cluster deletes an
// imposter's flows for good: each member fences, then deletes, so that a
// copy still travelling from a member that has not deleted yet (a push, an
// adoption page) cannot bring a flow back. A merge that took the flow
// before the fence is removed by the delete that follows.
func (s *Store) FencePrefix(ctx context.Context, prefix string, d time.Duration) {
	until := s.nowMs(ctx) + max(d.Milliseconds(), 1)
	s.mu.Lock()
	if s.fences == nil {
		s.fences = make(map[string]int64)
	}
	s.fences[prefix] = max(s.fences[prefix], until)
	s.mu.Unlock()
}

// UnfencePrefix lets Merge store prefix's flows again.
func (s *Store) UnfencePrefix(prefix string) {
	s.mu.Lock()
	delete(s.fences, prefix)
	s.mu.Unlock()
}

// fencedLocked reports whether a live fence covers flowID, dropping the
// fences that have run out. s.mu is held.
func (s *Store) fencedLocked(flowID string, now int64) bool {
	fenced := false
	for prefix, until := range s.fences {
		switch {
		case until <= now:
			delete(s.fences, prefix)
		case strings.HasPrefix(flowID, prefix):
			fenced = true
		}
	}
	return fenced
}

// Merge is the replica path: it stores each record of each set, value or
// tombstone, with exactly its version, if that version is higher than the
// stored record of its key (compared by MIdx, then V, then Origin), or the
// key has none; the flow's counter rises to at least the V of what it
// stores, so that later local writes stamp higher versions. Each set is applied at
// one instant under its flow's lock, so a reader never sees half of a
// multi-key write; sets under Sync return after the commit that covers
// them. It returns how many records it stored.
func (s *Store) Merge(ctx context.Context, sets ...RecordSet) (int, error) {
	for _, set := range sets {
		if err := s.checkName("flow id", set.FlowID); err != nil {
			return 0, err
		}
		if set.Durability > Sync {
			return 0, fmt.Errorf("%w: durability %d", ErrBadPolicy, set.Durability)
		}
		for _, r := range set.Records {
			if err := s.check(set.FlowID, r.Key, r.Value); err != nil {
				return 0, err
			}
			if r.Version.V == 0 || r.TTL < 0 {
				return 0, fmt.Errorf("%w: record %q with version %+v, ttl %v", ErrBadPolicy, r.Key, r.Version, r.TTL)
			}
		}
	}
	stored := 0
	var last *batch
	for _, set := range sets {
		if len(set.Records) == 0 {
			continue
		}
		if err := s.reserve(ctx, set.Durability); err != nil {
			return stored, err
		}
		f, now, err := s.acquireAs(ctx, set.FlowID, true, true, s.recordTTL(set.Records[0]))
		if f == nil {
			if err != nil {
				return stored, err
			}
			continue // fenced
		}
		var ops []op
		disk, here := s.diskBound(f, set.Durability), 0
		for _, r := range set.Records {
			if cur := s.current(f, r.Key, now); cur != nil && r.Version.Compare(cur.ver) <= 0 {
				continue
			}
			var e *entry
			if r.Deleted {
				e = s.bury(f, r.Key, r.Version, s.recordTTL(r), set.Durability, now)
			} else {
				e = s.put(f, r.Key, r.Value, r.Version, s.recordTTL(r), set.Durability, now)
			}
			if disk {
				ops = append(ops, diskOp(f, r.Key, e))
			}
			here++
		}
		if here > 0 {
			f.mode = set.Durability
			stored += here
		}
		if len(ops) > 0 {
			if b := s.persist(f, set.Durability, ops...); b != nil {
				last = b
			}
		}
		s.release(f)
	}
	// Batches commit in order: the last one covers every earlier one.
	return stored, await(ctx, last)
}

func (s *Store) recordTTL(r Record) int64 {
	if r.TTL <= 0 {
		return s.opts.DefaultTTL.Milliseconds()
	}
	return max(1, r.TTL.Milliseconds())
}

// Summary is what replicas compare to find the flows they disagree on: a
// flow's id, the highest version of its records, and Sum, a digest of its
// records' keys and versions that does not depend on their order. Two
// copies of a flow with equal sums hold the same writes.
type Summary struct {
	ID  string
	Top Version
	Sum uint64
}

// Summaries lists the flows whose id keep accepts and that hold an
// unexpired record, in id order, without counting as an access to them:
// what anti-entropy and adoption compare. keep runs without the store's
// locks.
func (s *Store) Summaries(keep func(flowID string) bool) ([]Summary, error) {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	fs := make([]*flow, 0, len(s.flows))
	for _, f := range s.flows {
		fs = append(fs, f)
	}
	now := s.nowMs(context.Background())
	s.mu.Unlock()
	fs = slices.DeleteFunc(fs, func(f *flow) bool { return !keep(f.id) })
	out := make([]Summary, 0, len(fs))
	var buf []byte
	for _, f := range fs {
		f.mu.Lock()
		sum := Summary{ID: f.id}
		n := 0
		for k, e := range f.entries {
			if e.expMs <= now {
				continue
			}
			n++
			if e.ver.Compare(sum.Top) > 0 {
				sum.Top = e.ver
			}
			buf = append(binary.AppendUvarint(buf[:0], uint64(len(k))), k...)
			buf = binary.BigEndian.AppendUint64(buf, e.ver.MIdx)
			buf = binary.BigEndian.AppendUint64(buf, e.ver.V)
			buf = binary.BigEndian.AppendUint64(buf, e.ver.Origin)
			if e.dead {
				buf = append(buf, 1)
			}
			sum.Sum += fnv1a(buf) // a sum of per-record hashes: order-free
		}
		dead := f.dead
		f.mu.Unlock()
		if n > 0 && !dead {
			out = append(out, sum)
		}
	}
	slices.SortFunc(out, func(a, b Summary) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// fnv1a is 64-bit FNV-1a: the same on every node, unlike hash/maphash.
func fnv1a(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}
