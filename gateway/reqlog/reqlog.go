// Package reqlog keeps the requests imposters record (mb's recordRequests
// and --mock) in bounded memory, and loses none of them: each imposter's
// requests go into a Log, which fills a chunk in memory, writes each full
// chunk to an append-only segment file, and keeps only the newest chunks
// in memory, within one budget for the whole process. A Log may be capped
// (--maxRecordedRequests): the oldest requests are then dropped, and
// counted.
//
// The files live under --datadir, where they outlive the process (as mb's
// datadir keeps recorded requests across restarts), or in a temporary
// folder removed when the process ends. Readers take a Snapshot and stream
// it, so that showing a million requests never holds them all.
package reqlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riftgate/riftgate/gateway/message"
)

// Options configure a Manager.
type Options struct {
	// Dir holds one folder per log; it is made when missing.
	Dir string
	// Keep makes the files outlive the process (--datadir): a log opened
	// again under its name has what it had. Without it, Close removes Dir.
	Keep bool
	// MemoryBytes is how many bytes of written chunks every log together
	// keeps in memory, newest first (default 32 MiB). Chunks still being
	// filled or waiting to be written come on top of it (WriteQueue).
	MemoryBytes int64
	// ChunkBytes is the size at which a chunk is written (default 256 KiB).
	ChunkBytes int
	// SegmentBytes is the size past which a new segment file starts
	// (default 64 MiB); a capped log deletes the oldest as it drops them.
	SegmentBytes int64
	// WriteQueue is how many full chunks may wait for the writer before
	// recording waits for it (default 32): memory, not requests, gives.
	WriteQueue int
	// FlushEvery, with Keep, is how long a chunk that is not full may stay
	// only in memory (default 1 s): at most that much is lost to a crash.
	FlushEvery time.Duration
	Logger     *slog.Logger
}

func (o *Options) defaults() {
	if o.MemoryBytes <= 0 {
		o.MemoryBytes = 32 << 20
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = 256 << 10
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 64 << 20
	}
	if o.WriteQueue <= 0 {
		o.WriteQueue = 32
	}
	if o.FlushEvery <= 0 {
		o.FlushEvery = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Manager owns every log of a process: the folder, the writer goroutine
// and the memory budget.
type Manager struct {
	opts Options
	log  *slog.Logger
	jobs chan *chunk
	done chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	logs   map[string]*Log
	closed bool
	// cache holds the written chunks still in memory, oldest first, from
	// head on; cached is their payload bytes.
	cache  []*chunk
	head   int
	cached int64
}

// Open makes the folder and starts the writer. Close ends both.
func Open(opts Options) (*Manager, error) {
	opts.defaults()
	if opts.Dir == "" {
		return nil, errors.New("reqlog: no folder")
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("reqlog: %w", err)
	}
	m := &Manager{
		opts: opts, log: opts.Logger,
		jobs: make(chan *chunk, opts.WriteQueue), done: make(chan struct{}),
		logs: map[string]*Log{},
	}
	m.wg.Add(1)
	go m.writer()
	if opts.Keep {
		m.wg.Add(1)
		go m.flusher()
	}
	return m, nil
}

// Close closes every log still open (keeping what Options.Keep keeps),
// stops the writer, and removes the folder unless Options.Keep.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true // no log opens from here on
	logs := make([]*Log, 0, len(m.logs))
	for _, l := range m.logs {
		logs = append(logs, l)
	}
	m.mu.Unlock()
	var errs []error
	for _, l := range logs {
		errs = append(errs, l.Close(true))
	}
	// Every log is closed, so nothing is sealed any more: the writer
	// drains its queue and ends.
	close(m.done)
	m.wg.Wait()
	if !m.opts.Keep {
		errs = append(errs, os.RemoveAll(m.opts.Dir))
	}
	return errors.Join(errs...)
}

// Sweep removes the folders of logs that are not open and not named in
// keep: what imposters gone while the process was down left behind.
func (m *Manager) Sweep(keep []string) error {
	ents, err := os.ReadDir(m.opts.Dir)
	if err != nil {
		return fmt.Errorf("reqlog: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if _, open := m.logs[name]; open || slices.Contains(keep, name) || !e.IsDir() {
			continue
		}
		errs = append(errs, os.RemoveAll(filepath.Join(m.opts.Dir, name)))
	}
	return errors.Join(errs...)
}

// writer writes the chunks queued to it, in any order (each knows its
// place in its file), until Close.
func (m *Manager) writer() {
	defer m.wg.Done()
	for {
		select {
		case c := <-m.jobs:
			m.write(c)
		case <-m.done:
			for {
				select {
				case c := <-m.jobs:
					m.write(c)
				default:
					return
				}
			}
		}
	}
}

func (m *Manager) write(c *chunk) {
	_, err := c.seg.f.WriteAt(c.buf, c.off)
	c.buf = nil
	c.seg.release()
	if err != nil {
		c.log.lose(c, err)
	} else {
		m.keep(c)
	}
	c.log.pending.Done()
}

// keep adds a written chunk to the memory budget, letting go of the
// oldest ones past it: they are read from their file from now on.
func (m *Manager) keep(c *chunk) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cache = append(m.cache, c)
	m.cached += int64(c.size)
	for m.cached > m.opts.MemoryBytes && m.head < len(m.cache) {
		o := m.cache[m.head]
		m.cache[m.head] = nil
		m.head++
		o.mem.Store(nil)
		m.cached -= int64(o.size)
	}
	if m.head > len(m.cache)/2 {
		m.cache = append(m.cache[:0], m.cache[m.head:]...)
		m.head = 0
	}
}

