package raftnode

import "sync"

// AppStateMachine is the pure half of the state-machine seam: a
// deterministic reduction of the Raft log. Implementations use no clocks,
// random numbers or IO; every replica reducing the same log must reach
// byte-identical state. S is the state, C the command and R the response.
// C and R travel as CBOR (followers forward commands, leaders return
// responses), so both must round-trip through fxamacker/cbor.
type AppStateMachine[S, C, R any] interface {
	// InitialState is the state before the first entry.
	InitialState() S
	// Apply reduces one committed command at log index into *state and
	// returns the response the proposer receives.
	Apply(state *S, cmd C, index uint64) R
	// ApplyMembership mirrors a committed membership change into *state
	// (for example a voter list that ownership is computed from).
	ApplyMembership(state *S, m Membership)
	// NoopResponse answers entries that carry no command: the leader's
	// blank entry, membership entries and undecodable commands.
	NoopResponse() R
	// EncodeSnapshot serialises *state. The adapter stores the bytes
	// verbatim; SnapshotCodec offers a versioned encoding.
	EncodeSnapshot(state *S) ([]byte, error)
	// DecodeSnapshot is the inverse of EncodeSnapshot.
	DecodeSnapshot(data []byte) (S, error)
}

// Effects buffers side effects produced while the state lock is held. The
// adapter runs them, in order, after the lock is released, so an effect that
// reads the state back can neither deadlock nor observe a half-applied batch.
type Effects struct{ fns []func() }

// Defer queues fn to run after the state lock is released. fn must capture
// owned copies of anything it needs from the state.
func (e *Effects) Defer(fn func()) { e.fns = append(e.fns, fn) }

func (e *Effects) publish() {
	for _, fn := range e.fns {
		fn()
	}
	e.fns = e.fns[:0]
}

// Observer is the effects half of the seam. Its hooks run with the state
// write lock held and must only inspect the state and queue effects.
type Observer[S, C, R any] interface {
	// OnApply follows AppStateMachine.Apply for a command at index.
	OnApply(fx *Effects, state *S, cmd C, resp R, index uint64)
	// OnMembership follows AppStateMachine.ApplyMembership.
	OnMembership(fx *Effects, state *S, m Membership)
	// OnRestore follows a snapshot replacing the whole state.
	OnRestore(fx *Effects, state *S, index uint64)
}

// NopObserver is an Observer that causes no effects.
type NopObserver[S, C, R any] struct{}

// OnApply implements Observer.
func (NopObserver[S, C, R]) OnApply(*Effects, *S, C, R, uint64) {}

// OnMembership implements Observer.
func (NopObserver[S, C, R]) OnMembership(*Effects, *S, Membership) {}

// OnRestore implements Observer.
func (NopObserver[S, C, R]) OnRestore(*Effects, *S, uint64) {}

// ReadOnlyState is the local read model handed to consumers. It is
// advisory: it reflects what this node has applied, which on a follower may
// lag the leader.
type ReadOnlyState[S any] struct {
	mu      *sync.RWMutex
	state   *S
	applied *uint64
}

// Read calls fn with the state and the index it reflects, under the read
// lock. fn must not retain or mutate the state.
func (r ReadOnlyState[S]) Read(fn func(state *S, applied uint64)) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	fn(r.state, *r.applied)
}

// TryRead is Read without waiting: it reports false, without calling fn,
// when an apply holds the lock.
func (r ReadOnlyState[S]) TryRead(fn func(state *S, applied uint64)) bool {
	if !r.mu.TryRLock() {
		return false
	}
	defer r.mu.RUnlock()
	fn(r.state, *r.applied)
	return true
}
