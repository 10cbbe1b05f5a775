package cli_test

// Black-box tests: the real riftgate binary (gatewaytest.Binary: $RIFTGATE_BIN
// or built from this checkout), and where it is cheap the real mb next to it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
	"github.com/riftgate/riftgate/loadtest"
)

// run runs one short CLI command to completion.
func run(t *testing.T, bin, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return out.String(), errb.String(), code
}

// proc is a long-running server process started by a test.
type proc struct {
	cmd  *exec.Cmd
	out  *gatewaytest.LockedBuffer
	done chan struct{}
	err  error // Wait's result, once done is closed
}

// startProc starts a server and reaps it as soon as it exits, so that a
// stopped process never lingers as a zombie that `stop` would see alive.
func startProc(t *testing.T, dir, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), out: &gatewaytest.LockedBuffer{}, done: make(chan struct{})}
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), p.out.String())
		}
	})
	return p
}

// exitCode waits (bounded) for the process to end and returns its exit code.
func (p *proc) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("process did not exit")
	}
	if p.err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	t.Fatalf("wait: %v", p.err)
	return -1
}

// waitForFile waits until path exists while p runs, and returns its contents.
func waitForFile(t *testing.T, p *proc, path string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		select {
		case <-p.done:
			t.Fatalf("process exited before writing %s:\n%s", path, p.out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("%s never appeared", path)
	return ""
}

func getJSON(t *testing.T, url string, header http.Header) (int, []byte) {
	t.Helper()
	return gatewaytest.Do(t, http.MethodGet, url, nil, header)
}

// mbBinary is the installed Mountebank 2.9.1, the reference.
func mbBinary(t *testing.T) string { return gatewaytest.Mountebank(t) }

// startMB runs mb on a free loopback port and waits for its pidfile, which
// mb writes once it is ready.
func startMB(t *testing.T, args ...string) (port int, pidfile string) {
	t.Helper()
	mb := mbBinary(t)
	dir := t.TempDir()
	port = gatewaytest.FreePort(t)
	pidfile = filepath.Join(dir, "mb.pid")
	p := startProc(t, dir, mb, append([]string{"start", "--port", strconv.Itoa(port), "--host", "localhost",
		"--localOnly", "--nologfile", "--pidfile", pidfile}, args...)...)
	waitForFile(t, p, pidfile)
	t.Cleanup(func() { _ = p.cmd.Process.Signal(syscall.SIGTERM) })
	return port, pidfile
}

func TestVersionAndHelp(t *testing.T) {
	bin := gatewaytest.Binary(t)
	dir := t.TempDir()
	if out, _, code := run(t, bin, dir, "--version"); code != 0 || out != gateway.Version+"\n" {
		t.Fatalf("--version: %q, exit %d", out, code)
	}
	for _, args := range [][]string{{"--help"}, {"help"}} {
		if out, _, code := run(t, bin, dir, args...); code != 0 || !strings.Contains(out, "Usage: riftgate [command=start]") {
			t.Fatalf("%v: %q, exit %d", args, out, code)
		}
	}
	for cmd, want := range map[string]string{"start": "--configfile", "save": "--savefile", "stop": "--pidfile", "replay": "--port"} {
		if out, _, code := run(t, bin, dir, cmd, "--help"); code != 0 || !strings.Contains(out, want) {
			t.Fatalf("%s --help: %q, exit %d", cmd, out, code)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("--help/--version wrote files: %v", entries)
	}
}

// loadtest hands its arguments to the bundled load generator unchanged.
func TestLoadtestDelegates(t *testing.T) {
	var want bytes.Buffer
	if code := loadtest.Main(context.Background(), []string{"help"}, &want, io.Discard); code != 0 {
		t.Fatalf("loadtest.Main help: exit %d", code)
	}
	out, stderr, code := run(t, gatewaytest.Binary(t), t.TempDir(), "loadtest", "help")
	if code != 0 || out != want.String() {
		t.Fatalf("riftgate loadtest help: exit %d, stdout %q, stderr %q; want %q", code, out, stderr, want.String())
	}
	if _, _, code := run(t, gatewaytest.Binary(t), t.TempDir(), "loadtest", "--no-such-flag"); code == 0 {
		t.Fatal("riftgate loadtest accepted an unknown flag")
	}
}

func TestUsageErrors(t *testing.T) {
	bin := gatewaytest.Binary(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"frob"}, "Invalid command 'frob'."},
		{[]string{"--port", "x"}, "Invalid value for --port"},
		{[]string{"--loglevel", "trace"}, "Choices:"},
		{[]string{"--demo", "--configfile", "x.json"}, "cannot be combined"},
		{[]string{"--configfile", "missing.json"}, "no such file"},
	}
	for _, tc := range tests {
		_, stderr, code := run(t, bin, t.TempDir(), tc.args...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// mb and riftgate agree on the exit codes of stop without a server.
func TestStopWithoutServer(t *testing.T) {
	bins := map[string]string{"riftgate": gatewaytest.Binary(t)}
	if mb := os.Getenv("RIFTGATE_MB"); mb != "" {
		bins["mb"] = mb
	} else if root, err := gatewaytest.RepoRoot(); err == nil {
		if p := filepath.Join(root, "build", "node", "node_modules", ".bin", "mb"); fileExists(p) {
			bins["mb"] = p
		}
	}
	for name, bin := range bins {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if _, stderr, code := run(t, bin, dir, "stop", "--pidfile", filepath.Join(dir, "none.pid")); code != 0 {
				t.Fatalf("stop with no pidfile: exit %d: %s", code, stderr)
			}
			// A pid that is certainly not running: a child that has been reaped.
			gone := exec.Command("true")
			if err := gone.Run(); err != nil {
				t.Fatal(err)
			}
			stale := filepath.Join(dir, "stale.pid")
			if err := os.WriteFile(stale, []byte(strconv.Itoa(gone.Process.Pid)), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, stderr, code := run(t, bin, dir, "stop", "--pidfile", stale); code != 0 {
				t.Fatalf("stop with a stale pidfile: exit %d: %s", code, stderr)
			}
			if fileExists(stale) {
				t.Fatal("stale pidfile left behind")
			}
		})
	}
}

// stop signals whatever process the pidfile names and waits for it.
func TestStopSignalsTheProcess(t *testing.T) {
	bin := gatewaytest.Binary(t)
	dir := t.TempDir()
	sleeper := startProc(t, dir, "sleep", "60")
	pidfile := filepath.Join(dir, "x.pid")
	if err := os.WriteFile(pidfile, []byte(strconv.Itoa(sleeper.cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := run(t, bin, dir, "stop", "--pidfile", pidfile); code != 0 {
		t.Fatalf("stop: exit %d: %s", code, stderr)
	}
	<-sleeper.done
	var ee *exec.ExitError
	if !errors.As(sleeper.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("sleep ended with %v, want SIGTERM", sleeper.err)
	}
	if fileExists(pidfile) {
		t.Fatal("pidfile left behind")
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// startRiftgate runs `riftgate start` with a pidfile and logfile in dir and
// waits until it has written the pidfile (that is, it is ready).
func startRiftgate(t *testing.T, dir string, port int, args ...string) *proc {
	t.Helper()
	p := startProc(t, dir, gatewaytest.Binary(t), append([]string{"start", "--port", strconv.Itoa(port),
		"--pidfile", filepath.Join(dir, "rg.pid"), "--logfile", filepath.Join(dir, "rg.log")}, args...)...)
	pid := waitForFile(t, p, filepath.Join(dir, "rg.pid"))
	if pid != strconv.Itoa(p.cmd.Process.Pid) {
		t.Fatalf("pidfile holds %q, process is %d", pid, p.cmd.Process.Pid)
	}
	return p
}

func TestStartLogsAndStops(t *testing.T) {
	dir := t.TempDir()
	port := gatewaytest.FreePort(t)
	p := startRiftgate(t, dir, port, "--allowInjection")
	admin := fmt.Sprintf("http://127.0.0.1:%d", port)
	if code, body := getJSON(t, admin+"/imposters", nil); code != http.StatusOK {
		t.Fatalf("GET /imposters: %d %s", code, body)
	}
	if _, stderr, code := run(t, gatewaytest.Binary(t), dir, "stop", "--pidfile", "rg.pid"); code != 0 {
		t.Fatalf("stop: exit %d: %s", code, stderr)
	}
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("server exited %d", code)
	}
	if fileExists(filepath.Join(dir, "rg.pid")) {
		t.Fatal("the server left its pidfile")
	}
	out := p.out.String()
	for _, want := range []string{
		fmt.Sprintf("warn: [riftgate:%d] Running with --allowInjection set. See http://localhost:%d/docs/security for security info\n", port, port),
		fmt.Sprintf("info: [riftgate:%d] riftgate v%s now taking orders - point your browser to http://localhost:%d/ for help\n", port, gateway.Version, port),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	logfile, err := os.ReadFile(filepath.Join(dir, "rg.log"))
	if err != nil {
		t.Fatal(err)
	}
	var line struct{ Level, Message, Timestamp string }
	first, _, _ := bytes.Cut(logfile, []byte("\n"))
	if err := json.Unmarshal(first, &line); err != nil || line.Level != "warn" || !strings.HasPrefix(line.Message, fmt.Sprintf("[riftgate:%d] Running", port)) {
		t.Fatalf("logfile starts %s (%v)", first, err)
	}
}

// An rcfile supplies option defaults, as mb's does.
func TestStartWithRCFile(t *testing.T) {
	dir := t.TempDir()
	port := gatewaytest.FreePort(t)
	rc := fmt.Sprintf(`{"port": %d, "pidfile": "rc.pid", "nologfile": true, "loglevel": "warn"}`, port)
	if err := os.WriteFile(filepath.Join(dir, "rc.json"), []byte(rc), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, dir, gatewaytest.Binary(t), "start", "--rcfile", "rc.json")
	waitForFile(t, p, filepath.Join(dir, "rc.pid"))
	if code, body := getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/imposters", port), nil); code != http.StatusOK {
		t.Fatalf("GET /imposters: %d %s", code, body)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if out := p.out.String(); strings.Contains(out, "info:") {
		t.Fatalf("--loglevel warn from the rcfile still logged info lines:\n%s", out)
	}
	if fileExists(filepath.Join(dir, "mb.log")) {
		t.Fatal("nologfile from the rcfile was ignored")
	}
}

func TestInterruptShutsDownCleanly(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			p := startRiftgate(t, dir, gatewaytest.FreePort(t), "--nologfile")
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := p.exitCode(t); code != 0 {
				t.Fatalf("exit %d after %v", code, sig)
			}
			if fileExists(filepath.Join(dir, "rg.pid")) {
				t.Fatal("pidfile left behind")
			}
			if fileExists(filepath.Join(dir, "rg.log")) || fileExists(filepath.Join(dir, "mb.log")) {
				t.Fatal("--nologfile wrote a logfile")
			}
		})
	}
}

func TestRestart(t *testing.T) {
	dir := t.TempDir()
	port := gatewaytest.FreePort(t)
	old := startRiftgate(t, dir, port)
	oldPid := strconv.Itoa(old.cmd.Process.Pid)
	// restart stops the old process by its pidfile, then serves in its place.
	next := startProc(t, dir, gatewaytest.Binary(t), "restart", "--port", strconv.Itoa(port),
		"--pidfile", "rg.pid", "--nologfile")
	if code := old.exitCode(t); code != 0 {
		t.Fatalf("old server exited %d", code)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, _ := os.ReadFile(filepath.Join(dir, "rg.pid")); string(b) == strconv.Itoa(next.cmd.Process.Pid) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("pidfile holds %q (old %s), not the restarted server's pid", b, oldPid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/imposters", port), nil); code != http.StatusOK {
		t.Fatalf("restarted server: GET /imposters: %d %s", code, body)
	}
	if err := next.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := next.exitCode(t); code != 0 {
		t.Fatalf("restarted server exited %d", code)
	}
}

func TestConfigfile(t *testing.T) {
	dir := t.TempDir()
	port, imp := gatewaytest.FreePort(t), gatewaytest.FreePort(t)
	files := map[string]string{
		"config.ejs": `{"imposters": [<%- include('imposters/one.ejs', {port: ` + strconv.Itoa(imp) + `}) %>]}`,
		"imposters/one.ejs": `{"port": <%= port %>, "protocol": "http", "name": "from a template",
			"stubs": [{"responses": [{"is": {"statusCode": 201, "body": "<%- stringify(filename, 'bodies/hello.txt') %>"}}]}]}`,
		"bodies/hello.txt": "hello\n\"templated\" world\n",
	}
	for name, contents := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(contents), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	startRiftgate(t, dir, port, "--configfile", "config.ejs", "--nologfile")
	code, body := gatewaytest.Do(t, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", imp), nil, nil)
	if code != http.StatusCreated || string(body) != "hello\n\"templated\" world" {
		t.Fatalf("imposter answered %d %q", code, body)
	}
}

// A configfile holding one imposter without the {"imposters": [...]} wrapper
// is accepted, as by mb.
func TestConfigfileSingleImposter(t *testing.T) {
	dir := t.TempDir()
	port, imp := gatewaytest.FreePort(t), gatewaytest.FreePort(t)
	cfg := fmt.Sprintf(`{"port": %d, "protocol": "http", "stubs": [{"responses": [{"is": {"body": "single"}}]}]}`, imp)
	if err := os.WriteFile(filepath.Join(dir, "one.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	startRiftgate(t, dir, port, "--configfile", "one.json", "--noParse", "--nologfile")
	if code, body := gatewaytest.Do(t, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", imp), nil, nil); string(body) != "single" {
		t.Fatalf("imposter answered %d %q", code, body)
	}
}

// save writes what a restart with --configfile restores.
func TestSaveRoundTrip(t *testing.T) {
	dir := t.TempDir()
	port, imp := gatewaytest.FreePort(t), gatewaytest.FreePort(t)
	p := startRiftgate(t, dir, port, "--nologfile")
	admin := fmt.Sprintf("http://127.0.0.1:%d", port)
	imposter := map[string]any{"port": imp, "protocol": "http", "name": "saved",
		"stubs": []any{map[string]any{"responses": []any{map[string]any{"is": map[string]any{"statusCode": 202, "body": "kept"}}}}}}
	if code, body := gatewaytest.Do(t, http.MethodPost, admin+"/imposters", imposter, nil); code != http.StatusCreated {
		t.Fatalf("POST /imposters: %d %s", code, body)
	}
	bin := gatewaytest.Binary(t)
	if _, stderr, code := run(t, bin, dir, "save", "--port", strconv.Itoa(port), "--savefile", "saved.json"); code != 0 {
		t.Fatalf("save: exit %d: %s", code, stderr)
	}
	_, want := getJSON(t, admin+"/imposters?replayable=true", nil)
	var indented bytes.Buffer
	if err := json.Indent(&indented, want, "", "  "); err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(filepath.Join(dir, "saved.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(saved, indented.Bytes()) {
		t.Fatalf("savefile:\n%s\nwant:\n%s", saved, indented.Bytes())
	}
	if _, stderr, code := run(t, bin, dir, "stop", "--pidfile", "rg.pid"); code != 0 {
		t.Fatalf("stop: exit %d: %s", code, stderr)
	}
	p.exitCode(t)
	startRiftgate(t, dir, port, "--configfile", "saved.json", "--nologfile")
	if code, body := gatewaytest.Do(t, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", imp), nil, nil); code != 202 || string(body) != "kept" {
		t.Fatalf("restored imposter answered %d %q", code, body)
	}
}

func TestSaveWithoutServer(t *testing.T) {
	dir := t.TempDir()
	port := gatewaytest.FreePort(t)
	_, stderr, code := run(t, gatewaytest.Binary(t), dir, "save", "--port", strconv.Itoa(port))
	if want := fmt.Sprintf("No riftgate process running on http://localhost:%d", port); code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
	if fileExists(filepath.Join(dir, "mb.json")) {
		t.Fatal("wrote a savefile without a server")
	}
}

// As mb does, start goes on without an rcfile it cannot find or parse,
// and says so on stderr.
func TestStartWithABadRCFile(t *testing.T) {
	for name, content := range map[string]string{"missing": "", "not JSON": "port=3000"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			rc := filepath.Join(dir, "rc.json")
			if content != "" {
				if err := os.WriteFile(rc, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			port := gatewaytest.FreePort(t)
			p := startProc(t, dir, gatewaytest.Binary(t), "start", "--port", strconv.Itoa(port), "--rcfile", rc,
				"--pidfile", "rg.pid", "--nologfile")
			waitForFile(t, p, filepath.Join(dir, "rg.pid"))
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := p.exitCode(t); code != 0 {
				t.Fatalf("exit %d", code)
			}
			if out := p.out.String(); !strings.Contains(out, "rcfile "+rc) {
				t.Fatalf("no word of the rcfile:\n%s", out)
			}
		})
	}
}

// restart with a configfile whose later imposter is refused ends, with
// mb's exit code, and leaves no process behind (it once hung in
// Imposter.Stop, which ran before fasthttp's Serve had its listener).
func TestRestartWithARefusedImposterEnds(t *testing.T) {
	dir := t.TempDir()
	port, first, second := gatewaytest.FreePort(t), gatewaytest.FreePort(t), gatewaytest.FreePort(t)
	cfg := fmt.Sprintf(`{"imposters":[{"protocol":"http","port":%d},{"protocol":"http","port":%d,"stubs":[{"responses":[]}]}]}`, first, second)
	if err := os.WriteFile(filepath.Join(dir, "imposters.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		p := startProc(t, dir, gatewaytest.Binary(t), "restart", "--port", strconv.Itoa(port), "--pidfile", "rg.pid",
			"--nologfile", "--configfile", "imposters.json")
		done := make(chan int, 1)
		go func() { done <- p.exitCode(t) }()
		select {
		case code := <-done:
			if code != 1 {
				t.Fatalf("run %d: exit %d, want 1:\n%s", i, code, p.out.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("run %d: restart with a refused imposter did not end:\n%s", i, p.out.String())
		}
	}
	if fileExists(filepath.Join(dir, "rg.pid")) {
		t.Fatal("a pidfile was left")
	}
}

// formatterJS is a custom --formatter: its own configfile format (one line,
// "port status body"), which save writes back.
const formatterJS = `const fs = require('fs');
module.exports = {
	load: async function (options) {
		const [port, status, body] = fs.readFileSync(options.configfile, 'utf8').trim().split(' ');
		return { imposters: [{ protocol: 'http', port: parseInt(port, 10),
			stubs: [{ responses: [{ is: { statusCode: parseInt(status, 10), body: body } }] }] }] };
	},
	save: function (options, imposters) {
		const i = imposters.imposters[0], is = i.stubs[0].responses[0].is;
		fs.writeFileSync(options.savefile, [i.port, is.statusCode, is.body, typeof options.port].join(' ') + '\n');
	}
};
`

// TestCustomFormatter loads a configfile and saves through a --formatter
// module of the user's, as mb does: what mb writes riftgate writes.
func TestCustomFormatter(t *testing.T) {
	saved := map[string]string{}
	for name, bin := range map[string]string{"mb": mbBinary(t), "riftgate": gatewaytest.Binary(t)} {
		dir := t.TempDir()
		port, imp := gatewaytest.FreePort(t), gatewaytest.FreePort(t)
		fmtPath := filepath.Join(dir, "fmt.js")
		if err := os.WriteFile(fmtPath, []byte(formatterJS), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "conf.txt"), []byte(fmt.Sprintf("%d 203 formatted\n", imp)), 0o644); err != nil {
			t.Fatal(err)
		}
		p := startProc(t, dir, bin, "start", "--port", strconv.Itoa(port), "--host", "127.0.0.1", "--nologfile",
			"--pidfile", "x.pid", "--configfile", "conf.txt", "--formatter", fmtPath)
		waitForFile(t, p, filepath.Join(dir, "x.pid"))
		var code int
		var body []byte
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if code, body = gatewaytest.Do(t, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", imp), nil, nil); code == 203 {
				break
			}
		}
		if code != 203 || string(body) != "formatted" {
			t.Fatalf("%s: the formatter's imposter answered %d %q", name, code, body)
		}
		if _, stderr, code := run(t, bin, dir, "save", "--port", strconv.Itoa(port), "--savefile", "out.txt", "--formatter", fmtPath); code != 0 {
			t.Fatalf("%s save: exit %d: %s", name, code, stderr)
		}
		out, err := os.ReadFile(filepath.Join(dir, "out.txt"))
		if err != nil {
			t.Fatalf("%s save: %v", name, err)
		}
		saved[name] = strings.Replace(string(out), strconv.Itoa(imp), "PORT", 1)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.exitCode(t)
	}
	if saved["mb"] != saved["riftgate"] {
		t.Fatalf("savefile: mb wrote %q, riftgate %q", saved["mb"], saved["riftgate"])
	}
}

// blackHole is a listener that accepts connections and never answers.
func blackHole(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// TestEveryCommandEndsOnSIGTERM runs each command where it waits longest
// (a server that never answers, a process that ignores SIGTERM, a
// formatter that never settles) and checks that SIGTERM ends it at once.
func TestEveryCommandEndsOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	hole := strconv.Itoa(blackHole(t))
	stubborn := exec.Command("sh", "-c", `trap "" TERM; while :; do sleep 0.1; done`)
	if err := stubborn.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stubborn.Process.Kill(); _ = stubborn.Wait() })
	files := map[string]string{
		"stubborn.pid": strconv.Itoa(stubborn.Process.Pid),
		"never.js": `function spin() { setTimeout(spin, 10); }
module.exports = { load: function () { spin(); return new Promise(function () {}); },
	save: function () { spin(); return new Promise(function () {}); } };`,
		"conf.txt": "x",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	never := filepath.Join(dir, "never.js")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"start", []string{"start", "--port", strconv.Itoa(gatewaytest.FreePort(t)), "--nologfile", "--pidfile", "start.pid"}},
		{"start with a formatter that never loads", []string{"start", "--port", strconv.Itoa(gatewaytest.FreePort(t)), "--nologfile",
			"--pidfile", "f.pid", "--configfile", "conf.txt", "--formatter", never}},
		{"stop of a process that ignores SIGTERM", []string{"stop", "--pidfile", "stubborn.pid"}},
		{"restart of a process that ignores SIGTERM", []string{"restart", "--port", strconv.Itoa(gatewaytest.FreePort(t)), "--nologfile", "--pidfile", "stubborn.pid"}},
		{"save to a server that never answers", []string{"save", "--port", hole, "--savefile", "s.json"}},
		{"save with a formatter that never saves", []string{"save", "--port", hole, "--formatter", never}},
		{"replay to a server that never answers", []string{"replay", "--port", hole}},
		{"loadtest of a server that never answers", []string{"loadtest", "run", "-d", "10m", "-progress", "never", "http://127.0.0.1:" + hole + "/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProc(t, dir, gatewaytest.Binary(t), tc.args...)
			time.Sleep(500 * time.Millisecond)
			select {
			case <-p.done:
				t.Fatalf("ended before the signal (so the case waits on nothing): %v\n%s", p.err, p.out.String())
			default:
			}
			sent := time.Now()
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.done:
			case <-time.After(5 * time.Second):
				t.Fatalf("still running 5s after SIGTERM:\n%s", p.out.String())
			}
			t.Logf("ended %v after SIGTERM: %v", time.Since(sent).Round(time.Millisecond), p.err)
		})
	}
	if err := stubborn.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatal("the stubborn process is gone: the stop cases proved nothing")
	}
}

// TestStopOfAStubbornProcessEnds: stop gives up, with exit 1, on a process
// that outlives SIGTERM, rather than waiting forever.
func TestStopOfAStubbornProcessEnds(t *testing.T) {
	dir := t.TempDir()
	stubborn := exec.Command("sh", "-c", `trap "" TERM; while :; do sleep 0.1; done`)
	if err := stubborn.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stubborn.Process.Kill(); _ = stubborn.Wait() })
	if err := os.WriteFile(filepath.Join(dir, "s.pid"), []byte(strconv.Itoa(stubborn.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, stderr, code := run(t, gatewaytest.Binary(t), dir, "stop", "--pidfile", "s.pid")
	if code != 1 || !strings.Contains(stderr, "still running") || time.Since(start) > 20*time.Second {
		t.Fatalf("stop: exit %d after %v: %s", code, time.Since(start), stderr)
	}
}

// datadirRun is what one server did with --datadir and --configfile: the
// imposters each start shows, and what save wrote.
type datadirRun struct {
	afterRestart, afterConfigfile string
	saved, savedNoProxies         string
}

func runDatadir(t *testing.T, bin string, port, a, b int) datadirRun {
	t.Helper()
	dir := t.TempDir()
	conf := fmt.Sprintf(`{"imposters":[{"protocol":"http","port":%d,"name":"from the configfile","stubs":[{"responses":[{"is":{"body":"B"}}]}]}]}`, b)
	if err := os.WriteFile(filepath.Join(dir, "c.json"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	admin := fmt.Sprintf("http://127.0.0.1:%d", port)
	startIt := func(args ...string) *proc {
		p := startProc(t, dir, bin, append([]string{"start", "--port", strconv.Itoa(port), "--host", "127.0.0.1", "--nologfile",
			"--pidfile", "x.pid", "--datadir", "data"}, args...)...)
		waitForFile(t, p, filepath.Join(dir, "x.pid"))
		return p
	}
	stopIt := func(p *proc) {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.exitCode(t)
	}
	ports := func() string {
		var got struct {
			Imposters []struct {
				Port int    `json:"port"`
				Name string `json:"name"`
			} `json:"imposters"`
		}
		var body []byte
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			_, body = getJSON(t, admin+"/imposters", nil)
			if json.Unmarshal(body, &got) == nil && len(got.Imposters) > 0 {
				break
			}
		}
		var out []string
		for _, i := range got.Imposters {
			name := map[int]string{a: "A", b: "B"}[i.Port]
			out = append(out, name+" "+i.Name)
		}
		return strings.Join(out, ", ")
	}
	p := startIt()
	imp := fmt.Sprintf(`{"protocol":"http","port":%d,"name":"posted","stubs":[{"responses":[{"proxy":{"to":"http://127.0.0.1:1"}}]},{"responses":[{"is":{"body":"A"}}]}]}`, a)
	if code, body := gatewaytest.Do(t, http.MethodPost, admin+"/imposters", imp, nil); code != http.StatusCreated {
		t.Fatalf("POST: %d %s", code, body)
	}
	stopIt(p)
	var r datadirRun
	p = startIt()
	r.afterRestart = ports()
	for _, save := range []struct {
		file string
		into *string
		args []string
	}{{"other.json", &r.saved, nil}, {"noproxies.json", &r.savedNoProxies, []string{"--removeProxies"}}} {
		if _, stderr, code := run(t, bin, dir, append([]string{"save", "--port", strconv.Itoa(port), "--savefile", save.file}, save.args...)...); code != 0 {
			t.Fatalf("save: %d %s", code, stderr)
		}
		bs, err := os.ReadFile(filepath.Join(dir, save.file))
		if err != nil {
			t.Fatal(err)
		}
		*save.into = string(bs)
	}
	stopIt(p)
	p = startIt("--configfile", "c.json")
	r.afterConfigfile = ports()
	stopIt(p)
	return r
}

// TestDatadirAndConfigfileAsMountebank: what --datadir keeps across a
// restart, what a --configfile does to it, and what save writes to another
// file (with and without --removeProxies), side by side with mb.
func TestDatadirAndConfigfileAsMountebank(t *testing.T) {
	port, a, b := gatewaytest.FreePort(t), gatewaytest.FreePort(t), gatewaytest.FreePort(t)
	mb := runDatadir(t, mbBinary(t), port, a, b)
	rg := runDatadir(t, gatewaytest.Binary(t), port, a, b)
	// mb loads a --configfile with PUT /imposters, replacing what --datadir
	// kept.
	if mb != rg {
		t.Fatalf("mb:\n%+v\nriftgate:\n%+v", mb, rg)
	}
}

// flagRun is what one start command line did.
type flagRun struct {
	served  bool   // the admin API answered
	exit    string // how the process ended (after SIGTERM if it served)
	options string // GET /config's options, when it served
	files   string // what it wrote in its working directory
	stderr  bool   // it wrote to stderr
}

func runFlags(t *testing.T, bin string, port int, args []string) flagRun {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rc.txt"), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	full := append([]string{"start", "--port", strconv.Itoa(port)}, args...)
	p := &proc{cmd: exec.Command(bin, full...), out: &gatewaytest.LockedBuffer{}, done: make(chan struct{})}
	var stderr gatewaytest.LockedBuffer
	p.cmd.Dir, p.cmd.Stdout, p.cmd.Stderr = dir, p.out, &stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	defer func() { _ = p.cmd.Process.Kill(); <-p.done }()
	var r flagRun
	url := fmt.Sprintf("http://127.0.0.1:%d/config", port)
	client := &http.Client{Timeout: time.Second}
wait:
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		select {
		case <-p.done:
			break wait
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := client.Get(url)
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var c struct {
			Options map[string]any `json:"options"`
		}
		_ = json.Unmarshal(body, &c)
		delete(c.Options, "version")
		o, _ := json.Marshal(c.Options)
		r.served, r.options = true, string(o)
		time.Sleep(300 * time.Millisecond) // let it write what it writes at start
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		break
	}
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("%s %v did not end", filepath.Base(bin), full)
	}
	r.exit = "0"
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		r.exit = ee.String()
	}
	var files []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && path != filepath.Join(dir, "rc.txt") {
			rel, _ := filepath.Rel(dir, path)
			files = append(files, rel)
		}
		return nil
	})
	r.files = strings.Join(files, " ")
	r.stderr = strings.TrimSpace(stderr.String()) != ""
	return r
}

// TestStartFlagsAsMountebank starts mb and riftgate with each start option
// in turn and compares whether each served, how it ended, the options
// GET /config shows, the files it wrote and whether it complained.
func TestStartFlagsAsMountebank(t *testing.T) {
	port := gatewaytest.FreePort(t)
	for _, args := range [][]string{
		nil,
		{"--nologfile"},
		{"--logfile", "other.log"},
		{"--logfile", "no/such/dir/x.log"},
		{"--pidfile", "other.pid", "--nologfile"},
		{"--loglevel", "debug", "--nologfile"},
		{"--loglevel", "trace"},
		{"--log", `{"level":"warn","transports":{"console":{"colorize":false,"format":"json"},"file":{"path":"j.log","format":"json"}}}`},
		{"--host", "127.0.0.1", "--nologfile"},
		{"--allowInjection", "--localOnly", "--nologfile"},
		{"--ipWhitelist", "127.0.0.1|::1", "--nologfile"},
		{"--origin", "http://example.test", "--nologfile"},
		{"--apikey", "k", "--nologfile"},
		{"--mock", "--debug", "--nologfile"},
		{"--protofile", "protocols.json", "--nologfile"},
		{"--rcfile", "rc.txt", "--nologfile"},
		{"--rcfile", "missing.json", "--nologfile"},
		{"--configfile", "missing.json", "--nologfile"},
		{"--noParse", "--nologfile"},
		{"--configfile", "rc.txt", "--formatter", "/no/such/formatter.js", "--nologfile"},
		{"--formatter", "/no/such/formatter.js", "--nologfile"},
		{"--port", "70000", "--nologfile"},
		{"--nosuchflag", "--nologfile"},
		{"--bogus", "1", "--other-thing", "--x=abc", "-z", "--nologfile", "extra", "words"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			mb := runFlags(t, mbBinary(t), port, args)
			rg := runFlags(t, gatewaytest.Binary(t), port, args)
			rg.files = strings.ReplaceAll(rg.files, "rg.pid", "mb.pid")
			if mb != rg {
				t.Errorf("mb:       %+v\nriftgate: %+v", mb, rg)
			}
		})
	}
}

// TestCommandsAsMountebank runs save, replay, stop and restart with their
// options against mb and riftgate (each against its own server) and
// compares exit codes, whether stderr has something, and the files written.
func TestCommandsAsMountebank(t *testing.T) {
	type result struct {
		code     int
		stderr   bool
		files    string
		keptJunk bool // a pidfile holding no process id is still there
	}
	servers := map[string]int{}
	for name, bin := range map[string]string{"mb": mbBinary(t), "riftgate": gatewaytest.Binary(t)} {
		dir := t.TempDir()
		port := gatewaytest.FreePort(t)
		p := startProc(t, dir, bin, "start", "--port", strconv.Itoa(port), "--host", "127.0.0.1", "--nologfile", "--pidfile", "s.pid")
		waitForFile(t, p, filepath.Join(dir, "s.pid"))
		t.Cleanup(func() { _ = p.cmd.Process.Signal(syscall.SIGTERM); <-p.done })
		imp := fmt.Sprintf(`{"protocol":"http","port":%d,"stubs":[{"responses":[{"proxy":{"to":"http://127.0.0.1:1"}}]}]}`, gatewaytest.FreePort(t))
		if code, body := gatewaytest.Do(t, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/imposters", port), imp, nil); code != http.StatusCreated {
			t.Fatalf("%s POST: %d %s", name, code, body)
		}
		servers[name] = port
	}
	dead := strconv.Itoa(gatewaytest.FreePort(t))
	for _, args := range [][]string{
		{"save"},
		{"save", "--savefile", "other.json"},
		{"save", "--savefile", "other.json", "--removeProxies"},
		{"save", "--savefile", "no/such/dir/x.json"},
		{"save", "--host", "127.0.0.1", "--savefile", "h.json"},
		{"save", "--port", dead},
		{"save", "--bogus", "--savefile", "b.json"},
		{"save", "--formatter", "/no/such/formatter.js"},
		{"replay"},
		{"replay", "--port", dead},
		{"stop"},
		{"stop", "--pidfile", "missing.pid"},
		{"stop", "--pidfile", "garbage.pid"},
		{"--version"},
		{"--help"},
		{"save", "--help"},
		{"frob"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			got := map[string]result{}
			for name, bin := range map[string]string{"mb": mbBinary(t), "riftgate": gatewaytest.Binary(t)} {
				dir := t.TempDir()
				if err := os.WriteFile(filepath.Join(dir, "garbage.pid"), []byte("not a pid"), 0o644); err != nil {
					t.Fatal(err)
				}
				full := append([]string(nil), args...)
				if len(args) > 0 && (args[0] == "save" || args[0] == "replay") && !slices.Contains(args, "--port") {
					full = append(full, "--port", strconv.Itoa(servers[name]))
				}
				_, stderr, code := run(t, bin, dir, full...)
				var files []string
				_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
					if err == nil && !d.IsDir() && d.Name() != "garbage.pid" {
						rel, _ := filepath.Rel(dir, path)
						files = append(files, rel)
					}
					return nil
				})
				got[name] = result{code, strings.TrimSpace(stderr) != "", strings.Join(files, " "), fileExists(filepath.Join(dir, "garbage.pid"))}
			}
			if got["mb"] != got["riftgate"] {
				t.Errorf("mb %+v, riftgate %+v", got["mb"], got["riftgate"])
			}
		})
	}
}

