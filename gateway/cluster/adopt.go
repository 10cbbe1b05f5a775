package cluster

import (
	"context"
	"slices"
	"time"

	"github.com/riftgate/riftgate/ring"
)

// Adoption (seed 000 §11). When the voters change, flows change owners;
// each new owner must hold the latest acknowledged state of its flows
// before it answers for them. It asks every member it can reach, of the
// new membership and of the one it last adopted at, for the records of the
// flows it owns now, and keeps the highest version of every key: a `sync`
// write is on the old owner and on at least one successor, so it survives
// the loss of either. Until that is done this node answers none of its
// flows (statusAdopting): a flow it owned before may have been served by
// another owner at a membership between, which it cannot rule out.
//
// A node that answers an adoption request raises its floor to the new
// index: from then on it refuses owner operations under any older view,
// even before it has applied the change itself, so the old owner of a flow
// stops writing it before the new one reads it. A node that restarts
// adopts too: its own disk may lack `async` writes its successors hold.
//
// Changes that leave the voters as they are (a learner joins or leaves)
// move no flow and are adopted at once.
//
// A member that cannot be reached holds copies nobody else may have: a
// `sync` write is on two of its flow's three holders (owner and successors
// at the membership before), so a flow two of whose holders were not
// reached may have lost an acknowledged write to this node's view. Such a
// flow stays held (statusAdopting) while the other flows are served, and
// the loop asks the missing members again until one answers, or until they
// are removed: an operator who removes both declares their copies gone.

// adoptPage bounds one adoption answer.
const adoptPage = 4 << 20

