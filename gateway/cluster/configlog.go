package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"syscall"
	"time"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/configlog"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/raftnode"
)

// Deadlines of the configuration log.
const (
	// submitTimeout bounds one admin write: forwarding, committing, and
	// every part of a large command.
	submitTimeout = 30 * time.Second
	// leaderWait bounds how long a write waits for a leader to confirm
	// this node's state or take the write: an election takes one to three
	// election timeouts (1-3 s); past it, an isolated node answers 503.
	leaderWait = 5 * time.Second
	// followTimeout bounds how long a write that has committed waits for
	// this node to run it before it is answered anyway.
	followTimeout = 10 * time.Second
	// catchUpTimeout bounds how long a starting node waits to confirm its
	// configuration is current before it serves what it has.
	catchUpTimeout = 10 * time.Second
	// barrierTimeout bounds a read barrier (?consistent=true).
	barrierTimeout = 5 * time.Second
	// retryEvery paces retries while there is no leader to take a write.
	retryEvery = 50 * time.Millisecond
)

// follower makes the engine's reconciler follow the applied configuration,
// off Raft's apply path: the observer only offers the newest state, and one
// goroutine moves the running imposters to it, skipping the states that
// arrived meanwhile (the reconciler moves between any two states).
type follower struct {
	log *slog.Logger

	// moving is held by each move of the reconciler: a follow, or a
	// submit's dry run, so that a dry run sees the imposters as they run.
	moving sync.Mutex

	mu      sync.Mutex
	rec     config.Reconciler // nil until the engine lends it; nil again once closed
	closed  bool
	want    *config.State
	wantIdx uint64
	have    *config.State // what the running imposters reflect
	haveIdx uint64
	moved   chan struct{} // closed and replaced whenever haveIdx moves
	kick    chan struct{}
}

func newFollower(log *slog.Logger) *follower {
	empty := config.Empty()
	return &follower{log: log, want: empty, have: empty, moved: make(chan struct{}), kick: make(chan struct{}, 1)}
}

// offer records s, applied at index, as the state to run.
func (f *follower) offer(s *config.State, index uint64) {
	f.mu.Lock()
	if index > f.wantIdx {
		f.want, f.wantIdx = s, index
	}
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// attach lends the follower the reconciler; it starts from the empty state,
// so the first move starts every imposter of the applied configuration.
func (f *follower) attach(rec config.Reconciler) {
	f.mu.Lock()
	f.rec = rec
	f.mu.Unlock()
	f.offer(nil, 0) // a kick
}

// detach stops the follower moving imposters; a move in progress finishes.
func (f *follower) detach() {
	f.mu.Lock()
	f.rec, f.closed = nil, true
	f.mu.Unlock()
	f.moving.Lock()
	defer f.moving.Unlock()
}

// run moves the imposters until ctx ends.
func (f *follower) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.kick:
		}
		f.moving.Lock()
		f.mu.Lock()
		rec, have, want, idx := f.rec, f.have, f.want, f.wantIdx
		f.mu.Unlock()
		if rec == nil || idx <= f.haveIdx {
			f.moving.Unlock()
			continue
		}
		if want != have {
			rec.Follow(ctx, have, want)
		}
		f.mu.Lock()
		f.have, f.haveIdx = want, idx
		close(f.moved)
		f.moved = make(chan struct{})
		f.mu.Unlock()
		f.moving.Unlock()
	}
}

// running returns the state the imposters reflect.
func (f *follower) running() *config.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.have
}

// applied returns the newest applied state and its index.
func (f *follower) applied() (*config.State, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.want, f.wantIdx
}

