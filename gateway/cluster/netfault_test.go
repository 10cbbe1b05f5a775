package cluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/cluster/clustertest"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// The cluster under real network faults (issue 33): every node in a
// network namespace of its own (clustertest's Options.Netns), partitions
// made as a real network makes them (packets dropped silently: no RST, no
// closed connection), pauses with SIGSTOP, crashes with SIGKILL, while
// per-flow counters are incremented and read through every node. What
// the fault proxy's tests (flows_process_test.go) cannot show, since a
// proxy's cut ends in a closed connection, which fails fast.

// Limits of the partition test.
const (
	// healWithin: after a heal, every (flow, node) pair answers 200 again
	// within this, whatever the partition's length.
	healWithin = 5 * time.Second
	// noticeWithin: GET /cluster on the other nodes shows a cut member
	// unreachable within this of the cut, and reachable again within this
	// of the heal.
	noticeWithin = 5 * time.Second
	// recoveryLimit is how long the test waits after a heal to measure
	// (and report) a recovery that takes longer than healWithin.
	recoveryLimit = 60 * time.Second
	// lastExchangeSlack: while a member is cut, lastExchangeMs of it must
	// have grown with the time since the cut, within this.
	lastExchangeSlack = 1500 * time.Millisecond
)

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the real-network-fault tests take minutes (make test runs them)")
	}
}

// A silent partition of the leader, 30 s and then 60 s (one cluster, one
// load): while it lasts, every request to any node answers within its
// budget, 200 or a 503 naming its cause, and GET /cluster on the other
// nodes shows the cut leader unreachable; within 5 s of each heal every
// (flow, node) pair answers 200 again and every member shows reachable;
// the per-flow histories of the whole run are linearizable (no duplicate,
// stale, lost or phantom count).
func TestSilentPartitionOfTheLeaderHealsWithinSeconds(t *testing.T) {
	skipShort(t)
	partitions := netfaultPartitions(t)
	c := clustertest.Start(t, clustertest.Options{Netns: true, Args: netArgs})
	port := gatewaytest.FreePort(t)
	postServed(t, c, port, counterImposter(port))
	lin, probe := flowsPerOwner(port, names(c.Nodes), 4, "lin"), flowsPerOwner(port, names(c.Nodes), 4, "probe")
	l := startLoad(t, c, port, lin, probe, c.Nodes, loadClients{linIncs: 6, linReads: 3, probes: 6})
	time.Sleep(3 * time.Second)

	for _, d := range partitions {
		leader := c.Leader()
		var others []*clustertest.Node
		for _, n := range c.Nodes {
			if n != leader {
				others = append(others, n)
			}
		}
		cutAt := l.now()
		w := l.watchCluster(c.Nodes, cutAt+d/2)
		c.Isolate(leader.Name)
		t.Logf("%.1fs: leader %s cut off, silently, for %v", cutAt.Seconds(), leader.Name, d)
		time.Sleep(d)
		healAt := l.now()
		c.Heal()
		t.Logf("%.1fs: healed", healAt.Seconds())
		rec := l.recovery(c.Nodes, healAt, recoveryLimit)
		worst, text := summary(rec)
		if worst > healWithin {
			t.Errorf("after a %v partition of the leader, not every (flow, node) pair answered 200 within %v of the heal: %s", d, healWithin, text)
		} else {
			t.Logf("after a %v partition of the leader: every pair answered 200 within %v of the heal: %s", d, worst.Round(time.Millisecond), text)
		}
		time.Sleep(time.Until(l.start.Add(healAt + noticeWithin + 2*time.Second)))
		views := w.end()
		checkReachability(t, views, leader.Name, cutAt, healAt, l.now())
		for _, n := range others {
			t.Logf("GET /cluster on %s %v into the partition: %s", n.Name, d/2, w.sample[n.Name])
		}
		t.Logf("GET /cluster on the cut %s %v into the partition: %s", leader.Name, d/2, w.sample[leader.Name])
		if len(w.errs) > 0 {
			t.Errorf("GET /cluster did not answer in 3 s: %v times per node", w.errs)
		}
		c.WaitVoters(3)
	}
	l.finalReads(c.Nodes, 20*time.Second)
	l.stopLoad(true, 500)
}

