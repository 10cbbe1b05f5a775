package raftnode

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// frameVersion is the first byte of a message batch body.
const frameVersion byte = 1

// Paths on the Raft router, relative to a member's URL.
const (
	pathMessage  = "/message"
	pathSnapshot = "/snapshot"
	pathPropose  = "/propose"
	pathAdmin    = "/admin"
)

// Headers of the authenticated peer protocol.
const (
	hdrGroup = "X-Rift-Group"
	hdrFrom  = "X-Rift-From"
	hdrURL   = "X-Rift-Url"
	hdrAuth  = "X-Rift-Auth"
)

// ErrBadFrame reports a message batch that does not decode.
var ErrBadFrame = errors.New("raftnode: bad message frame")

// encodeFrame writes a batch: version | (uvarint length | proto Message)*.
func encodeFrame(msgs []*pb.Message) ([]byte, error) {
	b := []byte{frameVersion}
	for _, m := range msgs {
		mb, err := marshalOpts.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("raftnode: encode message: %w", err)
		}
		b = binary.AppendUvarint(b, uint64(len(mb)))
		b = append(b, mb...)
	}
	return b, nil
}

// decodeFrame is the inverse of encodeFrame. It never trusts a length
// beyond the bytes actually present.
func decodeFrame(b []byte) ([]*pb.Message, error) {
	if len(b) == 0 || b[0] != frameVersion {
		return nil, fmt.Errorf("%w: version", ErrBadFrame)
	}
	b = b[1:]
	var out []*pb.Message
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: length", ErrBadFrame)
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(b[k:k+int(n)], m); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadFrame, err)
		}
		out = append(out, m)
		b = b[k+int(n):]
	}
	return out, nil
}

// transport carries Raft messages, forwarded proposals and admin calls
// between members over HTTP, authenticated with the cluster secret.
type transport struct {
	auth    *PeerAuth
	self    uint64
	selfURL string
	client  *http.Client
	msgCap  int64
	snapCap int64
	// staleAfter: a queued message older than this when its batch is
	// posted is dropped (raft resends what matters), so that no message
	// reaches a peer long after it was made: see heard.
	staleAfter time.Duration
	log        *slog.Logger
	resolve    func(id uint64) string // membership lookup
	step       func(ctx context.Context, m *pb.Message) error
	reportUR   func(id uint64)
	reportSS   func(id uint64, st raft.SnapshotStatus)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	peers   map[uint64]*peer
	learned map[uint64]string // URLs announced by authenticated senders
	heard   map[uint64]*heard
}

type peer struct {
	id uint64
	q  chan queued
}

type queued struct {
	m  *pb.Message
	at time.Time
}

// heard is what IsIsolated knows of one sender: when its latest message
// was sent, on this node's clock. A message can arrive long after it was
// sent: a partition heals and TCP delivers a segment it has been
// retransmitting, or a batch that waited behind one lost in the partition.
// Counted at its arrival, an old heartbeat of a leader would make a node
// that was cut off, and perhaps removed meanwhile, believe it follows a
// live leader and serve as an owner. So a message counts at arrival less
// its excess delay: arrival minus the sender's stamp, less the least such
// difference seen from that sender in the last minute (which holds the
// clock skew between the two, and the network's own delay). Only the
// sender's clock's drift within a minute enters, not its skew.
type heard struct {
	at    time.Time
	least [2]time.Duration // the least delay of this half-minute and the last
	since time.Time        // when least[0] started
}

// heardHalf is how long least[0] gathers before it becomes least[1].
const heardHalf = 30 * time.Second

// note counts a message stamped sent that arrived at arrived.
func (h *heard) note(sent, arrived time.Time) {
	d := arrived.Sub(sent)
	switch {
	case h.since.IsZero():
		h.least, h.since = [2]time.Duration{d, d}, arrived
	case arrived.Sub(h.since) >= heardHalf:
		h.least, h.since = [2]time.Duration{d, h.least[0]}, arrived
	case d < h.least[0]:
		h.least[0] = d
	}
	excess := d - min(h.least[0], h.least[1])
	if at := arrived.Add(-excess); at.After(h.at) {
		h.at = at
	}
}

// peerQueue bounds what waits for one slow peer; beyond it messages are
// dropped and the peer reported unreachable, which raft recovers from.
const peerQueue = 4096

func (t *transport) start(parent context.Context) {
	t.ctx, t.cancel = context.WithCancel(parent)
	t.peers = map[uint64]*peer{}
	t.learned = map[uint64]string{}
	t.heard = map[uint64]*heard{}
}

