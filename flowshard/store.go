package flowshard

import (
	"bytes"
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Errors returned by a Store, matched with errors.Is. The first four map one
// to one onto gateway/flow's errors; ErrClosed and ErrWriteFailed are what
// the gateway reports as unavailable.
var (
	ErrNotFound        = errors.New("flowshard: key not found")
	ErrVersionMismatch = errors.New("flowshard: version mismatch")
	ErrTooLarge        = errors.New("flowshard: flow id, key or value too large")
	ErrBadKey          = errors.New("flowshard: invalid flow id or key")
	ErrBadPolicy       = errors.New("flowshard: invalid policy or version")
	ErrClosed          = errors.New("flowshard: store closed")
	ErrWriteFailed     = errors.New("flowshard: durable write failed")
)

// Durability says when a write is acknowledged. See the package doc.
type Durability uint8

// Durability modes, chosen per write (in practice per imposter).
const (
	Memory Durability = iota // never written to disk
	Async                    // acknowledged before the batch commits
	Sync                     // acknowledged after the fsync that covers it
)

// Defaults used when the corresponding Options field is zero.
const (
	DefaultMaxFlows      = 100_000
	DefaultMaxKeyBytes   = 1 << 10  // 1 KiB, for flow ids and keys
	DefaultMaxValueBytes = 64 << 10 // 64 KiB
	DefaultTTL           = 5 * time.Minute
	DefaultSweepInterval = time.Second
	DefaultSweepBatch    = 4096
	DefaultMaxPending    = 4096
)

// Version is the fencing tuple stamped on every stored value: the membership
// index the writer owned the flow under, the flow's write counter, and the
// writer's node id. V is never 0 for a stored value.
type Version struct {
	MIdx   uint64
	V      uint64
	Origin uint64
}

// Compare orders versions by MIdx, then V, then Origin: -1, 0 or +1.
func (v Version) Compare(o Version) int {
	if c := cmp.Compare(v.MIdx, o.MIdx); c != 0 {
		return c
	}
	if c := cmp.Compare(v.V, o.V); c != 0 {
		return c
	}
	return cmp.Compare(v.Origin, o.Origin)
}

// Entry is one stored value. Value is the caller's own copy.
type Entry struct {
	Value   []byte
	Version Version
	Expires time.Time
}

// Policy carries what a write needs besides its key and value.
type Policy struct {
	TTL        time.Duration // 0: Options.DefaultTTL; refreshed by every write of the key
	Durability Durability
	MIdx       uint64 // stamped into the version (the node's membership index)
	Origin     uint64 // stamped into the version (the node's id)
	// NoWait makes a Sync write return once it is in memory and queued,
	// without waiting for its commit: the caller waits with Durable,
	// after work of its own (a replica's acknowledgement) that then
	// overlaps the fsync.
	NoWait bool
}

// wait waits for b under p: not at all with NoWait.
func (p Policy) wait(ctx context.Context, b *batch) error {
	if p.NoWait {
		return nil
	}
	return await(ctx, b)
}

// Options configure a Store. Zero values take the defaults above.
type Options struct {
	MaxFlows      int           // flows held at most; beyond it the least recently accessed flow is shed
	MaxKeyBytes   int           // cap on flow ids and keys
	MaxValueBytes int           // cap on values
	DefaultTTL    time.Duration // TTL of a write whose Policy.TTL is 0
	// SweepInterval is the pause between background expiry passes; a
	// negative value disables the sweeper (expiry is then lazy only).
	SweepInterval time.Duration
	SweepBatch    int // flows examined per sweep pass
	// MaxPending is how many disk ops may wait for the writer before new
	// disk writes block. It bounds a batch, and so what Async can lose.
	MaxPending int
	// MaxFileBytes caps flow.db; 0 means no cap. A commit that would grow
	// the file past it fails: its Sync writers get ErrWriteFailed.
	MaxFileBytes int
	// Now is the clock for TTLs. When nil, the store counts on the
	// monotonic clock from the wall time at Open: half the cost of
	// time.Now, which every operation pays. (A wall clock set back or
	// forward then moves no TTL until the next Open.)
	Now    func() time.Time
	Logger *slog.Logger // slog.Default() if nil
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxFlows, DefaultMaxFlows)
	def(&o.MaxKeyBytes, DefaultMaxKeyBytes)
	def(&o.MaxValueBytes, DefaultMaxValueBytes)
	def(&o.SweepBatch, DefaultSweepBatch)
	def(&o.MaxPending, DefaultMaxPending)
	if o.DefaultTTL <= 0 {
		o.DefaultTTL = DefaultTTL
	}
	if o.SweepInterval == 0 {
		o.SweepInterval = DefaultSweepInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Store is one node's flow store. Every method is safe for concurrent use.
type Store struct {
	opts   Options
	opened time.Time // for nowMs, with its monotonic reading
	openNs int64     // opened in Unix nanoseconds
	w      *writer   // nil for an in-memory store

	// mu guards flows, lru and sweepQ, and orders closed's store. Lock
	// order: mu before any flow.mu; nothing takes mu while holding a
	// flow.mu.
	mu    sync.Mutex
	flows map[string]*flow
	lru   list.List // of *flow, most recently accessed at the front
	// closed is set under mu, and read by an op both under mu and once it
	// holds its flow's mu: Close then waits out the ops in progress by
	// taking each flow's mu once (see acquire), which costs an op nothing.
	closed atomic.Bool
	sweepQ []*flow // flows the sweeper still has to visit this cycle
	// fences: prefixes whose flows Merge leaves alone, until a time in
	// nowMs's terms (see FencePrefix).
	fences map[string]int64

	stats     counters
	stopSweep chan struct{}
	sweepDone chan struct{}
	closeOnce sync.Once
}

// flow is one flow's in-memory state, authoritative over the disk copy.
type flow struct {
	id   string
	elem *list.Element

	mu      sync.Mutex
	dead    bool // removed from Store.flows: whoever still holds it retries
	counter uint64
	// expMs: the flow exists until then, the max over its writes of
	// now+TTL. Written under mu, read without it by acquire.
	expMs   atomic.Int64
	entries map[string]*entry
	onDisk  bool       // some op of this flow went to the writer
	mode    Durability // of the latest write, for Stats.Gets
	pending *batch     // the batch of this flow's latest Sync write
}

// entry is one stored value. It is read and written only under its flow's
// mu: a write of the key overwrites it in place, reusing its value's room,
// so that a warm key's write allocates nothing. A dead entry is a
// tombstone: the key was deleted by the write ver, and reads see it absent;
// it lives as long as an entry would, so that a replica can tell a deleted
// key from one it never saw.
type entry struct {
	value []byte
	ver   Version
	expMs int64
	dead  bool
}

// Open opens (creating it if needed) the flow store at path, loading every
// unexpired entry into memory. path "" gives a purely in-memory store: every
// durability behaves as Memory and nothing touches the disk.
func Open(path string, opts Options) (*Store, error) {
	s := &Store{
		opts:      opts.withDefaults(),
		opened:    time.Now(),
		flows:     make(map[string]*flow),
		stopSweep: make(chan struct{}),
		sweepDone: make(chan struct{}),
	}
	s.openNs = s.opened.UnixNano()
	if path != "" {
		db, err := bolt.Open(path, 0o600, &bolt.Options{
			Timeout: time.Second,
			// The freelist is rebuilt by scanning at open instead of being
			// written by every commit: fewer pages per group commit.
			NoFreelistSync: true,
			FreelistType:   bolt.FreelistMapType,
			MaxSize:        s.opts.MaxFileBytes,
		})
		if err != nil {
			return nil, fmt.Errorf("flowshard: open %s: %w", path, err)
		}
		if err := s.load(db); err != nil {
			return nil, errors.Join(fmt.Errorf("flowshard: load %s: %w", path, err), db.Close())
		}
		s.w = newWriter(db, s.opts.MaxPending, &s.stats, s.opts.Logger)
		go s.w.run()
	}
	if s.opts.SweepInterval > 0 {
		go s.sweeper()
	} else {
		close(s.sweepDone)
	}
	return s, nil
}

// load reads the file into memory and, in the same transaction, deletes
// what has expired and what exceeds MaxFlows.
func (s *Store) load(db *bolt.DB) error {
	now := s.nowMs(context.Background())
	return db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		format := formatV2
		switch f := meta.Get(formatKey); {
		case f == nil || bytes.Equal(f, []byte{formatV2}):
		case bytes.Equal(f, []byte{formatV1}):
			format = formatV1 // migrated below, in this transaction
		default:
			return fmt.Errorf("%w: file format %x, this build reads %d and %d", ErrCorrupt, f, formatV1, formatV2)
		}
		if err := meta.Put(formatKey, []byte{formatV2}); err != nil {
			return err
		}
		bk, err := tx.CreateBucketIfNotExists(dataBucket)
		if err != nil {
			return err
		}
		var drop [][]byte
		var rewrite []op // format 1 records, as format 2
		err = bk.ForEach(func(k, v []byte) error {
			id, key, err := splitKey(k)
			if err != nil {
				return err
			}
			r, err := decodeRecord(v)
			if err != nil {
				return fmt.Errorf("flow %q key %q: %w", id, key, err)
			}
			if (key == "") != (r.kind == kindFlow) || r.format != format {
				return fmt.Errorf("flow %q key %q: %w: kind %d of format %d in a format %d file", id, key, ErrCorrupt, r.kind, r.format, format)
			}
			f := s.flows[id]
			if f == nil {
				f = &flow{id: id, entries: make(map[string]*entry), onDisk: true, mode: Sync}
				s.flows[id] = f
			}
			if r.kind == kindFlow {
				f.counter = max(f.counter, r.counter)
				f.extend(r.expMs)
			} else {
				f.counter = max(f.counter, r.ver.V)
				if r.expMs <= now {
					drop = append(drop, bytes.Clone(k))
					if r.kind == kindEntry {
						s.stats.expiredEnt.Add(1)
					}
					return nil
				}
				f.extend(r.expMs)
				e := &entry{value: bytes.Clone(r.value), ver: r.ver, expMs: r.expMs, dead: r.kind == kindTombstone}
				f.entries[key] = e
				s.count(key, e, 1)
			}
			if format != formatV2 {
				rewrite = append(rewrite, op{key: bytes.Clone(k), val: encodeRecord(r)})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, o := range rewrite {
			if err := apply(bk, o); err != nil {
				return err
			}
		}
		for _, k := range drop {
			if err := bk.Delete(k); err != nil {
				return err
			}
		}
		// Access times are not stored; the latest-writing flow counts as the
		// most recently accessed.
		all := make([]*flow, 0, len(s.flows))
		for _, f := range s.flows {
			all = append(all, f)
		}
		slices.SortFunc(all, func(a, b *flow) int {
			return cmp.Or(cmp.Compare(a.expMs.Load(), b.expMs.Load()), strings.Compare(a.id, b.id))
		})
		for i, f := range all {
			expired := f.expMs.Load() <= now
			if expired || len(all)-i > s.opts.MaxFlows {
				if expired {
					s.stats.expiredFlows.Add(1)
				} else {
					s.stats.evictedLRU.Add(1)
				}
				s.forget(f)
				if err := apply(bk, op{key: flowKey(f.id), prefix: true}); err != nil {
					return err
				}
				continue
			}
			f.elem = s.lru.PushFront(f)
		}
		return nil
	})
}

// forget drops f's entries from the gauges and the map (at load).
func (s *Store) forget(f *flow) {
	for k, e := range f.entries {
		s.count(k, e, -1)
	}
	delete(s.flows, f.id)
}

// count adds e to the gauges (n = 1) or takes it out (n = -1): a live entry
// counts in Entries and Bytes, a tombstone in Tombstones.
func (s *Store) count(key string, e *entry, n int64) {
	if e.dead {
		s.stats.tombstones.Add(n)
		return
	}
	s.stats.entries.Add(n)
	s.stats.bytes.Add(n * int64(len(key)+len(e.value)))
}

// OpTimer is what the context of an operation may also be: one that knows
// when its operation began (a request's start, which the caller read for
// its own meters), so that the store does not read the clock again. The
// time must be this process's, with its monotonic reading.
type OpTimer interface {
	OpTime() (time.Time, bool)
}

// nowMs is the operation's time in Unix milliseconds: Options.Now's, the
// context's (OpTimer), or the clock's.
func (s *Store) nowMs(ctx context.Context) int64 {
	if s.opts.Now != nil {
		return s.opts.Now().UnixMilli()
	}
	// The wall clock at Open plus the monotonic time since, so that a step
	// of the wall clock moves no expiry; in integers, since Time.Add and
	// UnixMilli cost as much again as the clock reading itself.
	var since time.Duration
	if at, ok := opTime(ctx); ok {
		since = at.Sub(s.opened)
	} else {
		since = time.Since(s.opened)
	}
	return (s.openNs + int64(since)) / int64(time.Millisecond)
}

// opTime is the operation's time if its context knows it (OpTimer).
func opTime(ctx context.Context) (time.Time, bool) {
	if t, ok := ctx.(OpTimer); ok {
		return t.OpTime()
	}
	return time.Time{}, false
}

func (s *Store) check(flowID, key string, value []byte) error {
	if err := s.checkName("flow id", flowID); err != nil {
		return err
	}
	if err := s.checkName("key", key); err != nil {
		return err
	}
	if len(value) > s.opts.MaxValueBytes {
		return fmt.Errorf("%w: value of %d bytes (max %d)", ErrTooLarge, len(value), s.opts.MaxValueBytes)
	}
	return nil
}

// checkName checks a flow id or key.
func (s *Store) checkName(what, name string) error {
	switch {
	case name == "" || !utf8.ValidString(name):
		return fmt.Errorf("%w: %s %q", ErrBadKey, what, name)
	case len(name) > s.opts.MaxKeyBytes:
		return fmt.Errorf("%w: %s of %d bytes (max %d)", ErrTooLarge, what, len(name), s.opts.MaxKeyBytes)
	}
	return nil
}

// ttlMs validates p and returns its TTL in (at least one) milliseconds.
func (s *Store) ttlMs(p Policy) (int64, error) {
	if p.Durability > Sync || p.TTL < 0 {
		return 0, fmt.Errorf("%w: durability %d, ttl %v", ErrBadPolicy, p.Durability, p.TTL)
	}
	ttl := p.TTL
	if ttl == 0 {
		ttl = s.opts.DefaultTTL
	}
	return max(1, ttl.Milliseconds()), nil
}

// acquire returns flowID's flow locked, and the clock reading the operation
// uses throughout, and marks the flow most recently accessed;
// an expired flow counts as absent. When absent it creates the flow if
// create is set (shedding the least recently accessed flow when full),
// else returns nil. On success the caller must call s.release(f).
func (s *Store) acquire(ctx context.Context, flowID string, create bool, ttlMs int64) (*flow, int64, error) {
	return s.acquireAs(ctx, flowID, create, false, ttlMs)
}

// acquireAs is acquire; a merge finds a fenced flow absent (see FencePrefix).
func (s *Store) acquireAs(ctx context.Context, flowID string, create, merge bool, ttlMs int64) (*flow, int64, error) {
	for {
		now := s.nowMs(ctx) // read before s.mu, to hold it for less
		s.mu.Lock()
		if s.closed.Load() {
			s.mu.Unlock()
			return nil, 0, ErrClosed
		}
		if merge && len(s.fences) > 0 && s.fencedLocked(flowID, now) {
			s.mu.Unlock()
			return nil, 0, nil
		}
		f := s.flows[flowID]
		// The lock-free read keeps a busy flow's lock out of s.mu's way;
		// only an apparently expired flow is locked and checked again.
		if f != nil && f.expMs.Load() <= now {
			f.mu.Lock()
			if f.expMs.Load() <= now {
				s.removeLocked(f)
				s.stats.expiredFlows.Add(1)
				f.mu.Unlock()
				f = nil
			} else {
				f.mu.Unlock()
			}
		}
		if f == nil && !create {
			s.mu.Unlock()
			return nil, 0, nil
		}
		if f == nil {
			for len(s.flows) >= s.opts.MaxFlows {
				victim := s.lru.Back().Value.(*flow)
				victim.mu.Lock()
				s.removeLocked(victim)
				victim.mu.Unlock()
				s.stats.evictedLRU.Add(1)
			}
			f = &flow{id: flowID, entries: make(map[string]*entry)}
			f.expMs.Store(now + ttlMs)
			f.elem = s.lru.PushFront(f)
			s.flows[flowID] = f
		} else {
			s.lru.MoveToFront(f.elem)
		}
		s.mu.Unlock()
		f.mu.Lock()
		// A flow an op holds locked is in s.flows (removing it takes its
		// lock), so Close, which takes every flow's lock once after
		// setting closed, waits for this op or makes it see closed.
		if s.closed.Load() {
			f.mu.Unlock()
			return nil, 0, ErrClosed
		}
		if !f.dead {
			return f, now, nil
		}
		f.mu.Unlock()
	}
}

// extend makes f live at least until ms. f.mu is held (or f is not shared yet).
func (f *flow) extend(ms int64) {
	if ms > f.expMs.Load() {
		f.expMs.Store(ms)
	}
}

func (s *Store) release(f *flow) { f.mu.Unlock() }

// removeLocked deletes f from the store, in memory and (queued) on disk.
// s.mu and f.mu are held. It returns the batch that deletes it on disk.
func (s *Store) removeLocked(f *flow) *batch {
	f.dead = true
	for k, e := range f.entries {
		s.count(k, e, -1)
	}
	f.entries = nil
	delete(s.flows, f.id)
	s.lru.Remove(f.elem)
	if f.onDisk && s.w != nil {
		// Queued under s.mu: a flow recreated under the same id can only
		// queue its writes after this delete.
		return s.w.enqueue(false, op{key: flowKey(f.id), prefix: true})
	}
	return nil
}

// live returns f's entry for key, nil when it is absent or deleted. f.mu is
// held.
func (s *Store) live(f *flow, key string, now int64) *entry {
	if e := s.current(f, key, now); e != nil && !e.dead {
		return e
	}
	return nil
}

// current returns f's entry or tombstone for key, dropping it if it has
// expired. f.mu is held.
func (s *Store) current(f *flow, key string, now int64) *entry {
	e := f.entries[key]
	if e == nil || e.expMs > now {
		return e
	}
	delete(f.entries, key)
	if !e.dead {
		s.stats.expiredEnt.Add(1)
	}
	s.count(key, e, -1)
	if f.onDisk && s.w != nil {
		s.w.enqueue(false, op{key: entryKey(f.id, key), del: true})
	}
	return nil
}

// store sets key to value with version ver and queues it per d. f.mu is held.
func (s *Store) store(f *flow, key string, value []byte, ver Version, ttlMs int64, d Durability, now int64) (*entry, *batch) {
	e := s.put(f, key, value, ver, ttlMs, d, now)
	f.mode = d
	if !s.diskBound(f, d) {
		return e, nil
	}
	return e, s.persist(f, d, diskOp(f, key, e))
}

// put sets key to value with version ver in memory, over its entry or
// tombstone. f.mu is held.
func (s *Store) put(f *flow, key string, value []byte, ver Version, ttlMs int64, d Durability, now int64) *entry {
	e := s.slot(f, key)
	if cap(e.value) > 2*len(value)+64 {
		e.value = nil // do not pin the room of a far larger value
	}
	e.value = append(e.value[:0], value...)
	if e.value == nil {
		e.value = []byte{}
	}
	e.dead = false
	s.settle(f, key, e, ver, ttlMs, d, now)
	return e
}

// bury replaces key by a tombstone of the delete ver in memory. f.mu is held.
func (s *Store) bury(f *flow, key string, ver Version, ttlMs int64, d Durability, now int64) *entry {
	e := s.slot(f, key)
	e.value, e.dead = e.value[:0], true
	s.settle(f, key, e, ver, ttlMs, d, now)
	return e
}

// slot returns key's entry to be overwritten in place, out of the gauges
// until settle counts it again. f.mu is held.
func (s *Store) slot(f *flow, key string) *entry {
	e := f.entries[key]
	if e == nil {
		e = &entry{}
		f.entries[key] = e
		return e
	}
	s.count(key, e, -1)
	return e
}

// settle stamps e and counts it. f.mu is held.
func (s *Store) settle(f *flow, key string, e *entry, ver Version, ttlMs int64, d Durability, now int64) {
	e.ver, e.expMs = ver, now+ttlMs
	s.count(key, e, 1)
	f.counter = max(f.counter, ver.V)
	f.extend(e.expMs)
	s.stats.puts[d].Add(1)
}

// diskOp is what stores e under key of f on disk.
func diskOp(f *flow, key string, e *entry) op {
	if e.dead {
		return op{key: entryKey(f.id, key), val: encodeTombstone(e.ver, e.expMs)}
	}
	return op{key: entryKey(f.id, key), val: encodeEntry(e.ver, e.expMs, e.value)}
}

// diskBound reports whether a write of f under d reaches the writer, so
// that the Memory path skips encoding. f.mu is held.
func (s *Store) diskBound(f *flow, d Durability) bool {
	return s.w != nil && (d != Memory || f.onDisk)
}

// persist queues ops for the writer according to d and returns the batch a
// Sync caller must wait for. f.mu is held and diskBound(f, d) is true.
func (s *Store) persist(f *flow, d Durability, ops ...op) *batch {
	if d == Memory {
		// A Memory write over a key that may be on disk removes the disk
		// copy, so that a restart cannot resurrect the older value.
		for i := range ops {
			if !ops[i].prefix {
				ops[i].del, ops[i].val = true, nil
			}
		}
		s.w.enqueue(false, ops...)
		return nil
	}
	f.onDisk = true
	b := s.w.enqueue(d == Sync, ops...)
	if d == Sync {
		f.pending = b
		return b
	}
	return nil
}

// await waits for b's commit (nil: nothing to wait for).
func await(ctx context.Context, b *batch) error {
	if b == nil {
		return nil
	}
	select {
	case <-b.done:
		if b.err != nil {
			return fmt.Errorf("%w: %w", ErrWriteFailed, b.err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("flowshard: waiting for commit: %w", ctx.Err())
	}
}

// reserve applies the writer's back-pressure before a disk write.
func (s *Store) reserve(ctx context.Context, d Durability) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("flowshard: %w", err)
	}
	if s.w == nil || d == Memory {
		return nil
	}
	return s.w.reserve(ctx)
}

// prepare runs the checks every write shares and returns its TTL.
func (s *Store) prepare(ctx context.Context, flowID, key string, value []byte, p Policy) (int64, error) {
	if err := s.check(flowID, key, value); err != nil {
		return 0, err
	}
	ttl, err := s.ttlMs(p)
	if err != nil {
		return 0, err
	}
	return ttl, s.reserve(ctx, p.Durability)
}

// Get returns the live entry for key, its value copied into dst's room
// (append(dst[:0], value...); nil dst: a new slice), so that a caller that
// reuses a buffer allocates nothing. If the flow's latest Sync write has not committed
// yet, Get waits for it, so a reader never sees a Sync value that a crash
// could take back.
func (s *Store) Get(ctx context.Context, flowID, key string, dst []byte) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, fmt.Errorf("flowshard: %w", err)
	}
	f, now, err := s.acquire(ctx, flowID, false, 0)
	if f == nil {
		return Entry{}, cmp.Or(err, ErrNotFound)
	}
	s.stats.gets[f.mode].Add(1)
	var out Entry
	e := s.live(f, key, now)
	if e != nil {
		out = e.export(dst)
	}
	pending := f.pending
	s.release(f)
	if err := s.awaitRead(ctx, pending); err != nil {
		return Entry{}, err
	}
	if e == nil {
		return Entry{}, ErrNotFound
	}
	return out, nil
}

func (s *Store) awaitRead(ctx context.Context, b *batch) error {
	if b == nil || b.committed() {
		return nil
	}
	s.stats.syncReadWaits.Add(1)
	return await(ctx, b)
}

// export copies e out, its value into dst's room (never a nil slice).
func (e *entry) export(dst []byte) Entry {
	v := append(dst[:0], e.value...)
	if v == nil {
		v = []byte{}
	}
	return Entry{Value: v, Version: e.ver, Expires: time.UnixMilli(e.expMs)}
}

// Put sets key to value, stamping Version{p.MIdx, counter+1, p.Origin}. With
// Sync it returns after the commit that covers the write; an error then
// (ctx expired, ErrWriteFailed) leaves the outcome unknown: the value is
// already visible in memory and may or may not be on disk.
func (s *Store) Put(ctx context.Context, flowID, key string, value []byte, p Policy) (Version, error) {
	ttl, err := s.prepare(ctx, flowID, key, value, p)
	if err != nil {
		return Version{}, err
	}
	f, now, err := s.acquire(ctx, flowID, true, ttl)
	if err != nil {
		return Version{}, err
	}
	ver := Version{MIdx: p.MIdx, V: f.counter + 1, Origin: p.Origin}
	_, b := s.store(f, key, value, ver, ttl, p.Durability, now)
	s.release(f)
	return ver, p.wait(ctx, b)
}

// CAS sets key to value only if the key's current V equals expect (0: the
// key must be absent). On success it returns the new entry; on
// ErrVersionMismatch it returns the current one (zero when absent).
func (s *Store) CAS(ctx context.Context, flowID, key string, expect uint64, value []byte, p Policy) (Entry, error) {
	ttl, err := s.prepare(ctx, flowID, key, value, p)
	if err != nil {
		return Entry{}, err
	}
	f, now, err := s.acquire(ctx, flowID, expect == 0, ttl)
	if err != nil {
		return Entry{}, err
	}
	if f == nil {
		return Entry{}, ErrVersionMismatch
	}
	cur := s.live(f, key, now)
	if cur == nil && expect != 0 || cur != nil && cur.ver.V != expect {
		var out Entry
		if cur != nil {
			out = cur.export(nil)
		}
		pending := f.pending
		s.release(f)
		if err := s.awaitRead(ctx, pending); err != nil {
			return Entry{}, err
		}
		return out, ErrVersionMismatch
	}
	e, b := s.store(f, key, value, Version{MIdx: p.MIdx, V: f.counter + 1, Origin: p.Origin}, ttl, p.Durability, now)
	out := Entry{Value: value, Version: e.ver, Expires: time.UnixMilli(e.expMs)}
	s.release(f)
	return out, p.wait(ctx, b)
}

// Delete removes key, leaving a tombstone with the version of the delete,
// Version{p.MIdx, counter+1, p.Origin}, which it returns. It counts as a
// write of the flow: the counter advances (so a deleted key's version is
// never handed out again while the flow exists) and the flow's lifetime is
// extended by the TTL, which the tombstone lives for. It returns
// ErrNotFound when the key is absent.
func (s *Store) Delete(ctx context.Context, flowID, key string, p Policy) (Version, error) {
	ttl, err := s.prepare(ctx, flowID, key, nil, p)
	if err != nil {
		return Version{}, err
	}
	f, now, err := s.acquire(ctx, flowID, false, ttl)
	if f == nil {
		return Version{}, cmp.Or(err, ErrNotFound)
	}
	if s.live(f, key, now) == nil {
		s.release(f)
		return Version{}, ErrNotFound
	}
	ver := Version{MIdx: p.MIdx, V: f.counter + 1, Origin: p.Origin}
	e := s.bury(f, key, ver, ttl, p.Durability, now)
	f.mode = p.Durability
	var b *batch
	if s.diskBound(f, p.Durability) {
		b = s.persist(f, p.Durability, diskOp(f, key, e))
	}
	s.release(f)
	return ver, p.wait(ctx, b)
}

// Durable returns once every write of flowID made so far is as durable as
// its Durability asked: it waits for the commit of the flow's latest Sync
// write, if that has not finished. It is how a NoWait writer completes.
func (s *Store) Durable(ctx context.Context, flowID string) error {
	f, _, err := s.acquire(ctx, flowID, false, 0)
	if f == nil {
		return err
	}
	pending := f.pending
	s.release(f)
	if pending == nil {
		return nil
	}
	return await(ctx, pending)
}

// Keys returns the live keys of a flow, sorted; none for an absent flow.
func (s *Store) Keys(ctx context.Context, flowID string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("flowshard: %w", err)
	}
	f, now, err := s.acquire(ctx, flowID, false, 0)
	if f == nil {
		return nil, err
	}
	s.stats.gets[f.mode].Add(1)
	keys := make([]string, 0, len(f.entries))
	for k := range f.entries {
		if s.live(f, k, now) != nil {
			keys = append(keys, k)
		}
	}
	pending := f.pending
	s.release(f)
	slices.Sort(keys)
	return keys, s.awaitRead(ctx, pending)
}

