// Package gatewaytest runs the real riftgate binary for black-box tests, as
// net/http/httptest runs a real server: a process on loopback, driven over
// its admin API, killed when the test ends.
package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

var build struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the riftgate binary to test: $RIFTGATE_BIN when set (the
// Makefile sets it), else one built from this checkout once per test process.
// Go's test cache cannot see the sources of a binary built here, so outside
// the Makefile a product change needs `go test -count=1`.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("RIFTGATE_BIN"); p != "" {
		// The stat is for Go's test cache as much as for the error: a test
		// that only execs the binary would stay cached after it is rebuilt,
		// while a stat makes its size and mtime part of the cache key.
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("RIFTGATE_BIN: %v", err)
		}
		return p
	}
	build.once.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			build.err = err
			return
		}
		dir, err := os.MkdirTemp("", "riftgate-bin-")
		if err != nil {
			build.err = err
			return
		}
		build.path = filepath.Join(dir, "riftgate")
		cmd := exec.Command("go", "build", "-o", build.path, "./cmd/riftgate")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatalf("building riftgate: %v", build.err)
	}
	return build.path
}

// RepoRoot returns the directory holding go.mod, walking up from the
// working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// WasmDir returns where the Makefile puts built .wasm modules.
func WasmDir(t testing.TB) string {
	if d := os.Getenv("RIFTGATE_WASM_DIR"); d != "" {
		return d
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "build", "wasm")
}

// Wasm reads a module the Makefile built, by its path under WasmDir; a
// missing one fails the test.
func Wasm(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(WasmDir(t), rel))
	if err != nil {
		t.Fatalf("%v: run `make wasm`", err)
	}
	return b
}

// Instance is one running riftgate (or Mountebank) process.
type Instance struct {
	// within is how long a start waits for the admin API to answer.
	within time.Duration

	Port    int    // admin port
	URL     string // admin base URL
	DataDir string // the --datadir given, if any
	Dir     string // the process's working directory, a scratch directory owned by the instance

	t    testing.TB
	bin  string
	wrap []string // a command the binary runs under (e.g. unshare), or none
	dial Dialer   // how the test reaches the process (nil: the default dialer)
	args []string
	cmd  *exec.Cmd
	out  *LockedBuffer
	done chan struct{}
}

// Start runs `riftgate start` on a free loopback port and waits until the
// admin API answers. args are added to `--port P --host 127.0.0.1
// --nologfile --pidfile F`, and replace any of those they name (--logfile
// replaces --nologfile). The process is killed when the test ends; its
// output is logged if the test failed.
func Start(t testing.TB, args ...string) *Instance {
	t.Helper()
	return startInstance(t, Binary(t), nil, args)
}

// StartWithin is Start waiting up to d (rather than 30 s) for the admin
// API to answer, at this start and at every Restart: a start that loads a
// large --configfile (100,000 stubs) on a busy machine.
func StartWithin(t testing.TB, d time.Duration, args ...string) *Instance {
	t.Helper()
	return startArgsWithin(t, Binary(t), nil, nil, defaultArgs(t, args), d)
}

// StartUnder is Start with the binary run by wrap, a command that ends by
// executing its arguments (the binary and its flags), such as
// `unshare -m sh -c 'mount ... && exec "$0" "$@"'`: the process the test
// signals is then riftgate itself.
func StartUnder(t testing.TB, wrap []string, args ...string) *Instance {
	t.Helper()
	return startInstance(t, Binary(t), wrap, args)
}

// StartOn is Start with the admin API on host and port, chosen by the
// caller: a member of a cluster whose nodes share their ports, each on its
// own loopback address (127.0.0.2, ...).
func StartOn(t testing.TB, host string, port int, args ...string) *Instance {
	t.Helper()
	return startInstance(t, Binary(t), nil, append([]string{"--host", host, "--port", strconv.Itoa(port)}, args...))
}

// Dialer dials a connection, as net.Dialer.DialContext does.
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// Launch says where StartWith runs an instance and how the test reaches
// it: a process in a network namespace of its own runs under `ip netns
// exec` and is reached by a dialer whose sockets live where that
// namespace is reachable (internal/netfault).
type Launch struct {
	Host string   // the admin API's --host
	Port int      // and --port
	Wrap []string // the command the binary runs under (StartUnder), or none
	Dial Dialer   // reaches the process (the admin API, its imposters); nil: net.Dialer
	// Binary is the riftgate binary to run; "" is Binary's.
	Binary string
}

// StartWith is StartOn with a wrapping command and a dialer (Launch).
func StartWith(t testing.TB, l Launch, args ...string) *Instance {
	t.Helper()
	bin := l.Binary
	if bin == "" {
		bin = Binary(t)
	}
	return startInstanceVia(t, bin, l.Wrap, l.Dial, append([]string{"--host", l.Host, "--port", strconv.Itoa(l.Port)}, args...))
}

