package gateway

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"unicode/utf8"
)

// LogEntry is one line of GET /logs, in mb's shape.
type LogEntry struct {
	Level     string `json:"level"`
	Message   string `json:"message"`
	Timestamp string `json:"timestamp"`
}

// logRing keeps the most recent log entries for GET /logs, and hands new
// ones to the streams that follow the log. It is a circular buffer of max
// entries, each message cut at maxLogMessage bytes: a log line per request
// (an upstream that refuses every proxied request) costs the same bounded
// memory, and no copy of the whole ring per line, however long it lasts.
type logRing struct {
	mu      sync.Mutex
	entries []LogEntry // circular once full: the oldest at head
	head    int
	first   int // absolute index of the oldest entry
	max     int
	subs    map[chan indexed]struct{}
}

// maxLogMessage bounds the text an entry keeps of its message (the log
// itself, on stdout or in --logfile, has all of it).
const maxLogMessage = 4 << 10

// indexed is an entry with its absolute index, a stream's event id.
type indexed struct {
	i int
	e LogEntry
}

func newLogRing(max int) *logRing { return &logRing{max: max} }

// at returns the i-th oldest entry held.
func (r *logRing) at(i int) LogEntry { return r.entries[(r.head+i)%len(r.entries)] }

func (r *logRing) add(e LogEntry) {
	if len(e.Message) > maxLogMessage {
		cut := maxLogMessage
		for cut > 0 && !utf8.RuneStart(e.Message[cut]) {
			cut--
		}
		e.Message = e.Message[:cut] + "… (cut; the log has it whole)"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.entries) < r.max {
		r.entries = append(r.entries, e)
	} else {
		r.entries[r.head] = e
		r.head = (r.head + 1) % len(r.entries)
		r.first++
	}
	for ch := range r.subs {
		select {
		case ch <- indexed{r.first + len(r.entries) - 1, e}:
		default: // a reader that fell this far behind misses lines; the ids show the gap
		}
	}
}

// follow returns the entries after index after (the last backlog ones when
// after is negative), and a channel of those added from then on; stop ends
// the subscription.
func (r *logRing) follow(after, backlog int) (past []indexed, next <-chan indexed, stop func()) {
	ch := make(chan indexed, 1024)
	r.mu.Lock()
	defer r.mu.Unlock()
	lo := max(len(r.entries)-backlog, 0)
	if after >= 0 {
		lo = min(max(after+1-r.first, 0), len(r.entries))
	}
	for i := lo; i < len(r.entries); i++ {
		past = append(past, indexed{r.first + i, r.at(i)})
	}
	if r.subs == nil {
		r.subs = make(map[chan indexed]struct{})
	}
	r.subs[ch] = struct{}{}
	return past, ch, func() {
		r.mu.Lock()
		delete(r.subs, ch)
		r.mu.Unlock()
	}
}

// slice returns entries with absolute indexes in [start, end], as mb's
// startIndex and endIndex select them.
func (r *logRing) slice(start, end int) []LogEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	lo := max(start-r.first, 0)
	hi := len(r.entries)
	if end >= 0 && end-r.first+1 < hi {
		hi = end - r.first + 1
	}
	if lo >= hi {
		return []LogEntry{}
	}
	out := make([]LogEntry, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, r.at(i))
	}
	return out
}

// teeHandler passes records on and keeps a copy for GET /logs.
type teeHandler struct {
	next slog.Handler
	ring *logRing
}

func (t teeHandler) Enabled(ctx context.Context, l slog.Level) bool { return t.next.Enabled(ctx, l) }

func (t teeHandler) Handle(ctx context.Context, r slog.Record) error {
	var b strings.Builder
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "imposter" {
			b.WriteString("[" + a.Value.String() + "] ")
		}
		return true
	})
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "imposter" {
			b.WriteString(" " + a.Key + "=" + a.Value.String())
		}
		return true
	})
	t.ring.add(LogEntry{
		Level:     strings.ToLower(r.Level.String()),
		Message:   b.String(),
		Timestamp: r.Time.UTC().Format("2006-01-02T15:04:05.000Z"),
	})
	return t.next.Handle(ctx, r)
}

func (t teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return attrsHandler{t, as}
}

func (t teeHandler) WithGroup(name string) slog.Handler {
	return teeHandler{t.next.WithGroup(name), t.ring}
}

// attrsHandler carries attributes added with Logger.With into the ring's
// text as well as to the next handler.
type attrsHandler struct {
	t     teeHandler
	attrs []slog.Attr
}

func (h attrsHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.t.Enabled(ctx, l) }

func (h attrsHandler) Handle(ctx context.Context, r slog.Record) error {
	r2 := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r2.AddAttrs(h.attrs...)
	r.Attrs(func(a slog.Attr) bool { r2.AddAttrs(a); return true })
	return h.t.Handle(ctx, r2)
}

func (h attrsHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return attrsHandler{h.t, append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h attrsHandler) WithGroup(name string) slog.Handler { return h.t.WithGroup(name) }
