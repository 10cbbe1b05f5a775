package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Each peer gets two sessions from this node: one for owner operations,
// one for bulk replica traffic (pushes, adoption and anti-entropy pages,
// listings), so that a page of megabytes never queues ahead of a lookup.
const (
	slotOps = iota
	slotBulk
	slots
)

// peer is another member as a caller sees it.
type peer struct {
	f   *Flows
	id  uint64
	url string

	slot [slots]struct {
		mu   sync.Mutex // one dial at a time
		cur  atomic.Pointer[caller]
		down atomic.Int64 // unix ns until which dialing is not retried
	}
	push *pushQueue
}

// redialAfter is how long a failed dial makes calls to a peer fail at once,
// so that a dead node's flows answer 503 quickly instead of each waiting
// for its own dial to time out.
const redialAfter = 250 * time.Millisecond

// errNotSent marks a call that never left this node: the peer could not
// be reached.
var errNotSent = errors.New("cluster: not sent")

// errPeerDown is a call to a peer whose last dial failed moments ago.
var errPeerDown = fmt.Errorf("%w: peer unreachable (last dial failed)", errNotSent)

// caller is the calling end of a session: requests out, answers matched
// back to their call by id.
type caller struct {
	s       *session
	mu      sync.Mutex
	pending map[uint32]*call
	next    uint32
	err     error // set when the session died: no new calls
}

// call is one request in flight. Calls are pooled with their buffers and
// timer, so a steady stream of them allocates nothing of its own.
type call struct {
	done  chan struct{} // capacity 1
	in    []byte        // the answer body
	out   []byte        // the request body
	err   error
	timer *time.Timer
}

var callPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &call{done: make(chan struct{}, 1), timer: t}
}}

// peer returns the peer for id at url, replacing one whose URL changed.
func (f *Flows) peer(id uint64, url string) *peer {
	f.peerMu.RLock()
	p := f.peers[id]
	f.peerMu.RUnlock()
	if p != nil && p.url == url {
		return p
	}
	f.peerMu.Lock()
	defer f.peerMu.Unlock()
	p = f.peers[id]
	if p != nil && p.url == url {
		return p
	}
	if p != nil {
		p.close()
	}
	p = &peer{f: f, id: id, url: url}
	p.push = newPushQueue(f, p)
	f.peers[id] = p
	return p
}

// syncPeers closes the peers that left the membership.
func (f *Flows) syncPeers(v *view) {
	f.peerMu.Lock()
	defer f.peerMu.Unlock()
	for id, p := range f.peers {
		if _, ok := v.urls[id]; !ok {
			p.close()
			delete(f.peers, id)
		}
	}
}

func (p *peer) close() {
	for i := range p.slot {
		if c := p.slot[i].cur.Load(); c != nil {
			c.s.kill(errSessionClosed)
		}
	}
	p.push.close()
}

