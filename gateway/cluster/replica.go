package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/riftgate/riftgate/flowshard"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/ring"
)

// replicate pushes the records of keys of flowID (all of them when keys is
// nil) to the flow's successors. Pushes are asynchronous; under Sync it
// waits, within ctx, for the first successor to have written them (the
// other push goes on alone), so that one successor down does not stall
// writes and the owner's loss loses no acknowledged Sync write. A Sync
// push that no successor acknowledged marks the flow unsynced: the owner
// answers nothing more on it until a successor has its records.
//
// carry, when it is one of the successors and d is not Sync, is the node
// that asked for the write: its push is not queued but returned, to go
// with the answer (mergeCarried), which saves that push its own frames,
// merge call and wake-ups at both ends.
func (f *Flows) replicate(ctx *opCtx, v *view, flowID string, keys []string, d flow.Durability, carry uint64) (carried []flowshard.RecordSet, err error) {
	var room [ring.ReplicaSuccessors]uint64
	succ := v.ring.AppendSuccessors(room[:0], ring.ClassFlow, flowID, ring.ReplicaSuccessors)
	if len(succ) == 0 {
		return nil, nil
	}
	set, err := f.shard.Records(ctx, flowID, keys...)
	if err != nil {
		return nil, err
	}
	if len(set.Records) == 0 {
		return nil, nil
	}
	var ack *ack
	if d == flow.Sync {
		ack = newAck(len(succ))
		carry = 0 // the answer waits for a successor's write, not the other way round
	}
	for _, id := range succ {
		if id == carry {
			carried = append(carried, set)
			continue
		}
		url, ok := v.urls[id]
		if !ok {
			ack.done(fmt.Errorf("no URL for successor %s", formatID(id)))
			continue
		}
		f.peer(id, url).push.add(set, ack, ctx.now)
	}
	if ack == nil {
		return carried, nil
	}
	if err := ack.wait(ctx); err != nil {
		if _, loaded := f.unsynced.LoadOrStore(flowID, struct{}{}); !loaded {
			f.unsyncedN.Add(1)
		}
		return nil, err
	}
	return nil, nil
}

// mergeCarried merges the records an owner's answer carried to this node
// as one of the flow's successors: the push it did not send.
func (f *Flows) mergeCarried(ctx context.Context, a *answer) {
	if len(a.sets) == 0 {
		return
	}
	if _, err := f.shard.Merge(ctx, a.sets...); err != nil {
		f.pushFailed.Add(uint64(len(a.sets)))
		f.log.Debug("cluster: carried push not merged; anti-entropy will repair", "err", err)
		return
	}
	f.pushed.Add(uint64(len(a.sets)))
}

// ack is a Sync write waiting for its first successor.
type ack struct {
	mu     sync.Mutex
	left   int
	ok     bool
	last   error
	signal chan struct{}
}

func newAck(n int) *ack { return &ack{left: n, signal: make(chan struct{})} }

// done reports one successor's outcome; nil acks are ignored.
func (a *ack) done(err error) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.left == 0 {
		return
	}
	a.left--
	if err == nil && !a.ok {
		a.ok = true
		close(a.signal)
		return
	}
	if err != nil {
		a.last = err
	}
	if a.left == 0 && !a.ok {
		close(a.signal)
	}
}

func (a *ack) wait(ctx context.Context) error {
	select {
	case <-a.signal:
	case <-ctx.Done():
		return fmt.Errorf("waiting for a replica: %w", ctx.Err())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ok {
		return nil
	}
	return a.last
}

// pushQueue holds the records waiting to be pushed to one successor.
// pushSenders goroutines drain it: whatever queued while a push was in
// flight goes in the next, so pushes batch under load. It is bounded: past maxQueued the
// oldest unacknowledged records are dropped (anti-entropy brings them).
type pushQueue struct {
	f    *Flows
	p    *peer
	mu   sync.Mutex
	q    []pushItem
	wake chan struct{}
	stop chan struct{}
	once sync.Once
	// For drain, under mu: queued counts the items ever added, and taken
	// those taken off q (sent, being sent or dropped); sending holds the
	// first item number of each batch being sent; progress is closed and
	// replaced whenever a batch has been sent.
	queued, taken uint64
	sending       []uint64
	progress      chan struct{}
}

type pushItem struct {
	set flowshard.RecordSet
	ack *ack
	at  time.Time
}

// pushSenders is how many pushes to one successor may be in flight: while
// one waits for the successor's commit under `sync`, the next batch goes,
// and the successor's flowshard commits both together. Order does not
// matter: a replica keeps the highest version of each key.
const (
	maxQueued    = 1 << 14
	maxPushBytes = 1 << 20
	pushSenders  = 2
)

var errDropped = errors.New("dropped: the successor's push queue was full")

func newPushQueue(f *Flows, p *peer) *pushQueue {
	q := &pushQueue{f: f, p: p, wake: make(chan struct{}, 1), stop: make(chan struct{}), progress: make(chan struct{})}
	for range pushSenders {
		if !f.spawn(q.run) {
			q.close()
		}
	}
	return q
}

func (q *pushQueue) add(set flowshard.RecordSet, a *ack, at time.Time) {
	select {
	case <-q.stop:
		a.done(errSessionClosed)
		return
	default:
	}
	q.mu.Lock()
	if len(q.q) >= maxQueued {
		old := q.q[0]
		q.q = q.q[1:]
		q.taken++
		q.f.pushDropped.Add(1)
		defer old.ack.done(errDropped)
	}
	q.q = append(q.q, pushItem{set: set, ack: a, at: at})
	q.queued++
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *pushQueue) close() { q.once.Do(func() { close(q.stop) }) }

// lag is how long the oldest queued push has waited, and how many wait.
func (q *pushQueue) lag() (time.Duration, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.q) == 0 {
		return 0, 0
	}
	return time.Since(q.q[0].at), len(q.q)
}

