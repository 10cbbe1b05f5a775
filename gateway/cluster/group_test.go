package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
	"github.com/riftgate/riftgate/raftnode"
)

// These tests run members in this process, each with a reconciler that
// only remembers what it was asked: the group, the log and the follower,
// without the engine. The multi-process tests (process_test.go) run the
// real binary.

// runner is a config.Reconciler that records the state it was made to
// run, and refuses (in Prepare) to bind the ports in taken.
type runner struct {
	mu      sync.Mutex
	running *config.State
	taken   map[int]bool
}

func (r *runner) Prepare(_ context.Context, prev, next *config.State, _ config.Result) (config.Plan, error) {
	for port := range next.Imposters {
		if r.taken[port] && prev.Imposters[port] == nil {
			return nil, fmt.Errorf("port %d is taken here", port)
		}
	}
	return nopPlan{}, nil
}

func (r *runner) Follow(_ context.Context, _, next *config.State) {
	r.mu.Lock()
	r.running = next
	r.mu.Unlock()
}

func (r *runner) state() *config.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running
}

type nopPlan struct{}

func (nopPlan) Commit() {}
func (nopPlan) Abort()  {}

type member struct {
	name, dir, listen string
	node              *Node
	log               config.Log
	rec               *runner
}

var testSecret = []byte("cluster-test-secret-0123456789")

// testHost is the loopback address of the in-process nodes: one no other
// package's tests use (clustertest.Host is the processes').
const testHost = "127.0.0.10"

// freeAddr is an address of testHost with a port free just now.
func freeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort(testHost, strconv.Itoa(gatewaytest.FreePort(t)))
}

// fastRaft keeps elections quick and snapshots early.
func fastRaft(c *raftnode.Config) {
	c.TickInterval, c.ElectionTick = 20*time.Millisecond, 10
	c.SnapshotEntries, c.CatchUpEntries = 20, 5
	c.LeaderTaskGrace = time.Second
}

