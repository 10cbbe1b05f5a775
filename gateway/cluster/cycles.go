package cluster

import (
	"context"

	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/ring"
)

// Cycles is the cluster's imposter.Cycles: a stub's position in its
// responses is a flow of its own ("c<port>:<stub id>"), owned, replicated
// and adopted like any other, and its owner advances it under the flow's
// lock, so that a stub with several responses cycles through them once
// across the whole cluster, whichever node each request reaches. A stub
// with one response never asks.
func (f *Flows) Cycles() imposter.Cycles { return clusterCycles{f} }

type clusterCycles struct{ f *Flows }

// Next implements imposter.Cycles.
func (c clusterCycles) Next(ctx context.Context, key string, p flow.Policy) (uint64, error) {
	r := request{op: opCycle, flow: key, policy: toWire(p)}
	var a answer
	if err := c.f.do(ctx, ring.ClassFlow, &r, &a); err != nil {
		return 0, err
	}
	return a.n, nil
}