// TestGCFloor: a server the user has not tuned lets its heap grow to
// 64 MiB before it collects; with GOGC set, Go's own pacing stands.
func TestGCFloor(t *testing.T) {
	heapGoal := func(t *testing.T, env ...string) uint64 {
		dir := t.TempDir()
		port := gatewaytest.FreePort(t)
		p := &proc{cmd: exec.Command(gatewaytest.Binary(t), "start", "--port", strconv.Itoa(port),
			"--pidfile", filepath.Join(dir, "rg.pid"), "--nologfile"), out: &gatewaytest.LockedBuffer{}, done: make(chan struct{})}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
				p.cmd.Env = append(p.cmd.Env, kv)
			}
		}
		p.cmd.Env = append(p.cmd.Env, env...)
		p.cmd.Dir, p.cmd.Stdout, p.cmd.Stderr = dir, p.out, p.out
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { p.err = p.cmd.Wait(); close(p.done) }()
		t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
		waitForFile(t, p, filepath.Join(dir, "rg.pid"))
		code, body := getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), nil)
		if code != http.StatusOK {
			t.Fatalf("GET /metrics: %d", code)
		}
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, "riftgate_go_heap_goal_bytes "); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatalf("no riftgate_go_heap_goal_bytes in /metrics:\n%s", body)
		return 0
	}
	if goal := heapGoal(t); goal < 64<<20 {
		t.Errorf("untuned: heap goal %d bytes, want at least the 64 MiB floor", goal)
	}
	if goal := heapGoal(t, "GOGC=100"); goal >= 64<<20 {
		t.Errorf("GOGC=100: heap goal %d bytes, want Go's own (well under 64 MiB for an idle server)", goal)
	}
}
