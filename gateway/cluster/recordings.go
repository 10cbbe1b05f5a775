package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/riftgate/riftgate/gateway/reqlog"
	"github.com/riftgate/riftgate/raftnode"
)

// The peer routes that report and clear one member's recorded requests.
// Each version is in its path: a later format gets a route of its own,
// and a rolling upgrade serves both. Version 1 answers with every
// request at once (capped at recordingsBytes); version 2 in pages, by
// number, so that neither side holds them all. A node asks version 2 and
// answers both.
const (
	pathRequests   = "/app/v1/requests"
	pathRequestsV2 = "/app/v2/requests"
)

// Limits of a recordings call: each member answers within
// recordingsTimeout, with at most recordingsBytes; a page holds about
// pageBytes of records.
const (
	recordingsTimeout = 2 * time.Second
	recordingsBytes   = 64 << 20
	pageBytes         = 1 << 20
)

// The recordings RPC, a wire format pinned by golden tests.
type recordingsOp uint8

const (
	opGather recordingsOp = 1 // v1: count and every request, as JSON
	opClear  recordingsOp = 2 // v1, v2
	opCount  recordingsOp = 3 // v2: numberOfRequests
	opPage   recordingsOp = 4 // v2: a page of records from From
)

type recordingsRequest struct {
	Op   recordingsOp `cbor:"1,keyasint"`
	Port int          `cbor:"2,keyasint"`
	// From is the number of the first request a page asks for (v2).
	From int64 `cbor:"3,keyasint,omitempty"`
}

type recordingsResponse struct {
	Found bool  `cbor:"1,keyasint,omitempty"`
	Count int64 `cbor:"2,keyasint,omitempty"`
	// Requests are, in v1, the saved requests in their stored JSON form
	// (message.Request's), oldest first; in v2 a page of records
	// (gateway/reqlog's encoding).
	Requests [][]byte `cbor:"3,keyasint,omitempty"`
	// Next and More end a v2 page: the number to ask for next, and
	// whether there may be more.
	Next int64 `cbor:"4,keyasint,omitempty"`
	More bool  `cbor:"5,keyasint,omitempty"`
}

// Recordings is gateway.Cluster.Recordings: an imposter's recorded
// requests gathered from, and cleared on, every member over signed peer
// calls.
type Recordings struct{ n *Node }

// Recordings returns the node's recordings seam.
func (n *Node) Recordings() *Recordings { return &Recordings{n} }

// Serve answers the other members from this node's own recordings.
func (rc *Recordings) Serve(local reqlog.Source) {
	rc.handle(pathRequestsV2, local, func(req recordingsRequest, resp *recordingsResponse) (bool, error) {
		switch req.Op {
		case opCount:
			resp.Count, resp.Found = local.Count(req.Port)
		case opPage:
			page, ok, err := local.Page(req.Port, req.From, pageBytes)
			if err != nil {
				return true, err
			}
			resp.Found, resp.Requests, resp.Next, resp.More = ok, page.Records, page.Next, page.More
		default:
			return false, nil
		}
		return true, nil
	})
	// Version 1, for members of an older build during a rolling upgrade.
	rc.handle(pathRequests, local, func(req recordingsRequest, resp *recordingsResponse) (bool, error) {
		if req.Op != opGather {
			return false, nil
		}
		resp.Count, resp.Found = local.Count(req.Port)
		return true, gatherV1(local, req.Port, resp)
	})
}

// handle serves one version of the recordings route: a request is
// decoded, clears answer alike in every version, and ops answers the rest
// (false: an op it does not know).
func (rc *Recordings) handle(path string, local reqlog.Source, ops func(recordingsRequest, *recordingsResponse) (bool, error)) {
	rc.n.group.HandlePeer(path, 1<<10, func(_ context.Context, _ uint64, body []byte) ([]byte, error) {
		var req recordingsRequest
		if err := raftnode.UnmarshalCBOR(body, &req); err != nil {
			return nil, fmt.Errorf("recordings request: %w", err)
		}
		var resp recordingsResponse
		if req.Op == opClear {
			local.Reset(req.Port)
			resp.Found = true
		} else if known, err := ops(req, &resp); err != nil {
			return nil, err
		} else if !known {
			return nil, fmt.Errorf("recordings request: unknown op %d", req.Op)
		}
		return raftnode.MarshalCBOR(resp)
	})
}