// get returns a live session of slot i, dialing one if needed.
func (p *peer) get(i int, deadline time.Time) (*caller, error) {
	sl := &p.slot[i]
	if c := sl.cur.Load(); c != nil && c.alive() {
		return c, nil
	}
	if time.Now().UnixNano() < sl.down.Load() {
		return nil, errPeerDown
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if c := sl.cur.Load(); c != nil && c.alive() {
		return c, nil
	}
	if time.Now().UnixNano() < sl.down.Load() {
		return nil, errPeerDown
	}
	f := p.f
	if f.closed.Load() {
		return nil, fmt.Errorf("%w: %w", errNotSent, errSessionClosed)
	}
	if d := time.Now().Add(time.Second); d.Before(deadline) {
		deadline = d
	}
	ctx, cancel := context.WithDeadline(f.ctx, deadline)
	defer cancel()
	self := f.view.Load().urls[f.self]
	s, err := dialSession(ctx, f.cfg.Dial, f.auth, f.self, self, p.id, p.url)
	if err != nil {
		sl.down.Store(time.Now().Add(redialAfter).UnixNano())
		f.dialFailures.Add(1)
		return nil, fmt.Errorf("%w: %w", errNotSent, err)
	}
	c := &caller{s: s, pending: map[uint32]*call{}}
	if !f.spawn(c.readLoop) {
		s.kill(errSessionClosed)
		return nil, fmt.Errorf("%w: %w", errNotSent, errSessionClosed)
	}
	sl.cur.Store(c)
	return c, nil
}

func (c *caller) alive() bool {
	select {
	case <-c.s.dead:
		return false
	default:
		return true
	}
}

// readLoop hands each answer to its call until the session dies, then
// fails the calls still waiting.
func (c *caller) readLoop() {
	for {
		id, body, err := c.s.read()
		if err != nil {
			c.s.kill(err)
			c.mu.Lock()
			c.err = fmt.Errorf("cluster: session lost: %w", err)
			for id, cl := range c.pending {
				cl.err = c.err
				cl.done <- struct{}{}
				delete(c.pending, id)
			}
			c.mu.Unlock()
			return
		}
		c.mu.Lock()
		cl := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if cl != nil {
			cl.in = append(cl.in[:0], body...)
			cl.done <- struct{}{}
		}
	}
}

// call sends r to peer id on session slot i and decodes its answer into a,
// waiting at most until deadline. The peer's URL comes from the view this
// node built last: a caller that must be current calls currentView first.
func (f *Flows) call(id uint64, i int, deadline time.Time, r *request, a *answer) error {
	return f.callURL(id, f.view.Load().urls[id], i, deadline, r, a)
}

// callURL is call to a member at url, which may have left the membership
// (adoption asks the members of the last view too).
func (f *Flows) callURL(id uint64, url string, i int, deadline time.Time, r *request, a *answer) error {
	c, err := f.session(id, url, i, deadline)
	if err != nil {
		return err
	}
	cl := callPool.Get().(*call)
	defer callPool.Put(cl)
	cl.out = appendRequest(cl.out[:0], r)
	cl.err = nil
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	c.next++
	if c.next == tellID {
		c.next++ // id 0 is a frame that wants no answer
	}
	n := c.next
	c.pending[n] = cl
	c.mu.Unlock()
	if err := c.s.send(n, cl.out); err != nil {
		c.forget(n, cl)
		return err
	}
	cl.timer.Reset(time.Until(deadline))
	select {
	case <-cl.done:
		cl.timer.Stop()
	case <-cl.timer.C:
		if !c.forget(n, cl) {
			return fmt.Errorf("cluster: no answer from %s in time", formatID(id))
		}
	}
	if cl.err != nil {
		return cl.err
	}
	if err := decodeAnswer(cl.in, r.op, a); err != nil {
		c.s.kill(err)
		return err
	}
	return nil
}

// session returns the live session of slot i to member id at url.
func (f *Flows) session(id uint64, url string, i int, deadline time.Time) (*caller, error) {
	if url == "" {
		return nil, fmt.Errorf("cluster: node %s is not a member", formatID(id))
	}
	return f.peer(id, url).get(i, deadline)
}

// tellID is the frame id of a request that wants no answer (tell): the
// answerer sends none. An answerer of a build before it answers anyway,
// and the caller's reader drops that answer as no call's.
const tellID uint32 = 0

// tell sends r to peer id on session slot i and waits for no answer: it
// returns once r is written or queued behind a write in progress.
func (f *Flows) tell(id uint64, i int, r *request) error {
	c, err := f.session(id, f.view.Load().urls[id], i, time.Now().Add(f.deadline))
	if err != nil {
		return err
	}
	buf := bufPool.Get().(*[]byte)
	*buf = appendRequest((*buf)[:0], r)
	err = c.s.send(tellID, *buf)
	putBuf(buf)
	return err
}

// forget takes cl out of the pending calls. If the reader already took it,
// it waits for the delivery, so that cl can be reused, and reports true.
func (c *caller) forget(n uint32, cl *call) (delivered bool) {
	c.mu.Lock()
	_, waiting := c.pending[n]
	delete(c.pending, n)
	c.mu.Unlock()
	if !waiting {
		<-cl.done
	}
	return !waiting
}
