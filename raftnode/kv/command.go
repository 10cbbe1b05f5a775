package kv

import "bytes"

// ExpectKind is the precondition a write places on the current live record.
// Its values are the wire tags: append only.
type ExpectKind uint8

// Expectation kinds. The zero value is Absent, the safe default: a write
// that forgot its precondition can only create.
const (
	ExpectAbsent  ExpectKind = 0 // no live record
	ExpectVersion ExpectKind = 1 // a live record with exactly this version
	ExpectAny     ExpectKind = 2 // unconditional
)

// Expect is a precondition on the live record of a key. Expired records are
// absent: Absent succeeds against them, Version(v) fails.
type Expect struct {
	kind    ExpectKind
	version uint64
}

// Absent expects no live record.
func Absent() Expect { return Expect{kind: ExpectAbsent} }

// Version expects a live record written at log index v.
func Version(v uint64) Expect { return Expect{kind: ExpectVersion, version: v} }

// Any expects nothing.
func Any() Expect { return Expect{kind: ExpectAny} }

// Kind reports which precondition e is.
func (e Expect) Kind() ExpectKind { return e.kind }

// Version reports the version a Version expectation names (0 otherwise).
func (e Expect) Version() uint64 { return e.version }

// holds reports whether e is met by cur (nil: no live record).
func (e Expect) holds(cur *entry) bool {
	switch e.kind {
	case ExpectAbsent:
		return cur == nil
	case ExpectVersion:
		return cur != nil && cur.version == e.version
	case ExpectAny:
		return true
	}
	return false
}

// Record is what a key holds. Version is the log index of the write that
// created it; ExpiresAtMs 0 means it never expires (a TTL is at least 1 ms,
// so no expiring record can carry 0).
type Record struct {
	Value       []byte
	Version     uint64
	ExpiresAtMs uint64
}

// Equal compares records by content; nil and empty values are equal.
func (r *Record) Equal(o *Record) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.Version == o.Version && r.ExpiresAtMs == o.ExpiresAtMs && bytes.Equal(r.Value, o.Value)
}

// Command is one key mutation (or one bounded eviction) proposed to the log.
// The set of commands is closed: Put, Delete, TakeOnce, Evict.
//
// There is deliberately no increment: read-compute-propose loses races under
// contention, and a correct atomic increment has not been designed.
type Command interface{ isCommand() }

// Put writes Value under Key if Expect holds, with a new version (the log
// index) even when it renews an existing record. The entry expires TTLMs
// after the decision instant; NoExpiry (with TTLMs 0) asks for an entry that
// never expires, which only a policy with AllowNoExpiry accepts.
type Put struct {
	Key      string
	Value    []byte
	Expect   Expect
	TTLMs    uint64
	NoExpiry bool
	NowMs    uint64
}

// Delete removes the live record of Key if Expect holds. It creates no
// version. With Any it is idempotent and reports whether it removed a live
// record; with Absent it succeeds only if the key is logically absent; with
// Version(v) it removes only that live version.
type Delete struct {
	Key    string
	Expect Expect
	NowMs  uint64
}

// TakeOnce reads and removes the live record of Key in one command, if
// Expect (Any or Version) holds.
type TakeOnce struct {
	Key    string
	Expect Expect
	NowMs  uint64
}

// Evict reclaims up to Limit records that expired at or before CutoffMs (or
// the floor, if later), in expiry order.
type Evict struct {
	CutoffMs uint64
	Limit    uint32
}

func (Put) isCommand()      {}
func (Delete) isCommand()   {}
func (TakeOnce) isCommand() {}
func (Evict) isCommand()    {}

// Response is the result of applying one Command. The set is closed:
// Written, Deleted, Taken, Evicted, Conflict, Rejected.
type Response interface{ isResponse() }

// Written answers a successful Put with the new version.
type Written struct{ Version uint64 }

// Deleted answers a successful Delete; Removed says whether a live record
// went away.
type Deleted struct{ Removed bool }

// Taken answers a successful TakeOnce with the removed record, or nil when
// Any found nothing live.
type Taken struct{ Record *Record }

// Evicted answers an Evict: how many records it reclaimed and whether more
// expired records remain at the same cutoff.
type Evicted struct {
	Count       uint32
	MoreExpired bool
}

// Conflict answers a failed precondition with what is there now (nil when
// the key is logically absent), so a holder can recognise its own write
// whose reply was lost.
type Conflict struct{ Current *Record }

// Rejected answers a command that no state could accept.
type Rejected struct{ Reason Reason }

func (Written) isResponse()  {}
func (Deleted) isResponse()  {}
func (Taken) isResponse()    {}
func (Evicted) isResponse()  {}
func (Conflict) isResponse() {}
func (Rejected) isResponse() {}
