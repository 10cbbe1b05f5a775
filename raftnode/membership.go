package raftnode

import (
	"fmt"
	"slices"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Role is a member's part in the group.
type Role uint8

// Roles. The values are part of the snapshot format.
const (
	RoleVoter   Role = 1
	RoleLearner Role = 2
)

func (r Role) String() string {
	switch r {
	case RoleVoter:
		return "voter"
	case RoleLearner:
		return "learner"
	default:
		return fmt.Sprintf("role(%d)", uint8(r))
	}
}

// Member is one node of the group as the replicated membership knows it.
type Member struct {
	ID   uint64 `cbor:"1,keyasint" json:"id"`
	Name string `cbor:"2,keyasint" json:"name"`
	URL  string `cbor:"3,keyasint" json:"url"` // base URL of the node's Raft router
	Role Role   `cbor:"4,keyasint" json:"-"`
}

// Membership is the committed group membership. It is replicated through
// the log, carried in snapshots and mirrored into the application state.
type Membership struct {
	// Index is the log index of the change that produced this membership.
	Index   uint64   `cbor:"1,keyasint"`
	Members []Member `cbor:"2,keyasint"` // sorted by ID
	// Removed lists ids that left; they are never admitted again.
	Removed []uint64 `cbor:"3,keyasint"` // sorted
}

// Voters returns the voter ids in ascending order.
func (m Membership) Voters() []uint64 { return m.ids(RoleVoter) }

// Learners returns the learner ids in ascending order.
func (m Membership) Learners() []uint64 { return m.ids(RoleLearner) }

func (m Membership) ids(r Role) []uint64 {
	var out []uint64
	for _, mb := range m.Members {
		if mb.Role == r {
			out = append(out, mb.ID)
		}
	}
	return out
}

// Member looks a member up by id.
func (m Membership) Member(id uint64) (Member, bool) {
	i, ok := slices.BinarySearchFunc(m.Members, id, func(a Member, id uint64) int { return cmpU64(a.ID, id) })
	if !ok {
		return Member{}, false
	}
	return m.Members[i], true
}

// WasRemoved reports whether id was a member once and was removed.
func (m Membership) WasRemoved(id uint64) bool {
	_, ok := slices.BinarySearch(m.Removed, id)
	return ok
}

// Clone returns a deep copy, safe to hand out of the state lock.
func (m Membership) Clone() Membership {
	return Membership{Index: m.Index, Members: slices.Clone(m.Members), Removed: slices.Clone(m.Removed)}
}

// ConfState is the Raft configuration this membership describes. The
// substrate only proposes single changes, so it is never joint.
func (m Membership) ConfState() *pb.ConfState {
	return &pb.ConfState{Voters: m.Voters(), Learners: m.Learners()}
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// confContext travels in a conf change's Context: who the node is, and
// which proposal (origin, seq) to answer when it applies.
type confContext struct {
	Name   string `cbor:"1,keyasint"`
	URL    string `cbor:"2,keyasint"`
	Origin uint64 `cbor:"3,keyasint,omitempty"`
	Seq    uint64 `cbor:"4,keyasint,omitempty"`
}

// apply folds one single change into the membership.
func (m *Membership) apply(typ pb.ConfChangeType, id uint64, ctx confContext, index uint64) {
	m.Index = index
	i, found := slices.BinarySearchFunc(m.Members, id, func(a Member, id uint64) int { return cmpU64(a.ID, id) })
	switch typ {
	case pb.ConfChangeAddNode, pb.ConfChangeAddLearnerNode, pb.ConfChangeUpdateNode:
		role := RoleVoter
		if typ == pb.ConfChangeAddLearnerNode {
			role = RoleLearner
		}
		if found {
			mb := &m.Members[i]
			if typ != pb.ConfChangeUpdateNode {
				mb.Role = role
			}
			if ctx.Name != "" {
				mb.Name = ctx.Name
			}
			if ctx.URL != "" {
				mb.URL = ctx.URL
			}
			return
		}
		if typ == pb.ConfChangeUpdateNode {
			return
		}
		m.Members = slices.Insert(m.Members, i, Member{ID: id, Name: ctx.Name, URL: ctx.URL, Role: role})
	case pb.ConfChangeRemoveNode:
		if found {
			m.Members = slices.Delete(m.Members, i, i+1)
		}
		if j, ok := slices.BinarySearch(m.Removed, id); !ok {
			m.Removed = slices.Insert(m.Removed, j, id)
		}
	}
}

// decodedConfChange is a committed conf change entry in a version-neutral form.
type decodedConfChange struct {
	cc      pb.ConfChangeI
	changes []*pb.ConfChangeSingle
	ctx     confContext
}

func decodeConfChange(e *pb.Entry) (decodedConfChange, error) {
	var d decodedConfChange
	var raw []byte
	switch e.GetType() {
	case pb.EntryConfChange:
		var cc pb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			return d, fmt.Errorf("raftnode: decode conf change at %d: %w", e.GetIndex(), err)
		}
		d.cc = &cc
		d.changes = cc.AsV2().GetChanges()
		raw = cc.GetContext()
	case pb.EntryConfChangeV2:
		var cc pb.ConfChangeV2
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			return d, fmt.Errorf("raftnode: decode conf change v2 at %d: %w", e.GetIndex(), err)
		}
		d.cc = &cc
		d.changes = cc.GetChanges()
		raw = cc.GetContext()
	default:
		return d, fmt.Errorf("raftnode: entry %d is not a conf change", e.GetIndex())
	}
	if len(raw) > 0 {
		// A context we cannot read still changes the configuration: Raft has
		// already committed it. Only the name/URL/waiter are lost.
		_ = decMode.Unmarshal(raw, &d.ctx)
	}
	return d, nil
}