// StartMountebank runs the reference, mb 2.9.1 (see Mountebank), as Start
// runs riftgate: the same defaults and the same overrides.
func StartMountebank(t testing.TB, args ...string) *Instance {
	t.Helper()
	return startInstance(t, Mountebank(t), nil, args)
}

func startInstance(t testing.TB, bin string, wrap, args []string) *Instance {
	t.Helper()
	return startInstanceVia(t, bin, wrap, nil, args)
}

func startInstanceVia(t testing.TB, bin string, wrap []string, dial Dialer, args []string) *Instance {
	t.Helper()
	return startArgs(t, bin, wrap, dial, defaultArgs(t, args))
}

// defaultArgs are args with Start's defaults for what they do not say.
func defaultArgs(t testing.TB, args []string) []string {
	t.Helper()
	given := map[string]bool{}
	for _, a := range args {
		given[a] = true
	}
	var all []string
	for _, d := range [][]string{{"--port", strconv.Itoa(FreePort(t))}, {"--host", "127.0.0.1"}, {"--nologfile"}} {
		if !given[d[0]] && !(d[0] == "--nologfile" && given["--logfile"]) {
			all = append(all, d...)
		}
	}
	if !given["--pidfile"] {
		all = append(all, "--pidfile", "rg.pid") // in the instance's own directory
	}
	return append(all, args...)
}

// StartArgs runs `bin start args...` in a scratch directory, with no
// defaults: args must name the --port. It waits, as Start does, until the
// admin API answers.
func StartArgs(t testing.TB, bin string, args ...string) *Instance {
	t.Helper()
	return startArgs(t, bin, nil, nil, args)
}

func startArgs(t testing.TB, bin string, wrap []string, dial Dialer, args []string) *Instance {
	t.Helper()
	return startArgsWithin(t, bin, wrap, dial, args, 30*time.Second)
}

func startArgsWithin(t testing.TB, bin string, wrap []string, dial Dialer, args []string, within time.Duration) *Instance {
	t.Helper()
	in := &Instance{t: t, bin: bin, wrap: wrap, dial: dial, Dir: t.TempDir(), within: within}
	host := "127.0.0.1"
	for i, a := range args {
		if i+1 < len(args) {
			switch a {
			case "--datadir":
				in.DataDir = args[i+1]
			case "--port":
				in.Port, _ = strconv.Atoi(args[i+1])
			case "--host":
				if h := args[i+1]; h != "" && h != "0.0.0.0" && h != "::" {
					host = h
				}
			}
		}
	}
	if in.Port == 0 {
		t.Fatal("gatewaytest.StartArgs: no --port")
	}
	in.URL = "http://" + net.JoinHostPort(host, strconv.Itoa(in.Port))
	in.args = append([]string{"start"}, args...)
	in.start()
	t.Cleanup(func() {
		in.Kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(in.bin), in.Output())
		}
	})
	return in
}

func (in *Instance) start() {
	in.t.Helper()
	in.out = &LockedBuffer{}
	argv := append(append(append([]string(nil), in.wrap...), in.bin), in.args...)
	in.cmd = exec.Command(argv[0], argv[1:]...)
	in.cmd.Stdout, in.cmd.Stderr = in.out, in.out
	in.cmd.Dir = in.Dir
	if err := in.cmd.Start(); err != nil {
		in.t.Fatalf("starting %s: %v", in.bin, err)
	}
	in.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(in.cmd, in.done)
	deadline := time.Now().Add(in.within)
	hc := in.Client()
	defer hc.CloseIdleConnections()
	for time.Now().Before(deadline) {
		select {
		case <-in.done:
			in.t.Fatalf("%s exited at start:\n%s", filepath.Base(in.bin), in.out.String())
		default:
		}
		if resp, err := hc.Get(in.URL + "/"); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	in.t.Fatalf("%s did not answer on %s:\n%s", filepath.Base(in.bin), in.URL, in.out.String())
}

// Client returns an HTTP client that reaches the process (through the
// Launch's dialer), with no connection kept between requests: a test
// must not hold one to a process it kills or pauses. Its time-out is
// 30 s.
func (in *Instance) Client() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: in.transport()}
}

func (in *Instance) transport() *http.Transport {
	tr := &http.Transport{DisableKeepAlives: true, ExpectContinueTimeout: 10 * time.Second}
	if in.dial != nil {
		tr.DialContext = in.dial
	}
	return tr
}

// Signal sends sig to the process (SIGSTOP and SIGCONT pause and resume
// it).
func (in *Instance) Signal(sig os.Signal) error {
	if in.cmd.Process == nil {
		return errors.New("gatewaytest: no process")
	}
	return in.cmd.Process.Signal(sig)
}

