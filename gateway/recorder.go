package gateway

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/proxy"
)

// Batches of recordings: at most this many, or this many bytes of stubs,
// in one command, so that a batch fits one Raft entry (1 MiB) with room.
const (
	maxBatch      = 1000
	maxBatchBytes = 512 << 10
	// recordTimeout bounds writing a batch: it serves many requests, so
	// none of their contexts is its own.
	recordTimeout = 30 * time.Second
)

// recorder is proxy.Recorder: a recording is a configuration command,
// and the recordings made while one is written go together in the next
// (group commit, as flowshard's writer does): one durable write, or one
// Raft entry, for all of them. No timer waits for a batch to fill: the
// first recording finding none in progress yields once, to let the
// goroutines that are ready run, then writes, alone if it is alone, and
// the ones arriving meanwhile wait for the write after, so a recording
// waits at most for the write before its own.
//
// No goroutine of its own: the recording that finds no batch in progress
// writes one, and hands the next to the oldest recording still waiting.
type recorder struct {
	g *gateway

	mu    sync.Mutex
	queue []*recording
	busy  bool // a batch is being written

	// Counted for GET /metrics: how well recordings are grouped.
	recordings, batches atomic.Uint64
}

// recording is one recording waiting for its batch.
type recording struct {
	rec  config.Record
	err  error
	done chan struct{} // closed once its batch is written
	lead chan struct{} // closed when it is to write the next batch
}

// Record implements proxy.Recorder.
func (r *recorder) Record(ctx context.Context, rec proxy.Recording) error {
	ss, err := imposter.ParseStubFor(rec.Stub, rec.Protocol)
	if err != nil {
		return fmt.Errorf("proxy recording: %w", err)
	}
	p := &recording{
		rec:  config.Record{Port: rec.Port, Anchor: rec.Anchor, Once: rec.Once, Stub: config.StubDoc{JSON: ss.JSON(), Signature: rec.Signature, Parsed: ss}},
		done: make(chan struct{}),
		lead: make(chan struct{}),
	}
	r.mu.Lock()
	r.queue = append(r.queue, p)
	lead := !r.busy
	r.busy = true
	r.mu.Unlock()
	if !lead {
		select {
		case <-p.done:
			return p.err
		case <-p.lead:
		}
	}
	// Let the goroutines that are ready run first, once: on one core
	// (riftgate pinned, or GOMAXPROCS=1) nothing else runs while a batch
	// is written in memory, so without this every batch held one
	// recording. Those whose answers have come in record meanwhile and
	// join this batch; a lone recording loses nothing but the yield.
	runtime.Gosched()
	r.flush(ctx)
	<-p.done // it was at the head of the queue: the batch written held it
	return p.err
}

// flush writes the recordings at the head of the queue as one batch, then
// hands the next batch to the oldest recording left, if any.
func (r *recorder) flush(ctx context.Context) {
	r.mu.Lock()
	n, size := 0, 0
	for n < len(r.queue) && n < maxBatch && (n == 0 || size+len(r.queue[n].rec.Stub.JSON) <= maxBatchBytes) {
		size += len(r.queue[n].rec.Stub.JSON)
		n++
	}
	batch := r.queue[:n:n]
	r.queue = r.queue[n:]
	r.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	r.write(ctx, batch)
	r.batches.Add(1)
	r.recordings.Add(uint64(len(batch)))

	r.mu.Lock()
	if len(r.queue) > 0 {
		close(r.queue[0].lead)
	} else {
		r.busy, r.queue = false, nil
	}
	r.mu.Unlock()
}

// write submits batch as one command and tells each recording how it
// went. A batch that fails as a whole (a recorded stub that does not
// compile refuses the command) is written again one recording at a time,
// so that one bad recording costs only itself.
func (r *recorder) write(ctx context.Context, batch []*recording) {
	cmd := &config.Command{Op: config.OpRecordStubs, Records: make([]config.Record, len(batch))}
	for i, p := range batch {
		cmd.Records[i] = p.rec
	}
	res, err := r.g.config.Submit(ctx, cmd)
	if err == nil && res.Err == nil && len(res.Results) != len(batch) {
		err = fmt.Errorf("a batch of %d recordings answered %d results", len(batch), len(res.Results))
	}
	if (err != nil || res.Err != nil) && len(batch) > 1 {
		for _, p := range batch {
			r.write(ctx, []*recording{p})
		}
		return
	}
	for i, p := range batch {
		switch {
		case err != nil:
			p.err = err
		case res.Err != nil:
			p.err = res.Err.MB()
		case res.Results[i].Err != nil:
			p.err = res.Results[i].Err.MB()
		}
		switch {
		case p.err == nil:
		case mberr.As(p.err).Code == mberr.NoSuchResource:
			r.g.log.Info("proxy recording dropped: its stub is gone", "port", p.rec.Port)
		default:
			r.g.log.Error("proxy recording not kept", "port", p.rec.Port, "err", p.err)
		}
		close(p.done)
	}
}
