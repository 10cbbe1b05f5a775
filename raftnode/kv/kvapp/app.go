package kvapp

import "github.com/riftgate/riftgate/raftnode"

// App is the state machine of a group whose state is tenanted kv fragments:
// it implements raftnode.AppStateMachine[State, Command, Response].
// Membership is not mirrored into the state: kv does not need it.
type App struct{}

var _ raftnode.AppStateMachine[State, Command, Response] = App{}

// InitialState returns empty fragments for every tenant.
func (App) InitialState() State { return NewState() }

// Apply reduces one command (see the package-level Apply).
func (App) Apply(s *State, c Command, index uint64) Response { return Apply(s, c, index) }

// ApplyMembership does nothing: the fragments do not depend on membership.
func (App) ApplyMembership(*State, raftnode.Membership) {}

// NoopResponse answers entries that carry no command.
func (App) NoopResponse() Response { return Response{Kind: RespNoop} }

// EncodeSnapshot implements raftnode.AppStateMachine.
func (App) EncodeSnapshot(s *State) ([]byte, error) { return EncodeSnapshot(s) }

// DecodeSnapshot implements raftnode.AppStateMachine.
func (App) DecodeSnapshot(b []byte) (State, error) { return DecodeSnapshot(b) }
