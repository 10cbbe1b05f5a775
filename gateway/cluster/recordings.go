package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/raftnode"
)

// pathRequests is the peer route that reports and clears one member's
// recorded requests. Its version is in the path: a later format gets a
// route of its own, and a rolling upgrade serves both.
const pathRequests = "/app/v1/requests"

// Limits of a recordings call: each member answers within
// recordingsTimeout, with at most recordingsBytes.
const (
	recordingsTimeout = 2 * time.Second
	recordingsBytes   = 64 << 20
)

// The recordings RPC (version 1, in its path), a wire format pinned by
// golden tests.
type recordingsOp uint8

const (
	opGather recordingsOp = 1
	opClear  recordingsOp = 2
)

type recordingsRequest struct {
	Op   recordingsOp `cbor:"1,keyasint"`
	Port int          `cbor:"2,keyasint"`
}

type recordingsResponse struct {
	Found bool  `cbor:"1,keyasint,omitempty"`
	Count int64 `cbor:"2,keyasint,omitempty"`
	// Requests are the saved requests in their stored JSON form
	// (message.Request's), oldest first.
	Requests [][]byte `cbor:"3,keyasint,omitempty"`
}

// Recordings is gateway.Cluster.Recordings: an imposter's recorded
// requests gathered from, and cleared on, every member over signed peer
// calls.
type Recordings struct{ n *Node }

// Recordings returns the node's recordings seam.
func (n *Node) Recordings() *Recordings { return &Recordings{n} }

// Serve answers the other members from this node's own recordings.
func (rc *Recordings) Serve(local func(port int) (int64, []*message.Request, bool), reset func(port int)) {
	rc.n.group.HandlePeer(pathRequests, 1<<10, func(_ context.Context, _ uint64, body []byte) ([]byte, error) {
		var req recordingsRequest
		if err := raftnode.UnmarshalCBOR(body, &req); err != nil {
			return nil, fmt.Errorf("recordings request: %w", err)
		}
		var resp recordingsResponse
		switch req.Op {
		case opGather:
			count, reqs, ok := local(req.Port)
			resp.Found, resp.Count = ok, count
			for _, r := range reqs {
				b, err := r.MarshalJSON()
				if err != nil {
					return nil, err
				}
				resp.Requests = append(resp.Requests, b)
			}
		case opClear:
			reset(req.Port)
			resp.Found = true
		default:
			return nil, fmt.Errorf("recordings request: unknown op %d", req.Op)
		}
		return raftnode.MarshalCBOR(resp)
	})
}

// Gather returns what every other member recorded on the imposter on port,
// and the members that did not answer in time.
func (rc *Recordings) Gather(ctx context.Context, port int) (int64, []*message.Request, []string) {
	var (
		mu      sync.Mutex
		count   int64
		reqs    []*message.Request
		missing []string
	)
	rc.each(ctx, recordingsRequest{Op: opGather, Port: port}, func(name string, resp recordingsResponse, err error) {
		var got []*message.Request
		for _, b := range resp.Requests {
			r := &message.Request{}
			if err == nil {
				err = r.UnmarshalJSON(b)
			}
			got = append(got, r)
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			rc.n.log.Warn("recorded requests of a member are missing", "member", name, "port", port, "err", err)
			missing = append(missing, name)
			return
		}
		count += resp.Count
		reqs = append(reqs, got...)
	})
	slices.Sort(missing)
	return count, reqs, missing
}

// Clear makes every other member forget what it recorded on port.
func (rc *Recordings) Clear(ctx context.Context, port int) error {
	var (
		mu     sync.Mutex
		failed []string
	)
	rc.each(ctx, recordingsRequest{Op: opClear, Port: port}, func(name string, _ recordingsResponse, err error) {
		if err != nil {
			mu.Lock()
			failed = append(failed, name)
			mu.Unlock()
		}
	})
	if len(failed) > 0 {
		slices.Sort(failed)
		return unavailable(fmt.Sprintf("saved requests were cleared here and not on %s (unreachable); clear them again", strings.Join(failed, ", ")), nil)
	}
	return nil
}

// each sends req to every other member at once and hands each answer to fn.
func (rc *Recordings) each(ctx context.Context, req recordingsRequest, fn func(name string, resp recordingsResponse, err error)) {
	body, err := raftnode.MarshalCBOR(req)
	if err != nil {
		panic(err) // two integers always encode
	}
	n := rc.n
	var wg sync.WaitGroup
	for _, mb := range n.Current().Members {
		if mb.ID == n.Self() {
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, recordingsTimeout)
			defer cancel()
			var resp recordingsResponse
			out, err := n.group.CallPeer(cctx, mb.ID, pathRequests, body, recordingsBytes)
			if err == nil {
				err = raftnode.UnmarshalCBOR(out, &resp)
			}
			if err == nil && req.Op == opClear && !resp.Found {
				err = errors.New("the member did not clear")
			}
			fn(mb.Name, resp, err)
		})
	}
	wg.Wait()
}
