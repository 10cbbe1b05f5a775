package raftnode

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"
)

// ReadBarrier returns once this node has applied everything the group had
// committed when it was called, as confirmed by a quorum (raft ReadIndex
// under ReadOnlySafe). A read of State() after it is linearizable, on a
// follower too. It fails with ctx when no leader confirms in time.
func (g *Group[S, C, R]) ReadBarrier(ctx context.Context) error {
	if g.closed.Load() {
		return ErrClosed
	}
	seq := g.seq.Add(1)
	rctx := binary.BigEndian.AppendUint64(nil, seq)
	ch := make(chan uint64, 1)
	g.readMu.Lock()
	g.reads[seq] = ch
	g.readMu.Unlock()
	defer func() {
		g.readMu.Lock()
		delete(g.reads, seq)
		g.readMu.Unlock()
	}()
	// Raft drops a read request while it knows no leader (a node that just
	// started, an election): ask again when the leader changes, or on a
	// timer, until one confirms. Every request is made after the call
	// began, so any of them answers it.
	retry := time.NewTicker(2 * time.Duration(g.cfg.HeartbeatTick) * g.cfg.TickInterval)
	defer retry.Stop()
	for {
		changed := g.LeaderChanged()
		if err := g.node.ReadIndex(ctx, rctx); err != nil {
			return fmt.Errorf("raftnode: read index: %w", err)
		}
		select {
		case index := <-ch:
			return g.WaitApplied(ctx, index)
		case <-changed:
		case <-retry.C:
		case <-ctx.Done():
			return fmt.Errorf("raftnode: read index not confirmed: %w", ctx.Err())
		case <-g.ctx.Done():
			return ErrClosed
		}
	}
}

// deliverReads hands confirmed read indexes to their waiters.
func (g *Group[S, C, R]) deliverReads(states []readState) {
	g.readMu.Lock()
	defer g.readMu.Unlock()
	for _, rs := range states {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		if ch, ok := g.reads[binary.BigEndian.Uint64(rs.RequestCtx)]; ok {
			select {
			case ch <- rs.Index:
			default:
			}
		}
	}
}
