package cli

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLineHandler(t *testing.T) {
	var console, file bytes.Buffer
	sink := &logSink{now: time.Now, dests: []logDest{{w: &console, format: lineFormat}, {w: &file, format: "json"}}}
	log := slog.New(newLineHandler(sink, slog.LevelInfo, "[riftgate:2525] "))
	log.Debug("hidden")
	log.Info("riftgate v1 now taking orders")
	log.With("imposter", 4545).WithGroup("req").Warn("slow", "path", "/a b", "ms", 12)
	log.Error("boom", slog.Group("g", "k", "v"))

	wantConsole := "info: [riftgate:2525] riftgate v1 now taking orders\n" +
		"warn: [riftgate:2525] slow imposter=4545 req.path=\"/a b\" req.ms=12\n" +
		"error: [riftgate:2525] boom g.k=v\n"
	if console.String() != wantConsole {
		t.Fatalf("console:\n%s\nwant:\n%s", console.String(), wantConsole)
	}
	lines := strings.Split(strings.TrimSpace(file.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("logfile has %d lines: %s", len(lines), file.String())
	}
	// mb's (winston's) logfile line: level, message, ISO timestamp in UTC with milliseconds.
	if !strings.HasPrefix(lines[0], `{"level":"info","message":"[riftgate:2525] riftgate v1 now taking orders","timestamp":"`) ||
		!strings.HasSuffix(lines[0], `Z"}`) || len(lines[0]) != len(`{"level":"info","message":"[riftgate:2525] riftgate v1 now taking orders","timestamp":"2026-01-02T03:04:05.000Z"}`) {
		t.Fatalf("logfile line %s", lines[0])
	}
}

func TestFormatLineGolden(t *testing.T) {
	tests := []struct{ format, want string }{
		{"json", `{"level":"warn","message":"a \"q\" <b>","timestamp":"2026-11-29T18:42:37.856Z"}` + "\n"},
		{lineFormat, `warn: a "q" <b>` + "\n"},
		{"simple", `warn: a "q" <b>` + "\n"},
		{"%timestamp %level %message", `2026-11-29T18:42:37.856Z warn a "q" <b>` + "\n"},
	}
	for _, tc := range tests {
		if got := formatLine(tc.format, "warn", `a "q" <b>`, "2026-11-29T18:42:37.856Z"); got != tc.want {
			t.Errorf("format %q: got %q, want %q", tc.format, got, tc.want)
		}
	}
}

func TestLogConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    logConfig
		wantErr string
	}{
		{name: "defaults", want: logConfig{level: slog.LevelInfo, console: true, consoleFormat: lineFormat, filePath: "mb.log", fileFormat: "json"}},
		{name: "nologfile", args: []string{"--nologfile", "--loglevel", "debug"},
			want: logConfig{level: slog.LevelDebug, console: true, consoleFormat: lineFormat, fileFormat: "json"}},
		{name: "logfile", args: []string{"--logfile", "x.log", "--loglevel", "error"},
			want: logConfig{level: slog.LevelError, console: true, consoleFormat: lineFormat, filePath: "x.log", fileFormat: "json"}},
		{name: "--log wins", args: []string{"--loglevel", "error", "--log", `{"level":"warn","transports":{"console":{"format":"%message"},"file":{"path":"y.log","format":"%level %message"}}}`},
			want: logConfig{level: slog.LevelWarn, console: true, consoleFormat: "%message", filePath: "y.log", fileFormat: "%level %message"}},
		{name: "--log without transports logs to mb.log only", args: []string{"--log", `{"level":"debug"}`},
			want: logConfig{level: slog.LevelDebug, consoleFormat: lineFormat, filePath: "mb.log", fileFormat: "json"}},
		{name: "--log console only", args: []string{"--log", `{"transports":{"console":{}}}`},
			want: logConfig{level: slog.LevelInfo, console: true, consoleFormat: lineFormat, fileFormat: "json"}},
		{name: "bad --log", args: []string{"--log", `{level`}, wantErr: "cannot parse --log"},
		{name: "bad --log level", args: []string{"--log", `{"level":"loud"}`}, wantErr: "unknown log level"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseArgs(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			got, err := logConfigFrom(s)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Like mb, a new process starts a fresh logfile and keeps the last one as mb1.log.
func TestOpenLogfileKeepsThePreviousOne(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mb.log")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := openLogfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("new\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"mb.log": "new\n", "mb1.log": "old\n"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Fatalf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
}