func (t *transport) stop() {
	t.cancel()
	t.wg.Wait()
}

// url finds where to reach id: the committed membership first, then what an
// authenticated sender announced (a joining node knows nobody yet).
func (t *transport) url(id uint64) string {
	if u := t.resolve(id); u != "" {
		return u
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.learned[id]
}

// lastHeard is when the latest authenticated message from id was sent, on
// this node's clock (see heard).
func (t *transport) lastHeard(id uint64) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.heard[id]; h != nil {
		return h.at
	}
	return time.Time{}
}

// send queues msgs; it never blocks the Ready loop.
func (t *transport) send(msgs []*pb.Message) {
	for _, m := range msgs {
		if m.GetType() == pb.MsgSnap {
			t.sendSnapshot(m)
			continue
		}
		p := t.peer(m.GetTo())
		select {
		case p.q <- queued{m, time.Now()}:
		default:
			t.reportUR(m.GetTo())
		}
	}
}

func (t *transport) peer(id uint64) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.peers[id]; ok {
		return p
	}
	p := &peer{id: id, q: make(chan queued, peerQueue)}
	t.peers[id] = p
	t.wg.Add(1)
	go t.runPeer(p)
	return p
}

// maxBatch bounds how many queued messages share one POST.
const maxBatch = 256

func (t *transport) runPeer(p *peer) {
	defer t.wg.Done()
	batch := make([]*pb.Message, 0, maxBatch)
	for {
		select {
		case <-t.ctx.Done():
			return
		case q := <-p.q:
			batch, size, stale := batch[:0], 0, false
			cutoff := time.Now().Add(-t.staleAfter)
			add := func(q queued) {
				if t.staleAfter > 0 && q.at.Before(cutoff) {
					stale = true
					return
				}
				s := proto.Size(q.m)
				if len(batch) > 0 && int64(size+s+64) > t.msgCap {
					// Over the cap: put it in its own next batch.
					t.post(p.id, batch)
					batch, size = batch[:0], 0
				}
				batch, size = append(batch, q.m), size+s
			}
			add(q)
		drain:
			for len(batch) < maxBatch {
				select {
				case q := <-p.q:
					add(q)
				default:
					break drain
				}
			}
			if stale {
				t.reportUR(p.id) // raft probes the peer and resends
			}
			if len(batch) > 0 {
				t.post(p.id, batch)
			}
		}
	}
}

func (t *transport) post(to uint64, batch []*pb.Message) {
	if err := t.postFrame(to, pathMessage, batch); err != nil {
		if t.ctx.Err() == nil {
			t.log.Debug("raftnode: send failed", "to", FormatNodeID(to), "err", err)
		}
		t.reportUR(to)
		t.dropQueued(to)
	}
}

// dropQueued empties the queue of a peer a send just failed to: what waited
// behind the failure is stale (heartbeats, appends raft resends once it
// probes the peer again), and sending it after a partition heals would only
// delay the messages that matter.
func (t *transport) dropQueued(to uint64) {
	p := t.peer(to)
	for {
		select {
		case <-p.q:
		default:
			return
		}
	}
}

func (t *transport) sendSnapshot(m *pb.Message) {
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		if err := t.postFrame(m.GetTo(), pathSnapshot, []*pb.Message{m}); err != nil {
			t.log.Warn("raftnode: snapshot send failed", "to", FormatNodeID(m.GetTo()), "err", err)
			t.reportUR(m.GetTo())
			t.reportSS(m.GetTo(), raft.SnapshotFailure)
			return
		}
		t.reportSS(m.GetTo(), raft.SnapshotFinish)
	}()
}

// Deadlines of peer calls: a message batch that takes longer than
// messageTimeout is as good as lost (raft retransmits), and a peer's
// messages wait behind it, so it is a little over an election timeout: a
// batch sent into a silent partition holds the peer's queue that long at
// most once the network heals. A snapshot gets long enough to move
// MaxSnapshotBytes.
const (
	messageTimeout  = 1500 * time.Millisecond
	snapshotTimeout = 10 * time.Minute
)

func (t *transport) postFrame(to uint64, path string, msgs []*pb.Message) error {
	body, err := encodeFrame(msgs)
	if err != nil {
		return err
	}
	timeout := messageTimeout
	if path == pathSnapshot {
		timeout = snapshotTimeout
	}
	ctx, cancel := context.WithTimeout(t.ctx, timeout)
	defer cancel()
	_, err = t.call(ctx, to, path, body, 1<<10)
	return err
}

