package raftnode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv marks a re-executed test binary as a cluster member process.
const childEnv = "RAFTNODE_CHILD"

// runChild is one member in its own process: the counter group plus a
// small /test API the parent drives. It runs until killed.
func runChild() int {
	name, dir, addr := os.Getenv("RAFTNODE_NAME"), os.Getenv("RAFTNODE_DIR"), os.Getenv("RAFTNODE_ADDR")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	g, err := Bootstrap(ctx, Config{
		NodeName: name, GroupID: "counter", DataDir: dir, AdvertiseURL: "http://" + addr + "/raft",
		Secret: testSecret, Bootstrap: os.Getenv("RAFTNODE_BOOTSTRAP") == "1",
		TickInterval: 20 * time.Millisecond, ElectionTick: 20, SnapshotEntries: 20, CatchUpEntries: 5,
	}, counterApp{}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bootstrap:", err)
		return 1
	}
	r := g.Routers()
	mux := http.NewServeMux()
	mux.Handle("/raft/", http.StripPrefix("/raft", r.Raft))
	mux.Handle("/cluster/", http.StripPrefix("/cluster", r.Cluster))
	mux.HandleFunc("/test/propose", func(w http.ResponseWriter, req *http.Request) {
		add, _ := strconv.ParseInt(req.URL.Query().Get("add"), 10, 64)
		resp, err := g.ProposeAndWait(req.Context(), counterCmd{Add: add, Op: req.URL.Query().Get("op")})
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(resp)
	})
	mux.HandleFunc("/test/state", func(w http.ResponseWriter, _ *http.Request) {
		v, applied := int64(0), uint64(0)
		g.State().Read(func(s *counterState, a uint64) { v, applied = s.Value, a })
		_ = json.NewEncoder(w).Encode(map[string]any{"value": v, "applied": applied, "leader": g.IsLeader(), "voters": len(g.Membership().Voters())})
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		return 1
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	<-ctx.Done()
	_ = srv.Close()
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.Close(cctx); err != nil {
		fmt.Fprintln(os.Stderr, "close:", err)
		return 1
	}
	return 0
}

type proc struct {
	name, dir, addr string
	cmd             *exec.Cmd
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func (p *proc) start(t *testing.T, bootstrap bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "RAFTNODE_NAME="+p.name, "RAFTNODE_DIR="+p.dir, "RAFTNODE_ADDR="+p.addr)
	if bootstrap {
		cmd.Env = append(cmd.Env, "RAFTNODE_BOOTSTRAP=1")
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.cmd = cmd
}

func (p *proc) kill() {
	if p.cmd != nil {
		_ = p.cmd.Process.Kill() // SIGKILL: no Close, no flush
		_ = p.cmd.Wait()
		p.cmd = nil
	}
}

type procState struct {
	Value   int64  `json:"value"`
	Applied uint64 `json:"applied"`
	Leader  bool   `json:"leader"`
	Voters  int    `json:"voters"`
}

var procClient = &http.Client{Timeout: 5 * time.Second}

func (p *proc) state() (procState, error) {
	var s procState
	resp, err := procClient.Get("http://" + p.addr + "/test/state")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

func (p *proc) propose(add int64, op string) error {
	resp, err := procClient.Post(fmt.Sprintf("http://%s/test/propose?add=%d&op=%s", p.addr, add, op), "text/plain", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return nil
}

// TestProcessesSurviveKill9 runs three members as separate processes,
// kills the leader with SIGKILL (no Close, nothing flushed beyond what the
// Ready loop fsynced), and restarts it on its data directory.
func TestProcessesSurviveKill9(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	procs := map[string]*proc{}
	for _, n := range []string{"n1", "n2", "n3"} {
		procs[n] = &proc{name: n, dir: filepath.Join(base, n), addr: freePort(t)}
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.kill()
		}
		procClient.CloseIdleConnections()
	})
	procs["n1"].start(t, true)
	procs["n2"].start(t, false)
	procs["n3"].start(t, false)
	admin := &AdminClient{BaseURL: "http://" + procs["n1"].addr + "/cluster", Group: "counter", Secret: testSecret, HTTP: procClient}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	retry := func(what string, f func() error) {
		t.Helper()
		for {
			err := f()
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, n := range []string{"n2", "n3"} {
		retry("add "+n, func() error {
			err := admin.Do(ctx, http.MethodPost, "/learners", map[string]string{"name": n, "url": "http://" + procs[n].addr + "/raft"}, nil)
			if err != nil && strings.Contains(err.Error(), "already a learner") {
				return nil
			}
			return err
		})
		retry("promote "+n, func() error {
			return admin.Do(ctx, http.MethodPost, "/promote", map[string]string{"id": FormatNodeID(NodeIDFromName(n))}, nil)
		})
	}
	op := 0
	write := func(p *proc) {
		t.Helper()
		op++
		o := fmt.Sprintf("p-%d", op)
		retry("write", func() error { return p.propose(1, o) })
	}
	leader := func() *proc {
		t.Helper()
		var l *proc
		retry("find leader", func() error {
			for _, p := range procs {
				if p.cmd == nil {
					continue
				}
				if s, err := p.state(); err == nil && s.Leader {
					l = p
					return nil
				}
			}
			return fmt.Errorf("no leader")
		})
		return l
	}
	waitAll := func(want int64) {
		t.Helper()
		for _, p := range procs {
			retry(p.name+" to converge", func() error {
				s, err := p.state()
				if err != nil {
					return err
				}
				if s.Value != want || s.Voters != 3 {
					return fmt.Errorf("%s at %d with %d voters, want %d", p.name, s.Value, s.Voters, want)
				}
				return nil
			})
		}
	}
	for range 30 {
		write(procs["n2"]) // through a follower or the leader, whichever n2 is
	}
	waitAll(30)
	l := leader()
	l.kill()
	survivor := procs["n1"]
	if survivor == l {
		survivor = procs["n2"]
	}
	for range 30 {
		write(survivor)
	}
	l.start(t, false)
	waitAll(60)
	// Kill everyone, restart everyone: state comes back from disk.
	for _, p := range procs {
		p.kill()
	}
	for _, p := range procs {
		p.start(t, false)
	}
	waitAll(60)
	write(leader())
	waitAll(61)
}
