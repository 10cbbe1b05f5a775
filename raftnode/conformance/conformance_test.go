package conformance_test

import (
	"testing"

	"github.com/riftgate/riftgate/raftnode"
	"github.com/riftgate/riftgate/raftnode/conformance"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ledger is a minimal application: it records every command it applies,
// with the index, so every command changes the state.
type ledger struct {
	Seen    map[uint64]string `cbor:"1,keyasint"`
	Voters  []uint64          `cbor:"2,keyasint"`
	MembIdx uint64            `cbor:"3,keyasint"`
}

type ledgerApp struct{}

var codec = raftnode.SnapshotCodec[ledger]{Magic: [4]byte{'L', 'D', 'G', 'R'}, Version: 1}

func (ledgerApp) InitialState() ledger { return ledger{Seen: map[uint64]string{}} }
func (ledgerApp) Apply(s *ledger, cmd string, index uint64) string {
	s.Seen[index] = cmd
	return cmd
}
func (ledgerApp) ApplyMembership(s *ledger, m raftnode.Membership) {
	s.Voters, s.MembIdx = m.Voters(), m.Index
}
func (ledgerApp) NoopResponse() string                     { return "" }
func (ledgerApp) EncodeSnapshot(s *ledger) ([]byte, error) { return codec.Encode(s) }
func (ledgerApp) DecodeSnapshot(b []byte) (ledger, error) {
	s, err := codec.Decode(b)
	if s.Seen == nil {
		s.Seen = map[uint64]string{}
	}
	return s, err
}

func TestRaftnodeAdapterConforms(t *testing.T) {
	conformance.RunAll(t, conformance.ForApp[ledger, string, string](ledgerApp{}, nil, func(i int) string {
		return "cmd-" + string(rune('a'+i%26)) + string(rune('0'+i%10))
	}))
}
