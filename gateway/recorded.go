package gateway

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/reqlog"
)

// An answer that shows imposters with their recorded requests (GET
// /imposters/:id, DELETE /imposters, POST .../stubs and the others mb
// answers with the whole imposter) is written in three steps: the JSON
// without the requests, each imposter's marked by a string no definition
// can hold; that JSON indented, as writeRaw would; and the requests,
// streamed in place of each mark, indented as they would have been. An
// answer of a million requests thus never exists whole in memory, and
// one that fits in spillBytes goes out with its Content-Length, as before.

// spillBytes is the size up to which an answer is held and sent with a
// Content-Length; past it the answer streams (chunked).
const spillBytes = 1 << 20

// markPrefix starts every mark: random per process, so no imposter
// definition can hold one.
var markPrefix = func() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "riftgate-requests-" + hex.EncodeToString(b[:]) + "-"
}()

// recordStream is one source of records, oldest first.
type recordStream interface {
	next(ctx context.Context) (rec []byte, ok bool)
	err() error
	close()
}

// localStream reads a snapshot of an imposter's log.
type localStream struct {
	s *reqlog.Snapshot
	c *reqlog.Cursor
}

func newLocalStream(imp *imposter.Imposter) recordStream {
	s := imp.RecordedRequests()
	if s == nil {
		return emptyStream{}
	}
	return &localStream{s: s, c: s.Cursor(0)}
}

func (l *localStream) next(context.Context) ([]byte, bool) {
	_, rec, ok := l.c.Next()
	return rec, ok
}

func (l *localStream) err() error { return l.c.Err() }
func (l *localStream) close()     { l.s.Close() }

type emptyStream struct{}

func (emptyStream) next(context.Context) ([]byte, bool) { return nil, false }
func (emptyStream) err() error                          { return nil }
func (emptyStream) close()                              {}

// remoteStream adapts a member's reqlog.Stream.
type remoteStream struct{ reqlog.Stream }

func (r remoteStream) next(ctx context.Context) ([]byte, bool) { return r.Next(ctx) }
func (r remoteStream) err() error                              { return r.Err() }
func (r remoteStream) close()                                  { r.Close() }

// mergedStream merges streams by the time of their requests; on equal
// times the earlier stream (this node's is first) goes first, as a stable
// sort of their concatenation would order them.
type mergedStream struct {
	log     *slog.Logger
	streams []recordStream
	heads   mergeHeap
	started bool
	failed  error
}

type mergeHead struct {
	t   time.Time
	i   int
	rec []byte
}