// wait returns once the imposters run the state applied at index or later.
func (f *follower) wait(ctx context.Context, index uint64) error {
	for {
		f.mu.Lock()
		have, ch, closed := f.haveIdx, f.moved, f.closed
		f.mu.Unlock()
		switch {
		case have >= index:
			return nil
		case closed:
			return errors.New("cluster: the configuration log is closed")
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// dryRun validates cmd as the leader will apply it, on this node's newest
// state, and readies it without making any of it visible (reconciler
// Prepare, then Abort): a committed command cannot be refused by the nodes
// that follow it, so the node that takes it refuses what it cannot run.
func (f *follower) dryRun(ctx context.Context, cmd *config.Command) (config.Result, error) {
	f.moving.Lock()
	defer f.moving.Unlock()
	f.mu.Lock()
	rec, have, want := f.rec, f.have, f.want
	f.mu.Unlock()
	next, res := config.Apply(want, cmd)
	if res.Err != nil || rec == nil {
		return res, nil
	}
	plan, err := rec.Prepare(ctx, have, next, res)
	if err != nil {
		return config.Result{}, err
	}
	plan.Abort()
	return res, nil
}

// configLog is the cluster's config.Log: commands are proposed to the
// group, and a write is answered once this node runs it.
type configLog struct{ n *Node }

var _ config.Log = configLog{}

// State implements config.Log: the configuration this node runs.
func (l configLog) State() *config.State { return l.n.follow.running() }

// Close stops the log moving the engine's imposters, before they stop.
func (l configLog) Close() error {
	l.n.follow.detach()
	return nil
}

// Submit implements config.Log. The command is checked against this
// node's state once a read barrier has made it current, dry-run, and then
// proposed with only the module bytes the cluster lacks; it is answered
// once this node runs it.
func (l configLog) Submit(ctx context.Context, cmd *config.Command) (config.Result, error) {
	n := l.n
	enc, err := config.EncodeCommand(cmd)
	if err != nil {
		return config.Result{}, err
	}
	if len(enc) > configlog.MaxCommandBytes {
		return config.Result{}, mberr.New(mberr.PayloadTooLarge,
			fmt.Sprintf("the change is %d bytes; the configuration takes at most %d at a time", len(enc), configlog.MaxCommandBytes))
	}
	ctx, cancel := context.WithTimeout(ctx, submitTimeout)
	defer cancel()
	if cmd.Op == config.OpRecordStub || cmd.Op == config.OpRecordStubs {
		// Recordings go straight to the log: the engine made them, each
		// is applied or refused on its own whatever the state (its proxy
		// stub gone), and a recorded stub that does not compile is left
		// out where it runs. No barrier and no dry run, which would cost
		// a round trip and a copy of the state per batch.
		return n.propose(ctx, cmd)
	}
	bctx, bcancel := context.WithTimeout(ctx, leaderWait)
	err = n.group.ReadBarrier(bctx)
	bcancel()
	if err != nil {
		n.metrics.failed("no leader")
		return config.Result{}, unavailable("this node cannot confirm its configuration is current (no leader, or no quorum)", err)
	}
	if res, err := n.follow.dryRun(ctx, cmd); err != nil || res.Err != nil {
		return res, err
	}
	cur, _ := n.follow.applied()
	lean := withoutKnown(cmd, cur)
	res, err := n.propose(ctx, lean)
	if err == nil && res.Err != nil && lean != cmd {
		// A module this node had may have left the leader's state
		// meanwhile: the command goes again, with every module.
		res, err = n.propose(ctx, cmd)
	}
	return res, err
}

// withoutKnown returns cmd without the module bytes s already holds:
// modules travel by content hash, and their bytes only when needed.
func withoutKnown(cmd *config.Command, s *config.State) *config.Command {
	drop := false
	for h := range cmd.Modules {
		if _, ok := s.Modules[h]; ok {
			drop = true
		}
	}
	if !drop {
		return cmd
	}
	lean := *cmd
	lean.Modules = maps.Clone(cmd.Modules)
	maps.DeleteFunc(lean.Modules, func(h string, _ []byte) bool { _, ok := s.Modules[h]; return ok })
	if len(lean.Modules) == 0 {
		lean.Modules = nil
	}
	return &lean
}

// propose commits cmd, in parts when it is too large for one entry, and
// waits until this node runs it.
func (n *Node) propose(ctx context.Context, cmd *config.Command) (config.Result, error) {
	enc, err := config.EncodeCommand(cmd)
	if err != nil {
		return config.Result{}, err
	}
	var resp response
	if len(enc) <= maxEntryBytes-partOverhead {
		resp, err = n.proposeEntry(ctx, entry{V: entryVersion, Command: enc})
	} else {
		var id [8]byte
		_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
		upload := binary.BigEndian.Uint64(id[:]) | 1
		for _, p := range split(upload, enc) {
			if resp, err = n.proposeEntry(ctx, entry{V: entryVersion, Part: &p}); err != nil || resp.Err != "" {
				break
			}
		}
	}
	switch {
	case err != nil:
		return config.Result{}, err
	case resp.Err != "":
		n.metrics.failed("refused")
		return config.Result{}, unavailable("the cluster could not apply the change", errors.New(resp.Err))
	case resp.Result == nil:
		return config.Result{}, unavailable("the cluster answered the change without a result", nil)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), followTimeout)
	defer cancel()
	if err := n.follow.wait(wctx, resp.Index); err != nil {
		n.log.Warn("a committed change is answered before this node runs it", "index", resp.Index, "err", err)
	}
	return *resp.Result, nil
}

// partOverhead is what an entry adds around a command's bytes.
const partOverhead = 256

// proposeEntry proposes e through the leader, waiting out elections: a
// proposal that no leader took is retried; one whose outcome is unknown is
// not (it may have applied), and answers 503.
func (n *Node) proposeEntry(ctx context.Context, e entry) (response, error) {
	giveUp := time.Now().Add(leaderWait)
	for {
		changed := n.group.LeaderChanged()
		if !n.group.IsLeader() {
			n.metrics.forwarded.Add(1)
		}
		resp, err := n.group.ProposeAndWait(ctx, e)
		switch {
		case err == nil:
			return resp, nil
		case errors.Is(err, raftnode.ErrCommandTooLarge):
			n.metrics.failed("too large")
			return resp, mberr.New(mberr.PayloadTooLarge, err.Error())
		case errors.Is(err, raftnode.ErrNoLeader), errors.Is(err, raftnode.ErrNotLeader), errors.Is(err, syscall.ECONNREFUSED):
			// Not taken: no leader, or a leader that is gone.
		case errors.Is(err, raftnode.ErrClosed):
			n.metrics.failed("closed")
			return resp, unavailable("this node is stopping", err)
		default:
			n.metrics.failed("unknown outcome")
			return resp, unavailable("the change may or may not have been made (the leader changed or could not be reached before it answered): read the configuration to see", err)
		}
		if time.Now().After(giveUp) {
			n.metrics.failed("no leader")
			return resp, unavailable("no leader took the change in time", err)
		}
		select {
		case <-ctx.Done():
			n.metrics.failed("no leader")
			return resp, unavailable("no leader took the change in time", err)
		case <-changed:
		case <-time.After(retryEvery):
		}
	}
}

// unavailable is a 503 in mb's error shape.
func unavailable(msg string, err error) *mberr.Error {
	if err != nil {
		msg += ": " + err.Error()
	}
	return mberr.New(mberr.ClusterUnavailable, msg)
}

// observer follows the group's applies: effects run after the state lock
// is released, on Raft's apply path, so each only records what changed.
// The follower is offered a state under the lock, not as an effect: once
// the group reports an index applied, every configuration up to it has
// been offered, which WaitApplied relies on (offer only records it, and
// takes no lock of the state's).
type observer struct{ n *Node }

var _ raftnode.Observer[state, entry, response] = observer{}

// OnApply implements raftnode.Observer.
func (o observer) OnApply(_ *raftnode.Effects, s *state, _ entry, _ response, index uint64) {
	o.n.follow.offer(s.Config, index) // s.Config is immutable: Apply copies what it changes
}

// OnMembership implements raftnode.Observer.
func (o observer) OnMembership(fx *raftnode.Effects, _ *state, m raftnode.Membership) {
	m = m.Clone()
	fx.Defer(func() { o.n.setMembers(m) })
}

// OnRestore implements raftnode.Observer.
func (o observer) OnRestore(fx *raftnode.Effects, s *state, index uint64) {
	o.n.follow.offer(s.Config, index)
	m := s.Members.Clone()
	fx.Defer(func() { o.n.setMembers(m) })
}