// enqueue hands a sealed chunk to the writer, waiting while its queue is
// full. Once the writer is gone (the process ends) it writes at once.
func (m *Manager) enqueue(c *chunk) {
	select {
	case m.jobs <- c:
	case <-m.done:
		m.write(c)
	}
}

// flusher writes, with Options.Keep, the chunks that have waited
// FlushEvery without filling.
func (m *Manager) flusher() {
	defer m.wg.Done()
	t := time.NewTicker(m.opts.FlushEvery / 2)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case now := <-t.C:
			m.mu.Lock()
			logs := make([]*Log, 0, len(m.logs))
			for _, l := range m.logs {
				logs = append(logs, l)
			}
			m.mu.Unlock()
			for _, l := range logs {
				l.flushOlder(now.Add(-m.opts.FlushEvery))
			}
		}
	}
}

// Log is one imposter's recorded requests. Its methods are safe for
// concurrent use.
type Log struct {
	m    *Manager
	name string
	dir  string
	// pending counts the log's chunks queued to the writer.
	pending sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	max     int64 // 0: no cap
	kept    int64 // requests held now
	dropped int64 // requests dropped by the cap (or lost to a failed write)
	next    int64 // the number the next request gets
	// chunks are the sealed chunks, oldest first, of which the first skip
	// requests of chunks[0] are dropped.
	chunks []*chunk
	skip   int
	// active is the chunk being filled: header room, then its payload.
	active      []byte
	activeN     int
	activeFirst int64
	activeSince time.Time
	segs        []*segment // oldest first; the last takes new chunks
	lastTime    int64      // of the newest request, Unix nanoseconds
	nextSeg     int
	warnedCap   bool
}

// chunk is a sealed chunk: where it is in its segment, and its payload
// while it is in memory (until written, then while the budget keeps it).
type chunk struct {
	log   *Log
	seg   *segment
	off   int64 // of the header in the file
	size  int   // payload bytes
	first int64 // the number of its first request
	n     int
	mem   atomic.Pointer[[]byte]
	buf   []byte // header and payload, until written
}

// ErrOpen is Open's error for a name another log has open.
var ErrOpen = errors.New("reqlog: log already open")

