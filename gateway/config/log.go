package config

import "context"

// Log is the one path every configuration change takes. One implementation
// keeps a single node's log in bbolt (gateway/configlog); the cluster's
// proposes through Raft and answers once the command is applied locally.
type Log interface {
	// Submit makes cmd durable and applies it, and returns once it is
	// applied on this node, so the caller reads its own write. A refused
	// command answers Result.Err and changes nothing; an error means the
	// command was not made (nothing changed) or, in a cluster, that its
	// outcome is unknown.
	Submit(ctx context.Context, cmd *Command) (Result, error)
	// State returns the latest state applied on this node.
	State() *State
}

// Reconciler makes the running imposters follow the configuration.
type Reconciler interface {
	// Prepare readies the move from prev to next without making any of it
	// visible: listeners bound, stubs compiled. An error refuses the
	// command, with nothing left behind.
	Prepare(ctx context.Context, prev, next *State, res Result) (Plan, error)
	// Follow moves the running imposters from prev to next, a state no
	// one can refuse any more (the one a log was opened with, or a command
	// a cluster committed): what cannot be built or bound is left out,
	// said in the log, and everything else runs.
	Follow(ctx context.Context, prev, next *State)
}

// Plan is a prepared move, to be committed or aborted exactly once.
type Plan interface {
	// Commit makes the move visible. It cannot fail: what could fail was
	// done by Prepare.
	Commit()
	// Abort undoes Prepare.
	Abort()
}
