package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/riftgate/riftgate/raftnode"
	"github.com/riftgate/riftgate/ring"
)

// pathFlowCounts is the peer route that reports how many flows one member
// holds. Its version is in the path, as pathRequests' is.
const pathFlowCounts = "/app/v1/flowcounts"

// flowCountsTimeout bounds each member's answer to GET /cluster/flows.
const flowCountsTimeout = 2 * time.Second

// FlowCount is what one member holds in its flowshard, each flow placed on
// the ring of the membership that member runs, and whether the member is
// isolated (it then refuses owner-side operations): its answer to the
// flow-counts peer route (version 1, pinned by golden tests).
type FlowCount struct {
	MembershipIndex uint64 `cbor:"1,keyasint" json:"membershipIndex"`
	// Owned are the flows the member holds and owns.
	Owned int64 `cbor:"2,keyasint" json:"owned"`
	// Replicas are the flows it holds as one of their owner's successors.
	Replicas int64 `cbor:"3,keyasint" json:"replicas"`
	// Other are flows it holds and neither owns nor replicates: copies
	// left from an earlier membership, kept until their TTL.
	Other int64 `cbor:"4,keyasint" json:"other"`
	// Isolated: the member sees no leader a quorum acknowledged.
	Isolated bool `cbor:"5,keyasint" json:"isolated"`
}

// Count counts the flows this node's shard holds (those with a live
// entry, response-cycle positions among them) by its part in each: owner,
// successor or neither. It reads every flow id once: an admin call, not a
// request path.
func (f *Flows) Count(ctx context.Context) (FlowCount, error) {
	v := f.currentView()
	ids, _, err := f.shard.Flows(ctx, "", "", math.MaxInt)
	if err != nil {
		return FlowCount{}, fmt.Errorf("cluster: count flows: %w", err)
	}
	c := FlowCount{MembershipIndex: v.idx}
	for _, id := range ids {
		switch {
		case v.ring.Owner(ring.ClassFlow, id) == f.self:
			c.Owned++
		case slices.Contains(v.ring.Successors(ring.ClassFlow, id, ring.ReplicaSuccessors), f.self):
			c.Replicas++
		default:
			c.Other++
		}
	}
	return c, nil
}

// flowCounter is the flow runtime's Count, lent to the node by CountFlows.
type flowCounter = func(context.Context) (FlowCount, error)

// CountFlows makes count (Flows.Count) what this member reports of its
// flows, to the other members and under GET /cluster/flows.
func (n *Node) CountFlows(count flowCounter) {
	n.counter.Store(&count)
	n.group.HandlePeer(pathFlowCounts, 0, func(ctx context.Context, _ uint64, _ []byte) ([]byte, error) {
		c, err := n.ownCount(ctx)
		if err != nil {
			return nil, err
		}
		return raftnode.MarshalCBOR(c)
	})
}

// ownCount is this member's FlowCount.
func (n *Node) ownCount(ctx context.Context) (FlowCount, error) {
	p := n.counter.Load()
	if p == nil {
		return FlowCount{}, errors.New("this node runs no flow runtime")
	}
	c, err := (*p)(ctx)
	c.Isolated = n.IsIsolated()
	return c, err
}

// Ownership is GET /cluster/flows: how many flows each member holds, as
// each member counts its own shard.
type Ownership struct {
	MembershipIndex uint64            `json:"membershipIndex"` // the membership this node runs
	Members         []MemberOwnership `json:"members"`
}

// MemberOwnership is one member in Ownership. Answered is false, with
// Error, when the member did not report in time; its counts are then 0.
type MemberOwnership struct {
	Name     string `json:"name"`
	ID       string `json:"id"`
	Role     string `json:"role"`
	Answered bool   `json:"answered"`
	Error    string `json:"error,omitempty"`
	FlowCount
}

// Ownership asks every member, at once, for its flow counts.
func (n *Node) Ownership(ctx context.Context) Ownership {
	m := n.Current()
	own := Ownership{MembershipIndex: m.Index, Members: make([]MemberOwnership, len(m.Members))}
	var wg sync.WaitGroup
	for i, mb := range m.Members {
		own.Members[i] = MemberOwnership{Name: mb.Name, ID: raftnode.FormatNodeID(mb.ID), Role: mb.Role.String()}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, flowCountsTimeout)
			defer cancel()
			c, err := n.countOf(cctx, mb.ID)
			o := &own.Members[i]
			if err != nil {
				o.Error = err.Error()
				return
			}
			o.Answered, o.FlowCount = true, c
		})
	}
	wg.Wait()
	slices.SortFunc(own.Members, func(a, b MemberOwnership) int { return strings.Compare(a.Name, b.Name) })
	return own
}

// countOf is member id's flow count: this node's own, or one peer call.
func (n *Node) countOf(ctx context.Context, id uint64) (FlowCount, error) {
	if id == n.Self() {
		return n.ownCount(ctx)
	}
	var c FlowCount
	out, err := n.group.CallPeer(ctx, id, pathFlowCounts, nil, 1<<10)
	if err == nil {
		err = raftnode.UnmarshalCBOR(out, &c)
	}
	return c, err
}

func (n *Node) serveOwnership(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, n.Ownership(r.Context()))
}
