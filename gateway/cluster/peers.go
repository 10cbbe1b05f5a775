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
	// seen is when a call to it was last answered (unix ns; 0: never).
	seen atomic.Int64
	// dialing: the heartbeat is opening its operations session; it tries
	// again from hbNext, its back-off doubled by every failure in a row
	// (hbFailed) up to redialMax.
	dialing  atomic.Bool
	hbNext   atomic.Int64
	hbFailed atomic.Int32
	// lastErr is why the last dial or session failed, for the 503s that
	// follow and GET /cluster.
	lastErr atomic.Pointer[string]
}

// After a failed dial, calls to the peer fail at once for redialAfter, so
// that a dead node's flows answer 503 quickly instead of each waiting for
// its own dial to time out; the next call dials again. The heartbeat dials
// a member with no session too, backing off from redialAfter to redialMax:
// a healed or restarted peer gets a session within redialMax and a dial,
// whether or not calls come.
const (
	redialAfter = 250 * time.Millisecond
	redialMax   = time.Second
)

// Heartbeats: a calling session that has read nothing for pingAfter gets a
// ping, and one that has read nothing for silentAfter is taken for dead
// and reset; the next call dials afresh. A session dies so within
// silentAfter of its peer going silent, however the network fails, and a
// member whose calls were answered within reachableFor is reachable.
// silentAfter is twice the default flow budget: a peer starved of CPU for
// a moment is slow, not dead, and resetting its session would fail every
// call in flight on it; a call waits its own deadline meanwhile.
const (
	pingAfter   = 500 * time.Millisecond
	silentAfter = 4 * time.Second
)

var errSilent = fmt.Errorf("cluster: the peer stopped answering (nothing for %v)", silentAfter)

// errNotSent marks a call that never left this node: the peer could not
// be reached.
var errNotSent = errors.New("cluster: not sent")

// errPeerDown is a call to a peer whose last dial failed moments ago.
var errPeerDown = fmt.Errorf("%w: peer unreachable (last dial failed)", errNotSent)

// caller is the calling end of a session: requests out, answers matched
// back to their call by id.
type caller struct {
	s       *session
	p       *peer
	mu      sync.Mutex
	pending map[uint32]*call
	next    uint32
	err     error // set when the session died: no new calls
	// clock is the best recent reading of the answerer's clock: requests'
	// deadlines travel on it.
	clock   clockReading
	pinging atomic.Bool
}

// call is one request in flight. Calls are pooled with their buffers and
// timer, so a steady stream of them allocates nothing of its own.
type call struct {
	done  chan struct{} // capacity 1
	in    []byte        // the answer body
	out   []byte        // the request body
	err   error
	timer *time.Timer
	sent  int64 // unix ns: when it was queued, for the clock reading
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
	c, err := p.dial(deadline)
	if err != nil {
		sl.down.Store(time.Now().Add(redialAfter).UnixNano())
		p.f.dialFailures.Add(1)
		return nil, err
	}
	sl.cur.Store(c)
	return c, nil
}

// dial opens a session to the peer and starts reading its answers; the
// caller installs it in a slot.
func (p *peer) dial(deadline time.Time) (*caller, error) {
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
		p.setErr(err)
		return nil, fmt.Errorf("%w: %w", errNotSent, err)
	}
	c := &caller{s: s, p: p, pending: map[uint32]*call{}, clock: s.clock}
	if !f.spawn(c.readLoop) {
		s.kill(errSessionClosed)
		return nil, fmt.Errorf("%w: %w", errNotSent, errSessionClosed)
	}
	return c, nil
}

// redial is the heartbeat's dial of slot i: outside the slot's lock, so
// that calls never wait on a dial into a silent network, and without
// holding calls back when it fails (they dial for themselves). A session
// it opens serves the calls at once.
func (p *peer) redial(i int) error {
	c, err := p.dial(time.Now().Add(p.f.deadline))
	if err != nil {
		return err
	}
	sl := &p.slot[i]
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if cur := sl.cur.Load(); cur != nil && cur.alive() {
		c.s.kill(errSessionClosed) // a call dialled meanwhile
		return nil
	}
	sl.cur.Store(c)
	sl.down.Store(0)
	return nil
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
		fr, err := c.s.read()
		if err != nil {
			c.s.kill(err)
			c.mu.Lock()
			if c.s.err != nil {
				err = c.s.err // why it was killed, if it was
			}
			c.err = fmt.Errorf("cluster: session lost: %w", err)
			c.p.setErr(c.err)
			for id, cl := range c.pending {
				cl.err = c.err
				cl.done <- struct{}{}
				delete(c.pending, id)
			}
			c.mu.Unlock()
			return
		}
		back := c.s.lastRead.Load()
		c.p.seen.Store(back)
		c.mu.Lock()
		cl := c.pending[fr.id]
		delete(c.pending, fr.id)
		if cl != nil && fr.clock != 0 {
			if r := readingOf(cl.sent, back, fr.clock); r.err <= c.clock.errAt(back) {
				c.clock = r
			}
		}
		c.mu.Unlock()
		if cl != nil {
			cl.in = append(cl.in[:0], fr.body...)
			cl.done <- struct{}{}
		}
	}
}

