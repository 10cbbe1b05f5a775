// Package flowlocal is the single-node flow.Store: the engine's flow seam
// backed directly by this node's flowshard.
package flowlocal

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/riftgate/riftgate/flowshard"
	"github.com/riftgate/riftgate/gateway/flow"
)

// Origin is the node id a single node stamps into versions.
const Origin = 1

// Store implements flow.Store over a flowshard.Store.
type Store struct{ Shard *flowshard.Store }

var _ flow.Store = Store{}

func policy(p flow.Policy) flowshard.Policy {
	return flowshard.Policy{TTL: p.TTL, Durability: flowshard.Durability(p.Durability), Origin: Origin}
}

func version(v flowshard.Version) flow.Version {
	return flow.Version{MIdx: v.MIdx, V: v.V, Origin: v.Origin}
}

func entry(e flowshard.Entry) flow.Entry {
	return flow.Entry{Value: e.Value, Version: version(e.Version)}
}

// mapErr translates flowshard's errors into the seam's, keeping the cause.
func mapErr(err error) error {
	var to error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flowshard.ErrNotFound):
		to = flow.ErrNotFound
	case errors.Is(err, flowshard.ErrVersionMismatch):
		to = flow.ErrVersionMismatch
	case errors.Is(err, flowshard.ErrTooLarge):
		to = flow.ErrTooLarge
	case errors.Is(err, flowshard.ErrBadKey):
		to = flow.ErrBadKey
	default:
		to = flow.ErrUnavailable
	}
	return fmt.Errorf("%w: %w", to, err)
}

// Get implements flow.Store.
func (s Store) Get(ctx context.Context, flowID, key string, dst []byte) (flow.Entry, error) {
	e, err := s.Shard.Get(ctx, flowID, key, dst)
	return entry(e), mapErr(err)
}

// Put implements flow.Store.
func (s Store) Put(ctx context.Context, flowID, key string, value []byte, p flow.Policy) (flow.Version, error) {
	v, err := s.Shard.Put(ctx, flowID, key, value, policy(p))
	return version(v), mapErr(err)
}

// CAS implements flow.Store.
func (s Store) CAS(ctx context.Context, flowID, key string, expect uint64, value []byte, p flow.Policy) (flow.Entry, error) {
	e, err := s.Shard.CAS(ctx, flowID, key, expect, value, policy(p))
	return entry(e), mapErr(err)
}

// Delete implements flow.Store.
func (s Store) Delete(ctx context.Context, flowID, key string, p flow.Policy) error {
	_, err := s.Shard.Delete(ctx, flowID, key, policy(p))
	return mapErr(err)
}

// Load implements flow.Store.
func (s Store) Load(ctx context.Context, flowID string) (flow.Snapshot, error) {
	es, err := s.Shard.Entries(ctx, flowID)
	return snapshot(es), mapErr(err)
}

// Commit implements flow.Store.
func (s Store) Commit(ctx context.Context, flowID string, base []flow.KeyVersion, writes []flow.Write, p flow.Policy) (flow.Snapshot, error) {
	es, err := s.Shard.Commit(ctx, flowID, view[flowshard.KeyVersion](base), view[flowshard.Write](writes), policy(p))
	if err != nil {
		return snapshot(es), mapErr(err)
	}
	return nil, nil
}

// The seam's KeyVersion and Write are flowshard's (these conversions
// compile only while the fields match), so Commit hands them over as they
// are: flowshard only reads them.
var (
	_ = flowshard.KeyVersion(flow.KeyVersion{})
	_ = flowshard.Write(flow.Write{})
)

// view is s as a slice of T, a type of the same layout as S.
func view[T, S any](s []S) []T {
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

// snapshot converts a flowshard flow's entries, already sorted by key.
func snapshot(es []flowshard.KeyEntry) flow.Snapshot {
	out := make(flow.Snapshot, len(es))
	for i, e := range es {
		out[i] = flow.KeyEntry{Key: e.Key, Entry: entry(e.Entry)}
	}
	return out
}

// Clear implements flow.Store.
func (s Store) Clear(ctx context.Context, flowID string) error {
	return mapErr(s.Shard.Clear(ctx, flowID))
}

// List implements flow.Store.
func (s Store) List(ctx context.Context, prefix, after string, limit int) ([]string, bool, error) {
	ids, more, err := s.Shard.Flows(ctx, prefix, after, limit)
	return ids, more, mapErr(err)
}

// DeletePrefix implements flow.Store.
func (s Store) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	n, err := s.Shard.DeletePrefix(ctx, prefix)
	return n, mapErr(err)
}

// Stats implements flow.Store.
func (s Store) Stats(context.Context) (flow.Stats, error) {
	st := s.Shard.Stats()
	return flow.Stats{
		Flows: st.Flows, Entries: st.Entries, Bytes: st.Bytes, Writes: st.Puts,
		Batches: st.Batches, EvictedLRU: st.EvictedLRU, Expired: st.ExpiredFlows,
	}, nil
}