// errStatus is a peer's non-2xx answer.
type errStatus struct {
	code int
	msg  string
}

func (e *errStatus) Error() string { return fmt.Sprintf("peer answered %d: %s", e.code, e.msg) }

// call POSTs a signed body to member id and returns the verified response
// body, read up to respCap bytes.
func (t *transport) call(ctx context.Context, id uint64, path string, body []byte, respCap int64) ([]byte, error) {
	base := t.url(id)
	if base == "" {
		return nil, fmt.Errorf("raftnode: no URL for node %s", FormatNodeID(id))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("raftnode: build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	nonce := t.auth.Sign(req.Header, path, t.self, t.selfURL, body)
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("raftnode: post %s: %w", path, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, respCap+1))
	if err != nil {
		return nil, fmt.Errorf("raftnode: read %s response: %w", path, err)
	}
	if int64(len(rb)) > respCap {
		return nil, fmt.Errorf("raftnode: %s response over %d bytes", path, respCap)
	}
	if resp.StatusCode/100 != 2 {
		return nil, &errStatus{code: resp.StatusCode, msg: string(bytes.TrimSpace(rb))}
	}
	// Responses are authenticated too, and bound to their request by its
	// nonce: a forwarded proposal's answer is acted on as if this node had
	// applied it.
	if !t.auth.VerifyAnswer(resp.Header, path, id, nonce, rb) {
		return nil, fmt.Errorf("raftnode: %s response not authenticated", path)
	}
	return rb, nil
}

// inbound is an authenticated request.
type inbound struct {
	from  uint64
	body  []byte
	nonce string
}

// authenticated reads a capped body and verifies it: its tag, then that its
// stamp is recent and new. It answers the error itself (413, 401, 400) and
// returns ok=false in that case.
func (t *transport) authenticated(w http.ResponseWriter, r *http.Request, path string, limit int64) (in inbound, ok bool) {
	arrived := time.Now() // a snapshot's body may take minutes to read
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return in, false
	}
	if r.ContentLength > limit {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return in, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		} else {
			http.Error(w, "read body", http.StatusBadRequest)
		}
		return in, false
	}
	p, err := t.auth.Verify(r.Header, path, body, arrived)
	switch {
	case errors.Is(err, ErrUnauthenticated):
		http.Error(w, "unauthenticated", http.StatusUnauthorized)
		return in, false
	case errors.Is(err, errStamp):
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return in, false
	case err != nil:
		t.log.Warn("raftnode: refused an authentic request", "from", FormatNodeID(p.ID), "path", path, "err", err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return in, false
	}
	if strings.HasPrefix(path, appPrefix) {
		// An application's traffic says nothing of Raft's: IsIsolated
		// rests on the leader's own messages alone.
		return inbound{from: p.ID, body: body, nonce: p.Nonce}, true
	}
	from, url := p.ID, p.URL
	t.mu.Lock()
	h := t.heard[from]
	if h == nil {
		h = new(heard)
		t.heard[from] = h
	}
	h.note(p.Sent, arrived)
	if url != "" {
		t.learned[from] = url
	}
	t.mu.Unlock()
	return inbound{from: from, body: body, nonce: p.Nonce}, true
}

// reply writes a response body, signed for the request it answers.
func (t *transport) reply(w http.ResponseWriter, in inbound, path string, body []byte) {
	w.Header().Set("Content-Type", "application/octet-stream")
	t.auth.SignAnswer(w.Header(), path, t.self, in.nonce, body)
	_, _ = w.Write(body)
}

// handleMessages serves /message and /snapshot: decode, then Step each
// message into the local node.
func (t *transport) handleMessages(path string, limit int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		in, ok := t.authenticated(w, r, path, limit)
		if !ok {
			return
		}
		from := in.from
		msgs, err := decodeFrame(in.body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, m := range msgs {
			// A sender speaks only for itself (a forwarded transfer request
			// names the transferee instead), only to us, and proposes through
			// /propose: raft would otherwise append a stepped MsgProp.
			if (m.GetFrom() != from && m.GetType() != pb.MsgTransferLeader) || m.GetTo() != t.self || m.GetType() == pb.MsgProp || raft.IsLocalMsg(m.GetType()) {
				http.Error(w, "message not acceptable from this sender", http.StatusBadRequest)
				return
			}
		}
		for _, m := range msgs {
			if err := t.step(r.Context(), m); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		t.reply(w, in, path, nil)
	}
}