func (f *Flows) adoptLoop() {
	var last *view // the view adopted last; nil at boot
	for {
		v := f.currentView()
		if f.adopted.Load() != v.idx {
			switch {
			case last != nil && slices.Equal(last.voters, v.voters) && f.floor.Load() <= last.idx:
				f.adopted.Store(v.idx) // held flows stay held
				last = v
			case f.adopt(v, last):
				last = v
			default:
				// Retry: a newer view, or members that were not reachable.
				select {
				case <-f.ctx.Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
				continue
			}
		}
		wait := time.Second // a missed signal costs a second at most
		if f.held.Load() != nil {
			f.settle(v, last)
			wait = 200 * time.Millisecond
		}
		select {
		case <-f.ctx.Done():
			return
		case <-f.changed:
		case <-time.After(wait):
		}
	}
}

// adopt pulls this node's flows at v from every member of v and of last
// it can reach. It reports false if v was superseded meanwhile, or if no
// member could be reached while v has other voters (a node alone cannot
// tell what it missed; it tries again).
func (f *Flows) adopt(v, last *view) bool {
	start := time.Now()
	from := slices.Clone(v.members)
	urls := v.urls
	if last != nil {
		for _, id := range last.members {
			if _, ok := v.urls[id]; !ok && id != f.self {
				from = append(from, id)
			}
		}
	}
	merged := 0
	var missing, reached []uint64
	for _, id := range from {
		n, err := f.adoptFrom(v, last, id, urls)
		if err != nil {
			f.log.Info("cluster: adoption could not reach a member; flows it may hold the only copies of wait for it", "member", formatID(id), "err", err)
			missing = append(missing, id)
			continue
		}
		reached = append(reached, id)
		merged += n
		if f.currentView().idx != v.idx {
			return false
		}
	}
	if len(reached) == 0 && len(v.voters) > 1 && slices.Contains(v.voters, f.self) {
		return false
	}
	if f.currentView().idx != v.idx {
		return false
	}
	prev := v.ring // at boot, the best guess of where the copies are
	if last != nil {
		prev = last.ring
	}
	f.held.Store(newHeldFlows(v, prev, missing, reached, f.held.Load()))
	f.adopted.Store(v.idx)
	f.adoptions.Add(1)
	f.adoptNanos.Add(uint64(time.Since(start)))
	f.log.Info("cluster: flows adopted", "membershipIndex", v.idx, "members", len(reached), "missing", len(missing), "records", merged, "took", time.Since(start))
	return true
}

// adoptFrom pages through one member's records of the flows this node owns
// at v.
func (f *Flows) adoptFrom(v, last *view, id uint64, urls map[uint64]string) (int, error) {
	if _, ok := urls[id]; !ok && last != nil {
		urls = last.urls
	}
	cursor, merged := "", 0
	for {
		a, n, err := f.adoptPage(v, id, urls[id], cursor)
		merged += n
		if err != nil || !a.more {
			return merged, err
		}
		cursor = a.next
	}
}

// adoptPage asks one member for the page after cursor and merges it. A
// prefix delete on this node waits for it (f.deleting), as it waits for a
// repair: a page read from a member before that member's delete round is
// merged before this node's next one, which removes what it brought back.
func (f *Flows) adoptPage(v *view, id uint64, url, cursor string) (*answer, int, error) {
	f.deleting.RLock()
	defer f.deleting.RUnlock()
	r := request{op: opAdopt, node: f.self, key: cursor, limit: adoptPage, voters: v.voters}
	a := new(answer)
	r.mIdx, r.budget = v.idx, uint64(f.deadline.Milliseconds())
	if err := f.callURL(id, url, slotBulk, time.Now().Add(f.deadline), &r, a); err != nil {
		return nil, 0, err
	}
	if a.status != statusOK {
		return nil, 0, statusErr(a)
	}
	n, err := f.shard.Merge(f.ctx, a.sets...)
	return a, n, err
}

// serveAdopt answers an adoption page: this node raises its floor to the
// caller's index, then sends the records of the flows the caller owns at
// the caller's voters.
func (f *Flows) serveAdopt(ctx context.Context, r *request, a *answer) {
	rg, err := ring.New(r.mIdx, r.voters)
	if err != nil {
		refuse(a, statusBadRequest, "voters: %v", err)
		return
	}
	for {
		fl := f.floor.Load()
		if fl >= r.mIdx || f.floor.CompareAndSwap(fl, r.mIdx) {
			break
		}
	}
	// Owner operations already past the floor check hold their flow's
	// lock; taking each flow's lock below waits for them.
	sums, err := f.shard.Summaries(func(id string) bool {
		return id > r.key && rg.Owner(ring.ClassFlow, id) == r.node
	})
	if err != nil {
		shardStatus(a, err)
		return
	}
	size := uint64(0)
	for i, s := range sums {
		if size >= r.limit && i > 0 {
			a.more, a.next = true, sums[i-1].ID
			return
		}
		fl, err := f.locks.lock(ctx, s.ID)
		if err != nil {
			refuse(a, statusUnavailable, "adoption page: %v", err)
			return
		}
		set, err := f.shard.Records(ctx, s.ID)
		f.locks.unlock(s.ID, fl)
		if err != nil {
			shardStatus(a, err)
			return
		}
		for _, rec := range set.Records {
			size += uint64(len(rec.Key) + len(rec.Value) + 32)
		}
		a.sets = append(a.sets, set)
	}
}

// heldFlows are the flows adoption could not settle: two of their holders
// at the membership before (owner and successors on prev) were not
// reached. before chains the flows an earlier adoption held, whose missing
// members are still missing.
type heldFlows struct {
	prev    *ring.Ring
	missing []uint64
	before  *heldFlows
}

// newHeldFlows is what an adoption at v leaves held, given the members it
// missed and reached and the flows held until then; nil when none can be.
func newHeldFlows(v *view, prev *ring.Ring, missing, reached []uint64, old *heldFlows) *heldFlows {
	h := &heldFlows{prev: prev, missing: missing}
	h.before = old.without(func(id uint64) bool { return slices.Contains(reached, id) })
	return h.trim(v)
}

// trim drops the levels that can hold no flow at v: none of their missing
// members is still a member, whose copies could yet be read.
func (h *heldFlows) trim(v *view) *heldFlows {
	if h == nil {
		return nil
	}
	h.before = h.before.trim(v)
	if !slices.ContainsFunc(h.missing, func(id uint64) bool { _, ok := v.urls[id]; return ok }) {
		return h.before
	}
	return h
}

// without returns a copy of h whose missing lists drop the members reached.
func (h *heldFlows) without(reached func(uint64) bool) *heldFlows {
	if h == nil {
		return nil
	}
	return &heldFlows{
		prev:    h.prev,
		missing: slices.DeleteFunc(slices.Clone(h.missing), reached),
		before:  h.before.without(reached),
	}
}

// holds reports whether flowID waits for a missing member at v: fewer of
// its holders were reached than every sync write is sure to be on, and a
// holder not reached is still a member.
func (h *heldFlows) holds(v *view, flowID string) bool {
	for ; h != nil; h = h.before {
		var room [1 + ring.ReplicaSuccessors]uint64
		hs := h.prev.AppendSuccessors(append(room[:0], h.prev.Owner(ring.ClassFlow, flowID)), ring.ClassFlow, flowID, ring.ReplicaSuccessors)
		// A sync write is on its owner and one successor when it has one.
		need := len(hs) - min(2, len(hs)) + 1
		reached, awaited := 0, 0
		for _, id := range hs {
			if !slices.Contains(h.missing, id) {
				reached++
			} else if _, ok := v.urls[id]; ok {
				awaited++
			}
		}
		if reached < need && awaited > 0 {
			return true
		}
	}
	return false
}

// settle asks the missing members that are still members again; each that
// answers no longer holds any flow.
func (f *Flows) settle(v, last *view) {
	h := f.held.Load()
	var ids []uint64
	for l := h; l != nil; l = l.before {
		for _, id := range l.missing {
			if _, ok := v.urls[id]; ok && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	var reached []uint64
	for _, id := range ids {
		if _, err := f.adoptFrom(v, last, id, v.urls); err == nil {
			reached = append(reached, id)
		}
	}
	if f.currentView().idx != v.idx {
		return // the next adoption starts from h
	}
	next := h.without(func(id uint64) bool { return slices.Contains(reached, id) }).trim(v)
	if f.held.CompareAndSwap(h, next) && len(reached) > 0 {
		f.log.Info("cluster: held flows settled by members that answered again", "members", len(reached), "stillHeld", next != nil)
	}
}
