package conformance

import (
	"testing"

	"github.com/riftgate/riftgate/raftnode"
	pb "go.etcd.io/raft/v3/raftpb"
)

// stateMachine adapts raftnode's StateMachine (and its Storage) to Adapter.
type stateMachine[S, C, R any] struct {
	sm    *raftnode.StateMachine[S, C, R]
	store *raftnode.Storage
}

func (a stateMachine[S, C, R]) ApplyEntries(ents []*pb.Entry) ([]uint64, error) {
	res, err := a.sm.ApplyEntries(ents)
	out := make([]uint64, 0, len(res))
	for _, r := range res {
		out = append(out, r.Index)
	}
	return out, err
}

func (a stateMachine[S, C, R]) Applied() (uint64, uint64)            { return a.sm.Applied() }
func (a stateMachine[S, C, R]) Membership() raftnode.Membership      { return a.sm.Membership() }
func (a stateMachine[S, C, R]) Snapshot() (*pb.Snapshot, error)      { return a.sm.Snapshot() }
func (a stateMachine[S, C, R]) InstallSnapshot(s *pb.Snapshot) error { return a.sm.InstallSnapshot(s) }
func (a stateMachine[S, C, R]) Fingerprint() ([]byte, error)         { return a.sm.Fingerprint() }
func (a stateMachine[S, C, R]) Close() error                         { return a.store.Close() }

// ForApp is the harness for raftnode's own adapter over app: each Open is a
// real raft.db in dir, and snapshot-write failures come from the Storage's
// fault hook. command(i) must return distinct state-changing commands.
func ForApp[S, C, R any](app raftnode.AppStateMachine[S, C, R], obs raftnode.Observer[S, C, R], command func(i int) C) Harness {
	return Harness{
		Open: func(t testing.TB, dir string) Adapter {
			t.Helper()
			store, err := raftnode.OpenStorage(dir)
			if err != nil {
				t.Fatalf("open storage: %v", err)
			}
			sm, err := raftnode.NewStateMachine(store, app, obs, nil)
			if err != nil {
				_ = store.Close()
				t.Fatalf("open adapter: %v", err)
			}
			return stateMachine[S, C, R]{sm: sm, store: store}
		},
		FailSnapshotWrites: func(a Adapter, err error) {
			a.(stateMachine[S, C, R]).store.FailSnapshotWrites(err)
		},
		Command: func(i int) []byte {
			b, err := raftnode.CommandEntryData(command(i))
			if err != nil {
				panic(err)
			}
			return b
		},
	}
}
