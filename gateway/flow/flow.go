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

// Store is the flow store. Every method is safe for concurrent use and
// honours ctx's deadline.
type Store interface {
	Get(ctx context.Context, flowID, key string) (Entry, error)
	Put(ctx context.Context, flowID, key string, value []byte, p Policy) (Version, error)
	// CAS writes value only when the key's current V equals expect (0: the
	// key must be absent). On ErrVersionMismatch it returns the current
	// entry, so that the caller need not read again.
	CAS(ctx context.Context, flowID, key string, expect uint64, value []byte, p Policy) (Entry, error)
	Delete(ctx context.Context, flowID, key string, p Policy) error
	Keys(ctx context.Context, flowID string) ([]string, error)
	Clear(ctx context.Context, flowID string) error
}
