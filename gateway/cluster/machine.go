package cluster

import (
	"fmt"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/configlog"
	"github.com/riftgate/riftgate/raftnode"
)

// state is the configuration group's replicated state: the imposter
// configuration, the membership mirrored from Raft, and the uploads of
// large commands still arriving.
type state struct {
	Config  *config.State
	Members raftnode.Membership
	Uploads map[uint64]*upload
	pending int // bytes the uploads hold; derived, rebuilt on decode
}

// machine is the pure half of the seam: config.Apply is the reduction.
type machine struct{}

var _ raftnode.AppStateMachine[state, entry, response] = machine{}

// InitialState implements raftnode.AppStateMachine.
func (machine) InitialState() state {
	return state{Config: config.Empty(), Uploads: map[uint64]*upload{}}
}

// Apply implements raftnode.AppStateMachine.
func (machine) Apply(s *state, e entry, index uint64) response {
	s.forgetStalled(index)
	r := response{Index: index}
	switch {
	case e.V != entryVersion:
		r.Err = fmt.Sprintf("entry version %d: this build reads %d", e.V, entryVersion)
	case e.Part != nil:
		enc, err := s.take(e.Part, index)
		if err != nil {
			r.Err = err.Error()
		} else if enc != nil {
			s.command(enc, &r)
		}
	default:
		s.command(e.Command, &r)
	}
	return r
}

func (s *state) command(enc []byte, r *response) {
	cmd, err := config.DecodeCommand(enc)
	if err != nil {
		r.Err = err.Error()
		return
	}
	next, res := config.Apply(s.Config, cmd)
	s.Config, r.Result = next, &res
}

// take adds one part to its upload and returns the whole command once the
// last part is in.
func (s *state) take(p *part, index uint64) ([]byte, error) {
	u := s.Uploads[p.Upload]
	if p.Index == 0 {
		switch {
		case u != nil:
			return nil, fmt.Errorf("upload %016x started twice", p.Upload)
		case p.Count < 2 || p.Size > configlog.MaxCommandBytes:
			return nil, fmt.Errorf("upload %016x: %d parts of a %d-byte command", p.Upload, p.Count, p.Size)
		case s.pending+int(p.Size) > maxPendingBytes:
			return nil, fmt.Errorf("upload %016x refused: unfinished uploads already hold %d bytes", p.Upload, s.pending)
		}
		u = &upload{Count: p.Count, Size: p.Size, Sum: p.Sum, Data: make([]byte, 0, p.Size)}
		s.Uploads[p.Upload] = u
		s.pending += int(p.Size)
	}
	if u == nil {
		return nil, fmt.Errorf("part %d of upload %016x, which is unknown or was forgotten", p.Index, p.Upload)
	}
	err := u.take(p, index)
	var done bool
	if err == nil {
		done, err = u.done()
	}
	if err != nil || done {
		s.drop(p.Upload)
	}
	if err != nil || !done {
		return nil, err
	}
	return u.Data, nil
}

func (s *state) drop(id uint64) {
	if u, ok := s.Uploads[id]; ok {
		s.pending -= int(u.Size)
		delete(s.Uploads, id)
	}
}

// forgetStalled drops the uploads whose proposer stopped sending parts.
func (s *state) forgetStalled(index uint64) {
	for id, u := range s.Uploads {
		if u.Last+uploadTimeout < index {
			s.drop(id)
		}
	}
}

// ApplyMembership implements raftnode.AppStateMachine.
func (machine) ApplyMembership(s *state, m raftnode.Membership) { s.Members = m }

// NoopResponse implements raftnode.AppStateMachine.
func (machine) NoopResponse() response { return response{} }

// The snapshot: "RGCG", a u16 version, and a CBOR body holding the whole
// configuration in its own encoding (config.EncodeState), the membership
// and the unfinished uploads.
const snapshotVersion uint16 = 1

var snapshotCodec = raftnode.SnapshotCodec[snapshotBody]{Magic: [4]byte{'R', 'G', 'C', 'G'}, Version: snapshotVersion}

type snapshotBody struct {
	Config  []byte              `cbor:"1,keyasint"`
	Members raftnode.Membership `cbor:"2,keyasint"`
	Uploads map[uint64]*upload  `cbor:"3,keyasint,omitempty"`
}

// EncodeSnapshot implements raftnode.AppStateMachine.
func (machine) EncodeSnapshot(s *state) ([]byte, error) {
	cfg, err := config.EncodeState(s.Config)
	if err != nil {
		return nil, err
	}
	return snapshotCodec.Encode(&snapshotBody{Config: cfg, Members: s.Members, Uploads: s.Uploads})
}

// DecodeSnapshot implements raftnode.AppStateMachine.
func (machine) DecodeSnapshot(data []byte) (state, error) {
	b, err := snapshotCodec.Decode(data)
	if err != nil {
		return state{}, err
	}
	cfg, err := config.DecodeState(b.Config)
	if err != nil {
		return state{}, err
	}
	s := state{Config: cfg, Members: b.Members, Uploads: b.Uploads}
	if s.Uploads == nil {
		s.Uploads = map[uint64]*upload{}
	}
	for _, u := range s.Uploads {
		s.pending += int(u.Size)
	}
	return s, nil
}
