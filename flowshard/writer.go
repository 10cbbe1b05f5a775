package flowshard

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// op is one disk mutation. del set: delete key; prefix set: delete every key
// starting with key (a whole flow); otherwise put key=val.
type op struct {
	key    []byte
	val    []byte
	del    bool
	prefix bool
}

// batch is the set of ops one bbolt transaction commits. done is closed
// after the commit (and its fsync) returned; err is its result.
type batch struct {
	ops     []op
	waiters int // Sync writes that wait for this batch
	done    chan struct{}
	err     error
}

func newBatch() *batch { return &batch{done: make(chan struct{})} }

// committed reports whether b's commit has finished, without waiting.
func (b *batch) committed() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// writer is the single goroutine that owns every bbolt write transaction.
// It commits whatever is queued as one transaction, then looks again: it
// never waits on a timer while the queue is empty, so a lone Sync put costs
// one commit, and under load the queue that built up during a commit
// becomes the next batch (group commit).
type writer struct {
	db         *bolt.DB
	maxPending int
	stats      *counters
	log        *slog.Logger

	mu    sync.Mutex
	cur   *batch
	space chan struct{} // closed (and replaced) whenever cur is taken

	wake     chan struct{} // capacity 1: "cur is not empty"
	stop     chan struct{}
	done     chan struct{} // closed when run has drained, closed db and returned
	closeErr error         // db.Close's result, readable after done

	// Owned by run: see gather.
	lastCommit time.Duration
	target     int
	// Owned by run: see superseded.
	skip    []bool
	keySlot map[string]int
	lastOp  []int
}

func newWriter(db *bolt.DB, maxPending int, st *counters, log *slog.Logger) *writer {
	return &writer{
		db:         db,
		maxPending: maxPending,
		stats:      st,
		log:        log,
		cur:        newBatch(),
		space:      make(chan struct{}),
		wake:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
}

// reserve blocks while maxPending ops are already queued. It is the
// back-pressure that bounds a batch, and so what Async can lose. The bound is
// soft: writers that pass together may overshoot it by their number.
func (w *writer) reserve(ctx context.Context) error {
	for {
		w.mu.Lock()
		if len(w.cur.ops) < w.maxPending {
			w.mu.Unlock()
			return nil
		}
		space := w.space
		w.mu.Unlock()
		select {
		case <-space:
		case <-w.stop:
			return ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("flowshard: waiting for writer queue: %w", ctx.Err())
		}
	}
}

// enqueue appends ops to the batch being filled and returns it. It never
// blocks: callers hold a flow lock. waiter says whether the caller will wait
// for the commit.
//
// It wakes the writer for every write, even where gather only waits on
// (docs/flowshard.md says why waking it less was not kept).
func (w *writer) enqueue(waiter bool, ops ...op) *batch {
	w.mu.Lock()
	b := w.cur
	b.ops = append(b.ops, ops...)
	if waiter {
		b.waiters++
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return b
}

func (w *writer) run() {
	defer close(w.done)
	for {
		select {
		case <-w.wake:
			w.gather()
			w.commitOnce()
		case <-w.stop:
			for w.commitOnce() {
			}
			if err := w.db.Close(); err != nil {
				w.closeErr = fmt.Errorf("flowshard: close: %w", err)
			}
			return
		}
	}
}

// gather holds a non-empty queue back briefly, until the Sync writers that
// the previous commit released have queued their next write (w.target
// waiters), for at most a quarter of the previous commit's duration and
// never more than maxGather. Without it, N steady Sync writers split into two
// halves that alternate between committing and queueing, and every commit
// carries N/2 writes. It never waits while the queue is empty (a wake-up
// may be stale: its ops went into the previous commit), nor for writers
// that were not released.
func (w *writer) gather() {
	w.gatherAsync()
	budget := min(w.lastCommit/4, maxGather)
	if w.target == 0 || budget <= 0 {
		return
	}
	t := time.NewTimer(budget)
	defer t.Stop()
	for {
		w.mu.Lock()
		n, queued := w.cur.waiters, len(w.cur.ops)
		w.mu.Unlock()
		if queued == 0 || n >= w.target {
			return
		}
		select {
		case <-w.wake:
		case <-t.C:
			return
		case <-w.stop:
			return
		}
	}
}

// maxGather caps gather's wait.
const maxGather = 2 * time.Millisecond

// AsyncInterval is how long a batch holding only Async writes waits for more
// before it commits: the "batch interval" Async may lose in a crash. Without
// it every Async write paid for a commit of its own, and on one core (one P)
// each commit's fsync held the P until the runtime took it back, starving
// the request handlers: Async ran at a tenth of Sync's rate.
const AsyncInterval = 5 * time.Millisecond

// gatherAsync holds a batch with no Sync waiter for up to AsyncInterval,
// until a Sync write arrives or half the queue's bound is reached.
func (w *writer) gatherAsync() {
	full := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.cur.ops) == 0 || w.cur.waiters > 0 || len(w.cur.ops) >= w.maxPending/2
	}
	if full() {
		return
	}
	t := time.NewTimer(AsyncInterval)
	defer t.Stop()
	for {
		select {
		case <-w.wake:
			if full() {
				return
			}
		case <-t.C:
			return
		case <-w.stop:
			return
		}
	}
}