// Entries returns every live entry of a flow, sorted by key, read at one
// instant under the flow's lock: what a replica push or an adoption
// copies. An absent flow has none.
func (s *Store) Entries(ctx context.Context, flowID string) ([]KeyEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("flowshard: %w", err)
	}
	f, now, err := s.acquire(ctx, flowID, false, 0)
	if f == nil {
		return nil, err
	}
	s.stats.gets[f.mode].Add(1)
	out := s.exportLocked(f, now)
	pending := f.pending
	s.release(f)
	return out, s.awaitRead(ctx, pending)
}

// KeyEntry is one key of a flow with its entry.
type KeyEntry struct {
	Key string
	Entry
}

// KeyVersion names the version a Commit expects one key to have.
type KeyVersion struct {
	Key string
	V   uint64
}

// Write is one change of a Commit: Value is stored under Key, or Key is
// removed when Delete is set (an absent key is no error).
type Write struct {
	Key    string
	Value  []byte
	Delete bool
}

// Commit applies writes to a flow, all of them or none, only when the
// flow's live keys are exactly base's, each with base's V: the flow has not
// changed since it was read. Each write advances the flow's counter, as a
// Put or Delete would, and all of them reach the disk in one batch. On
// ErrVersionMismatch nothing is written and the current entries are
// returned, sorted by key, so that the caller can try again without
// reading; on success nothing is returned (the one caller, a script's
// state, is done with the flow, and copying it out was a tenth of a
// counter script's request).
func (s *Store) Commit(ctx context.Context, flowID string, base []KeyVersion, writes []Write, p Policy) ([]KeyEntry, error) {
	ttl, err := s.ttlMs(p)
	if err != nil {
		return nil, err
	}
	if err := s.checkName("flow id", flowID); err != nil {
		return nil, err
	}
	stores := false
	for _, w := range writes {
		if err := s.check(flowID, w.Key, w.Value); err != nil {
			return nil, err
		}
		stores = stores || !w.Delete
	}
	if err := s.reserve(ctx, p.Durability); err != nil {
		return nil, err
	}
	f, now, err := s.acquire(ctx, flowID, len(base) == 0 && stores, ttl)
	if err != nil {
		return nil, err
	}
	if f == nil {
		if len(base) == 0 {
			return nil, nil // nothing to write to an absent flow
		}
		return nil, ErrVersionMismatch
	}
	if !s.matches(f, base, now) {
		out := s.exportLocked(f, now)
		pending := f.pending
		s.release(f)
		if err := s.awaitRead(ctx, pending); err != nil {
			return nil, err
		}
		return out, ErrVersionMismatch
	}
	var ops []op
	disk := s.diskBound(f, p.Durability)
	for _, w := range writes {
		if w.Delete && s.live(f, w.Key, now) == nil {
			continue
		}
		ver := Version{MIdx: p.MIdx, V: f.counter + 1, Origin: p.Origin}
		var e *entry
		if w.Delete {
			e = s.bury(f, w.Key, ver, ttl, p.Durability, now)
		} else {
			e = s.put(f, w.Key, w.Value, ver, ttl, p.Durability, now)
		}
		if disk {
			ops = append(ops, diskOp(f, w.Key, e))
		}
	}
	f.mode = p.Durability
	var b *batch
	if len(ops) > 0 {
		b = s.persist(f, p.Durability, ops...)
	}
	s.release(f)
	return nil, p.wait(ctx, b)
}

