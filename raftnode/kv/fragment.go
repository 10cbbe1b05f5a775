package kv

import (
	"container/heap"
	"slices"
)

// Fragment is the replicated state of one key/value namespace. It is not
// safe for concurrent use: the embedding state machine serialises Apply and
// guards reads with its own lock.
type Fragment struct {
	policy  Policy
	records map[string]*entry
	floor   uint64

	// Derived from records, never serialised: rebuilt on snapshot decode.
	expiry expiryIndex
	bytes  int64
}

type entry struct {
	key       string
	value     []byte
	version   uint64
	expiresAt uint64 // 0: never
	slot      int    // position in expiry, -1 when not indexed
}

// NewFragment returns an empty fragment bound by p.
func NewFragment(p Policy) (*Fragment, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Fragment{policy: p, records: map[string]*entry{}}, nil
}

// Floor is the logical-time floor: the latest instant at which the fragment
// reclaimed anything. Every decision is made at max(now, Floor()).
func (f *Fragment) Floor() uint64 { return f.floor }

// Len is the number of stored records, expired-but-unreclaimed included.
func (f *Fragment) Len() int { return len(f.records) }

// Bytes is the sum of key and value bytes of stored records.
func (f *Fragment) Bytes() int64 { return f.bytes }

// Get reads the live record of key as of nowMs (raised to the floor). The
// returned value is a copy.
func (f *Fragment) Get(key string, nowMs uint64) (Record, bool) {
	e := f.live(key, f.at(nowMs))
	if e == nil {
		return Record{}, false
	}
	return *e.record(), true
}

// AnyExpired reports whether an Evict at cutoffMs would reclaim anything:
// the sweep driver's cheap pre-check, so an idle group proposes nothing.
func (f *Fragment) AnyExpired(cutoffMs uint64) bool {
	return len(f.expiry) > 0 && f.expiry[0].expiresAt <= f.at(cutoffMs)
}

// Apply reduces cmd at log index index. It is deterministic: no clock, no
// randomness, no IO; time comes only from the command.
func (f *Fragment) Apply(cmd Command, index uint64) Response {
	if index == 0 {
		return Rejected{ReasonZeroIndex}
	}
	switch c := cmd.(type) {
	case Put:
		return f.put(c, index)
	case Delete:
		return f.delete(c)
	case TakeOnce:
		return f.takeOnce(c)
	case Evict:
		return f.evict(c)
	}
	return Rejected{ReasonMalformed}
}

func (f *Fragment) at(nowMs uint64) uint64 { return max(nowMs, f.floor) }

func (f *Fragment) live(key string, at uint64) *entry {
	e := f.records[key]
	if e == nil || (e.expiresAt != 0 && e.expiresAt <= at) {
		return nil
	}
	return e
}

func (f *Fragment) put(c Put, index uint64) Response {
	at := f.at(c.NowMs)
	if r := f.policy.checkPut(c, at); r != 0 {
		return Rejected{r}
	}
	cur := f.live(c.Key, at)
	if !c.Expect.holds(cur) {
		return Conflict{cur.record()}
	}
	old := f.records[c.Key] // live or expired: this key's slot is replaced
	entries, size := len(f.records)+1, f.bytes+int64(len(c.Key)+len(c.Value))
	if old != nil {
		entries--
		size -= old.size()
	}
	switch {
	case entries > f.policy.MaxEntries:
		return Rejected{ReasonQuotaEntries}
	case size > f.policy.MaxBytes:
		return Rejected{ReasonQuotaBytes}
	}
	if old != nil {
		f.remove(old)
	}
	e := &entry{key: c.Key, value: slices.Clone(c.Value), version: index, slot: -1}
	if !c.NoExpiry {
		e.expiresAt = at + c.TTLMs
	}
	f.insert(e)
	return Written{Version: index}
}

func (f *Fragment) delete(c Delete) Response {
	if r := f.policy.checkKey(c.Key); r != 0 {
		return Rejected{r}
	}
	cur := f.live(c.Key, f.at(c.NowMs))
	if !c.Expect.holds(cur) {
		return Conflict{cur.record()}
	}
	if cur == nil { // Absent held, or Any found nothing: idempotent
		return Deleted{Removed: false}
	}
	f.remove(cur)
	return Deleted{Removed: true}
}

func (f *Fragment) takeOnce(c TakeOnce) Response {
	if r := f.policy.checkKey(c.Key); r != 0 {
		return Rejected{r}
	}
	if c.Expect.kind == ExpectAbsent {
		return Rejected{ReasonInvalidExpect}
	}
	cur := f.live(c.Key, f.at(c.NowMs))
	if !c.Expect.holds(cur) {
		return Conflict{cur.record()}
	}
	if cur == nil {
		return Taken{}
	}
	f.remove(cur)
	return Taken{cur.record()}
}

func (f *Fragment) evict(c Evict) Response {
	if c.Limit == 0 {
		return Rejected{ReasonEvictLimitZero}
	}
	limit := min(c.Limit, f.policy.MaxEvictPerCommand, HardMaxEvict)
	at := f.at(c.CutoffMs)
	var n uint32
	for n < limit && len(f.expiry) > 0 && f.expiry[0].expiresAt <= at {
		f.remove(f.expiry[0])
		n++
	}
	if n > 0 {
		// Reclamation destroys the difference between "expired" and "never
		// existed"; from now on nothing may decide before this instant.
		f.floor = at
	}
	return Evicted{Count: n, MoreExpired: f.AnyExpired(at)}
}

func (f *Fragment) insert(e *entry) {
	f.records[e.key] = e
	f.bytes += e.size()
	if e.expiresAt != 0 {
		heap.Push(&f.expiry, e)
	}
}

func (f *Fragment) remove(e *entry) {
	delete(f.records, e.key)
	f.bytes -= e.size()
	if e.slot >= 0 {
		heap.Remove(&f.expiry, e.slot)
	}
}

func (e *entry) size() int64 { return int64(len(e.key) + len(e.value)) }

// record is nil for a nil entry, so Conflict{cur.record()} reports absence.
// The value is a copy: a response or read handed to a local caller must not
// alias replicated state.
func (e *entry) record() *Record {
	if e == nil {
		return nil
	}
	return &Record{Value: slices.Clone(e.value), Version: e.version, ExpiresAtMs: e.expiresAt}
}

// expiryIndex is a min-heap of expiring entries ordered by (expiresAt, key).
// The order is total, so which records an Evict pops does not depend on the
// heap's shape, which differs between a replica that applied the log and
// one that decoded a snapshot.
type expiryIndex []*entry

func (h expiryIndex) Len() int { return len(h) }
func (h expiryIndex) Less(i, j int) bool {
	if h[i].expiresAt != h[j].expiresAt {
		return h[i].expiresAt < h[j].expiresAt
	}
	return h[i].key < h[j].key
}
func (h expiryIndex) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].slot, h[j].slot = i, j
}
func (h *expiryIndex) Push(x any) {
	e := x.(*entry)
	e.slot = len(*h)
	*h = append(*h, e)
}
func (h *expiryIndex) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.slot = -1
	return e
}