// commitOnce takes the queued batch and commits it; it reports whether there
// was anything to commit.
func (w *writer) commitOnce() bool {
	w.mu.Lock()
	b := w.cur
	if len(b.ops) == 0 {
		w.mu.Unlock()
		return false
	}
	w.cur = newBatch()
	close(w.space)
	w.space = make(chan struct{})
	w.mu.Unlock()

	start := time.Now()
	superseded := w.superseded(b.ops)
	err := w.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(dataBucket)
		for i, o := range b.ops {
			if w.skip[i] {
				continue
			}
			if err := apply(bk, o); err != nil {
				return err
			}
		}
		return nil
	})
	w.lastCommit = time.Since(start)
	w.stats.commit(len(b.ops), superseded, w.lastCommit, err)
	// Those queued meanwhile plus those about to be released.
	w.mu.Lock()
	w.target = w.cur.waiters + b.waiters
	w.mu.Unlock()
	if err != nil {
		// Memory already holds these writes; only their disk copy is lost.
		b.err = fmt.Errorf("flowshard: commit of %d ops: %w", len(b.ops), err)
		w.log.Error("flowshard: commit failed; memory and disk now differ until the keys are written again", "ops", len(b.ops), "err", err)
	}
	close(b.done)
	return true
}

// superseded marks in w.skip the ops of a batch that a later op of the
// same batch on the same key replaces, with no prefix delete between them:
// the transaction would write the key again before it commits, so only
// the last write of a key goes to bbolt. A flow written many times within
// one AsyncInterval (an imposter's one flow, a scenario moving) then costs
// one bbolt put a key per commit. It returns how many it marked.
func (w *writer) superseded(ops []op) int {
	w.skip = slices.Grow(w.skip[:0], len(ops))[:len(ops)]
	clear(w.skip)
	if w.keySlot == nil {
		w.keySlot = map[string]int{}
	}
	clear(w.keySlot)
	w.lastOp = w.lastOp[:0]
	n := 0
	for i, o := range ops {
		if o.prefix {
			// What it deletes may be written again after it: those writes
			// must stay after it, so the ops before it are not compared
			// with them.
			clear(w.keySlot)
			w.lastOp = w.lastOp[:0]
			continue
		}
		if slot, ok := w.keySlot[string(o.key)]; ok {
			w.skip[w.lastOp[slot]] = true
			w.lastOp[slot] = i
			n++
			continue
		}
		w.keySlot[string(o.key)] = len(w.lastOp)
		w.lastOp = append(w.lastOp, i)
	}
	return n
}

func apply(bk *bolt.Bucket, o op) error {
	switch {
	case o.prefix:
		c := bk.Cursor()
		// Re-seek after each delete: bbolt cursors may skip an element when
		// the one under them is deleted.
		for k, _ := c.Seek(o.key); k != nil && bytes.HasPrefix(k, o.key); k, _ = c.Seek(o.key) {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	case o.del:
		return bk.Delete(o.key)
	default:
		return bk.Put(o.key, o.val)
	}
}
