package raftnode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// proposalVersion is the first byte of every command entry. A later
// framing gets a new byte; old logs keep decoding through this one.
const proposalVersion byte = 1

// proposalHeaderLen is version(1) | origin(8) | seq(8).
const proposalHeaderLen = 17

// ErrBadProposal reports entry data that is not a command frame.
var ErrBadProposal = errors.New("raftnode: bad proposal frame")

// encodeProposal frames a CBOR command with the (origin, seq) pair the
// proposing node uses to find its waiter when the entry applies.
func encodeProposal(origin, seq uint64, cmd []byte) []byte {
	b := make([]byte, proposalHeaderLen, proposalHeaderLen+len(cmd))
	b[0] = proposalVersion
	binary.BigEndian.PutUint64(b[1:], origin)
	binary.BigEndian.PutUint64(b[9:], seq)
	return append(b, cmd...)
}

func decodeProposal(data []byte) (origin, seq uint64, cmd []byte, err error) {
	if len(data) < proposalHeaderLen || data[0] != proposalVersion {
		return 0, 0, nil, fmt.Errorf("%w (%d bytes)", ErrBadProposal, len(data))
	}
	return binary.BigEndian.Uint64(data[1:]), binary.BigEndian.Uint64(data[9:]), data[proposalHeaderLen:], nil
}

// CommandEntryData is the entry payload for cmd as the substrate frames it,
// with no waiter attached. Tests and conformance fixtures build logs with it.
func CommandEntryData(cmd any) ([]byte, error) {
	b, err := encMode.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("raftnode: encode command: %w", err)
	}
	return encodeProposal(0, 0, b), nil
}

// ConfChangeEntryData is the EntryConfChangeV2 payload adding, promoting or
// removing one member, as the admin API proposes it.
func ConfChangeEntryData(typ pb.ConfChangeType, id uint64, name, url string) ([]byte, error) {
	return confChangeData(typ, id, confContext{Name: name, URL: url})
}

func confChangeData(typ pb.ConfChangeType, id uint64, ctx confContext) ([]byte, error) {
	c, err := encMode.Marshal(ctx)
	if err != nil {
		return nil, err
	}
	return marshalOpts.Marshal(confChangeV2(typ, id, c))
}

func confChangeV2(typ pb.ConfChangeType, id uint64, ctx []byte) *pb.ConfChangeV2 {
	return &pb.ConfChangeV2{
		Changes: []*pb.ConfChangeSingle{{Type: typ.Enum(), NodeId: new(id)}},
		Context: ctx,
	}
}

// Result is the answer to one applied entry. Every entry answers, blank
// and membership entries included, so no waiter is left hanging.
type Result[R any] struct {
	Index    uint64
	Origin   uint64 // proposing node's id, 0 when no waiter is attached
	Seq      uint64
	Response R
	Err      error // set when the command could not be decoded
}

// snapshotMagic and snapshotVersion frame the adapter's snapshot: the
// membership plus the application's own bytes, verbatim.
var snapshotMagic = [4]byte{'R', 'G', 'S', 'N'}

const snapshotVersion uint16 = 1

type snapshotBody struct {
	Membership Membership `cbor:"1,keyasint"`
	App        []byte     `cbor:"2,keyasint"`
}

// StateMachine is the adapter between the Raft log and an AppStateMachine:
// it decodes entries, applies them under the state lock, runs observer
// hooks, publishes their effects after unlocking, and builds and installs
// snapshots against a Storage.
type StateMachine[S, C, R any] struct {
	app   AppStateMachine[S, C, R]
	obs   Observer[S, C, R]
	store *Storage
	log   *slog.Logger
	// confHook lets the group hand each conf change to raft.Node.
	confHook func(pb.ConfChangeI)

	mu          sync.RWMutex
	state       S
	applied     uint64
	appliedTerm uint64
	members     Membership
	fx          Effects
}

