package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/riftgate/riftgate/gateway/flow"
)

// BenchmarkOwnerRPC measures flow operations from n1 on flows n1 owns
// (local) and on flows another node owns (one owner RPC each), in one
// process on loopback: the RPC's cost and allocations, and its latency
// quantiles as the runtime's histogram saw them (bucket upper bounds).
func BenchmarkOwnerRPC(b *testing.B) {
	c := newTCluster(b, nil)
	c.direct = true
	grown(c)
	n1 := c.get("n1")
	v := n1.f.currentView()
	local, remote := flowsOwnedBy(v, "n1", 1)[0], flowsOwnedBy(v, "n2", 1)[0]
	ctx := context.Background()
	mem := flow.Policy{Durability: flow.Memory}
	states := [2][]byte{[]byte("in"), []byte("Started")}
	for _, id := range []string{local, remote} {
		if _, err := n1.f.Put(ctx, id, "k", []byte("value"), mem); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name string
		op   func(id string) error
	}{
		{"get", func(id string) error { _, err := n1.f.Get(ctx, id, "k", nil); return err }},
		{"put-memory", func(id string) error { _, err := n1.f.Put(ctx, id, "k", []byte("value"), mem); return err }},
		// A scenario's move, as the engine makes it: a swap on the value
		// this node last saw, from one state to the other and back.
		{"swap-memory", func(id string) error {
			old, ok := n1.f.Recall(id, "k") // what owners last answered this node
			if !ok {                        // its own flow: its shard holds the value
				e, _ := n1.f.shard.Get(ctx, id, "k", nil)
				old = flow.Entry{Value: e.Value, Version: flow.Version(e.Version)}
			}
			next := states[0]
			if string(old.Value) == string(next) {
				next = states[1]
			}
			_, err := n1.f.Swap(ctx, id, "k", old, next, mem)
			if errors.Is(err, flow.ErrVersionMismatch) {
				err = nil // another caller moved it first
			}
			return err
		}},
	} {
		for _, where := range []struct{ name, id string }{{"local", local}, {"remote", remote}} {
			b.Run(bc.name+"/"+where.name, func(b *testing.B) {
				n1.f.rpcLatency = latency{}
				b.ReportAllocs()
				if where.name == "local" {
					// A local operation never waits, so parallel callers
					// would only take turns, each for a whole time slice
					// of the scheduler: long enough to starve the Raft
					// group's heartbeats until the owner turns isolated.
					for b.Loop() {
						if err := bc.op(where.id); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				b.SetParallelism(16) // a loaded node has many in flight
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := bc.op(where.id); err != nil {
							b.Error(err)
							return
						}
					}
				})
				if where.name == "remote" {
					reportQuantiles(b, n1.f)
				}
			})
		}
	}
	// One caller at a time: the round trip itself.
	b.Run("get/remote-serial", func(b *testing.B) {
		n1.f.rpcLatency = latency{}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := n1.f.Get(ctx, remote, "k", nil); err != nil {
				b.Fatal(err)
			}
		}
		reportQuantiles(b, n1.f)
	})
}

func reportQuantiles(b *testing.B, f *Flows) {
	p50, _ := f.RPCLatency(0.5)
	p99, _ := f.RPCLatency(0.99)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
}
