package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// logConfig is mb's logging configuration: a level and up to two
// transports, each with a format ("json", or a template using %level,
// %message and %timestamp).
type logConfig struct {
	level         slog.Level
	console       bool
	consoleFormat string
	filePath      string // "" means no logfile
	fileFormat    string
}

const lineFormat = "%level: %message"

// logConfigFrom derives the logging setup the way mb does: from --log JSON
// when given, else from --loglevel, --logfile and --nologfile.
func logConfigFrom(s *settings) (logConfig, error) {
	if raw := s.str("log"); raw != "" {
		var c struct {
			Level      string `json:"level"`
			Transports *struct {
				Console *struct {
					Format string `json:"format"`
				} `json:"console"`
				File *struct {
					Path   string `json:"path"`
					Format string `json:"format"`
				} `json:"file"`
			} `json:"transports"`
		}
		if err := json.Unmarshal([]byte(raw), &c); err != nil {
			return logConfig{}, fmt.Errorf("cannot parse --log as JSON: %w", err)
		}
		lc := logConfig{consoleFormat: lineFormat, fileFormat: "json"}
		level, err := parseLevel(c.Level)
		if err != nil {
			return logConfig{}, err
		}
		lc.level = level
		if c.Transports == nil {
			// mb's default when --log names no transports: only the logfile.
			lc.filePath = "mb.log"
			return lc, nil
		}
		if t := c.Transports.Console; t != nil {
			lc.console = true
			if t.Format != "" {
				lc.consoleFormat = t.Format
			}
		}
		if t := c.Transports.File; t != nil {
			lc.filePath = t.Path
			if lc.filePath == "" {
				lc.filePath = "mb.log"
			}
			if t.Format != "" {
				lc.fileFormat = t.Format
			}
		}
		return lc, nil
	}
	level, err := parseLevel(s.str("loglevel"))
	if err != nil {
		return logConfig{}, err
	}
	lc := logConfig{level: level, console: true, consoleFormat: lineFormat, fileFormat: "json"}
	if !s.boolean("nologfile") {
		lc.filePath = s.str("logfile")
	}
	return lc, nil
}

func parseLevel(name string) (slog.Level, error) {
	switch name {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q (choices: debug, info, warn, error)", name)
}

// openLogfile starts a fresh logfile as mb does, keeping the previous one
// as <name>1<ext> so that GET /logs shows only this process.
func openLogfile(path string) (*os.File, error) {
	if _, err := os.Stat(path); err == nil {
		ext := filepath.Ext(path)
		if err := os.Rename(path, strings.TrimSuffix(path, ext)+"1"+ext); err != nil {
			return nil, fmt.Errorf("rotate logfile: %w", err)
		}
	}
	// mb's file transport makes the directories it needs.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open logfile: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open logfile: %w", err)
	}
	return f, nil
}

// logSink is where every handler derived from one logger writes; the mutex
// keeps lines whole.
type logSink struct {
	mu    sync.Mutex
	dests []logDest
	now   func() time.Time
}

type logDest struct {
	w      io.Writer
	format string
}

// lineHandler is a slog.Handler writing mb-style log lines: "info: [riftgate:2525] message"
// on the console and JSON objects {"level","message","timestamp"} in the logfile.
// Attributes follow the message as key=value.
type lineHandler struct {
	sink   *logSink
	level  slog.Leveler
	prefix string
	attrs  string
	group  string
}

func newLineHandler(sink *logSink, level slog.Leveler, prefix string) *lineHandler {
	return &lineHandler{sink: sink, level: level, prefix: prefix}
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var msg strings.Builder
	msg.WriteString(h.prefix)
	msg.WriteString(r.Message)
	msg.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&msg, h.group, a)
		return true
	})
	level := levelName(r.Level)
	ts := r.Time
	if ts.IsZero() {
		ts = h.sink.now()
	}
	stamp := ts.UTC().Format("2006-01-02T15:04:05.000Z")
	h.sink.mu.Lock()
	defer h.sink.mu.Unlock()
	var firstErr error
	for _, d := range h.sink.dests {
		if _, err := io.WriteString(d.w, formatLine(d.format, level, msg.String(), stamp)); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("write log: %w", err)
		}
	}
	return firstErr
}

func (h *lineHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range attrs {
		appendAttr(&b, h.group, a)
	}
	c := *h
	c.attrs = b.String()
	return &c
}

func (h *lineHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group = h.group + name + "."
	return &c
}

func appendAttr(b *strings.Builder, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		g := group
		if a.Key != "" {
			g += a.Key + "."
		}
		for _, sub := range a.Value.Group() {
			appendAttr(b, g, sub)
		}
		return
	}
	b.WriteByte(' ')
	b.WriteString(group)
	b.WriteString(a.Key)
	b.WriteByte('=')
	v := a.Value.String()
	if v == "" || strings.ContainsAny(v, " \t\n\"=") {
		v = fmt.Sprintf("%q", v)
	}
	b.WriteString(v)
}

// levelName is winston's spelling of a level.
func levelName(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	}
	return "error"
}

func formatLine(format, level, msg, stamp string) string {
	if format == "json" {
		// JSON.stringify's escaping (jsonQuote), not encoding/json's HTML-safe one.
		return `{"level":` + jsonQuote(level) + `,"message":` + jsonQuote(msg) + `,"timestamp":` + jsonQuote(stamp) + "}\n"
	}
	if format == "simple" {
		format = lineFormat
	}
	return strings.NewReplacer("%level", level, "%message", msg, "%timestamp", stamp).Replace(format) + "\n"
}
