package inject

import (
	"context"
	"sync"
	"time"

	"github.com/dop251/goja"
)

// watchTick is how often the watchdog looks for runs past their deadline
// or whose caller gave up: the most a stop lags behind either.
const watchTick = 10 * time.Millisecond

// watch is what a runtime's runs share with the engine's watchdog, which
// stops a run (goja's Interrupt) at its deadline or when its caller's
// context ends. It replaces a timer and a context callback per run, which
// cost half a microsecond of a counter's request. One run at a time.
type watch struct {
	mu     sync.Mutex
	rt     *goja.Runtime
	ctx    context.Context // the run's caller's; nil between runs
	due    time.Time
	fired  bool
	reason error // why it fired
	// expired is closed when the watchdog fires, for a run asleep in a
	// timer; a runtime it fired on is never used again.
	expired chan struct{}
}

func (w *watch) begin(ctx context.Context, due time.Time) {
	w.mu.Lock()
	w.ctx, w.due = ctx, due
	w.mu.Unlock()
}

// end disarms w after a run and reports whether the watchdog fired on it.
func (w *watch) end() (fired bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ctx = nil
	return w.fired
}

// why returns why the watchdog fired.
func (w *watch) why() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reason
}

// check fires w if its run is past due or its caller gave up; force fires
// a running w with force as the reason.
func (w *watch) check(now time.Time, force error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx == nil || w.fired {
		return
	}
	reason := force
	switch {
	case reason != nil:
	case w.ctx.Err() != nil:
		reason = w.ctx.Err()
	case !now.Before(w.due):
		reason = ErrTimeout
	default:
		return
	}
	w.fired, w.reason = true, reason
	close(w.expired)
	w.rt.Interrupt(reason)
}

// watchdog is the engine's one goroutine that stops runs. It starts with
// the first runtime, so an engine that never runs a script never wakes up,
// and stops with Close.
type watchdog struct {
	mu      sync.Mutex
	watches map[*watch]struct{}
	once    sync.Once
	stop    chan struct{}
	done    chan struct{}
	closed  sync.Once
}

func (d *watchdog) add(w *watch) {
	d.once.Do(func() {
		d.stop, d.done = make(chan struct{}), make(chan struct{})
		go d.run()
	})
	d.mu.Lock()
	if d.watches == nil {
		d.watches = map[*watch]struct{}{}
	}
	d.watches[w] = struct{}{}
	d.mu.Unlock()
}

func (d *watchdog) remove(w *watch) {
	d.mu.Lock()
	delete(d.watches, w)
	d.mu.Unlock()
}

func (d *watchdog) run() {
	defer close(d.done)
	t := time.NewTicker(watchTick)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case now := <-t.C:
			d.each(now, nil)
		}
	}
}

func (d *watchdog) each(now time.Time, force error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for w := range d.watches {
		w.check(now, force)
	}
}

// close stops every run still going with reason, then the watchdog.
func (d *watchdog) close(reason error) {
	d.each(time.Now(), reason)
	d.closed.Do(func() {
		d.once.Do(func() {}) // one that never started cannot start now
		if d.stop != nil {
			close(d.stop)
			<-d.done
		}
	})
}