// checkReachability checks the GET /cluster views of a partition of cut
// from cutAt to healAt, watched until end.
func checkReachability(t *testing.T, views []memberView, cut string, cutAt, healAt, end time.Duration) {
	t.Helper()
	var during, after, noField, stale []string
	seenDuring, seenAfter := 0, 0
	for _, v := range views {
		switch {
		case v.observer != cut && v.member == cut && v.at >= cutAt+noticeWithin && v.at < healAt:
			seenDuring++
			if v.reachable {
				during = append(during, fmt.Sprintf("%s at %.1fs", v.observer, (v.at-cutAt).Seconds()))
			}
			since := v.at - cutAt
			switch {
			case !v.hasLast:
				noField = append(noField, v.observer)
			case !v.lastIsSet || time.Duration(v.lastMs*float64(time.Millisecond)) < since-lastExchangeSlack:
				stale = append(stale, fmt.Sprintf("%s %.1fs into the cut: lastExchangeMs %v", v.observer, since.Seconds(), map[bool]any{true: v.lastMs, false: "null"}[v.lastIsSet]))
			}
		case v.at >= healAt+noticeWithin && v.at <= end:
			seenAfter++
			if !v.reachable && v.observer != v.member {
				after = append(after, fmt.Sprintf("%s sees %s unreachable %.1fs after the heal", v.observer, v.member, (v.at-healAt).Seconds()))
			}
			if v.observer != v.member && v.hasLast && (!v.lastIsSet || v.lastMs > 3000) {
				after = append(after, fmt.Sprintf("%s: lastExchangeMs of %s is %v %.1fs after the heal", v.observer, v.member, map[bool]any{true: v.lastMs, false: "null"}[v.lastIsSet], (v.at-healAt).Seconds()))
			}
		}
	}
	if seenDuring == 0 || seenAfter == 0 {
		t.Errorf("GET /cluster was seen %d times during the cut and %d after the heal: the test proved nothing", seenDuring, seenAfter)
	}
	if len(during) > 0 {
		t.Errorf("GET /cluster on the other nodes showed the cut %s reachable %d of %d times from %v after the cut until the heal: %s", cut, len(during), seenDuring, noticeWithin, firstFew(during))
	}
	if len(noField) > 0 {
		t.Errorf("GET /cluster has no lastExchangeMs for the members (%d views)", len(noField))
	} else if len(stale) > 0 {
		t.Errorf("GET /cluster's lastExchangeMs of the cut %s did not grow with the cut: %s", cut, firstFew(stale))
	}
	if len(after) > 0 {
		t.Errorf("from %v after the heal, GET /cluster still showed: %s", noticeWithin, firstFew(after))
	}
}

func firstFew(s []string) string {
	if len(s) > 8 {
		return strings.Join(s[:8], "; ") + fmt.Sprintf("; ... (%d in all)", len(s))
	}
	return strings.Join(s, "; ")
}

// An owner paused (SIGSTOP) for 10 s and continued, then an owner killed
// (SIGKILL) and started again after 10 s, under load: meanwhile every
// request to the other nodes answers within its budget, 200 or a 503
// naming its cause; within 5 s of the fault's end (SIGCONT, or the start
// of the restart) every (flow, node) pair answers 200 again; the per-flow
// histories are linearizable and no acknowledged sync write is lost.
func TestPausedAndKilledOwnersServeAgainWithinSeconds(t *testing.T) {
	skipShort(t)
	c := clustertest.Start(t, clustertest.Options{Netns: true, Args: netArgs})
	port := gatewaytest.FreePort(t)
	postServed(t, c, port, counterImposter(port))
	lin, probe := flowsPerOwner(port, names(c.Nodes), 4, "lin"), flowsPerOwner(port, names(c.Nodes), 4, "probe")
	l := startLoad(t, c, port, lin, probe, c.Nodes, loadClients{linIncs: 6, linReads: 3, probes: 6})
	time.Sleep(3 * time.Second)

	const length = 10 * time.Second
	for _, fault := range []string{"paused (SIGSTOP)", "killed (SIGKILL)"} {
		leader := c.Leader()
		var victim *clustertest.Node
		for _, n := range c.Nodes {
			if n != leader {
				victim = n // a follower: the fault is its flows', not an election's
			}
		}
		l.without(victim)
		at := l.now()
		if fault == "killed (SIGKILL)" {
			victim.Kill()
		} else {
			c.Pause(victim.Name)
		}
		t.Logf("%.1fs: %s %s for %v", at.Seconds(), victim.Name, fault, length)
		time.Sleep(length)
		endAt := l.now()
		if fault == "killed (SIGKILL)" {
			victim.Restart()
			t.Logf("%.1fs: %s started again; its admin API answered after %v", l.now().Seconds(), victim.Name, (l.now() - endAt).Round(time.Millisecond))
		} else {
			c.Resume(victim.Name)
			t.Logf("%.1fs: %s continued", endAt.Seconds(), victim.Name)
		}
		l.with(victim)
		worst, text := summary(l.recovery(c.Nodes, endAt, recoveryLimit))
		if worst > healWithin {
			t.Errorf("after %s was %s for %v, not every (flow, node) pair answered 200 within %v of the fault's end: %s", victim.Name, fault, length, healWithin, text)
		} else {
			t.Logf("after %s was %s for %v: every pair answered 200 within %v of the fault's end: %s", victim.Name, fault, length, worst.Round(time.Millisecond), text)
		}
		c.WaitVoters(3)
		time.Sleep(2 * time.Second)
	}
	l.finalReads(c.Nodes, 20*time.Second)
	l.stopLoad(true, 500)
}