func logger(t testing.TB) *slog.Logger {
	if os.Getenv("CLUSTER_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// start runs (or reruns, on its old address and data) member m.
func (m *member) start(t *testing.T, join ...string) {
	t.Helper()
	opts := Options{Name: m.name, Listen: m.listen, Bootstrap: len(join) == 0, Join: join, Secret: testSecret,
		DataDir: m.dir, Logger: logger(t), tune: fastRaft}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var err error
	for range 50 { // a port just closed may linger
		if m.node, err = Start(ctx, opts); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("start %s: %v", m.name, err)
	}
	m.rec = &runner{taken: map[int]bool{}}
	if m.log, err = m.node.ConfigLog(m.rec); err != nil {
		t.Fatal(err)
	}
}

func (m *member) stop(t *testing.T) {
	t.Helper()
	if m.node == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.node.Close(ctx); err != nil {
		t.Errorf("close %s: %v", m.name, err)
	}
	m.node = nil
}

func newMembers(t *testing.T, names ...string) []*member {
	base := t.TempDir()
	var ms []*member
	for _, n := range names {
		m := &member{name: n, dir: filepath.Join(base, n), listen: freeAddr(t)}
		ms = append(ms, m)
		t.Cleanup(func() { m.stop(t) })
	}
	return ms
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func voters(m *member) int { return len(m.node.Current().Voters()) }

func encoded(t *testing.T, s *config.State) []byte {
	b, err := config.EncodeState(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func submit(t *testing.T, m *member, cmd *config.Command) config.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := m.log.Submit(ctx, cmd)
	if err != nil {
		t.Fatalf("submit on %s: %v", m.name, err)
	}
	return res
}

// Writes on any member are answered once that member runs them; a member
// that joins after the log was compacted gets the configuration in a
// snapshot and runs it; every member sees the same membership.
func TestGroupReplicatesAndSnapshots(t *testing.T) {
	ms := newMembers(t, "n1", "n2", "n3")
	n1, n2, n3 := ms[0], ms[1], ms[2]
	n1.start(t)
	peer := "http://" + n1.listen
	n2.start(t, peer)
	eventually(t, "two voters", func() bool { return voters(n1) == 2 && voters(n2) == 2 })
	for i := range 40 {
		m := ms[i%2]
		port := 1 + i%7
		submit(t, m, &config.Command{Op: config.OpDeleteImposter, Port: port})
		if res := submit(t, m, create(port, `{"responses":[{"is":{"body":"`+strconv.Itoa(i)+`"}}]}`)); res.Err != nil {
			t.Fatalf("create on %s: %v", m.name, res.Err)
		}
		// Read your own write on the member that took it.
		if imp := m.rec.state().Imposter(port); imp == nil || !bytes.Contains(imp.Stubs()[0].JSON, []byte(`"`+strconv.Itoa(i)+`"`)) {
			t.Fatalf("%s does not run its own write %d", m.name, i)
		}
	}
	// The index a member runs is the group's: another member waits for it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if idx := n1.node.Applied(); idx < 80 {
		t.Fatalf("n1 runs index %d after 80 commands", idx)
	} else if err := n2.node.WaitApplied(ctx, idx); err != nil {
		t.Fatalf("n2 waiting for index %d: %v", idx, err)
	}
	n3.start(t, peer)
	eventually(t, "three voters everywhere", func() bool { return voters(n1) == 3 && voters(n2) == 3 && voters(n3) == 3 })
	want := encoded(t, n1.log.State())
	eventually(t, "n3 to run the configuration", func() bool {
		s := n3.rec.state()
		return s != nil && bytes.Equal(encoded(t, s), want)
	})
	ids := map[uint64]bool{}
	for _, m := range ms {
		if m.node.IsIsolated() {
			t.Errorf("%s isolated in a healthy group", m.name)
		}
		ids[m.node.Self()] = true
		if got, want := m.node.Current().Index, n1.node.Current().Index; got != want {
			t.Errorf("%s at membership index %d, n1 at %d", m.name, got, want)
		}
	}
	if len(ids) != 3 {
		t.Errorf("self ids %v", ids)
	}

	// A restarted member runs what it had, and what changed meanwhile.
	n3.stop(t)
	submit(t, n2, create(99, `{}`))
	n3.start(t, peer)
	eventually(t, "the restarted n3 to run the change it missed", func() bool {
		s := n3.rec.state()
		return s != nil && s.Imposter(99) != nil
	})
}

// A change the taking member cannot run (its reconciler refuses it) is
// refused there and never proposed; a refusal by config.Apply is mb's
// error and is not proposed either.
func TestSubmitRefusesWhatThisMemberCannotRun(t *testing.T) {
	ms := newMembers(t, "n1")
	n1 := ms[0]
	n1.start(t)
	n1.rec.taken[13] = true
	// A change made first: the leader's own entries are behind us.
	if res := submit(t, n1, create(15, `{}`)); res.Err != nil {
		t.Fatal(res.Err)
	}
	before := n1.node.group.Applied()
	ctx := context.Background()
	if _, err := n1.log.Submit(ctx, create(13, `{}`)); err == nil {
		t.Fatal("a change the member cannot run was accepted")
	}
	res, err := n1.log.Submit(ctx, &config.Command{Op: config.OpInsertStub, Port: 14, Stubs: []config.StubDoc{{JSON: []byte(`{}`)}}})
	if err != nil || res.Err == nil {
		t.Fatalf("a stub for no imposter: %+v %v", res, err)
	}
	if after := n1.node.group.Applied(); after != before {
		t.Fatalf("refused changes were proposed: applied %d -> %d", before, after)
	}
}

// A member that has no leader answers a write with 503 in bounded time and
// changes nothing.
func TestWriteWithoutALeaderIsRefused(t *testing.T) {
	ms := newMembers(t, "n1", "n2")
	n1, n2 := ms[0], ms[1]
	n1.start(t)
	n2.start(t, "http://"+n1.listen)
	eventually(t, "two voters", func() bool { return voters(n1) == 2 && voters(n2) == 2 })
	n1.stop(t)
	start := time.Now()
	_, err := n2.log.Submit(context.Background(), create(20, `{}`))
	var e interface{ Error() string }
	if err == nil || !errors.As(err, &e) || !bytes.Contains([]byte(err.Error()), []byte("cluster unavailable")) {
		t.Fatalf("a write without a quorum: %v", err)
	}
	if took := time.Since(start); took > 3*leaderWait {
		t.Fatalf("the refusal took %v", took)
	}
}

// The group grows to MaxVoters; a further member stays a learner until a
// voter is removed, and is then promoted in its place.
func TestVotersStopAtFiveAndALearnerTakesARemovedOnesPlace(t *testing.T) {
	ms := newMembers(t, "n1", "n2", "n3", "n4", "n5", "n6")
	ms[0].start(t)
	peer := "http://" + ms[0].listen
	for _, m := range ms[1:] {
		m.start(t, peer)
	}
	n1 := ms[0]
	eventually(t, "5 voters and a learner", func() bool {
		m := n1.node.Current()
		return len(m.Voters()) == MaxVoters && len(m.Learners()) == 1
	})
	time.Sleep(600 * time.Millisecond) // the promoter has had its chances
	if m := n1.node.Current(); len(m.Voters()) != MaxVoters {
		t.Fatalf("%d voters, at most %d", len(m.Voters()), MaxVoters)
	}
	learner := n1.node.Current().Learners()[0]
	var victim uint64 // a voter other than n1, which makes the change
	for _, id := range n1.node.Current().Voters() {
		if id != n1.node.Self() {
			victim = id
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := n1.node.group.Remove(ctx, victim); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the learner promoted in the removed voter's place", func() bool {
		mb, ok := n1.node.Current().Member(learner)
		return ok && mb.Role == raftnode.RoleVoter && len(n1.node.Current().Voters()) == MaxVoters
	})
}