// Open returns the log called name (a folder under the manager's), capped
// at max requests (0: none). With Options.Keep, what a log of that name
// held when the process last closed it is there again, capped at max;
// otherwise it starts empty.
func (m *Manager) Open(name string, max int64) (*Log, error) {
	if name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("reqlog: bad log name %q", name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errors.New("reqlog: closed")
	}
	if _, ok := m.logs[name]; ok {
		return nil, fmt.Errorf("%w: %s", ErrOpen, name)
	}
	l := &Log{m: m, name: name, dir: filepath.Join(m.opts.Dir, name), max: max}
	if !m.opts.Keep {
		if err := os.RemoveAll(l.dir); err != nil {
			return nil, fmt.Errorf("reqlog: %w", err)
		}
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return nil, fmt.Errorf("reqlog: %w", err)
	}
	if err := l.recover(); err != nil {
		return nil, err
	}
	l.newActive()
	l.mu.Lock()
	l.trimLocked()
	l.mu.Unlock()
	m.logs[name] = l
	return l, nil
}

// recover reads the segments a previous process left: each chunk header
// is checked, the payloads of the last two segments too (a crash tears
// only what was being written); the first bad chunk ends the log there.
func (l *Log) recover() error {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("reqlog: %w", err)
	}
	var nos []int
	for _, e := range ents {
		if n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), segSuffix)); err == nil && strings.HasSuffix(e.Name(), segSuffix) && n > 0 {
			nos = append(nos, n)
		}
	}
	slices.Sort(nos)
	var buf []byte
	broken := false
	for i, no := range nos {
		path := l.segPath(no)
		if broken {
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("reqlog: %w", err)
			}
			continue
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("reqlog: %w", err)
		}
		seg := &segment{f: f, path: path, no: no, refs: 1}
		hdr := make([]byte, segHdrLen)
		if _, err := f.ReadAt(hdr, 0); err != nil || string(hdr[:4]) != segMagic || hdr[4] != segVersion || hdr[5] != 0 {
			// Not a segment this version wrote whole: it is dropped with
			// what follows it.
			f.Close()
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("reqlog: %w", err)
			}
			broken = true
			continue
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return fmt.Errorf("reqlog: %w", err)
		}
		checkPayloads := i >= len(nos)-2
		off := int64(segHdrLen)
		for off < st.Size() {
			h := make([]byte, chunkHdrLen)
			if _, err := f.ReadAt(h, off); err != nil {
				broken = true
				break
			}
			ch, err := readChunkHeader(h)
			if err == nil && off+chunkHdrLen+int64(ch.size) > st.Size() {
				err = errBadChunk
			}
			if err == nil && ch.first < l.next {
				// Numbers only grow (a cap's drops leave gaps): this chunk
				// is not one the log wrote after the last.
				err = errBadChunk
			}
			if err == nil && checkPayloads {
				_, buf, err = seg.readChunk(off, ch.size, buf)
			}
			if err != nil {
				broken = true
				break
			}
			l.chunks = append(l.chunks, &chunk{log: l, seg: seg, off: off, size: ch.size, first: ch.first, n: ch.n})
			seg.live++
			l.next = ch.first + int64(ch.n)
			l.kept += int64(ch.n)
			off += chunkHdrLen + int64(ch.size)
		}
		if broken {
			if err := f.Truncate(off); err != nil {
				f.Close()
				return fmt.Errorf("reqlog: %w", err)
			}
			l.m.log.Warn("recorded requests: a segment ends in a torn chunk; it is cut there", "file", path, "at", off)
		}
		seg.size = off
		l.segs = append(l.segs, seg)
		l.nextSeg = no + 1
	}
	if l.nextSeg == 0 {
		l.nextSeg = 1
	}
	return nil
}

func (l *Log) segPath(no int) string {
	return filepath.Join(l.dir, fmt.Sprintf("%08d%s", no, segSuffix))
}

func (l *Log) newActive() {
	l.active = make([]byte, chunkHdrLen, min(4<<10, chunkHdrLen+l.m.opts.ChunkBytes))
	l.activeN, l.activeFirst = 0, l.next
}

