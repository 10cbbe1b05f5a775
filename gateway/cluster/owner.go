package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/riftgate/riftgate/flowshard"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/ring"
)

// maxServing bounds the requests this node answers at once; past it a
// request is answered unavailable at once (the caller's bridge has its own
// bound, this one protects the answerer from every caller together).
const maxServing = 4096

// Handler serves the sessions other members open to this node. The group
// mounts it on the peer listener, at sessionPath unless PeerURL says
// otherwise.
func (f *Flows) Handler() http.Handler { return http.HandlerFunc(f.serveHTTP) }

func (f *Flows) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/session") {
		http.NotFound(w, r)
		return
	}
	if f.closed.Load() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	s, from, err := acceptSession(w, r, f.auth, f.self)
	if err != nil {
		f.log.Debug("cluster: refused a session", "remote", r.RemoteAddr, "err", err)
		return
	}
	f.sessMu.Lock()
	if f.closed.Load() {
		f.sessMu.Unlock()
		s.kill(errSessionClosed)
		return
	}
	s.peer = from
	f.sessions[s] = struct{}{}
	f.wg.Add(1)
	f.sessMu.Unlock()
	defer func() {
		f.sessMu.Lock()
		delete(f.sessions, s)
		f.sessMu.Unlock()
		f.wg.Done()
	}()
	f.log.Debug("cluster: session opened", "from", formatID(from))
	f.serveSession(s)
}

var (
	reqPool = sync.Pool{New: func() any { return new(request) }}
	ansPool = sync.Pool{New: func() any { return new(answer) }}
	bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}
)

// putBuf returns a frame body's buffer to bufPool, unless one huge body
// grew it: the session copies what it sends, so the buffer is free again.
func putBuf(buf *[]byte) {
	if cap(*buf) <= 64<<10 {
		bufPool.Put(buf)
	}
}

// serveSession reads requests until the session ends, answering each on
// its own goroutine: a `sync` write waits for disks and replicas, and must
// not hold up the lookups behind it.
func (f *Flows) serveSession(s *session) {
	for {
		if !s.buffered() {
			// About to block on the socket: what the inline answers queued
			// goes out now, in one write.
			_ = s.flush()
		}
		fr, err := s.read()
		if err != nil {
			s.kill(err)
			return
		}
		id := fr.id
		r := reqPool.Get().(*request)
		if err := decodeRequest(fr.body, r); err != nil {
			f.reply(s, id, r.op, &answer{status: statusBadRequest, msg: err.Error()}, true)
			reqPool.Put(r)
			continue
		}
		if late := time.Duration(time.Now().UnixNano() - fr.clock); fr.clock != 0 && late > 0 {
			// It waited in a stalled socket or a paused process: its caller
			// has given up and answered its client, so it must not happen.
			f.expired.Add(1)
			f.reply(s, id, r.op, &answer{status: statusExpired, mIdx: f.view.Load().idx,
				msg: fmt.Sprintf("deadline: the request reached the owner %v after its deadline", late.Round(time.Millisecond))}, true)
			reqPool.Put(r)
			continue
		}
		r.deadline = fr.clock
		if f.serving.Add(1) > maxServing {
			f.serving.Add(-1)
			f.sheds.Add(1)
			f.reply(s, id, r.op, &answer{status: statusUnavailable, mIdx: f.view.Load().idx, msg: flow.CauseShed + ": owner overloaded"}, true)
			reqPool.Put(r)
			continue
		}
		r.s, r.id = s, id
		if inlineable(r) && f.answerOne(r, true) {
			continue
		}
		select {
		case f.work <- r:
		default:
			if !f.spawn(func() { f.worker(r) }) {
				f.serving.Add(-1)
				reqPool.Put(r)
			}
		}
	}
}

// workerIdle is how long an idle answering goroutine waits for another
// request before it ends.
const workerIdle = 10 * time.Second

// worker answers r, then whatever requests come while it is idle: a busy
// node reuses its goroutines instead of starting one per request.
func (f *Flows) worker(r *request) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f.answerOne(r, false)
		idle.Reset(workerIdle)
		select {
		case r = <-f.work:
		case <-idle.C:
			return
		case <-f.ctx.Done():
			return
		}
	}
}

