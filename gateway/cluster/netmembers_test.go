package cluster_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/cluster/clustertest"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// Membership changes under fire: a member added while another is paused
// (SIGSTOP), a member added while one is cut off, a rolling restart of
// every node while one is cut off, a dead member (SIGKILL) replaced by a
// new node while another is paused, and a member removed while it is cut
// off (and kept running, as a removed process may be). The cluster grows
// from 3 voters to 5 so that each change keeps a quorum with one node
// down and another faulted. Load runs on every node that is not paused
// or stopped throughout. These are the paths where flows change owner:
// the per-flow histories must stay linearizable, no acknowledged sync
// write may be lost, and every request answers within its budget.
func TestMembershipChangesUnderFire(t *testing.T) {
	skipShort(t)
	c := clustertest.Start(t, clustertest.Options{Netns: true, Args: netArgs})
	port := gatewaytest.FreePort(t)
	postServed(t, c, port, counterImposter(port))
	lin, probe := flowsPerOwner(port, names(c.Nodes), 4, "lin"), flowsPerOwner(port, names(c.Nodes), 4, "probe")
	live := slices.Clone(c.Nodes)
	l := startLoad(t, c, port, lin, probe, live, loadClients{linIncs: 6, linReads: 3, probes: 6})
	n1 := c.Nodes[0] // the others join through it: it is never faulted while one does
	time.Sleep(2 * time.Second)

	liveNames := func(except ...*clustertest.Node) []string {
		var out []string
		for _, n := range live {
			if !slices.Contains(except, n) {
				out = append(out, n.Name)
			}
		}
		return out
	}
	// pick chooses the node to fault: the leader when it is not n1, else
	// a voter other than n1, never one of except.
	pick := func(except ...*clustertest.Node) *clustertest.Node {
		t.Helper()
		if ld := c.Leader(liveNames()...); ld != n1 && !slices.Contains(except, ld) {
			return ld
		}
		for _, n := range live {
			if n != n1 && !slices.Contains(except, n) {
				return n
			}
		}
		t.Fatal("no node to fault")
		return nil
	}
	step := func(format string, args ...any) {
		t.Logf("%.1fs: "+format, append([]any{l.now().Seconds()}, args...)...)
	}

	// 1. Add a member while one is paused.
	p := pick()
	l.without(p)
	c.Pause(p.Name)
	step("%s paused; adding n4", p.Name)
	n4 := c.Add()
	live = append(live, n4)
	c.WaitVoters(4, liveNames(p)...)
	c.Resume(p.Name)
	l.with(p)
	l.with(n4)
	c.WaitVoters(4, liveNames()...)
	step("n4 is a voter; %s resumed", p.Name)
	time.Sleep(2 * time.Second)

	// 2. Add a member while one is cut off.
	x := pick()
	c.Isolate(x.Name)
	step("%s cut off; adding n5", x.Name)
	n5 := c.Add()
	live = append(live, n5)
	c.WaitVoters(5, liveNames(x)...)
	l.with(n5)
	time.Sleep(2 * time.Second)
	c.Heal()
	c.WaitVoters(5, liveNames()...)
	step("n5 is a voter; %s healed", x.Name)
	time.Sleep(2 * time.Second)

	// 3. A rolling restart (SIGTERM, start again, wait for the group)
	// while one is cut off; the cut node is restarted last, still cut.
	x = pick()
	c.Isolate(x.Name)
	step("%s cut off; rolling restart", x.Name)
	order := slices.DeleteFunc(slices.Clone(live), func(n *clustertest.Node) bool { return n == x })
	for _, n := range append(order, x) {
		l.without(n)
		n.Stop()
		n.Restart()
		if n != x {
			c.WaitVoters(5, liveNames(x)...)
		}
		l.with(n)
		step("%s restarted", n.Name)
		time.Sleep(time.Second)
	}
	c.Heal()
	c.WaitVoters(5, liveNames()...)
	step("rolling restart done; %s healed", x.Name)
	time.Sleep(2 * time.Second)

	// 4. Replace a dead member (SIGKILL) by a new node, while another is
	// paused.
	v := pick()
	l.setTargets(slices.DeleteFunc(slices.Clone(live), func(n *clustertest.Node) bool { return n == v })...)
	v.Kill()
	live = slices.DeleteFunc(live, func(n *clustertest.Node) bool { return n == v })
	q := pick()
	l.without(q)
	c.Pause(q.Name)
	step("%s killed, %s paused; removing %s", v.Name, q.Name, v.Name)
	removeMember(t, n1, v.Name)
	c.WaitVoters(4, liveNames(q)...)
	n6 := c.Add()
	live = append(live, n6)
	c.WaitVoters(5, liveNames(q)...)
	l.with(n6)
	c.Resume(q.Name)
	l.with(q)
	c.WaitVoters(5, liveNames()...)
	step("n6 replaced %s; %s resumed", v.Name, q.Name)
	time.Sleep(2 * time.Second)

	// 5. Remove a member while it is cut off; it keeps running (and
	// taking requests) for a while after the heal, as a removed process
	// may: it must not serve what it no longer owns.
	r := pick()
	c.Isolate(r.Name)
	step("%s cut off; removing it", r.Name)
	removeMember(t, n1, r.Name)
	live = slices.DeleteFunc(live, func(n *clustertest.Node) bool { return n == r })
	c.WaitVoters(4, liveNames()...)
	time.Sleep(2 * time.Second)
	c.Heal()
	step("%s removed; healed, still running", r.Name)
	time.Sleep(4 * time.Second)
	l.without(r)
	r.Kill()

	l.finalReads(live, 20*time.Second)
	l.stopLoad(true, 500)
}

// removeMember removes name through via, retrying while no leader takes
// the change (503); a 404 after a 503 is a change that was made.
func removeMember(t *testing.T, via *clustertest.Node, name string) {
	t.Helper()
	tried := false
	var code int
	var body []byte
	clustertest.Eventually(t, 60*time.Second, "the removal of "+name, func() bool {
		code, body = via.Do("DELETE", "/cluster/members/"+name, nil)
		switch {
		case code == http.StatusOK, code == http.StatusNotFound && tried:
			return true
		case code == http.StatusServiceUnavailable:
			tried = true
			return false
		}
		t.Fatalf("DELETE /cluster/members/%s: %d %s", name, code, body)
		return false
	})
}