// Append records r; it copies what it keeps.
func (l *Log) Append(r *message.Request) {
	b := scratch.Get().(*[]byte)
	l.append(b, AppendRecord((*b)[:0], r))
}

// AppendJSON records a request given as mb's JSON, received at ts (a
// request Mountebank recorded in its datadir); it copies what it keeps.
func (l *Log) AppendJSON(ts time.Time, js []byte) {
	b := scratch.Get().(*[]byte)
	l.append(b, AppendJSONRecord((*b)[:0], ts, js))
}

// Next is the number the next request recorded gets (Cursor.Next's).
func (l *Log) Next() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

// append adds rec, made in the scratch buffer b, which it gives back.
func (l *Log) append(b *[]byte, rec []byte) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		*b = rec
		scratch.Put(b)
		return
	}
	if l.activeN == 0 {
		l.activeSince = time.Now()
	}
	l.lastTime = orderTime(rec, l.lastTime)
	if need := len(l.active) + len(rec) + binary.MaxVarintLen64; need > cap(l.active) {
		// Past the first few requests, a chunk takes its full size at
		// once rather than by doubling (which would waste half of it).
		grown := make([]byte, len(l.active), max(need, chunkHdrLen+l.m.opts.ChunkBytes+binary.MaxVarintLen64))
		copy(grown, l.active)
		l.active = grown
	}
	l.active = appendFramed(l.active, rec)
	l.activeN++
	l.next++
	l.kept++
	var sealed *chunk
	if len(l.active)-chunkHdrLen >= l.m.opts.ChunkBytes {
		sealed = l.sealLocked()
	}
	l.trimLocked()
	l.mu.Unlock()
	if cap(rec) <= 64<<10 {
		*b = rec
		scratch.Put(b)
	}
	if sealed != nil {
		l.m.enqueue(sealed)
	}
}

var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func appendFramed(dst, rec []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(rec)))
	return append(dst, rec...)
}

// sealLocked turns the active chunk into a sealed one, placed at the end
// of the last segment (a new one past SegmentBytes), and returns it for
// the writer; nil when there is nothing to seal, or no file to put it in
// (its requests are then lost, and counted as dropped).
func (l *Log) sealLocked() *chunk {
	if l.activeN == 0 {
		return nil
	}
	buf := l.active
	putChunkHeader(buf, l.activeN, l.activeFirst)
	c := &chunk{log: l, size: len(buf) - chunkHdrLen, first: l.activeFirst, n: l.activeN, buf: buf}
	payload := buf[chunkHdrLen:]
	c.mem.Store(&payload)
	l.newActive()
	seg, err := l.segmentFor(len(buf))
	if err != nil {
		l.m.log.Error("recorded requests: cannot write; these are lost", "log", l.name, "requests", c.n, "err", err)
		l.kept -= int64(c.n)
		l.dropped += int64(c.n)
		return nil
	}
	c.seg, c.off = seg, seg.size
	seg.size += int64(len(buf))
	seg.live++
	seg.acquire() // for the writer
	l.chunks = append(l.chunks, c)
	l.pending.Add(1)
	return c
}

// segmentFor returns the segment the next chunk of size bytes goes to.
func (l *Log) segmentFor(size int) (*segment, error) {
	if n := len(l.segs); n > 0 {
		s := l.segs[n-1]
		if s.size == segHdrLen || s.size+int64(size) <= l.m.opts.SegmentBytes {
			return s, nil
		}
	}
	no := l.nextSeg
	path := l.segPath(no)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("reqlog: %w", err)
	}
	if _, err := f.WriteAt(segHeader(), 0); err != nil {
		f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("reqlog: %w", err)
	}
	l.nextSeg++
	s := &segment{f: f, path: path, no: no, size: segHdrLen, refs: 1}
	l.segs = append(l.segs, s)
	return s, nil
}