// Output returns what the process printed so far.
func (in *Instance) Output() string { return in.out.String() }

// Kill sends SIGKILL and waits for the process to go.
func (in *Instance) Kill() {
	if in.cmd.Process != nil {
		_ = in.cmd.Process.Kill()
		<-in.done
	}
}

// Stop sends SIGTERM and waits (bounded) for a clean exit.
func (in *Instance) Stop() {
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.done:
	case <-time.After(10 * time.Second):
		in.t.Errorf("%s did not stop on SIGTERM", filepath.Base(in.bin))
		in.Kill()
	}
}

// RestartAs starts the process again with the same arguments from
// another binary (an upgrade in place), after Kill or Stop.
func (in *Instance) RestartAs(bin string) {
	in.t.Helper()
	in.bin = bin
	in.start()
}

// Restart starts the process again with the same arguments, after Kill or
// Stop.
func (in *Instance) Restart() {
	in.t.Helper()
	in.start()
}

// Do sends an admin request. body may be nil, a string, []byte or any value
// to encode as JSON.
func (in *Instance) Do(method, path string, body any) (int, []byte) {
	in.t.Helper()
	resp, err := request(in.transport(), method, in.URL+path, body, nil)
	if err != nil {
		in.t.Fatalf("%s %s: %v", method, in.URL+path, err)
	}
	return readAll(in.t, method, in.URL+path, resp)
}

// Do sends one HTTP request and returns the status and body.
func Do(t testing.TB, method, url string, body any, header http.Header) (int, []byte) {
	t.Helper()
	resp, err := Request(method, url, body, header)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return readAll(t, method, url, resp)
}

func readAll(t testing.TB, method, url string, resp *http.Response) (int, []byte) {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return resp.StatusCode, b
}

// Request sends one HTTP request on a fresh connection.
func Request(method, url string, body any, header http.Header) (*http.Response, error) {
	// With "Expect: 100-continue", wait for the server's verdict before
	// sending a body it may refuse.
	return request(&http.Transport{DisableKeepAlives: true, ExpectContinueTimeout: 10 * time.Second}, method, url, body, header)
}

func request(tr *http.Transport, method, url string, body any, header http.Header) (*http.Response, error) {
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = bytes.NewReader([]byte(b))
	case []byte:
		r = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: tr}
	return c.Do(req)
}

// PostImposter creates an imposter and returns its port; it fails the test
// unless the answer is 201.
func (in *Instance) PostImposter(imposter any) int {
	in.t.Helper()
	status, body := in.Do("POST", "/imposters", imposter)
	if status != http.StatusCreated {
		in.t.Fatalf("POST /imposters: %d %s", status, body)
	}
	var created struct {
		Port int `json:"port"`
	}
	if err := json.Unmarshal(body, &created); err != nil {
		in.t.Fatalf("POST /imposters: %v", err)
	}
	return created.Port
}

// FreePort returns a port that was free on every address a moment ago,
// from below Linux's ephemeral range (32768 and up): every socket bound to
// port 0 and every outgoing connection, which other tests running at the
// same time make by the thousand, takes its port from that range, so a port
// picked there can be taken again before the test binds it (EADDRINUSE).
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePortIn(t, 10000, 32767)
}

var picked struct {
	mu   sync.Mutex
	used map[int]bool
}

// FreePortIn returns a port in [lo, hi] that was free on every address a
// moment ago and that this process has not returned before.
func FreePortIn(t testing.TB, lo, hi int) int {
	t.Helper()
	picked.mu.Lock()
	defer picked.mu.Unlock()
	if picked.used == nil {
		picked.used = map[int]bool{}
	}
	for range 1000 {
		n := lo + rand.IntN(hi-lo+1)
		if picked.used[n] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf(":%d", n))
		if err != nil {
			continue
		}
		ln.Close()
		picked.used[n] = true
		return n
	}
	t.Fatalf("no free port in %d-%d", lo, hi)
	return 0
}

// LockedBuffer is a bytes.Buffer safe for one writer and concurrent readers:
// a process's output, read while it runs.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Mountebank returns the installed Mountebank 2.9.1 (the reference for
// differential tests): $RIFTGATE_MB when set (the Makefile sets it), else
// build/node under the repository. Its absence fails the test: `make test`
// installs it.
func Mountebank(t testing.TB) string {
	t.Helper()
	p := os.Getenv("RIFTGATE_MB")
	if p == "" {
		root, err := RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		p = filepath.Join(root, "build", "node", "node_modules", ".bin", "mb")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("Mountebank is not installed: run `make node`: %v", err)
	}
	return p
}