func (q *pushQueue) run() {
	var batch []pushItem
	for {
		select {
		case <-q.stop:
			q.mu.Lock()
			rest := q.q
			q.q = nil
			q.taken += uint64(len(rest))
			q.mu.Unlock()
			for _, it := range rest {
				it.ack.done(errSessionClosed)
			}
			return
		case <-q.wake:
		}
		for {
			q.mu.Lock()
			n, size := 0, 0
			for n < len(q.q) && (n == 0 || size < maxPushBytes) {
				for _, r := range q.q[n].set.Records {
					size += len(r.Key) + len(r.Value) + 32
				}
				n++
			}
			batch = append(batch[:0], q.q[:n]...)
			q.q = slices.Delete(q.q, 0, n)
			first := q.taken
			q.taken += uint64(n)
			if n > 0 {
				q.sending = append(q.sending, first)
			}
			q.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			err := q.send(batch)
			q.sent(first)
			for _, it := range batch {
				it.ack.done(err)
			}
			if err != nil {
				q.f.pushFailed.Add(uint64(len(batch)))
				q.f.log.Debug("cluster: push failed; anti-entropy will repair", "to", formatID(q.p.id), "flows", len(batch), "err", err)
			} else {
				q.f.pushed.Add(uint64(len(batch)))
			}
			clear(batch)
		}
	}
}

// sent records that the batch starting at item number first was sent
// (or failed), waking drain.
func (q *pushQueue) sent(first uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sending = slices.DeleteFunc(q.sending, func(n uint64) bool { return n == first })
	close(q.progress)
	q.progress = make(chan struct{})
}

// drain returns once every push queued before it was called has been sent
// and merged by the successor, or dropped: it waits for the batches ahead
// of it, then asks the successor an empty push, which is answered after
// every frame this node sent before it on the session (told pushes are
// merged in order, on the session's reader). A delete that runs after
// every member drained cannot be overtaken by an older push.
func (q *pushQueue) drain(ctx context.Context) error {
	q.mu.Lock()
	target := q.queued
	for {
		done := q.taken
		for _, n := range q.sending {
			done = min(done, n)
		}
		if done >= target {
			break
		}
		wait := q.progress
		q.mu.Unlock()
		select {
		case <-wait:
		case <-q.stop:
			return errSessionClosed
		case <-ctx.Done():
			return fmt.Errorf("cluster: draining pushes to %s: %w", formatID(q.p.id), ctx.Err())
		}
		q.mu.Lock()
	}
	empty := target == 0
	q.mu.Unlock()
	if empty {
		return nil // this node never pushed to the successor
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(q.f.deadline)
	}
	return q.push(nil, true, deadline)
}