// trimLocked drops the oldest requests past the cap: whole chunks (and
// segments, once none of theirs is left) when it can, else by skipping
// into the oldest chunk or cutting the active one.
func (l *Log) trimLocked() {
	for l.max > 0 && l.kept > l.max {
		over := l.kept - l.max
		if !l.warnedCap {
			l.warnedCap = true
			l.m.log.Warn("recorded requests: over the cap; the oldest are dropped from now on", "log", l.name, "max", l.max)
		}
		if len(l.chunks) == 0 {
			l.cutActive(int(min(over, int64(l.activeN))))
			continue
		}
		c := l.chunks[0]
		left := int64(c.n - l.skip)
		if over < left {
			l.skip += int(over)
			l.kept -= over
			l.dropped += over
			continue
		}
		l.kept -= left
		l.dropped += left
		l.skip = 0
		l.chunks[0] = nil
		l.chunks = l.chunks[1:]
		l.unlive(c.seg)
	}
}

// cutActive drops the first n requests of the active chunk.
func (l *Log) cutActive(n int) {
	p := l.active[chunkHdrLen:]
	at := 0
	for range n {
		v, k := binary.Uvarint(p[at:])
		at += k + int(v)
	}
	l.active = append(l.active[:chunkHdrLen], p[at:]...)
	l.activeN -= n
	l.activeFirst += int64(n)
	l.kept -= int64(n)
	l.dropped += int64(n)
}

// unlive notes that seg holds one chunk fewer; an old segment left with
// none is deleted.
func (l *Log) unlive(seg *segment) {
	if seg == nil {
		return
	}
	seg.live--
	if seg.live > 0 || len(l.segs) == 0 || seg == l.segs[len(l.segs)-1] {
		return
	}
	i := slices.Index(l.segs, seg)
	if i < 0 {
		return
	}
	l.segs = slices.Delete(l.segs, i, i+1)
	if err := os.Remove(seg.path); err != nil {
		l.m.log.Warn("recorded requests: cannot remove a dropped segment", "file", seg.path, "err", err)
	}
	seg.release()
}

// lose takes a chunk whose write failed out of the log: its requests are
// counted as dropped.
func (l *Log) lose(c *chunk, err error) {
	l.m.log.Error("recorded requests: cannot write; these are lost", "log", l.name, "requests", c.n, "err", err)
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.Index(l.chunks, c)
	if i < 0 {
		return // dropped meanwhile
	}
	n := c.n
	if i == 0 {
		n -= l.skip
		l.skip = 0
	}
	l.chunks = slices.Delete(l.chunks, i, i+1)
	l.kept -= int64(n)
	l.dropped += int64(n)
	l.unlive(c.seg)
}

// flushOlder seals the active chunk when it has waited since before t.
func (l *Log) flushOlder(t time.Time) {
	l.mu.Lock()
	var c *chunk
	if !l.closed && l.activeN > 0 && l.activeSince.Before(t) {
		c = l.sealLocked()
	}
	l.mu.Unlock()
	if c != nil {
		l.m.enqueue(c)
	}
}

// SetMax changes the cap (0: none), dropping what is now over it.
func (l *Log) SetMax(max int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.max = max
	l.trimLocked()
}

// Len returns how many requests the log holds.
func (l *Log) Len() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kept
}

// Dropped returns how many requests the cap dropped (or a failed write
// lost) since the log was opened or Reset.
func (l *Log) Dropped() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}

// Max returns the cap (0: none).
func (l *Log) Max() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.max
}

// Reset forgets every request, as DELETE /imposters/:id/savedRequests
// does; snapshots taken before still read theirs.
func (l *Log) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.dropSegments()
	l.chunks, l.skip, l.kept, l.dropped, l.warnedCap = nil, 0, 0, 0, false
	l.newActive()
}

// dropSegments deletes every segment file; open snapshots keep reading
// theirs until they close.
func (l *Log) dropSegments() {
	for _, s := range l.segs {
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.m.log.Warn("recorded requests: cannot remove a segment", "file", s.path, "err", err)
		}
		s.release()
	}
	l.segs = nil
}