// inlineable reports whether r can be answered on its session's reader
// goroutine: an operation that waits for no disk and no other node (not
// under sync, not a claim, not a page of adoption), which saves the
// reader handing it to a worker and the worker's wake-up, most of an
// owner RPC's cost after the syscalls. Whatever else would make it wait
// (a busy flow lock, an isolated owner) sends it to a worker after all.
func inlineable(r *request) bool {
	switch {
	case ownerOp(r.op):
		return !claimOp(r.op) && r.policy.durability != byte(flow.Sync)
	case r.op == opPing:
		return true
	case r.op == opPush:
		for _, set := range r.sets {
			if set.Durability == flowshard.Sync {
				return false
			}
		}
		return true
	}
	return false
}

// answerOne answers r and reports whether it did: inline, it does not if
// the operation would have to wait, and r is left as it came.
func (f *Flows) answerOne(r *request, inline bool) bool {
	a := ansPool.Get().(*answer)
	a.reset()
	now := time.Now()
	deadline := now.Add(time.Duration(min(r.budget, uint64(f.deadline.Milliseconds()))) * time.Millisecond)
	if d := time.Unix(0, r.deadline); r.deadline != 0 && d.Before(deadline) {
		deadline = d
	}
	oc := newOpCtx(now, deadline)
	oc.inline = inline
	done := true
	if ownerOp(r.op) {
		done = f.serveOwner(oc, r, a)
	} else {
		f.serveNode(oc, r, a)
	}
	oc.release()
	if !done {
		putAnswer(a)
		return false
	}
	f.reply(r.s, r.id, r.op, a, inline)
	putAnswer(a)
	f.serving.Add(-1)
	r.s = nil
	reqPool.Put(r)
	return true
}

// reply sends a, the answer to op; inline, it is queued for the reader's
// next flush.
func (f *Flows) reply(s *session, id uint32, op byte, a *answer, inline bool) {
	if id == tellID {
		if a.status != statusOK {
			f.toldFailed.Add(1)
			f.log.Debug("cluster: a request that wants no answer failed", "op", op, "from", formatID(s.peer), "err", a.msg)
		}
		return
	}
	buf := bufPool.Get().(*[]byte)
	*buf = appendAnswer((*buf)[:0], op, a)
	now := time.Now().UnixNano() // the answer's clock: the caller reads the offset from it
	if inline {
		_ = s.queue(id, now, *buf)
	} else {
		_ = s.send(id, now, *buf) // a failed send killed the session; the caller sees that
	}
	putBuf(buf)
}

func refuse(a *answer, status byte, format string, args ...any) {
	a.status, a.msg = status, fmt.Sprintf(format, args...)
}

// shardStatus maps flowshard's errors to answer statuses.
func shardStatus(a *answer, err error) {
	switch {
	case err == nil:
		a.status = statusOK
	case errors.Is(err, flowshard.ErrNotFound):
		a.status = statusNotFound
	case errors.Is(err, flowshard.ErrVersionMismatch):
		a.status = statusMismatch
	case errors.Is(err, flowshard.ErrTooLarge):
		refuse(a, statusTooLarge, "%v", err)
	case errors.Is(err, flowshard.ErrBadKey):
		refuse(a, statusBadKey, "%v", err)
	case errors.Is(err, flowshard.ErrBadPolicy):
		refuse(a, statusBadRequest, "%v", err)
	default:
		refuse(a, statusUnavailable, "%v", err)
	}
}

// cycleKey is the flow key that holds a response cycle's position, and
// cycleTTL how long an idle cycle keeps it (mb's never resets).
const (
	cycleKey = "pos"
	cycleTTL = 24 * time.Hour
)

