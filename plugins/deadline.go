package plugins

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// watchTick is how often the watchdog looks for calls past their deadline
// or whose caller gave up: the most a stop can lag behind either.
const watchTick = 10 * time.Millisecond

// callCtx is the context an instance's calls run under, one per instance.
// Only the host's watchdog ends it, when a call overruns its deadline or
// its caller's context ends; it then also raises the module's stop flag
// (see interruptible), on which the guest traps within fuelPerExit loop
// iterations, while host imports see Done close. One channel serves every
// call of the instance, because an instance whose channel closed is
// discarded.
//
// It replaces a context.WithTimeout per call, which cost about a
// microsecond and eight allocations, a fifth of a small plugin call.
type callCtx struct {
	done chan struct{}

	mu sync.Mutex
	// parent is the caller's context during a call, so that its values and
	// deadline reach the flow store through the host imports.
	parent context.Context
	due    time.Duration // since the host's epoch; 0 while no call runs
	err    error         // why done closed
	// fired is set once err is, so that Err, which the flow store asks on
	// every operation, costs no lock until then (err never changes back).
	fired atomic.Bool
	// stop is the module's stop flag, set only while a call runs (due is
	// not 0), so never on a closed module.
	stop api.MutableGlobal
	// cs is the instance's call state, which the host imports reach through
	// the context wazero passes them.
	cs *callState
}

func newCallCtx(cs *callState) *callCtx {
	return &callCtx{parent: context.Background(), done: make(chan struct{}), cs: cs}
}

// The methods lock, because a context derived from c may read it from
// another goroutine while a later call rearms it.

func (c *callCtx) Deadline() (time.Time, bool) { return c.caller().Deadline() }

func (c *callCtx) Value(key any) any { return c.caller().Value(key) }

func (c *callCtx) Done() <-chan struct{} { return c.done }

func (c *callCtx) Err() error {
	if !c.fired.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// OpTime is when the call's request began (Input.Start), for the flow
// store (flowshard.OpTimer), which the host's flow imports reach with c:
// it spares the store a clock reading per operation. Only the call's own
// goroutine asks.
func (c *callCtx) OpTime() (time.Time, bool) {
	if in := c.cs.in; in != nil && !in.Start.IsZero() {
		return in.Start, true
	}
	return time.Time{}, false
}

func (c *callCtx) caller() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parent
}

// begin arms c for a call from parent that must end by due.
func (c *callCtx) begin(parent context.Context, due time.Duration) {
	c.mu.Lock()
	c.parent, c.due = parent, due
	c.mu.Unlock()
}

// end disarms c once a call returns; an unarmed c is left as it is.
func (c *callCtx) end() {
	c.mu.Lock()
	c.parent, c.due = context.Background(), 0
	c.mu.Unlock()
}

// check fires c if its call is past due or its caller's context ended.
func (c *callCtx) check(now time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.due == 0 || c.err != nil {
		return
	}
	switch {
	case c.parent.Err() != nil:
		c.fire(context.Canceled)
	case now >= c.due:
		c.fire(context.DeadlineExceeded)
	}
}

// abort fires c, if a call runs, because the host is closing.
func (c *callCtx) abort() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.due != 0 && c.err == nil {
		c.fire(ErrClosed)
	}
}

// fire ends c for err and stops the guest. The caller holds c.mu.
func (c *callCtx) fire(err error) {
	c.err = err
	c.fired.Store(true)
	close(c.done)
	if c.stop != nil {
		c.stop.Set(1)
	}
}

// watchdog is the host's one goroutine that fires the callCtx of every
// call that ran too long. It starts with the first registration, so a host
// without plugins never wakes up, and stops with Close.
type watchdog struct {
	once  sync.Once
	epoch time.Time
	stop  chan struct{}
	done  chan struct{}
}

// now is the monotonic time since the host's epoch.
func (w *watchdog) now() time.Duration { return time.Since(w.epoch) }

func (h *Host) startWatchdog() {
	h.wd.once.Do(func() {
		h.wd.stop = make(chan struct{})
		h.wd.done = make(chan struct{})
		go h.watch()
	})
}

func (h *Host) watch() {
	defer close(h.wd.done)
	t := time.NewTicker(watchTick)
	defer t.Stop()
	for {
		select {
		case <-h.wd.stop:
			return
		case <-t.C:
		}
		now := h.wd.now()
		h.insts.Range(func(_, v any) bool {
			v.(*instance).cc.check(now)
			return true
		})
	}
}

// stopWatchdog ends the watchdog, if it started, and waits for it.
func (h *Host) stopWatchdog() {
	h.wd.once.Do(func() {}) // a watchdog that never started cannot start now
	if h.wd.stop != nil {
		close(h.wd.stop)
		<-h.wd.done
	}
}
