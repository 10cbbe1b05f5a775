package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
// number, so that neither side holds them all. A node answers both, and
// asks version 2, falling back to version 1 for a member that does not
// serve it (a member of an older build answers 404).
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
	if !recordingsV1Only {
		rc.serveV2(local)
	}
	// Version 1, for members of an older build during a rolling upgrade.
	rc.handle(pathRequests, local, func(req recordingsRequest, resp *recordingsResponse) (bool, error) {
		if req.Op != opGather {
			return false, nil
		}
		resp.Count, resp.Found = local.Count(req.Port)
		return true, gatherV1(local, req.Port, resp)
	})
}

func (rc *Recordings) serveV2(local reqlog.Source) {
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
		all  reqlog.Stream // a version 1 member's requests, had whole
	}
	var (
		mu      sync.Mutex
		count   int64
		found   []counted
		missing []string
	)
	rc.each(ctx, recordingsRequest{Op: opCount, Port: port}, func(id uint64, name string, resp recordingsResponse, v1 bool, err error) {
		var all reqlog.Stream
		if err == nil && v1 && resp.Found {
			all, err = v1Records(resp.Requests)
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			rc.n.log.Warn("recorded requests of a member are missing", "member", name, "port", port, "err", err)
			missing = append(missing, name)
			return
		}
		count += resp.Count
		if resp.Found {
			found = append(found, counted{name, id, all})
		}
	})
	slices.Sort(missing)
	slices.SortFunc(found, func(a, b counted) int { return strings.Compare(a.name, b.name) })
	streams := make([]reqlog.Stream, len(found))
	for i, f := range found {
		streams[i] = f.all
		if f.all == nil {
			streams[i] = &pageStream{rc: rc, id: f.id, name: f.name, port: port, more: true}
		}
	}
	return count, streams, missing
}

// v1Records makes a version 1 answer's requests (mb's JSON) records, each
// at its timestamp so that the merge by time places it.
func v1Records(requests [][]byte) (*recordsStream, error) {
	recs := make([][]byte, len(requests))
	for i, js := range requests {
		var r struct {
			Timestamp string `json:"timestamp"`
		}
		if err := json.Unmarshal(js, &r); err != nil {
			return nil, fmt.Errorf("a version 1 recorded request: %w", err)
		}
		var at time.Time
		if r.Timestamp != "" {
			var err error
			if at, err = time.Parse(time.RFC3339Nano, r.Timestamp); err != nil {
				return nil, fmt.Errorf("a version 1 recorded request's timestamp: %w", err)
			}
		}
		recs[i] = reqlog.AppendJSONRecord(nil, at, js)
	}
	return &recordsStream{recs: recs}, nil
}

// recordsStream is a member's records had whole (a version 1 answer).
type recordsStream struct{ recs [][]byte }

// Next implements reqlog.Stream.
func (r *recordsStream) Next(context.Context) ([]byte, bool) {
	if len(r.recs) == 0 {
		return nil, false
	}
	rec := r.recs[0]
	r.recs = r.recs[1:]
	return rec, true
}

// Err implements reqlog.Stream.
func (r *recordsStream) Err() error { return nil }

// Close implements reqlog.Stream.
func (r *recordsStream) Close() { r.recs = nil }

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
	body := encodeRecordings(recordingsRequest{Op: opPage, Port: p.port, From: p.next})
	resp, err := p.rc.callOn(ctx, p.id, pathRequestsV2, body)
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
	rc.each(ctx, recordingsRequest{Op: opClear, Port: port}, func(_ uint64, name string, _ recordingsResponse, _ bool, err error) {
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

// each sends req to every other member at once (call) and hands each
// answer to fn.
func (rc *Recordings) each(ctx context.Context, req recordingsRequest, fn func(id uint64, name string, resp recordingsResponse, v1 bool, err error)) {
	n := rc.n
	var wg sync.WaitGroup
	for _, mb := range n.Current().Members {
		if mb.ID == n.Self() {
			continue
		}
		wg.Go(func() {
			resp, v1, err := rc.call(ctx, mb.ID, req)
			if err == nil && req.Op == opClear && !resp.Found {
				err = errors.New("the member did not clear")
			}
			fn(mb.ID, mb.Name, resp, v1, err)
		})
	}
	wg.Wait()
}

// call sends req (a count or a clear) to member id on version 2's route
// or, when the member does not serve it (404: an older build) or this
// build speaks only version 1, on version 1's, where a count is asked as
// a gather: the count and every request at once. v1 says which answered.
func (rc *Recordings) call(ctx context.Context, id uint64, req recordingsRequest) (resp recordingsResponse, v1 bool, err error) {
	if !recordingsV1Only {
		resp, err = rc.callOn(ctx, id, pathRequestsV2, encodeRecordings(req))
		if raftnode.PeerStatus(err) != http.StatusNotFound {
			return resp, false, err
		}
	}
	if req.Op == opCount {
		req.Op = opGather
	}
	resp, err = rc.callOn(ctx, id, pathRequests, encodeRecordings(req))
	return resp, true, err
}

// callOn makes one recordings call on path, within recordingsTimeout.
func (rc *Recordings) callOn(ctx context.Context, id uint64, path string, body []byte) (recordingsResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, recordingsTimeout)
	defer cancel()
	var resp recordingsResponse
	out, err := rc.n.group.CallPeer(cctx, id, path, body, recordingsBytes)
	if err == nil {
		err = raftnode.UnmarshalCBOR(out, &resp)
	}
	return resp, err
}

func encodeRecordings(req recordingsRequest) []byte {
	body, err := raftnode.MarshalCBOR(req)
	if err != nil {
		panic(err) // integers always encode
	}
	return body
}