// serveOwner answers an owner operation: the owner's checks in seed order,
// then the operation under the flow's lock. On a reader goroutine
// (ctx.inline) it gives up, answering nothing and changing nothing, where
// it would wait, and reports false.
func (f *Flows) serveOwner(ctx *opCtx, r *request, a *answer) bool {
	v := f.opView()
	if r.mIdx > v.idx && ctx.inline {
		return false
	}
	if r.mIdx > v.idx {
		// The caller applied a membership change this node has not yet:
		// it is on its way, give it a moment rather than a 503.
		wait := time.Now().Add(100 * time.Millisecond)
		if ctx.deadline.Before(wait) {
			wait = ctx.deadline
		}
		f.waitView(r.mIdx, wait)
		v = f.currentView()
		ctx.now = time.Now() // the checks below judge the time after the wait
	}
	a.mIdx = v.idx
	class := ring.ClassFlow
	if claimOp(r.op) {
		class = ring.ClassClaim
	}
	switch {
	case r.mIdx != v.idx:
		f.fenced.Add(1)
		refuse(a, statusFenced, "fenced: the caller is at membership index %d, the owner at %d", r.mIdx, v.idx)
		return true
	case r.ownerAt != v && v.ring.Owner(class, r.flow) != f.self:
		f.notOwner.Add(1)
		refuse(a, statusNotOwner, "node %s does not own %q at membership index %d", formatID(f.self), r.flow, v.idx)
		return true
	}
	if f.cfg.Membership.IsIsolatedAt(ctx.now) {
		if ctx.inline {
			return false // isolatedFor waits for a leader
		}
		if f.isolatedFor(ctx) {
			f.isolated.Add(1)
			refuse(a, statusIsolated, "owner %s is isolated: it cannot see a leader that a quorum acknowledged", formatID(f.self))
			return true
		}
		ctx.now = time.Now() // it waited for a leader
	}
	if f.adopted.Load() != v.idx {
		f.adopting.Add(1)
		refuse(a, statusAdopting, "owner %s is still adopting its flows at membership index %d", formatID(f.self), v.idx)
		return true
	}
	if h := f.held.Load(); h != nil && class == ring.ClassFlow && h.holds(v, r.flow) {
		f.adopting.Add(1)
		refuse(a, statusAdopting, "owner %s has not adopted %q: two of its copies are on members it cannot reach", formatID(f.self), r.flow)
		return true
	}
	if class == ring.ClassClaim {
		f.serveClaim(ctx, v, r, a)
		return true
	}
	fl, err := f.locks.lock(ctx, r.flow)
	if err != nil {
		if errors.Is(err, errWouldWait) {
			return false
		}
		refuse(a, statusUnavailable, "%s: waiting for flow %q: %v", flow.CauseDeadline, r.flow, err)
		return true
	}
	defer f.locks.unlock(r.flow, fl)
	if fl := f.floor.Load(); v.idx < fl {
		f.fenced.Add(1)
		refuse(a, statusFenced, "fenced: another node adopted at membership index %d", fl)
		return true
	}
	if f.unsyncedN.Load() > 0 {
		if _, ok := f.unsynced.Load(r.flow); ok {
			if ctx.inline {
				return false // a sync push waits for a replica
			}
			if _, err := f.replicate(ctx, v, r.flow, nil, flow.Sync, 0); err != nil {
				refuse(a, statusUnavailable, "%s: flow %q: an earlier sync write has not reached a replica: %v", flow.CauseReplicas, r.flow, err)
				return true
			}
			f.unsynced.Delete(r.flow)
			f.unsyncedN.Add(-1)
		}
	}
	pol := r.policy.policy()
	// A sync write does not wait for its own commit here: the push to the
	// successors overlaps it, and Durable waits for it below.
	p := flowshard.Policy{TTL: pol.TTL, Durability: flowshard.Durability(pol.Durability), MIdx: v.idx, Origin: f.self,
		NoWait: pol.Durability == flow.Sync}
	var changed []string
	var one [1]string
	switch r.op {
	case opGet:
		e, err := a.read(ctx, f.shard, r.flow, r.key)
		shardStatus(a, err)
		a.present, a.ver, a.value = err == nil, flow.Version(e.Version), e.Value
	case opLoad:
		m, err := f.shard.Entries(ctx, r.flow)
		shardStatus(a, err)
		a.snap = appendSnapshot(a.snap[:0], m)
	case opPut:
		ver, err := f.shard.Put(ctx, r.flow, r.key, r.value, p)
		shardStatus(a, err)
		a.ver = flow.Version(ver)
		one[0], changed = r.key, one[:]
	case opCAS:
		e, err := f.shard.CAS(ctx, r.flow, r.key, r.expect, r.value, p)
		shardStatus(a, err)
		a.present, a.ver, a.value = e.Version.V != 0, flow.Version(e.Version), e.Value
		if err == nil {
			one[0], changed = r.key, one[:]
		}
	case opSwap:
		// Under the flow's lock nothing writes between the read and the
		// CAS on the version it read.
		e, err := a.read(ctx, f.shard, r.flow, r.key)
		switch {
		case err != nil && !errors.Is(err, flowshard.ErrNotFound):
			shardStatus(a, err)
		case (err == nil) != r.hasOld || err == nil && !bytes.Equal(e.Value, r.old):
			a.status = statusMismatch
			a.present, a.ver, a.value = err == nil, flow.Version(e.Version), e.Value
		default:
			e, err = f.shard.CAS(ctx, r.flow, r.key, e.Version.V, r.value, p)
			shardStatus(a, err)
			a.present, a.ver, a.value = e.Version.V != 0, flow.Version(e.Version), e.Value
			if err == nil {
				one[0], changed = r.key, one[:]
			}
		}
	case opDelete:
		_, err := f.shard.Delete(ctx, r.flow, r.key, p)
		shardStatus(a, err)
		if err == nil {
			one[0], changed = r.key, one[:]
		}
	case opCommit, opClearFlow:
		base, writes := r.base, r.writes
		if r.op == opClearFlow {
			m, err := f.shard.Entries(ctx, r.flow)
			if err != nil || len(m) == 0 {
				shardStatus(a, err)
				return true
			}
			for _, e := range m {
				base = append(base, flow.KeyVersion{Key: e.Key, V: e.Version.V})
				writes = append(writes, flow.Write{Key: e.Key, Delete: true})
			}
		}
		b := make([]flowshard.KeyVersion, len(base))
		for i, kv := range base {
			b[i] = flowshard.KeyVersion(kv)
		}
		ws := make([]flowshard.Write, len(writes))
		for i, w := range writes {
			ws[i] = flowshard.Write(w)
			changed = append(changed, w.Key)
		}
		m, err := f.shard.Commit(ctx, r.flow, b, ws, p)
		shardStatus(a, err)
		a.snap = appendSnapshot(a.snap[:0], m)
		if err != nil {
			changed = nil
		}
	case opCycle:
		e, err := f.shard.Get(ctx, r.flow, cycleKey, nil)
		if err != nil && !errors.Is(err, flowshard.ErrNotFound) {
			shardStatus(a, err)
			return true
		}
		var pos uint64
		if len(e.Value) == 8 {
			pos = binary.BigEndian.Uint64(e.Value)
		}
		var next [8]byte
		binary.BigEndian.PutUint64(next[:], pos+1)
		p.TTL = cycleTTL
		_, err = f.shard.Put(ctx, r.flow, cycleKey, next[:], p)
		shardStatus(a, err)
		a.n = pos
		one[0], changed = cycleKey, one[:]
	}
	if len(changed) == 0 || a.status != statusOK {
		if p.NoWait && len(changed) > 0 {
			_ = f.shard.Durable(ctx, r.flow) // a failed write queued nothing to wait for, but be sure
		}
		return true
	}
	var carry uint64
	if r.op == opSwap && r.s != nil {
		carry = r.s.peer // opSwap's answer carries the caller's push
	}
	sets, err := f.replicate(ctx, v, r.flow, changed, pol.Durability, carry)
	if err != nil {
		// The write is in this node's shard and may be on a replica: its
		// outcome is unknown to the caller, and the flow answers nothing
		// until a replica has it (see replicate).
		refuse(a, statusUnavailable, "%s: flow %q: no replica acknowledged the sync write: %v", flow.CauseReplicas, r.flow, err)
		_ = f.shard.Durable(ctx, r.flow)
		return true
	}
	a.sets = append(a.sets, sets...)
	if p.NoWait {
		if err := f.shard.Durable(ctx, r.flow); err != nil {
			refuse(a, statusUnavailable, "flow %q: the sync write's commit failed: %v", r.flow, err)
		}
	}
	return true
}

