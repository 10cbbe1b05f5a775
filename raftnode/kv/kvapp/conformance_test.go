package kvapp_test

import (
	"fmt"
	"testing"

	"github.com/riftgate/riftgate/raftnode"
	"github.com/riftgate/riftgate/raftnode/conformance"
	"github.com/riftgate/riftgate/raftnode/kv"
	"github.com/riftgate/riftgate/raftnode/kv/kvapp"
)

// The adapter contract, run with the kv application as its state machine.
func TestKvAppConformsToTheAdapterContract(t *testing.T) {
	conformance.RunAll(t, conformance.ForApp[kvapp.State, kvapp.Command, kvapp.Response](kvapp.App{}, nil, func(i int) kvapp.Command {
		return kvapp.Command{Tenant: kvapp.Tenants()[i%len(kvapp.Tenants())], Kv: kv.Put{
			Key: fmt.Sprintf("key-%d", i), Value: []byte("v"), Expect: kv.Absent(), TTLMs: 60_000, NowMs: 1,
		}}
	}))
}

// kv keeps its own snapshot framing so that it needs no Raft runtime; it is
// byte-compatible with raftnode's envelope.
func TestFragmentSnapshotUsesTheSubstrateEnvelope(t *testing.T) {
	f, err := kv.NewFragment(kv.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	f.Apply(kv.Put{Key: "k", Value: []byte("v"), TTLMs: 5}, 1)
	b, err := f.EncodeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	v, body, err := raftnode.DecodeEnvelope(b, [4]byte{'R', 'G', 'K', 'V'})
	if err != nil || v != kv.SnapshotVersion {
		t.Fatalf("version %d, err %v", v, err)
	}
	var decoded []any
	if err := raftnode.UnmarshalCBOR(body, &decoded); err != nil || len(decoded) != 2 {
		t.Fatalf("body %v, err %v", decoded, err)
	}
}
