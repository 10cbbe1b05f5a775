// Package flowlocal is the single-node flow.Store: the engine's flow seam
// backed directly by this node's flowshard.
package flowlocal

import (
	"context"
	"errors"
	"fmt"

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
func (s Store) Get(ctx context.Context, flowID, key string) (flow.Entry, error) {
	e, err := s.Shard.Get(ctx, flowID, key)
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
	return mapErr(s.Shard.Delete(ctx, flowID, key, policy(p)))
}

// Keys implements flow.Store.
func (s Store) Keys(ctx context.Context, flowID string) ([]string, error) {
	k, err := s.Shard.Keys(ctx, flowID)
	return k, mapErr(err)
}

// Clear implements flow.Store.
func (s Store) Clear(ctx context.Context, flowID string) error {
	return mapErr(s.Shard.Clear(ctx, flowID))
}