// gatherV1 renders every recorded request as JSON, as version 1 answers:
// past recordingsBytes it fails rather than grow without bound.
func gatherV1(local reqlog.Source, port int, resp *recordingsResponse) error {
	size := 0
	var rec reqlog.Record
	for from, more := int64(0), true; more; {
		page, ok, err := local.Page(port, from, pageBytes)
		if err != nil || !ok {
			return err
		}
		for _, b := range page.Records {
			if err := rec.Decode(b); err != nil {
				return err
			}
			var js bytes.Buffer
			rec.AppendJSON(&js)
			if size += js.Len(); size > recordingsBytes {
				return fmt.Errorf("recorded requests: over %d bytes; ask with a newer build", recordingsBytes)
			}
			resp.Requests = append(resp.Requests, js.Bytes())
		}
		from, more = page.Next, page.More
	}
	return nil
}

// Gather returns the sum of every other member's numberOfRequests on the
// imposter on port, a stream of each one's recorded requests (in member
// name order), and the members that did not answer in time.
func (rc *Recordings) Gather(ctx context.Context, port int) (int64, []reqlog.Stream, []string) {
	type counted struct {
		name string
		id   uint64
	}
	var (
		mu      sync.Mutex
		count   int64
		found   []counted
		missing []string
	)
	rc.each(ctx, pathRequestsV2, recordingsRequest{Op: opCount, Port: port}, func(id uint64, name string, resp recordingsResponse, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			rc.n.log.Warn("recorded requests of a member are missing", "member", name, "port", port, "err", err)
			missing = append(missing, name)
			return
		}
		count += resp.Count
		if resp.Found {
			found = append(found, counted{name, id})
		}
	})
	slices.Sort(missing)
	slices.SortFunc(found, func(a, b counted) int { return strings.Compare(a.name, b.name) })
	streams := make([]reqlog.Stream, len(found))
	for i, f := range found {
		streams[i] = &pageStream{rc: rc, id: f.id, name: f.name, port: port, more: true}
	}
	return count, streams, missing
}

// pageStream reads one member's recorded requests a page at a time.
type pageStream struct {
	rc   *Recordings
	id   uint64
	name string
	port int
	next int64
	more bool
	recs [][]byte
	err  error
}

// Next implements reqlog.Stream.
func (p *pageStream) Next(ctx context.Context) ([]byte, bool) {
	for len(p.recs) == 0 {
		if !p.more || p.err != nil {
			return nil, false
		}
		p.fetch(ctx)
	}
	rec := p.recs[0]
	p.recs = p.recs[1:]
	return rec, true
}

func (p *pageStream) fetch(ctx context.Context) {
	body, err := raftnode.MarshalCBOR(recordingsRequest{Op: opPage, Port: p.port, From: p.next})
	if err != nil {
		p.err = err
		return
	}
	cctx, cancel := context.WithTimeout(ctx, recordingsTimeout)
	defer cancel()
	var resp recordingsResponse
	out, err := p.rc.n.group.CallPeer(cctx, p.id, pathRequestsV2, body, recordingsBytes)
	if err == nil {
		err = raftnode.UnmarshalCBOR(out, &resp)
	}
	if err != nil {
		p.err = fmt.Errorf("member %s: %w", p.name, err)
		return
	}
	if !resp.Found {
		p.more = false // the imposter is gone there meanwhile
		return
	}
	p.recs, p.next, p.more = resp.Requests, resp.Next, resp.More
}

// Err implements reqlog.Stream.
func (p *pageStream) Err() error { return p.err }

// Close implements reqlog.Stream.
func (p *pageStream) Close() { p.recs = nil }

// Clear makes every other member forget what it recorded on port.
func (rc *Recordings) Clear(ctx context.Context, port int) error {
	var (
		mu     sync.Mutex
		failed []string
	)
	rc.each(ctx, pathRequestsV2, recordingsRequest{Op: opClear, Port: port}, func(_ uint64, name string, _ recordingsResponse, err error) {
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

// each sends req to every other member at once on path and hands each
// answer to fn.
func (rc *Recordings) each(ctx context.Context, path string, req recordingsRequest, fn func(id uint64, name string, resp recordingsResponse, err error)) {
	body, err := raftnode.MarshalCBOR(req)
	if err != nil {
		panic(err) // integers always encode
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
			out, err := n.group.CallPeer(cctx, mb.ID, path, body, recordingsBytes)
			if err == nil {
				err = raftnode.UnmarshalCBOR(out, &resp)
			}
			if err == nil && req.Op == opClear && !resp.Found {
				err = errors.New("the member did not clear")
			}
			fn(mb.ID, mb.Name, resp, err)
		})
	}
	wg.Wait()
}
