package cluster

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riftgate/riftgate/gateway/flow"
)

// flowLocks are the owner's per-flow locks: an operation on a flow holds
// its lock from its checks to its answer, replica acknowledgement under
// `sync` included, so a reader never sees a value a crash of the owner
// could still take back. Waiting is bounded by the operation's deadline.
type flowLocks struct{ l *flow.Locks }

func newFlowLocks() flowLocks { return flowLocks{flow.NewLocks()} }

// errWouldWait is lock's answer, under an inline opCtx, for a lock held by
// another operation.
var errWouldWait = errors.New("cluster: the flow's lock is held")

// lock takes id's lock, waiting at most until ctx ends; under an inline
// opCtx it does not wait, and fails with errWouldWait.
func (l flowLocks) lock(ctx context.Context, id string) (*flow.Lock, error) {
	if fl, ok := l.l.TryLock(id); ok {
		return fl, nil
	}
	oc, isOp := ctx.(*opCtx)
	if isOp && oc.inline {
		return nil, errWouldWait
	}
	fl, err := l.l.Lock(ctx, id)
	if err == nil && isOp {
		// It waited: its write is stamped, and its TTL counted, from
		// when it got the lock.
		oc.now = time.Now()
	}
	return fl, err
}

// unlock releases a lock lock returned.
func (l flowLocks) unlock(id string, fl *flow.Lock) { l.l.Unlock(id, fl) }

// opCtx is the deadline of one owner operation, as a context that costs
// no allocation: it is pooled, its timer is reused, and its done channel
// is replaced only after it fired. It carries no values and no parent.
//
// Its timer runs only once someone asks for Done: most operations never
// wait (an uncontended lock, a memory or async write), and arming and
// stopping a runtime timer for each was a tenth of a local operation's
// cost. Until then Err stays nil, as the context contract allows: Done has
// not been closed, and nobody is waiting on it.
//
// Never derive a context from one (context.WithTimeout and the like): the
// standard library watches a foreign parent from a goroutine of its own,
// which can still read the opCtx after its release, when the pool has
// handed it to another operation.
type opCtx struct {
	// inline: the operation runs on a session's reader goroutine and must
	// not wait (see inlineable).
	inline bool
	// now is the operation's one clock reading: its flowshard operations
	// run at that time (flowshard.OpTimer), and the isolation rule and
	// push queue read it instead of the clock. An operation that waited
	// (for the membership, for its flow's lock) reads it again after.
	now      time.Time
	deadline time.Time
	fired    atomic.Bool
	mu       sync.Mutex
	done     chan struct{}
	timing   bool // the timer is armed for deadline
	timer    *time.Timer
}

var opCtxPool = sync.Pool{New: func() any {
	c := &opCtx{done: make(chan struct{})}
	c.timer = time.AfterFunc(time.Hour, c.fire)
	c.timer.Stop()
	return c
}}

// newOpCtx returns a context for an operation begun at now that ends at
// deadline; call release when done.
func newOpCtx(now, deadline time.Time) *opCtx {
	c := opCtxPool.Get().(*opCtx)
	c.now, c.deadline = now, deadline
	return c
}

// fire ends the context, unless it was released, or re-armed for a later
// deadline, before a late timer got here.
func (c *opCtx) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timing && !c.fired.Load() && !time.Now().Before(c.deadline) {
		c.fired.Store(true)
		close(c.done)
	}
}

func (c *opCtx) release() {
	c.inline = false
	c.mu.Lock()
	if c.timing {
		c.timer.Stop()
		c.timing = false
	}
	if c.fired.Load() {
		c.done = make(chan struct{})
		c.fired.Store(false)
	}
	c.mu.Unlock()
	opCtxPool.Put(c)
}

func (c *opCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *opCtx) Value(any) any               { return nil }

// Done arms the timer on first use.
func (c *opCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.timing {
		c.timing = true
		if d := time.Until(c.deadline); d > 0 {
			c.timer.Reset(d)
		} else {
			c.fired.Store(true)
			close(c.done)
		}
	}
	return c.done
}

func (c *opCtx) Err() error {
	if c.fired.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

// OpTime implements flowshard.OpTimer.
func (c *opCtx) OpTime() (time.Time, bool) { return c.now, true }