// NewStateMachine restores the adapter from store's latest snapshot, or
// starts from app.InitialState when there is none.
func NewStateMachine[S, C, R any](store *Storage, app AppStateMachine[S, C, R], obs Observer[S, C, R], log *slog.Logger) (*StateMachine[S, C, R], error) {
	if obs == nil {
		obs = NopObserver[S, C, R]{}
	}
	if log == nil {
		log = slog.Default()
	}
	m := &StateMachine[S, C, R]{app: app, obs: obs, store: store, log: log, state: app.InitialState()}
	snap, err := store.Snapshot()
	if err != nil {
		return nil, err
	}
	if snap.GetMetadata().GetIndex() == 0 {
		return m, nil
	}
	state, members, err := m.decodeSnapshot(snap)
	if err != nil {
		return nil, fmt.Errorf("raftnode: restore snapshot at %d: %w", snap.GetMetadata().GetIndex(), err)
	}
	m.state, m.members = state, members
	m.applied, m.appliedTerm = snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
	return m, nil
}

func (m *StateMachine[S, C, R]) decodeSnapshot(snap *pb.Snapshot) (S, Membership, error) {
	var zero S
	ver, body, err := DecodeEnvelope(snap.GetData(), snapshotMagic)
	if err != nil {
		return zero, Membership{}, err
	}
	if ver != snapshotVersion {
		return zero, Membership{}, fmt.Errorf("%w: version %d", ErrBadEnvelope, ver)
	}
	var sb snapshotBody
	if err := decMode.Unmarshal(body, &sb); err != nil {
		return zero, Membership{}, fmt.Errorf("raftnode: decode snapshot body: %w", err)
	}
	state, err := m.app.DecodeSnapshot(sb.App)
	if err != nil {
		return zero, Membership{}, fmt.Errorf("raftnode: decode app snapshot: %w", err)
	}
	return state, sb.Membership, nil
}

// ApplyEntries applies committed entries in order and answers each one.
// Entries at or below the applied index are skipped, so a replay after a
// restart is harmless.
func (m *StateMachine[S, C, R]) ApplyEntries(ents []*pb.Entry) ([]Result[R], error) {
	if len(ents) == 0 {
		return nil, nil
	}
	out := make([]Result[R], 0, len(ents))
	m.mu.Lock()
	var err error
	for _, e := range ents {
		idx := e.GetIndex()
		if idx <= m.applied {
			continue
		}
		if m.applied != 0 && idx != m.applied+1 {
			err = fmt.Errorf("raftnode: apply gap: entry %d after %d", idx, m.applied)
			break
		}
		res := Result[R]{Index: idx}
		switch e.GetType() {
		case pb.EntryNormal:
			m.applyNormal(e, &res)
		case pb.EntryConfChange, pb.EntryConfChangeV2:
			err = m.applyConfChange(e, &res)
		}
		if err != nil {
			break
		}
		m.applied, m.appliedTerm = idx, e.GetTerm()
		out = append(out, res)
	}
	fx := m.fx
	m.fx = Effects{}
	m.mu.Unlock()
	fx.publish()
	return out, err
}

func (m *StateMachine[S, C, R]) applyNormal(e *pb.Entry, res *Result[R]) {
	if len(e.GetData()) == 0 {
		res.Response = m.app.NoopResponse()
		return
	}
	origin, seq, body, err := decodeProposal(e.GetData())
	res.Origin, res.Seq = origin, seq
	var cmd C
	if err == nil {
		err = decMode.Unmarshal(body, &cmd)
	}
	if err != nil {
		// Every replica fails the same way, so skipping stays deterministic.
		m.log.Warn("raftnode: undecodable command skipped", "index", e.GetIndex(), "err", err)
		res.Response, res.Err = m.app.NoopResponse(), fmt.Errorf("raftnode: command at %d: %w", e.GetIndex(), err)
		return
	}
	res.Response = m.app.Apply(&m.state, cmd, e.GetIndex())
	m.obs.OnApply(&m.fx, &m.state, cmd, res.Response, e.GetIndex())
}