// matches reports whether f's live keys are exactly base's, with base's V.
// f.mu is held.
func (s *Store) matches(f *flow, base []KeyVersion, now int64) bool {
	live := 0
	for k := range f.entries {
		if s.live(f, k, now) != nil {
			live++
		}
	}
	if live != len(base) {
		return false
	}
	for _, kv := range base {
		if e := f.entries[kv.Key]; e == nil || e.dead || e.ver.V != kv.V {
			return false
		}
	}
	return true
}

// exportLocked copies f's live entries, sorted by key, their values in one
// allocation. f.mu is held.
func (s *Store) exportLocked(f *flow, now int64) []KeyEntry {
	out := make([]KeyEntry, 0, len(f.entries))
	size := 0
	for k := range f.entries {
		if e := s.live(f, k, now); e != nil {
			out = append(out, KeyEntry{Key: k, Entry: Entry{Version: e.ver, Expires: time.UnixMilli(e.expMs)}})
			size += len(e.value)
		}
	}
	slices.SortFunc(out, func(a, b KeyEntry) int { return strings.Compare(a.Key, b.Key) })
	buf := make([]byte, 0, size)
	for i := range out {
		v := f.entries[out[i].Key].value
		start := len(buf)
		buf = append(buf, v...)
		out[i].Value = buf[start:len(buf):len(buf)]
	}
	return out
}