// drainPushes drains (pushQueue.drain) every successor's queue at once.
func (f *Flows) drainPushes(ctx context.Context) error {
	f.peerMu.RLock()
	queues := make([]*pushQueue, 0, len(f.peers))
	for _, p := range f.peers {
		queues = append(queues, p.push)
	}
	f.peerMu.RUnlock()
	errs := make([]error, len(queues))
	var wg sync.WaitGroup
	for i, q := range queues {
		wg.Go(func() { errs[i] = q.drain(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// send pushes one batch. A batch that no Sync write waits for is told,
// fire-and-forget (seed 000 §11): no answer frame, no wake-up for it at
// either end; the successor counts what it could not merge, and
// anti-entropy repairs it.
func (q *pushQueue) send(batch []pushItem) error {
	sets := make([]flowshard.RecordSet, len(batch))
	waited := false
	for i, it := range batch {
		sets[i] = it.set
		waited = waited || it.ack != nil
	}
	return q.push(sets, waited, time.Now().Add(q.f.deadline))
}

// push sends sets to the successor on the bulk session: asked, it waits
// until deadline for the successor's answer, else it is told.
func (q *pushQueue) push(sets []flowshard.RecordSet, asked bool, deadline time.Time) error {
	r := request{op: opPush, sets: sets}
	r.mIdx, r.budget = q.f.view.Load().idx, uint64(q.f.deadline.Milliseconds())
	if !asked {
		return q.f.tell(q.p.id, slotBulk, &r)
	}
	var a answer
	if err := q.f.call(q.p.id, slotBulk, deadline, &r, &a); err != nil {
		return err
	}
	if a.status != statusOK {
		return statusErr(&a)
	}
	return nil
}

// antiEntropyLoop is the backstop for lost pushes (seed 000 §11): every
// AntiEntropy, this node, as owner, offers each successor the summaries of
// the flows it owns that the successor replicates; the successor answers
// with those its copy lacks or holds otherwise, and those are pushed
// again. The owner works out who replicates what once a round, and a
// successor only looks the offered ids up, so a round costs one pass over
// the owner's flows.
func (f *Flows) antiEntropyLoop() {
	t := time.NewTicker(f.cfg.AntiEntropy)
	defer t.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
		}
		if err := f.antiEntropy(); err != nil {
			f.log.Debug("cluster: anti-entropy round cut short", "err", err)
		}
	}
}

// offerChunk bounds the summaries in one offer.
const offerChunk = 4096

func (f *Flows) antiEntropy() error {
	v := f.currentView()
	if len(v.voters) < 2 || f.adopted.Load() != v.idx {
		return nil // nothing to replicate, or nothing owned yet
	}
	owned, err := f.shard.Summaries(func(id string) bool { return v.ring.Owner(ring.ClassFlow, id) == f.self })
	if err != nil {
		return err
	}
	offers := map[uint64][]flowshard.Summary{}
	for _, s := range owned {
		for _, id := range v.ring.Successors(ring.ClassFlow, s.ID, ring.ReplicaSuccessors) {
			offers[id] = append(offers[id], s)
		}
	}
	var errs []error
	for id, sums := range offers {
		if err := f.offer(v, id, sums); err != nil {
			errs = append(errs, fmt.Errorf("offer to %s: %w", formatID(id), err))
		}
	}
	return errors.Join(errs...)
}

// offer sends one successor the summaries of what it should hold and
// pushes what it lacks.
func (f *Flows) offer(v *view, id uint64, sums []flowshard.Summary) error {
	url, ok := v.urls[id]
	if !ok {
		return nil
	}
	p := f.peer(id, url)
	for len(sums) > 0 && f.ctx.Err() == nil {
		n := min(len(sums), offerChunk)
		r := request{op: opOffer, sums: sums[:n], mIdx: v.idx, budget: uint64(f.deadline.Milliseconds())}
		sums = sums[n:]
		var a answer
		if err := f.callURL(id, url, slotBulk, time.Now().Add(f.deadline), &r, &a); err != nil {
			return err
		}
		if a.status != statusOK {
			return statusErr(&a)
		}
		if err := f.repair(p, a.ids); err != nil {
			return err
		}
	}
	return nil
}

// repair queues pushes of the flows a successor's copy lacks, under
// f.deleting: a prefix delete running meanwhile either drains them or
// leaves none to read (TestDeletePrefixOutrunsRepair).
func (f *Flows) repair(p *peer, ids []string) error {
	f.deleting.RLock()
	defer f.deleting.RUnlock()
	for _, flowID := range ids {
		set, err := f.shard.Records(f.ctx, flowID)
		if err != nil {
			return err
		}
		if len(set.Records) > 0 {
			p.push.add(set, nil, time.Now())
			f.repaired.Add(1)
		}
	}
	return nil
}

// serveOffer answers an owner's offer: the offered flows this node's copy
// lacks or holds otherwise.
func (f *Flows) serveOffer(r *request, a *answer) {
	stale := make(map[string]uint64, len(r.sums))
	for _, s := range r.sums {
		stale[s.ID] = s.Sum
	}
	local, err := f.shard.Summaries(func(id string) bool { _, ok := stale[id]; return ok })
	if err != nil {
		shardStatus(a, err)
		return
	}
	for _, s := range local {
		if stale[s.ID] == s.Sum {
			delete(stale, s.ID)
		}
	}
	for _, s := range r.sums {
		if _, ok := stale[s.ID]; ok {
			a.ids = append(a.ids, s.ID)
		}
	}
}