type mergeHeap []mergeHead

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(a, b int) bool {
	if c := h[a].t.Compare(h[b].t); c != 0 {
		return c < 0
	}
	return h[a].i < h[b].i
}
func (h mergeHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.(mergeHead)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func mergeStreams(log *slog.Logger, streams []recordStream) recordStream {
	if len(streams) == 1 {
		return streams[0]
	}
	return &mergedStream{log: log, streams: streams}
}

// advance reads stream i's next record onto the heap. A member's stream
// that fails is logged and left out: the answer has what the others had.
func (m *mergedStream) advance(ctx context.Context, i int) {
	rec, ok := m.streams[i].next(ctx)
	if !ok {
		if err := m.streams[i].err(); err != nil {
			if i == 0 {
				m.failed = err // this node's own: the answer cannot be whole
			} else {
				m.log.Warn("recorded requests of a member are cut short", "err", err)
			}
		}
		return
	}
	t, err := reqlog.RecordTime(rec)
	if err != nil {
		m.advance(ctx, i)
		return
	}
	heap.Push(&m.heads, mergeHead{t, i, rec})
}

func (m *mergedStream) next(ctx context.Context) ([]byte, bool) {
	if !m.started {
		m.started = true
		for i := range m.streams {
			m.advance(ctx, i)
		}
	} else if len(m.heads) > 0 {
		// The record handed out last was the top's: only now may its
		// stream move on (its buffer is reused).
		top := heap.Pop(&m.heads).(mergeHead)
		m.advance(ctx, top.i)
	}
	if m.failed != nil || len(m.heads) == 0 {
		return nil, false
	}
	return m.heads[0].rec, true
}

func (m *mergedStream) err() error { return m.failed }

func (m *mergedStream) close() {
	for _, s := range m.streams {
		s.close()
	}
}

// streamedImposter is one imposter in an answer: its JSON (a View with a
// RequestsMark) and the stream of its requests.
type streamedImposter struct {
	mark   string
	stream recordStream
}

// answer is an admin answer that shows imposters with their requests.
type answer struct {
	g     *gateway
	parts []streamedImposter
}

// imposter renders imp for the answer as v asks, with its requests
// marked and their stream taken now, so that numberOfRequests and the
// requests shown agree. elsewhere are the other members' streams (a
// cluster's merged view).
func (a *answer) imposter(imp *imposter.Imposter, v imposter.View, elsewhere []reqlog.Stream) json.RawMessage {
	if v.Replayable || v.List {
		return imp.JSON(v)
	}
	v.RequestsMark = markPrefix + strconv.Itoa(len(a.parts))
	streams := []recordStream{newLocalStream(imp)}
	for _, r := range elsewhere {
		streams = append(streams, remoteStream{r})
	}
	a.parts = append(a.parts, streamedImposter{v.RequestsMark, mergeStreams(a.g.log, streams)})
	return imp.JSON(v)
}

// close lets go of every stream the answer did not write.
func (a *answer) close() {
	for _, p := range a.parts {
		p.stream.close()
	}
	a.parts = nil
}

// write writes doc, indented, with each part's requests in place of its
// mark.
func (a *answer) write(ctx context.Context, w http.ResponseWriter, status int, doc json.RawMessage) {
	defer a.close()
	var ind bytes.Buffer
	if err := json.Indent(&ind, doc, "", "  "); err != nil {
		writeErr(w, err)
		return
	}
	out := &spillWriter{w: w, status: status}
	streams := make(map[string]recordStream, len(a.parts))
	for _, p := range a.parts {
		streams[p.mark] = p.stream
	}
	b := ind.Bytes()
	open := []byte(`"` + markPrefix)
	for {
		at := bytes.Index(b, open)
		if at < 0 {
			break
		}
		end := bytes.IndexByte(b[at+1:], '"')
		if end < 0 {
			break
		}
		mark := string(b[at+1 : at+1+end])
		s, ok := streams[mark]
		if !ok {
			break // not one of ours: a definition cannot hold a mark
		}
		delete(streams, mark) // a mark is written once
		line := bytes.LastIndexByte(b[:at], '\n') + 1
		depth := len(b[line:at]) - len(bytes.TrimLeft(b[line:at], " "))
		out.write(b[:at])
		if err := writeRequests(ctx, out, s, depth); err != nil {
			a.g.log.Error("streaming recorded requests", "err", err)
			if !out.committed {
				writeErr(w, mberr.New(mberr.CannotStartServer, "cannot read the recorded requests: "+err.Error()))
				return
			}
			// Headers are gone: the client must see a broken answer,
			// not a short one.
			panic(http.ErrAbortHandler)
		}
		b = b[at+1+end+1:]
	}
	out.write(b)
	out.finish()
}

// writeRequests writes a JSON array of the stream's requests, as
// json.Indent would lay it out at depth spaces (the key's).
func writeRequests(ctx context.Context, out *spillWriter, s recordStream, depth int) error {
	prefix := make([]byte, 0, depth+3)
	prefix = append(prefix, '\n')
	for range depth + 2 {
		prefix = append(prefix, ' ')
	}
	var (
		rec      reqlog.Record
		js, ind  bytes.Buffer
		n        int
		elemPref = string(prefix[1:])
	)
	out.write([]byte("["))
	for {
		b, ok := s.next(ctx)
		if !ok {
			break
		}
		if err := rec.Decode(b); err != nil {
			return err
		}
		js.Reset()
		rec.AppendJSON(&js)
		ind.Reset()
		if err := json.Indent(&ind, js.Bytes(), elemPref, "  "); err != nil {
			return fmt.Errorf("a recorded request: %w", err)
		}
		if n > 0 {
			out.write([]byte(","))
		}
		out.write(prefix)
		out.write(ind.Bytes())
		n++
		if out.err != nil {
			return nil // the client is gone: nothing more to say to it
		}
	}
	if err := s.err(); err != nil {
		return err
	}
	if n > 0 {
		out.write(prefix[:depth+1])
	}
	out.write([]byte("]"))
	return nil
}

// spillWriter holds an answer until it passes spillBytes, then streams it.
type spillWriter struct {
	w         http.ResponseWriter
	status    int
	buf       bytes.Buffer
	bw        *bufio.Writer
	committed bool
	err       error
}

func (s *spillWriter) write(p []byte) {
	if s.err != nil {
		return
	}
	if !s.committed {
		s.buf.Write(p)
		if s.buf.Len() > spillBytes {
			s.commit()
		}
		return
	}
	_, s.err = s.bw.Write(p)
}

func (s *spillWriter) commit() {
	s.committed = true
	s.w.Header().Set("Content-Type", "application/json; charset=utf-8")
	s.w.WriteHeader(s.status)
	s.bw = bufio.NewWriterSize(s.w, 64<<10)
	_, s.err = s.bw.Write(s.buf.Bytes())
	s.buf = bytes.Buffer{}
}

func (s *spillWriter) finish() {
	if !s.committed {
		writeBytes(s.w, s.status, s.buf.Bytes())
		return
	}
	if s.err == nil {
		s.err = s.bw.Flush()
	}
}

// writeImposter answers with one imposter as v shows it, its requests
// streamed; with a cluster's recordings (GET /imposters/:id, unless
// ?local=true) they are every member's, merged by time.
func (g *gateway) writeImposter(w http.ResponseWriter, r *http.Request, status int, imp *imposter.Imposter, v imposter.View, rc Recordings) {
	a := &answer{g: g}
	var elsewhere []reqlog.Stream
	if rc != nil && !v.Replayable && !v.List {
		count, streams, missing := rc.Gather(r.Context(), imp.Port())
		v.Elsewhere, elsewhere = &imposter.Recorded{Count: count}, streams
		if len(missing) > 0 {
			// What they recorded is not in the answer.
			w.Header().Set("X-Riftgate-Unreachable-Members", strings.Join(missing, ","))
		}
	}
	if st := imp.Recorded(); st.Dropped > 0 {
		w.Header().Set("X-Riftgate-Dropped-Requests", strconv.FormatInt(st.Dropped, 10))
	}
	doc := a.imposter(imp, v, elsewhere)
	a.write(r.Context(), w, status, doc)
}

// writeImposterList answers {"imposters": [...]} with every imposter as v
// shows it, each one's own requests streamed.
func (g *gateway) writeImposterList(w http.ResponseWriter, r *http.Request, status int, imps []*imposter.Imposter, v imposter.View) {
	a := &answer{g: g}
	list := make([]json.RawMessage, len(imps))
	for i, imp := range imps {
		list[i] = a.imposter(imp, v, nil)
	}
	a.write(r.Context(), w, status, impostersDoc(list))
}

// impostersDoc is {"imposters": list}, the list as it is (json.Marshal
// would escape HTML in it, which mb does not).
func impostersDoc(list []json.RawMessage) json.RawMessage {
	b := []byte(`{"imposters":[`)
	for i, imp := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, imp...)
	}
	return append(b, "]}"...)
}

