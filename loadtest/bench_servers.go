package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is a server the bench started and must stop.
type process struct {
	name    string
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
}

// startProcess runs argv with its output in a log file under dir.
func startProcess(name string, argv []string, dir string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = os.Environ()
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, exited: make(chan struct{}), logPath: logPath}
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(p.exited)
	}()
	return p, nil
}

// stop asks the process to end (SIGTERM) and kills it after 5 s.
func (p *process) stop() { p.end(syscall.SIGTERM) }

// end sends the process sig and waits for it to exit, killing it after 5 s.
func (p *process) end(sig syscall.Signal) {
	if p == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// tail is the end of the process's log, for a failure note.
func (p *process) tail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	b = bytes.TrimSpace(b)
	if len(b) > 300 {
		b = b[len(b)-300:]
	}
	return strings.ReplaceAll(string(b), "\n", " | ")
}

// waitReady polls check until it succeeds, the process exits or the
// deadline passes.
func (p *process) waitReady(ctx context.Context, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if last = check(); last == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited at start: %s", p.name, p.tail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after %v: %w (log: %s)", p.name, timeout, last, p.tail())
}

// freePort asks the kernel for a port that is free now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func dialCheck(addr string) func() error {
	return func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// httpc is for the admin API and probes only; measurements use the workers.
var httpc = &http.Client{Timeout: 10 * time.Second}

func getOK(url string) func() error {
	return func() error {
		resp, err := httpc.Get(url)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// startHello starts the raw server and returns its base URL; its tcp
// address goes to b.rawTCP, its https base URL to b.rawTLS, its WebSocket
// echo server's to b.rawWS.
func (b *bench) startHello(ctx context.Context) (*process, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	tcpPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	tlsPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	proxyPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	b.rawProxy = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(proxyPort))
	wsPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	grpcPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	b.rawGRPC = "grpc://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(grpcPort))
	b.rawTCP = "tcp://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(tcpPort))
	b.rawWS = "ws://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(wsPort))
	b.rawTLS = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))
	argv := append(append([]string{}, b.cfg.helloCmd...), "-host", "127.0.0.1", "-port", strconv.Itoa(port),
		"-tcp-port", strconv.Itoa(tcpPort), "-tls-port", strconv.Itoa(tlsPort), "-proxy-port", strconv.Itoa(proxyPort), "-ws-port", strconv.Itoa(wsPort), "-grpc-port", strconv.Itoa(grpcPort))
	p, err := startProcess("raw", b.cfg.pinned(argv), b.dir)
	if err != nil {
		return nil, "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := p.waitReady(ctx, 10*time.Second, dialCheck(addr)); err != nil {
		p.stop()
		return nil, "", err
	}
	return p, "http://" + addr, nil
}

// startMountebankLike starts riftgate or mb with mb's command line and
// returns the admin API's base URL.
func (b *bench) startMountebankLike(ctx context.Context, name, bin string, extra ...string) (*process, string, error) {
	// mb is a node program: give it time on a busy machine.
	return b.startAdmin(ctx, name, bin, 30*time.Second, extra...)
}

// startAdmin is startMountebankLike with the time the admin API has to
// answer: a start on a large --datadir takes longer.
func (b *bench) startAdmin(ctx context.Context, name, bin string, ready time.Duration, extra ...string) (*process, string, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	argv := []string{bin, "start", "--port", strconv.Itoa(port), "--host", "127.0.0.1",
		"--allowInjection", "--nologfile", "--pidfile", filepath.Join(b.dir, name+".pid")}
	p, err := startProcess(name, b.cfg.pinned(append(argv, extra...)), b.dir)
	if err != nil {
		return nil, "", err
	}
	admin := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := p.waitReady(ctx, ready, getOK(admin+"/imposters")); err != nil {
		p.stop()
		return nil, "", err
	}
	return p, admin, nil
}

