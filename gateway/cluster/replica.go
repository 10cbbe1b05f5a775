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
func (f *Flows) replicate(ctx context.Context, v *view, flowID string, keys []string, d flow.Durability) error {
	succ := v.ring.Successors(ring.ClassFlow, flowID, ring.ReplicaSuccessors)
	if len(succ) == 0 {
		return nil
	}
	set, err := f.shard.Records(ctx, flowID, keys...)
	if err != nil {
		return err
	}
	if len(set.Records) == 0 {
		return nil
	}
	var ack *ack
	if d == flow.Sync {
		ack = newAck(len(succ))
	}
	for _, id := range succ {
		url, ok := v.urls[id]
		if !ok {
			ack.done(fmt.Errorf("no URL for successor %s", formatID(id)))
			continue
		}
		f.peer(id, url).push.add(set, ack)
	}
	if ack == nil {
		return nil
	}
	if err := ack.wait(ctx); err != nil {
		if _, loaded := f.unsynced.LoadOrStore(flowID, struct{}{}); !loaded {
			f.unsyncedN.Add(1)
		}
		return err
	}
	return nil
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

// pushQueue holds the records waiting to be pushed to one successor. One
// goroutine drains it: whatever queued while a push was in flight goes in
// the next, so pushes batch under load. It is bounded: past maxQueued the
// oldest unacknowledged records are dropped (anti-entropy brings them).
type pushQueue struct {
	f    *Flows
	p    *peer
	mu   sync.Mutex
	q    []pushItem
	wake chan struct{}
	stop chan struct{}
	once sync.Once
}

type pushItem struct {
	set flowshard.RecordSet
	ack *ack
	at  time.Time
}

const (
	maxQueued    = 1 << 14
	maxPushBytes = 1 << 20
)

var errDropped = errors.New("dropped: the successor's push queue was full")

func newPushQueue(f *Flows, p *peer) *pushQueue {
	q := &pushQueue{f: f, p: p, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	if !f.spawn(q.run) {
		q.close()
	}
	return q
}

func (q *pushQueue) add(set flowshard.RecordSet, a *ack) {
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
		q.f.pushDropped.Add(1)
		defer old.ack.done(errDropped)
	}
	q.q = append(q.q, pushItem{set: set, ack: a, at: time.Now()})
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
			q.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			err := q.send(batch)
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

func (q *pushQueue) send(batch []pushItem) error {
	sets := make([]flowshard.RecordSet, len(batch))
	for i, it := range batch {
		sets[i] = it.set
	}
	r := request{op: opPush, sets: sets}
	var a answer
	deadline := time.Now().Add(q.f.deadline)
	r.mIdx, r.budget = q.f.view.Load().idx, uint64(q.f.deadline.Milliseconds())
	if err := q.f.call(q.p.id, slotBulk, deadline, &r, &a); err != nil {
		return err
	}
	if a.status != statusOK {
		return statusErr(&a)
	}
	return nil
}

// antiEntropyLoop is the backstop for lost pushes: every AntiEntropy this
// node asks each voter for a summary of the flows it owns and this node
// replicates, and fetches those whose copy here differs.
func (f *Flows) antiEntropyLoop() {
	t := time.NewTicker(f.cfg.AntiEntropy)
	defer t.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
		}
		v := f.currentView()
		for _, id := range v.voters {
			if id != f.self && f.ctx.Err() == nil {
				if err := f.pullFrom(v, id); err != nil {
					f.log.Debug("cluster: anti-entropy pull failed", "from", formatID(id), "err", err)
				}
			}
		}
	}
}

// pullFrom brings this node's replicas of owner's flows up to date.
func (f *Flows) pullFrom(v *view, owner uint64) error {
	mine := func(id string) bool {
		return v.ring.Owner(ring.ClassFlow, id) == owner && slices.Contains(v.ring.Successors(ring.ClassFlow, id, ring.ReplicaSuccessors), f.self)
	}
	local, err := f.shard.Summaries(mine)
	if err != nil {
		return err
	}
	have := make(map[string]uint64, len(local))
	for _, s := range local {
		have[s.ID] = s.Sum
	}
	cursor := ""
	for {
		r := request{op: opSummary, node: f.self, key: cursor, limit: 4096, voters: v.voters}
		var a answer
		r.mIdx, r.budget = v.idx, uint64(f.deadline.Milliseconds())
		if err := f.call(owner, slotBulk, time.Now().Add(f.deadline), &r, &a); err != nil {
			return err
		}
		if a.status != statusOK {
			return statusErr(&a)
		}
		var stale []string
		for _, s := range a.sums {
			if sum, ok := have[s.ID]; !ok || sum != s.Sum {
				stale = append(stale, s.ID)
			}
		}
		for len(stale) > 0 {
			n := min(len(stale), 256)
			if err := f.fetch(v, owner, stale[:n]); err != nil {
				return err
			}
			stale = stale[n:]
		}
		if !a.more {
			return nil
		}
		cursor = a.next
	}
}

func (f *Flows) fetch(v *view, from uint64, ids []string) error {
	r := request{op: opFetch, ids: ids}
	var a answer
	r.mIdx, r.budget = v.idx, uint64(f.deadline.Milliseconds())
	if err := f.call(from, slotBulk, time.Now().Add(f.deadline), &r, &a); err != nil {
		return err
	}
	if a.status != statusOK {
		return statusErr(&a)
	}
	n, err := f.shard.Merge(f.ctx, a.sets...)
	f.repaired.Add(uint64(n))
	return err
}

// serveSummary answers a replica's pull: the summaries of the flows this
// node owns, at the caller's voters, that the caller replicates.
func (f *Flows) serveSummary(r *request, a *answer) {
	rg, err := ring.New(r.mIdx, r.voters)
	if err != nil {
		refuse(a, statusBadRequest, "voters: %v", err)
		return
	}
	sums, err := f.shard.Summaries(func(id string) bool {
		return id > r.key && rg.Owner(ring.ClassFlow, id) == f.self &&
			slices.Contains(rg.Successors(ring.ClassFlow, id, ring.ReplicaSuccessors), r.node)
	})
	if err != nil {
		shardStatus(a, err)
		return
	}
	limit := int(min(max(r.limit, 1), 1<<16))
	if len(sums) > limit {
		sums, a.more, a.next = sums[:limit], true, sums[limit-1].ID
	}
	a.sums = sums
}