// Close ends the log. keep asks for its requests to outlive it, which
// they do only where the manager keeps files (--datadir): the process
// ends. Otherwise (the imposter is deleted or replaced) its files go.
func (l *Log) Close(keep bool) error {
	keep = keep && l.m.opts.Keep
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	var c *chunk
	if keep {
		c = l.sealLocked()
	}
	l.mu.Unlock()
	if c != nil {
		l.m.enqueue(c)
	}
	l.pending.Wait()
	l.mu.Lock()
	var errs []error
	if keep {
		for _, s := range l.segs {
			errs = append(errs, s.f.Sync())
			s.release()
		}
		l.segs = nil
	} else {
		l.dropSegments()
		errs = append(errs, os.RemoveAll(l.dir))
	}
	l.chunks, l.active = nil, nil
	l.mu.Unlock()
	l.m.mu.Lock()
	if l.m.logs[l.name] == l {
		delete(l.m.logs, l.name)
	}
	l.m.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("reqlog: closing %s: %w", l.name, err)
	}
	return nil
}

// Snapshot is the log's requests at one moment, to read at leisure: later
// requests, drops and resets do not change it. Close it when done.
type Snapshot struct {
	chunks      []*chunk
	skip        int
	active      []byte // a copy of the active chunk's payload
	activeN     int
	activeFirst int64
	more        bool // SnapshotFrom left later requests out
	segs        []*segment
	n           int64
	buf         []byte
	offs        [][2]int
}

// Snapshot returns the log's requests as they are now.
func (l *Log) Snapshot() *Snapshot { return l.SnapshotFrom(0, 0) }

// SnapshotFrom returns the log's requests numbered seq and up (a number
// Cursor.Next gave; 0 for the oldest). With maxBytes > 0 it stops at the
// first chunk past that many bytes of records, and More says so: a page
// for another member of a cluster.
func (l *Log) SnapshotFrom(seq int64, maxBytes int) *Snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return &Snapshot{}
	}
	// The first chunk holding seq or later.
	i, _ := slices.BinarySearchFunc(l.chunks, seq, func(c *chunk, seq int64) int {
		switch {
		case c.first+int64(c.n) <= seq:
			return -1
		case c.first > seq:
			return 1
		}
		return 0
	})
	s := &Snapshot{}
	if i < len(l.chunks) {
		s.skip = int(max(seq-l.chunks[i].first, 0))
		if i == 0 {
			s.skip = max(s.skip, l.skip)
		}
	}
	bytes := 0
	for j := i; j < len(l.chunks); j++ {
		if maxBytes > 0 && bytes >= maxBytes {
			s.more = true
			break
		}
		c := l.chunks[j]
		s.chunks = append(s.chunks, c)
		n := c.n
		if j == i {
			n -= s.skip
		}
		s.n += int64(n)
		bytes += c.size
	}
	if !s.more {
		s.active = slices.Clone(l.active[chunkHdrLen:])
		s.activeN, s.activeFirst = l.activeN, l.activeFirst
		if skip := seq - l.activeFirst; skip > 0 && len(s.chunks) == 0 {
			// seq is within the active chunk: cut the copy there.
			k := int(min(skip, int64(s.activeN)))
			at := 0
			for range k {
				v, w := binary.Uvarint(s.active[at:])
				at += w + int(v)
			}
			s.active = s.active[at:]
			s.activeN -= k
			s.activeFirst += int64(k)
		}
		s.n += int64(s.activeN)
	}
	var last *segment
	for _, c := range s.chunks {
		if c.seg != last {
			last = c.seg
			last.acquire()
			s.segs = append(s.segs, last)
		}
	}
	return s
}

// Len returns how many requests the snapshot holds.
func (s *Snapshot) Len() int64 { return s.n }

// More reports whether the log held later requests than the snapshot
// (SnapshotFrom with maxBytes).
func (s *Snapshot) More() bool { return s.more }

// Close lets go of the files the snapshot reads.
func (s *Snapshot) Close() {
	for _, seg := range s.segs {
		seg.release()
	}
	s.segs, s.chunks, s.active = nil, nil, nil
}