// postImposter creates one imposter; any answer but 201 is an error that
// names what the server said.
func postImposter(admin, body string) error {
	resp, err := httpc.Post(admin+"/imposters", "application/json", strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("POST /imposters: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("POST /imposters: %s: %s", resp.Status, oneLine(string(msg)))
	}
	return nil
}

func deleteImposter(admin string, port int) error {
	req, err := http.NewRequest(http.MethodDelete, fmt.Sprintf("%s/imposters/%d", admin, port), nil)
	if err != nil {
		return fmt.Errorf("DELETE /imposters/%d: %w", port, err)
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return fmt.Errorf("DELETE /imposters/%d: %w", port, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("DELETE /imposters/%d: %s", port, resp.Status)
	}
	return nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

// probeStep is one request of a case's functional check, run before any
// load: a system that answers wrongly is reported as failed, not measured.
type probeStep struct {
	method, path, flow string
	// send is the request's body, of type contentType.
	send, contentType string
	status            int
	body              string // "" accepts any body
}

func probe(base string, steps []probeStep, checkBody bool) error {
	for i, s := range steps {
		req, err := http.NewRequest(s.method, base+s.path, strings.NewReader(s.send))
		if err != nil {
			return fmt.Errorf("probe: %w", err)
		}
		if s.flow != "" {
			req.Header.Set("X-Flow-Id", s.flow)
		}
		if s.contentType != "" {
			req.Header.Set("Content-Type", s.contentType)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return fmt.Errorf("probe %d %s %s: %w", i, s.method, s.path, err)
		}
		body, _ := io.ReadAll(bufio.NewReader(io.LimitReader(resp.Body, 4096)))
		_ = resp.Body.Close()
		if resp.StatusCode != s.status {
			return fmt.Errorf("probe %d %s %s: status %d, want %d (body %q)", i, s.method, s.path, resp.StatusCode, s.status, oneLine(string(body)))
		}
		if checkBody && s.body != "" && strings.TrimSpace(string(body)) != s.body {
			return fmt.Errorf("probe %d %s %s: body %q, want %q", i, s.method, s.path, oneLine(string(body)), s.body)
		}
	}
	return nil
}

// quiesce waits, at most quietMax, until the servers of systems use less
// than quietShare of a core over quietSlice, and logs what it waited.
func (b *bench) quiesce(ctx context.Context, systems []string) {
	var procs []*process
	for _, sys := range systems {
		if f := b.servers[sys]; f != nil {
			procs = append(procs, f()...)
		}
	}
	b.quiesceProcs(ctx, procs)
}

// quiesceProcs waits, up to quietMax, until procs use under quietShare of
// a core.
func (b *bench) quiesceProcs(ctx context.Context, procs []*process) {
	start := time.Now()
	for time.Since(start) < quietMax && ctx.Err() == nil {
		before := cpuOf(procs)
		select {
		case <-ctx.Done():
		case <-time.After(quietSlice):
		}
		if used := cpuOf(procs) - before; used < time.Duration(quietShare*float64(quietSlice)) {
			break
		}
	}
	if waited := time.Since(start); waited > 2*quietSlice {
		b.log.Info("waited for the servers to go quiet", "processes", len(procs), "waited", waited.Round(time.Second))
	}
}

// What quiesce calls quiet.
const (
	quietSlice = time.Second
	quietShare = 0.05
	quietMax   = 3 * time.Minute
)

func cpuOf(procs []*process) time.Duration {
	var sum time.Duration
	for _, p := range procs {
		if d, ok := p.cpuTime(); ok {
			sum += d
		}
	}
	return sum
}

// clockTicks is the unit of /proc/<pid>/stat's CPU times (USER_HZ, which
// Linux fixes at 100 for user space whatever the kernel's tick).
const clockTicks = 100

// cpuTime is the user and system CPU time p and the processes it started
// (mb's node, a wrapper's child) have used so far; false where /proc is
// not there to read.
func (p *process) cpuTime() (time.Duration, bool) {
	if p == nil || p.cmd.Process == nil {
		return 0, false
	}
	return treeCPU(p.cmd.Process.Pid, 0)
}

func treeCPU(pid, depth int) (time.Duration, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command (field 2) is in parentheses and may hold spaces; utime
	// and stime are fields 14 and 15, the 12th and 13th after it.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	d := time.Duration(ut+st) * time.Second / clockTicks
	if depth > 4 {
		return d, true
	}
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, t := range tasks {
		kids, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
		for _, k := range strings.Fields(string(kids)) {
			if n, err := strconv.Atoi(k); err == nil {
				if c, ok := treeCPU(n, depth+1); ok {
					d += c
				}
			}
		}
	}
	return d, true
}
