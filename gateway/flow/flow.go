// Package flow is the flow-store seam: the synchronous interface through
// which the engine and plugins read and write per-flow state.
//
// A flow is a small key/value map named by a scoped flow id ("i8080:abc" or
// "f:abc"). The engine never knows whether the store behind this interface is
// the local flowshard or a cluster owner reached over RPC; every failure of
// the latter surfaces as ErrUnavailable, which a stub answers with 503.
package flow

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Errors every Store implementation returns, matched with errors.Is.
var (
	ErrNotFound        = errors.New("flow: key not found")
	ErrVersionMismatch = errors.New("flow: version mismatch")
	ErrUnavailable     = errors.New("flow: store unavailable")
	ErrTooLarge        = errors.New("flow: key or value too large")
	ErrBadKey          = errors.New("flow: invalid key")
)

// The causes of unavailability. A store that knows why names one
// (Unavailable), and the 503 a stub answers, and its log line, say it
// (Describe): an operator must tell a cut-off node from a slow owner.
const (
	CauseIsolated    = "isolated"          // this node, or the owner, cannot see a leader a quorum acknowledged
	CauseUnreachable = "owner unreachable" // no session to the owner: dial failed, or it went silent
	CauseFenced      = "fenced"            // the owner and this node disagree on the membership
	CauseAdopting    = "not yet adopted"   // the owner has not taken its flows over yet
	CauseShed        = "shed"              // too many operations in flight, here or at the owner
	CauseDeadline    = "deadline"          // the request's budget ran out
	CauseReplicas    = "no replica"        // a sync write reached no replica in time
)

// causes are the causes, for a store that reads one back from text.
var causes = []string{CauseIsolated, CauseUnreachable, CauseFenced, CauseAdopting, CauseShed, CauseDeadline, CauseReplicas}

// CauseOf returns the cause msg starts with ("cause: ..."), or "".
func CauseOf(msg string) string {
	for _, c := range causes {
		if len(msg) > len(c) && msg[:len(c)] == c && msg[len(c)] == ':' {
			return c
		}
	}
	return ""
}

// UnavailableError is ErrUnavailable with its cause.
type UnavailableError struct {
	Cause string
	Err   error
}

func (e *UnavailableError) Error() string { return e.Cause + ": " + e.Err.Error() }

// Unwrap gives ErrUnavailable and what happened.
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// Unavailable is err, an unavailability, with its cause.
func Unavailable(cause string, err error) error { return &UnavailableError{Cause: cause, Err: err} }

// Describe is what a 503 says of err: that the flow's owner is
// unavailable, and, when err names it, why.
func Describe(err error) string {
	var ue *UnavailableError
	switch {
	case errors.As(err, &ue):
		return "the flow's owner is unavailable (" + ue.Cause + "): " + ue.Err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "the flow's owner is unavailable (" + CauseDeadline + "): the request's budget ran out"
	case err != nil:
		return "the flow's owner is unavailable: " + err.Error()
	}
	return "the flow's owner is unavailable"
}

// BudgetKey is the context key under which a request carries the end of
// its flow budget, a *time.Time: every flow operation it makes, and every
// wait for a flow's lock, ends by then (Budget).
var BudgetKey any = &budgetKey{}

type budgetKey struct{}

// Budget is when the flow work done under ctx must end: the earlier of
// ctx's deadline and its flow budget; ok is false when it has neither.
func Budget(ctx context.Context) (end time.Time, ok bool) {
	end, ok = ctx.Deadline()
	if b, _ := ctx.Value(BudgetKey).(*time.Time); b != nil && (!ok || b.Before(end)) {
		return *b, true
	}
	return end, ok
}

// ErrBudget is a request's flow budget running out.
var ErrBudget = Unavailable(CauseDeadline, fmt.Errorf("%w: the request's flow budget ran out", context.DeadlineExceeded))

// Size caps applied by every Store before anything is stored.
const (
	MaxKeyBytes   = 1 << 10  // 1 KiB
	MaxValueBytes = 64 << 10 // 64 KiB
	DefaultTTL    = 5 * time.Minute
)

// Durability says when a write is acknowledged.
type Durability uint8

// Durability modes, chosen per imposter.
const (
	Memory Durability = iota // never written to disk
	Async                    // acknowledged before the batch commits
	Sync                     // acknowledged after the fsync that covers it
)

// Policy carries the per-imposter settings that apply to a write.
type Policy struct {
	TTL        time.Duration // 0 means DefaultTTL
	Durability Durability
}

// Version is the fencing tuple stamped on every stored value: the
// membership index the writer owned the flow under, the flow's write
// counter, and the writer's node id. Higher tuples win, compared in that
// order. Guests and CAS callers see only V, which is never 0 for a stored
// value, so 0 can mean "absent".
type Version struct {
	MIdx   uint64
	V      uint64
	Origin uint64
}

