package raftnode

import (
	"slices"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"
)

func genMessage() *rapid.Generator[*pb.Message] {
	return rapid.Custom(func(t *rapid.T) *pb.Message {
		m := &pb.Message{
			Type: pb.MessageType(rapid.Int32Range(0, 22).Draw(t, "type")).Enum(),
			To:   new(rapid.Uint64().Draw(t, "to")),
			From: new(rapid.Uint64().Draw(t, "from")),
			Term: new(rapid.Uint64().Draw(t, "term")),
		}
		for i := range rapid.IntRange(0, 3).Draw(t, "n") {
			m.Entries = append(m.Entries, &pb.Entry{Index: new(uint64(i)), Term: new(uint64(1)), Data: rapid.SliceOf(rapid.Byte()).Draw(t, "data")})
		}
		return m
	})
}

// Message batches round-trip exactly, whatever they hold.
func TestFrameRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		msgs := rapid.SliceOfN(genMessage(), 0, 5).Draw(t, "msgs")
		b, err := encodeFrame(msgs)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeFrame(b)
		if err != nil || len(back) != len(msgs) {
			t.Fatalf("decode: %v (%d of %d)", err, len(back), len(msgs))
		}
		for i := range msgs {
			if !proto.Equal(msgs[i], back[i]) {
				t.Fatalf("message %d changed", i)
			}
		}
	})
}

// Membership stays sorted and duplicate-free under any sequence of
// changes, a removed id is never a member, and roles follow the last
// change; replaying the same sequence gives the same membership (the
// reduction is deterministic).
func TestMembershipProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type change struct {
			typ pb.ConfChangeType
			id  uint64
		}
		changes := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) change {
			return change{
				typ: rapid.SampledFrom([]pb.ConfChangeType{pb.ConfChangeAddNode, pb.ConfChangeAddLearnerNode, pb.ConfChangeRemoveNode, pb.ConfChangeUpdateNode}).Draw(t, "typ"),
				id:  rapid.Uint64Range(1, 6).Draw(t, "id"),
			}
		}), 0, 30).Draw(t, "changes")
		reduce := func() Membership {
			var m Membership
			for i, c := range changes {
				m.apply(c.typ, c.id, confContext{Name: "n", URL: "u"}, uint64(i+1))
			}
			return m
		}
		m := reduce()
		if !slices.IsSortedFunc(m.Members, func(a, b Member) int { return cmpU64(a.ID, b.ID) }) || !slices.IsSorted(m.Removed) {
			t.Fatalf("unsorted: %+v", m)
		}
		for i := 1; i < len(m.Members); i++ {
			if m.Members[i].ID == m.Members[i-1].ID {
				t.Fatalf("duplicate member: %+v", m)
			}
		}
		// The model: the last add/remove of each id decides.
		last := map[uint64]pb.ConfChangeType{}
		for _, c := range changes {
			if c.typ == pb.ConfChangeUpdateNode {
				continue
			}
			last[c.id] = c.typ
		}
		for id, typ := range last {
			mb, ok := m.Member(id)
			switch typ {
			case pb.ConfChangeRemoveNode:
				if ok {
					t.Fatalf("removed %d still a member", id)
				}
				if !m.WasRemoved(id) {
					t.Fatalf("removed %d not recorded", id)
				}
			case pb.ConfChangeAddNode:
				if !ok || mb.Role != RoleVoter {
					t.Fatalf("%d should be a voter: %+v", id, m)
				}
			case pb.ConfChangeAddLearnerNode:
				if !ok || mb.Role != RoleLearner {
					t.Fatalf("%d should be a learner: %+v", id, m)
				}
			}
		}
		again := reduce()
		if !slices.Equal(m.Members, again.Members) || !slices.Equal(m.Removed, again.Removed) {
			t.Fatal("the same changes reduced to different memberships")
		}
	})
}

// The offered snapshot codec round-trips any value, and its bytes are
// canonical: equal values encode equally.
func TestSnapshotCodecProperty(t *testing.T) {
	c := SnapshotCodec[goldenBody]{Magic: [4]byte{'P', 'R', 'O', 'P'}, Version: 3}
	rapid.Check(t, func(t *rapid.T) {
		v := goldenBody{A: rapid.Uint64().Draw(t, "a"), B: rapid.String().Draw(t, "b")}
		b, err := c.Encode(&v)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := c.Encode(&goldenBody{A: v.A, B: v.B})
		if !slices.Equal(b, again) {
			t.Fatal("equal values encoded differently")
		}
		back, err := c.Decode(b)
		if err != nil || back != v {
			t.Fatalf("round trip %+v -> %+v (%v)", v, back, err)
		}
		if _, err := (SnapshotCodec[goldenBody]{Magic: c.Magic, Version: 2}).Decode(b); err == nil {
			t.Fatal("an older codec accepted a newer version")
		}
	})
}