// remoteDeadline is deadline on the answerer's clock (unix ns), erring
// late by the reading's error and a millisecond: the answerer refuses what
// it reads after it. Call with c.mu held.
func (c *caller) remoteDeadline(deadline time.Time, now int64) int64 {
	return deadline.UnixNano() + c.clock.off + c.clock.errAt(now) + int64(time.Millisecond)
}

// setErr keeps why the peer last failed.
func (p *peer) setErr(err error) {
	msg := err.Error()
	p.lastErr.Store(&msg)
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
	return c.call(deadline, r, a)
}

// errNoAnswer is a call's deadline passing without an answer: its outcome
// is unknown.
var errNoAnswer = errors.New("no answer in time")

// call sends r on c's session and decodes its answer into a, waiting at
// most until deadline, which travels with r.
func (c *caller) call(deadline time.Time, r *request, a *answer) error {
	cl := callPool.Get().(*call)
	defer callPool.Put(cl)
	cl.out = appendRequest(cl.out[:0], r)
	cl.err = nil
	now := time.Now()
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
	cl.sent = now.UnixNano()
	clock := c.remoteDeadline(deadline, cl.sent)
	c.mu.Unlock()
	if err := c.s.send(n, clock, cl.out); err != nil {
		c.forget(n, cl)
		return err
	}
	cl.timer.Reset(deadline.Sub(now))
	select {
	case <-cl.done:
		cl.timer.Stop()
	case <-cl.timer.C:
		if !c.forget(n, cl) {
			return fmt.Errorf("cluster: %w from %s (%v)", errNoAnswer, formatID(c.p.id), deadline.Sub(now).Round(time.Millisecond))
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
	err = c.s.send(tellID, 0, *buf) // no deadline: a push is fenced by its versions
	putBuf(buf)
	return err
}

// heartbeatLoop keeps every member's sessions honest: it opens an
// operations session to each member that has none (so that reachability
// is known before the first flow operation needs it), pings the sessions
// that have been quiet, and resets the ones that stayed silent.
func (f *Flows) heartbeatLoop() {
	t := time.NewTicker(pingAfter / 2)
	defer t.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
		}
		v := f.view.Load()
		now := time.Now().UnixNano()
		for _, id := range v.members {
			f.peer(id, v.urls[id]).heartbeat(now)
		}
	}
}

func (p *peer) heartbeat(now int64) {
	f := p.f
	for i := range p.slot {
		sl := &p.slot[i]
		c := sl.cur.Load()
		if c == nil || !c.alive() {
			if i == slotOps && now >= p.hbNext.Load() && p.dialing.CompareAndSwap(false, true) {
				f.spawn(func() {
					defer p.dialing.Store(false)
					if err := p.redial(slotOps); err != nil {
						n := min(p.hbFailed.Add(1), 8)
						p.hbNext.Store(time.Now().Add(min(redialAfter<<(n-1), redialMax)).UnixNano())
						return
					}
					p.hbFailed.Store(0)
				})
			}
			continue
		}
		switch quiet := time.Duration(now - c.s.lastRead.Load()); {
		case quiet > silentAfter:
			f.silentSessions.Add(1)
			f.log.Info("cluster: resetting a silent session", "peer", formatID(p.id), "quiet", quiet.Round(time.Millisecond))
			c.s.kill(errSilent)
		case quiet > pingAfter && c.pinging.CompareAndSwap(false, true):
			f.spawn(func() {
				defer c.pinging.Store(false)
				var a answer
				_ = c.call(time.Now().Add(silentAfter), &request{op: opPing, mIdx: f.view.Load().idx}, &a)
			})
		}
	}
}

// LastExchange is when a call to member id was last answered (zero:
// never), and why its last session or dial failed ("" if none did): the
// member's reachability as this node's sessions see it (Node.Status).
func (f *Flows) LastExchange(id uint64) (time.Time, string) {
	f.peerMu.RLock()
	p := f.peers[id]
	f.peerMu.RUnlock()
	if p == nil {
		return time.Time{}, ""
	}
	var why string
	if e := p.lastErr.Load(); e != nil {
		why = *e
	}
	if ns := p.seen.Load(); ns != 0 {
		return time.Unix(0, ns), why
	}
	return time.Time{}, why
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