func (m *StateMachine[S, C, R]) applyConfChange(e *pb.Entry, res *Result[R]) error {
	d, err := decodeConfChange(e)
	if err != nil {
		return err
	}
	for _, ch := range d.changes {
		m.members.apply(ch.GetType(), ch.GetNodeId(), d.ctx, e.GetIndex())
	}
	if len(d.changes) == 0 {
		m.members.Index = e.GetIndex()
	}
	if m.confHook != nil {
		m.confHook(d.cc)
	}
	snapshot := m.members.Clone()
	m.app.ApplyMembership(&m.state, snapshot)
	m.obs.OnMembership(&m.fx, &m.state, snapshot)
	res.Origin, res.Seq = d.ctx.Origin, d.ctx.Seq
	res.Response = m.app.NoopResponse()
	return nil
}

// Applied returns the index and term of the last applied entry.
func (m *StateMachine[S, C, R]) Applied() (index, term uint64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.applied, m.appliedTerm
}

// Membership returns a copy of the applied membership.
func (m *StateMachine[S, C, R]) Membership() Membership {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.members.Clone()
}

// ReadOnly returns the local read model over this adapter's state.
func (m *StateMachine[S, C, R]) ReadOnly() ReadOnlyState[S] {
	return ReadOnlyState[S]{mu: &m.mu, state: &m.state, applied: &m.applied}
}

// Fingerprint is the application encoding of the current state, for
// comparing replicas.
func (m *StateMachine[S, C, R]) Fingerprint() ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.app.EncodeSnapshot(&m.state)
}

// snapshotData encodes the applied state under the read lock, so the bytes
// are exactly the state at the returned index: point-in-time.
func (m *StateMachine[S, C, R]) snapshotData() (index, term uint64, cs *pb.ConfState, data []byte, err error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	app, err := m.app.EncodeSnapshot(&m.state)
	if err != nil {
		return 0, 0, nil, nil, fmt.Errorf("raftnode: encode app snapshot: %w", err)
	}
	data, err = EncodeEnvelope(snapshotMagic, snapshotVersion, snapshotBody{Membership: m.members, App: app})
	return m.applied, m.appliedTerm, m.members.ConfState(), data, err
}

// Snapshot builds a snapshot of the applied state and persists it in the
// storage. It does not compact the log.
func (m *StateMachine[S, C, R]) Snapshot() (*pb.Snapshot, error) {
	index, term, cs, data, err := m.snapshotData()
	if err != nil {
		return nil, err
	}
	return m.store.CreateSnapshot(index, term, cs, data)
}

// InstallSnapshot replaces the state with snap's. It decodes first, then
// persists snap, and only then swaps: a failure at any step leaves the
// state, the applied index and the storage as they were.
func (m *StateMachine[S, C, R]) InstallSnapshot(snap *pb.Snapshot) error {
	state, members, err := m.decodeSnapshot(snap)
	if err != nil {
		return fmt.Errorf("raftnode: install snapshot: %w", err)
	}
	if err := m.store.ApplySnapshot(proto.Clone(snap).(*pb.Snapshot)); err != nil {
		return fmt.Errorf("raftnode: install snapshot: %w", err)
	}
	idx := snap.GetMetadata().GetIndex()
	m.mu.Lock()
	m.state, m.members = state, members
	m.applied, m.appliedTerm = idx, snap.GetMetadata().GetTerm()
	m.obs.OnRestore(&m.fx, &m.state, idx)
	fx := m.fx
	m.fx = Effects{}
	m.mu.Unlock()
	fx.publish()
	return nil
}

// SnapshotID names a snapshot by term and index. It is path-safe (hex and
// a dash), so it can name files and URLs directly.
func SnapshotID(md *pb.SnapshotMetadata) string {
	return fmt.Sprintf("%016x-%016x", md.GetTerm(), md.GetIndex())
}