// isolationGrace is how long an owner that finds itself isolated waits for
// a leader before it refuses: an election, or a leader handing over, takes
// tens of milliseconds, which an operation would rather wait out than
// answer 503 for. A partitioned owner still refuses, that much later.
const isolationGrace = 250 * time.Millisecond

// isolatedFor reports whether this node is isolated, waiting up to
// isolationGrace (within ctx's deadline) for it not to be.
func (f *Flows) isolatedFor(ctx *opCtx) bool {
	until := time.Now().Add(isolationGrace)
	if ctx.deadline.Before(until) {
		until = ctx.deadline
	}
	// A new leader ends the wait the moment this node learns of it; the
	// poll catches the rest (a leader heard from again, a quorum back).
	poll := time.NewTimer(isolationPoll)
	defer poll.Stop()
	for {
		changed := f.cfg.Membership.LeaderChanged()
		if !f.cfg.Membership.IsIsolatedAt(time.Now()) {
			return false
		}
		left := time.Until(until)
		if left <= 0 {
			return true
		}
		poll.Reset(min(left, isolationPoll))
		select {
		case <-changed:
		case <-poll.C:
		}
	}
}

// isolationPoll is how often an owner waiting for a leader looks again
// without being told of one.
const isolationPoll = 5 * time.Millisecond

