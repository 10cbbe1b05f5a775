package kv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Proposer submits a command to the group's log and returns its response
// once applied. The embedding application adapts its own proposal path
// (wrapping the command in its envelope, picking the fragment).
type Proposer interface {
	Propose(ctx context.Context, cmd Command) (Response, error)
}

// SweepTarget is one fragment as the sweep driver sees it: a proposer plus a
// read of this node's applied copy.
type SweepTarget interface {
	Proposer
	// AnyExpired reports whether an Evict at cutoffMs would reclaim
	// anything (Fragment.AnyExpired, under the application's read lock).
	AnyExpired(cutoffMs uint64) bool
}

// SweepStats reports one Sweep.
type SweepStats struct {
	Rounds  int    // Evict commands proposed
	Evicted uint64 // records reclaimed
}

// Sweep drains everything expired at cutoffMs: it proposes nothing when
// nothing has expired (an idle group must not write), and otherwise
// re-proposes Evict at once, with the same cutoff, while the fragment
// reports more_expired. Waiting an interval between rounds would let a
// fragment that expires faster than one batch per interval grow without
// bound; re-reading the clock per round would chase its own tail.
func Sweep(ctx context.Context, t SweepTarget, cutoffMs uint64, limit uint32) (SweepStats, error) {
	var st SweepStats
	if !t.AnyExpired(cutoffMs) {
		return st, nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		resp, err := t.Propose(ctx, Evict{CutoffMs: cutoffMs, Limit: limit})
		if err != nil {
			return st, fmt.Errorf("kv: sweep round %d: %w", st.Rounds+1, err)
		}
		st.Rounds++
		ev, ok := resp.(Evicted)
		if !ok {
			return st, fmt.Errorf("kv: sweep round %d: %w: %v", st.Rounds, errUnexpected, resp)
		}
		st.Evicted += uint64(ev.Count)
		if !ev.MoreExpired {
			return st, nil
		}
	}
}

var errUnexpected = errors.New("unexpected evict response")

// SweeperConfig configures RunSweeper.
type SweeperConfig struct {
	Interval time.Duration // between sweeps; a sweep with a backlog does not wait
	Limit    uint32        // Evict limit per round (the policy caps it again)
	NowMs    func() uint64 // read once per sweep: the cutoff
	Logger   *slog.Logger  // nil: slog.Default()
}

// RunSweeper sweeps t at once and then every Interval until ctx is done,
// then returns nil. Run it from the leader-task watcher's factory: eviction
// is a write, so only the leader should propose it, and a new leader starts
// on any backlog straight away. A failed sweep is logged and retried at the
// next tick with a fresh cutoff.
func RunSweeper(ctx context.Context, t SweepTarget, cfg SweeperConfig) error {
	if cfg.Interval <= 0 || cfg.Limit == 0 || cfg.NowMs == nil {
		return fmt.Errorf("kv: sweeper needs a positive Interval and Limit and a clock")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
		cutoff := cfg.NowMs()
		st, err := Sweep(ctx, t, cutoff, cfg.Limit)
		if err != nil && ctx.Err() == nil {
			log.Warn("kv sweep failed", "cutoff_ms", cutoff, "rounds", st.Rounds, "evicted", st.Evicted, "err", err)
			continue
		}
		if st.Rounds > 0 {
			log.Debug("kv sweep", "cutoff_ms", cutoff, "rounds", st.Rounds, "evicted", st.Evicted)
		}
	}
}