// Clear removes a whole flow, its write counter included. If any of the
// flow went to disk, it returns after the commit that deletes it there.
func (s *Store) Clear(ctx context.Context, flowID string) error {
	_, err := s.deleteWhere(ctx, func(id string) bool { return id == flowID })
	return err
}

// DeletePrefix removes every flow whose id starts with prefix (an imposter
// deleted: "i8080:") and returns how many it removed. Like Clear, it waits
// for the disk deletion to commit.
func (s *Store) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	return s.deleteWhere(ctx, func(id string) bool { return strings.HasPrefix(id, prefix) })
}

// deleteWhere removes every flow whose id matches and returns how many it
// removed, after their disk deletion committed.
func (s *Store) deleteWhere(ctx context.Context, match func(flowID string) bool) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("flowshard: %w", err)
	}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return 0, ErrClosed
	}
	var last *batch
	n := 0
	for id, f := range s.flows {
		if !match(id) {
			continue
		}
		f.mu.Lock()
		if b := s.removeLocked(f); b != nil {
			last = b
		}
		f.mu.Unlock()
		n++
	}
	s.mu.Unlock()
	s.stats.cleared.Add(uint64(n))
	// Batches commit in order, so the last one covers every earlier delete.
	return n, await(ctx, last)
}

// Flows lists, in order, up to limit ids of flows that start with prefix,
// come after the id after ("" to start) and hold at least one live entry.
// more reports whether another page follows: pass the last id as after.
func (s *Store) Flows(ctx context.Context, prefix, after string, limit int) (ids []string, more bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("flowshard: %w", err)
	}
	if limit <= 0 {
		return nil, false, fmt.Errorf("%w: limit %d", ErrBadPolicy, limit)
	}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return nil, false, ErrClosed
	}
	now := s.nowMs(ctx)
	for id, f := range s.flows {
		if !strings.HasPrefix(id, prefix) || id <= after {
			continue
		}
		f.mu.Lock()
		for _, e := range f.entries {
			if e.expMs > now && !e.dead {
				ids = append(ids, id)
				break
			}
		}
		f.mu.Unlock()
	}
	s.mu.Unlock()
	slices.Sort(ids)
	if len(ids) > limit {
		return ids[:limit], true, nil
	}
	return ids, false, nil
}

