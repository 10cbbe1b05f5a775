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
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
		{[]string{"start", "--bogus", "1"}, "Unknown argument: bogus"},
		{[]string{"--port", "x"}, "Invalid value for --port"},
		{[]string{"--loglevel", "trace"}, "Choices:"},
		{[]string{"--demo", "--configfile", "x.json"}, "cannot be combined"},
		{[]string{"--configfile", "missing.json"}, "no such file"},
		{[]string{"--rcfile", "missing.json"}, "no such file"},
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