// appendSnapshot is a flowshard flow (sorted by key) as the seam's.
func appendSnapshot(out flow.Snapshot, es []flowshard.KeyEntry) flow.Snapshot {
	for _, e := range es {
		out = append(out, flow.KeyEntry{Key: e.Key, Entry: flow.Entry{Value: e.Value, Version: flow.Version(e.Version)}})
	}
	return out
}

// serveNode answers what any member answers for itself: listings,
// deletes of a prefix, replica pushes, adoption pages and anti-entropy
// offers.
func (f *Flows) serveNode(ctx context.Context, r *request, a *answer) {
	a.mIdx = f.view.Load().idx
	switch r.op {
	case opPing:
		a.status = statusOK
	case opList:
		ids, more, err := f.shard.Flows(ctx, r.flow, r.key, int(min(r.limit, 10000)))
		shardStatus(a, err)
		a.ids, a.more = ids, more
	case opFencePrefix, opDeletePrefix:
		// Half of what the operation has left, so that a successor cut off
		// costs the drain, not this member's delete and answer. (A context
		// of its own: one derived from the pooled opCtx would watch it
		// after its release.)
		end, _ := ctx.Deadline()
		dctx, cancel := context.WithTimeout(context.Background(), time.Until(end)/2)
		f.deleting.Lock()
		if r.op == opFencePrefix {
			// Until the second round: both rounds' broadcasts, and one more
			// deadline for the caller to get from one to the other.
			f.shard.FencePrefix(ctx, r.flow, 3*f.deadline)
		}
		if err := f.drainPushes(dctx); err != nil {
			f.log.Debug("cluster: deleting a prefix before some pushes were drained", "prefix", r.flow, "err", err)
		}
		cancel()
		v := f.currentView()
		owned, err := f.shard.Summaries(func(id string) bool {
			return strings.HasPrefix(id, r.flow) && v.ring.Owner(ring.ClassFlow, id) == f.self
		})
		if err == nil {
			_, err = f.shard.DeletePrefix(ctx, r.flow)
		}
		if r.op == opDeletePrefix {
			f.shard.UnfencePrefix(r.flow)
		}
		f.deleting.Unlock()
		shardStatus(a, err)
		a.n = uint64(len(owned))
	case opPush:
		n, err := f.shard.Merge(ctx, r.sets...)
		shardStatus(a, err)
		a.n = uint64(n)
	case opAdopt:
		f.serveAdopt(ctx, r, a)
	case opOffer:
		f.serveOffer(r, a)
	default:
		refuse(a, statusBadRequest, "op %d is not a node operation", r.op)
	}
}