// Stats returns a snapshot of the counters.
func (s *Store) Stats() Stats {
	st := s.stats.snapshot()
	s.mu.Lock()
	st.Flows = int64(len(s.flows))
	s.mu.Unlock()
	return st
}

// sweeper drops expired entries and flows in the background, at most
// SweepBatch flows per pass, one pass per SweepInterval.
func (s *Store) sweeper() {
	defer close(s.sweepDone)
	t := time.NewTicker(s.opts.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stopSweep:
			return
		case <-t.C:
			s.sweep(s.opts.SweepBatch)
		}
	}
}

// sweep visits up to n flows, continuing where the previous pass stopped and
// starting a new cycle over every flow when the previous one is done.
func (s *Store) sweep(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sweepQ) == 0 {
		for _, f := range s.flows {
			s.sweepQ = append(s.sweepQ, f)
		}
	}
	now := s.nowMs(context.Background())
	for ; n > 0 && len(s.sweepQ) > 0; n-- {
		f := s.sweepQ[len(s.sweepQ)-1]
		s.sweepQ[len(s.sweepQ)-1] = nil
		s.sweepQ = s.sweepQ[:len(s.sweepQ)-1]
		f.mu.Lock()
		switch {
		case f.dead:
		case f.expMs.Load() <= now:
			s.removeLocked(f)
			s.stats.expiredFlows.Add(1)
		default:
			for k := range f.entries {
				s.current(f, k, now)
			}
		}
		f.mu.Unlock()
	}
}

// Close stops the sweeper, waits for operations in progress, commits
// everything queued (Async writes included), closes the file and stops the
// writer. Operations after Close fail with ErrClosed. If ctx ends first,
// Close returns its error and the writer finishes draining on its own.
func (s *Store) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed.Store(true)
		s.sweepQ = nil
		held := make([]*flow, 0, len(s.flows))
		for _, f := range s.flows {
			held = append(held, f)
		}
		s.mu.Unlock()
		close(s.stopSweep)
		<-s.sweepDone
		for _, f := range held { // wait out the ops in progress
			f.mu.Lock()
			//lint:ignore SA2001 the empty critical section is the wait
			f.mu.Unlock()
		}
		if s.w != nil {
			close(s.w.stop)
		}
	})
	if s.w == nil {
		return nil
	}
	select {
	case <-s.w.done:
		return s.w.closeErr
	case <-ctx.Done():
		return fmt.Errorf("flowshard: close: %w", ctx.Err())
	}
}