// Entry is one stored value and its version.
type Entry struct {
	Value   []byte
	Version Version
}

// KeyEntry is one key of a flow with its entry.
type KeyEntry struct {
	Key string
	Entry
}

// KeyVersion names the version of one key: what a Commit expects to find.
type KeyVersion struct {
	Key string
	V   uint64
}

// Write is one change of a Commit: Value is stored under Key, or Key is
// removed when Delete is set.
type Write struct {
	Key    string
	Value  []byte
	Delete bool
}

// Snapshot is a whole flow read at one instant: its live keys, sorted.
type Snapshot []KeyEntry

// Versions lists the snapshot's keys and versions, which a Commit based on
// it expects.
func (s Snapshot) Versions() []KeyVersion {
	out := make([]KeyVersion, len(s))
	for i, e := range s {
		out[i] = KeyVersion{Key: e.Key, V: e.Version.V}
	}
	return out
}

// Stats are the counters of the flows one node holds, for metrics.
type Stats struct {
	Flows, Entries, Bytes int64
	Writes                [3]uint64 // by Durability
	Batches               uint64    // durable commits
	EvictedLRU            uint64    // whole flows shed at the flow cap
	Expired               uint64    // whole flows whose TTL ran out
}

// Store is the flow store. Every method is safe for concurrent use and
// honours ctx's deadline.
type Store interface {
	// Get reads a key, its value copied into dst's room
	// (append(dst[:0], value...); nil dst: a new slice), so that a caller
	// that reuses a buffer allocates nothing.
	Get(ctx context.Context, flowID, key string, dst []byte) (Entry, error)
	Put(ctx context.Context, flowID, key string, value []byte, p Policy) (Version, error)
	// CAS writes value only when the key's current V equals expect (0: the
	// key must be absent). On ErrVersionMismatch it returns the current
	// entry, so that the caller need not read again.
	CAS(ctx context.Context, flowID, key string, expect uint64, value []byte, p Policy) (Entry, error)
	Delete(ctx context.Context, flowID, key string, p Policy) error
	// Load reads every live key of a flow at one instant; an absent flow
	// is an empty snapshot.
	Load(ctx context.Context, flowID string) (Snapshot, error)
	// Commit applies writes, all or none, only when the flow holds exactly
	// the keys and versions of base (a Load's Versions). On
	// ErrVersionMismatch nothing is written and the current snapshot is
	// returned, so that the caller can retry without reading again; on
	// success the snapshot is nil.
	Commit(ctx context.Context, flowID string, base []KeyVersion, writes []Write, p Policy) (Snapshot, error)
	// Clear removes a whole flow.
	Clear(ctx context.Context, flowID string) error
	// List pages through the ids of the flows whose id starts with prefix,
	// in order, after the id after ("" from the start); more says whether
	// ids follow the last one returned.
	List(ctx context.Context, prefix, after string, limit int) (ids []string, more bool, err error)
	// DeletePrefix removes every flow whose id starts with prefix (an
	// imposter's, when it is deleted) and says how many it removed.
	DeletePrefix(ctx context.Context, prefix string) (int, error)
	// Stats reports the counters of the flows this node holds.
	Stats(ctx context.Context) (Stats, error)
}

// Speculator is a Store whose reads cost a round trip (a cluster's, to a
// flow's owner). It remembers what it last saw of a key, and it swaps on a
// key's value rather than its version, so that a decision made on a
// remembered value is checked where the write happens: a scenario that
// reads its state and moves it then costs one round trip, not two.
type Speculator interface {
	// Recall returns what this store last saw of key (Version.V 0: that
	// it was absent), asking no one: it may be stale, and nothing may be
	// answered on it that Swap has not confirmed.
	Recall(flowID, key string) (Entry, bool)
	// Swap writes value only when the key holds old.Value now (when
	// old.Version.V is 0: only when it is absent), whatever its version.
	// On ErrVersionMismatch it returns the current entry (Version.V 0:
	// absent), read by the owner: the caller may decide on it.
	Swap(ctx context.Context, flowID, key string, old Entry, value []byte, p Policy) (Entry, error)
}

// Scope is the prefix of every flow id of an imposter on port: "i<port>:",
// or "f:" for the fleet namespace that imposters with contextScope "fleet"
// share. It is the one place that spells it.
func Scope(port int, fleet bool) string {
	if fleet {
		return "f:"
	}
	return "i" + strconv.Itoa(port) + ":"
}

// AppendScope appends Scope(port, fleet) to b without allocating.
func AppendScope(b []byte, port int, fleet bool) []byte {
	if fleet {
		return append(b, "f:"...)
	}
	return append(strconv.AppendInt(append(b, 'i'), int64(port), 10), ':')
}
