package raftnode

import (
	"context"
	"sync"
	"time"
)

// LeaderTask is work that must run only while this node leads, such as a
// sweep that proposes writes. It returns when ctx is cancelled.
type LeaderTask func(ctx context.Context)

// LeaderTaskFactory builds the tasks of one leadership generation. gen
// counts this node's leaderships from 1.
type LeaderTaskFactory func(gen uint64) []LeaderTask

// WatchLeader runs the factory's tasks while this node leads. On losing
// leadership it cancels them, gives them a shared grace period
// (Config.LeaderTaskGrace), logs the stragglers as aborted and then waits
// for every one of them before a new generation may start: a rapid leader
// flap never runs two generations at once. Go cannot kill a goroutine, so
// "aborted" means reported and abandoned by the schedule, not stopped; a
// task that ignores its context delays the next generation.
//
// The returned stop cancels the watcher and waits for it; Close does too.
func (g *Group[S, C, R]) WatchLeader(factory LeaderTaskFactory) (stop func()) {
	if g.closed.Load() {
		return func() {}
	}
	ctx, cancel := context.WithCancel(g.ctx)
	ch, unsubscribe := g.subscribeLeadership()
	done := make(chan struct{})
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer close(done)
		defer unsubscribe()
		runLeaderWatch(ctx, g.leading.Load, ch, factory, g.cfg.LeaderTaskGrace, g.log)
	}()
	return func() {
		cancel()
		<-done
	}
}

// logger is the slice of slog the watcher needs.
type logger interface {
	Warn(msg string, args ...any)
}

func runLeaderWatch(ctx context.Context, leading func() bool, changed <-chan struct{}, factory LeaderTaskFactory, grace time.Duration, log logger) {
	var gen uint64
	for ctx.Err() == nil {
		for !leading() {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
		gen++
		genCtx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var mu sync.Mutex
		running := 0
		for _, task := range factory(gen) {
			wg.Add(1)
			mu.Lock()
			running++
			mu.Unlock()
			go func() {
				defer wg.Done()
				defer func() { mu.Lock(); running--; mu.Unlock() }()
				task(genCtx)
			}()
		}
		for leading() && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-changed:
			}
		}
		cancel()
		stopped := make(chan struct{})
		go func() { wg.Wait(); close(stopped) }()
		timer := time.NewTimer(grace)
		select {
		case <-stopped:
		case <-timer.C:
			mu.Lock()
			n := running
			mu.Unlock()
			log.Warn("raftnode: leader tasks overran their grace period; waiting for them before the next generation", "generation", gen, "stragglers", n)
			<-stopped
		}
		timer.Stop()
	}
}