// localRecordings lends this node's recordings to the other members of a
// cluster (reqlog.Source).
type localRecordings struct{ g *gateway }

func (l localRecordings) Count(port int) (int64, bool) {
	imp, ok := l.g.get(port)
	if !ok {
		return 0, false
	}
	return imp.NumberOfRequests(), true
}

func (l localRecordings) Page(port int, from int64, maxBytes int) (reqlog.Page, bool, error) {
	imp, ok := l.g.get(port)
	if !ok {
		return reqlog.Page{Next: from}, false, nil
	}
	log := imp.RecordedLog()
	if log == nil {
		return reqlog.Page{Next: from}, true, nil
	}
	s := log.SnapshotFrom(from, maxBytes)
	defer s.Close()
	page := reqlog.Page{Next: from, More: s.More()}
	var buf []byte
	var ends []int
	c := s.Cursor(0)
	for len(buf) < maxBytes {
		seq, rec, ok := c.Next()
		if !ok {
			break
		}
		buf = append(buf, rec...)
		ends = append(ends, len(buf))
		page.Next = seq + 1
		if len(buf) >= maxBytes {
			page.More = true // perhaps: the next page says
		}
	}
	if err := c.Err(); err != nil {
		return reqlog.Page{}, true, err
	}
	start := 0
	for _, end := range ends {
		page.Records = append(page.Records, buf[start:end:end])
		start = end
	}
	return page, true, nil
}

func (l localRecordings) Reset(port int) {
	if imp, ok := l.g.get(port); ok {
		imp.ResetRequests()
	}
}