// payload returns chunk i's records; the last "chunk" is the active one.
func (s *Snapshot) payload(i int) ([]byte, error) {
	if i == len(s.chunks) {
		return s.active, nil
	}
	c := s.chunks[i]
	if p := c.mem.Load(); p != nil {
		return *p, nil
	}
	p, buf, err := c.seg.readChunk(c.off, c.size, s.buf)
	s.buf = buf
	return p, err
}

// count returns how many requests of chunk i the snapshot holds, how many
// it skips at its start, and the number of its first.
func (s *Snapshot) count(i int) (n, skip int, first int64) {
	switch {
	case i == len(s.chunks):
		return s.activeN, 0, s.activeFirst
	case i == 0:
		return s.chunks[0].n - s.skip, s.skip, s.chunks[0].first
	}
	return s.chunks[i].n, 0, s.chunks[i].first
}

// Cursor reads a snapshot oldest first.
type Cursor struct {
	s    *Snapshot
	i    int // the chunk being read; len(s.chunks) is the active one
	p    []byte
	seq  int64
	from int64 // requests still to skip
	err  error
	done bool
	load bool // p is to be loaded for chunk i
}

// Cursor returns a cursor at the from-th request (0 is the oldest). It
// reads the snapshot's buffers: one cursor at a time per snapshot.
func (s *Snapshot) Cursor(from int64) *Cursor { return &Cursor{s: s, from: from, load: true} }

// Next returns the next request's number and record, which is valid until
// the next call; ok is false at the end or on an error (Err).
func (c *Cursor) Next() (seq int64, rec []byte, ok bool) {
	for !c.done {
		if c.load {
			if c.i > len(c.s.chunks) {
				c.done = true
				break
			}
			n, skip, first := c.s.count(c.i)
			if c.from >= int64(n) {
				c.from -= int64(n)
				c.i++
				continue
			}
			p, err := c.s.payload(c.i)
			if err != nil {
				c.err, c.done = err, true
				break
			}
			skip += int(c.from)
			c.from = 0
			c.seq = first
			for range skip {
				v, k := binary.Uvarint(p)
				if k <= 0 || v > uint64(len(p)-k) {
					c.err, c.done = errCorrupt, true
					return 0, nil, false
				}
				p = p[k+int(v):]
				c.seq++
			}
			c.p, c.load = p, false
		}
		if len(c.p) == 0 {
			c.i++
			c.load = true
			continue
		}
		v, k := binary.Uvarint(c.p)
		if k <= 0 || v > uint64(len(c.p)-k) {
			c.err, c.done = errCorrupt, true
			break
		}
		rec = c.p[k : k+int(v)]
		c.p = c.p[k+int(v):]
		seq = c.seq
		c.seq++
		return seq, rec, true
	}
	return 0, nil, false
}

// Err returns the error that ended the cursor, if any.
func (c *Cursor) Err() error { return c.err }

// Each calls fn with each request's record from the from-th (0 is the
// oldest) on, oldest first, until fn returns false. rec is valid only
// until fn returns.
func (s *Snapshot) Each(from int64, fn func(rec []byte) bool) error {
	c := s.Cursor(from)
	for {
		_, rec, ok := c.Next()
		if !ok {
			return c.Err()
		}
		if !fn(rec) {
			return nil
		}
	}
}

// EachReverse is Each newest first: from counts from the newest.
func (s *Snapshot) EachReverse(from int64, fn func(rec []byte) bool) error {
	for i := len(s.chunks); i >= 0; i-- {
		n, skip, _ := s.count(i)
		if from >= int64(n) {
			from -= int64(n)
			continue
		}
		p, err := s.payload(i)
		if err != nil {
			return err
		}
		if s.offs, err = recordOffsets(p, s.offs); err != nil {
			return err
		}
		for j := len(s.offs) - 1 - int(from); j >= skip; j-- {
			if !fn(p[s.offs[j][0]:s.offs[j][1]]) {
				return nil
			}
		}
		from = 0
	}
	return nil
}
