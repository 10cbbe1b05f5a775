package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		command string
		want    map[string]string // options checked, by name
		wantErr string
	}{
		{name: "defaults", args: nil, command: "start", want: map[string]string{
			"port": "2525", "pidfile": "mb.pid", "logfile": "mb.log", "loglevel": "info", "ipWhitelist": "*",
			"savefile": "mb.json", "allowInjection": "false", "nologfile": "false", "host": "", "configfile": "",
		}},
		{name: "command and spaced values", args: []string{"save", "--port", "3000", "--savefile", "x.json"}, command: "save",
			want: map[string]string{"port": "3000", "savefile": "x.json"}},
		{name: "equals values", args: []string{"--port=3000", "--host=0.0.0.0", "--ipWhitelist=1.2.3.4|5.6.7.8"}, command: "start",
			want: map[string]string{"port": "3000", "host": "0.0.0.0", "ipWhitelist": "1.2.3.4|5.6.7.8"}},
		{name: "options before the command", args: []string{"--pidfile", "a.pid", "stop"}, command: "stop",
			want: map[string]string{"pidfile": "a.pid"}},
		{name: "booleans", args: []string{"--allowInjection", "--localOnly", "true", "--mock=false", "--debug"}, command: "start",
			want: map[string]string{"allowInjection": "true", "localOnly": "true", "mock": "false", "debug": "true"}},
		{name: "a boolean does not eat a following command", args: []string{"--allowInjection", "restart"}, command: "restart",
			want: map[string]string{"allowInjection": "true"}},
		{name: "negated boolean", args: []string{"--no-allowInjection"}, command: "start",
			want: map[string]string{"allowInjection": "false"}},
		{name: "aliases", args: []string{"-p", "4000", "-h", "localhost", "-i", "-w", "127.0.0.1"}, command: "start",
			want: map[string]string{"port": "4000", "host": "localhost", "allowInjection": "true", "ipWhitelist": "127.0.0.1"}},
		{name: "clustered boolean aliases", args: []string{"-il"}, command: "start",
			want: map[string]string{"allowInjection": "true", "localOnly": "true"}},
		{name: "kebab case", args: []string{"--allow-injection", "--no-parse", "--ip-whitelist", "*"}, command: "start",
			want: map[string]string{"allowInjection": "true", "noParse": "true", "ipWhitelist": "*"}},
		{name: "values may start with a dash", args: []string{"--apikey", "-secret-"}, command: "start",
			want: map[string]string{"apikey": "-secret-"}},
		{name: "last one wins", args: []string{"--port", "1", "--port", "2"}, command: "start", want: map[string]string{"port": "2"}},
		{name: "riftgate's demo", args: []string{"start", "--demo", "--allowInjection"}, command: "start",
			want: map[string]string{"demo": "true"}},
		{name: "mb options checked later are parsed", args: []string{"--protofile", "p.json", "--formatter", "f", "--impostersRepository", "r.js"}, command: "start",
			want: map[string]string{"protofile": "p.json", "formatter": "f", "impostersRepository": "r.js"}},
		{name: "missing value", args: []string{"--port"}, wantErr: "Not enough arguments following: port"},
		{name: "bad port", args: []string{"--port", "http"}, wantErr: "Invalid value for --port"},
		{name: "port out of range", args: []string{"--port", "70000"}, wantErr: "Invalid value for --port"},
		{name: "bad boolean", args: []string{"--mock=yes"}, wantErr: "Invalid value for --mock"},
		{name: "bad log level", args: []string{"--loglevel", "trace"}, wantErr: "Argument: loglevel"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseArgs(tc.args)
			if tc.wantErr != "" {
				var ue *UsageError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want a usage error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if s.command != tc.command {
				t.Errorf("command = %q, want %q", s.command, tc.command)
			}
			for name, want := range tc.want {
				if got := s.str(name); got != want {
					t.Errorf("--%s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

func TestRCFile(t *testing.T) {
	tests := []struct {
		name        string
		rc          string
		args        []string
		want        map[string]string
		wantErr     string
		wantWarning string
	}{
		{name: "fills options", rc: `{"port": 3000, "allowInjection": true, "pidfile": "rc.pid", "ipWhitelist": ["1.1.1.1", "2.2.2.2"]}`,
			want: map[string]string{"port": "3000", "allowInjection": "true", "pidfile": "rc.pid", "ipWhitelist": "1.1.1.1|2.2.2.2"}},
		{name: "the command line wins", rc: `{"port": 3000, "loglevel": "debug"}`, args: []string{"--port", "4000"},
			want: map[string]string{"port": "4000", "loglevel": "debug"}},
		{name: "an alias on the command line wins too", rc: `{"port": 3000}`, args: []string{"-p", "4000"},
			want: map[string]string{"port": "4000"}},
		{name: "log configuration as an object", rc: `{"log": {"level": "warn"}}`, want: map[string]string{"log": `{"level": "warn"}`}},
		{name: "an unknown option is ignored", rc: `{"prot": 1, "port": 3000}`, want: map[string]string{"port": "3000"}},
		{name: "wrong type", rc: `{"port": "many"}`, wantErr: "Invalid value for --port"},
		{name: "not JSON", rc: `port=3000`, wantWarning: "Cannot parse rcfile"},
		{name: "not an object", rc: `[1]`, wantWarning: "Cannot parse rcfile"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc := filepath.Join(t.TempDir(), "mbrc.json")
			if err := os.WriteFile(rc, []byte(tc.rc), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := parseArgs(append([]string{"--rcfile", rc}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			warning, err := s.applyRCFile()
			if !strings.Contains(warning, tc.wantWarning) || (tc.wantWarning == "" && warning != "") {
				t.Fatalf("warning %q, want one containing %q", warning, tc.wantWarning)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				if got := s.str(name); got != want {
					t.Errorf("--%s = %q, want %q", name, got, want)
				}
			}
		})
	}
	s, err := parseArgs([]string{"--rcfile", filepath.Join(t.TempDir(), "missing.json")})
	if err != nil {
		t.Fatal(err)
	}
	// mb starts without a missing rcfile, and says so.
	if warning, err := s.applyRCFile(); err != nil || !strings.HasPrefix(warning, "Cannot find rcfile ") {
		t.Fatalf("missing rcfile: %q, %v", warning, err)
	}
}

func FuzzParseArgs(f *testing.F) {
	f.Add("start\x00--port\x003000\x00--allowInjection")
	f.Add("-il\x00--no-mock\x00--host=h")
	f.Add("--\x00stop")
	f.Add("--port=\x00-p")
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		s, err := parseArgs(args)
		if err != nil {
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("error %T is not a usage error", err)
			}
			return
		}
		for _, o := range options {
			v, ok := s.values[o.name]
			switch {
			case o.kind == kBool && ok && v != "true" && v != "false":
				t.Fatalf("--%s = %q", o.name, v)
			case o.kind == kInt && ok && s.integer(o.name) < 0:
				t.Fatalf("--%s = %q", o.name, v)
			}
		}
	})
}

// Options mb does not know are kept, typed as its parser types them.
func TestUnknownOptionsAreKept(t *testing.T) {
	s, err := parseArgs([]string{"start", "--bogus", "1", "--other-thing", "--x=abc", "-z", "--port", "3000", "--b", "false", "more"})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(s.extras)
	if want := `[[bogus 1] [otherThing true] [x "abc"] [z true] [b false]]`; got != want || s.integer("port") != 3000 || s.command != "start" {
		t.Fatalf("extras %s, port %d, command %q; want %s", got, s.integer("port"), s.command, want)
	}
}
