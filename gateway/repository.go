package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/riftgate/riftgate/gateway/config"
)

// Repository is mb's pluggable imposters repository (--impostersRepository)
// as riftgate meets it: the configuration log stays the source of truth,
// every change to it is written through to the repository (an imposter
// changed or added is deleted there and added again, one removed is
// deleted), and at start the repository's imposters are loaded as a
// --configfile is.
type Repository interface {
	LoadAll(ctx context.Context) ([]json.RawMessage, error)
	Add(ctx context.Context, imposter json.RawMessage) error
	Delete(ctx context.Context, port int) error
}

// writeThrough wraps the reconciler: once a move is committed, what
// changed goes to the repository, in order, from one goroutine, so that a
// slow repository never holds up the log.
type writeThrough struct {
	config.Reconciler
	repo Repository
	log  *slog.Logger

	mu      sync.Mutex
	pending []repoWrite
	wake    chan struct{}
	idle    sync.WaitGroup
}

type repoWrite struct {
	port int
	doc  json.RawMessage // nil: delete
}

func newWriteThrough(inner config.Reconciler, repo Repository, log *slog.Logger) *writeThrough {
	w := &writeThrough{Reconciler: inner, repo: repo, log: log, wake: make(chan struct{}, 1)}
	go w.run()
	return w
}

// Prepare implements config.Reconciler.
func (w *writeThrough) Prepare(ctx context.Context, prev, next *config.State, res config.Result) (config.Plan, error) {
	p, err := w.Reconciler.Prepare(ctx, prev, next, res)
	if err != nil {
		return nil, err
	}
	return thenPlan{p, func() { w.changed(prev, next) }}, nil
}

// Follow implements config.Reconciler.
func (w *writeThrough) Follow(ctx context.Context, prev, next *config.State) {
	w.Reconciler.Follow(ctx, prev, next)
	w.changed(prev, next)
}

// changed queues the writes that take the repository from prev to next.
func (w *writeThrough) changed(prev, next *config.State) {
	var writes []repoWrite
	for _, port := range prev.Ports() {
		if next.Imposter(port) == nil {
			writes = append(writes, repoWrite{port: port})
		}
	}
	for _, port := range next.Ports() {
		if doc := next.Imposter(port); doc != prev.Imposter(port) {
			writes = append(writes, repoWrite{port: port}, repoWrite{port: port, doc: imposterJSON(doc)})
		}
	}
	if len(writes) == 0 {
		return
	}
	w.mu.Lock()
	if len(w.pending) == 0 {
		w.idle.Add(1)
	}
	w.pending = append(w.pending, writes...)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run writes what is queued, in order; a write that fails is logged.
func (w *writeThrough) run() {
	for range w.wake {
		for {
			w.mu.Lock()
			if len(w.pending) == 0 {
				w.mu.Unlock()
				break
			}
			wr := w.pending[0]
			w.pending = w.pending[1:]
			last := len(w.pending) == 0
			w.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			var err error
			if wr.doc == nil {
				err = w.repo.Delete(ctx, wr.port)
			} else {
				err = w.repo.Add(ctx, wr.doc)
			}
			cancel()
			if err != nil {
				w.log.Error("imposters repository", "port", wr.port, "err", err)
			}
			if last {
				w.idle.Done()
			}
		}
	}
}

// repoFlushTimeout bounds how long shutdown waits for queued writes.
const repoFlushTimeout = 10 * time.Second

// close waits (bounded) until every queued write is done, and stops the
// writer; what is still queued then is logged as lost.
func (w *writeThrough) close() {
	done := make(chan struct{})
	go func() { w.idle.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(repoFlushTimeout):
		w.mu.Lock()
		w.log.Error("imposters repository: writes not made before shutdown", "count", len(w.pending))
		w.pending = nil
		w.mu.Unlock()
	}
	close(w.wake)
}

// imposterJSON is an imposter's whole definition: its header with its
// stubs, as stored.
func imposterJSON(doc *config.Imposter) json.RawMessage {
	h := bytes.TrimSpace(doc.Header)
	var b bytes.Buffer
	b.Write(h[:len(h)-1])
	if len(bytes.TrimSpace(h[1:len(h)-1])) > 0 {
		b.WriteByte(',')
	}
	b.WriteString(`"stubs":[`)
	for i, st := range doc.Stubs() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(st.JSON)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}
