package netfault

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newNet(t *testing.T) *Net {
	t.Helper()
	if err := Available(); err != nil {
		t.Fatalf("netfault needs network namespaces (CI runs as root): %v", err)
	}
	n, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat("/run/netns/" + n.Name()); err == nil {
			t.Errorf("%s is still there after Close", n.Name())
		}
	})
	return n
}

// listenIn listens on addr inside node's namespace and echoes one line
// per connection.
func listenIn(t *testing.T, n *Net, node, addr string) {
	t.Helper()
	ns, err := n.NS(node)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := OpenNS(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFD(fd)
	var ln net.Listener
	if err := InNamespace(fd, func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "hello from "+node+"\n")
			c.Close()
		}
	}()
}

// dialFrom dials addr from node's namespace and reads the greeting.
func dialFrom(n *Net, node, addr string, timeout time.Duration) (string, error) {
	ns, err := n.NS(node)
	if err != nil {
		return "", err
	}
	fd, err := OpenNS(ns)
	if err != nil {
		return "", err
	}
	defer closeFD(fd)
	var c net.Conn
	if err := InNamespace(fd, func() (err error) { c, err = net.DialTimeout("tcp", addr, timeout); return err }); err != nil {
		return "", err
	}
	return greeting(c, timeout)
}

func greeting(c net.Conn, timeout time.Duration) (string, error) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(c)
	return string(b), err
}

func fromHub(n *Net, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := n.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	return greeting(c, time.Second)
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// The hub reaches every node; a blackhole rule drops one peer's packets
// silently (the dial times out, it is not refused) in one direction or
// both; Heal restores every link; the hub is never cut.
func TestPartitionsAreSilentAndHeal(t *testing.T) {
	n := newNet(t)
	a, err := n.Add("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.Add("b")
	if err != nil {
		t.Fatal(err)
	}
	c, err := n.Add("c")
	if err != nil {
		t.Fatal(err)
	}
	addr := map[string]string{"a": net.JoinHostPort(a, "7000"), "b": net.JoinHostPort(b, "7000"), "c": net.JoinHostPort(c, "7000")}
	for name, ad := range addr {
		listenIn(t, n, name, ad)
	}
	wait := 300 * time.Millisecond
	reach := func(from, to string) error {
		got, err := dialFrom(n, from, addr[to], wait)
		if err == nil && got != "hello from "+to+"\n" {
			return errors.New("wrong greeting " + strconv.Quote(got))
		}
		return err
	}
	for _, from := range []string{"a", "b", "c"} {
		for _, to := range []string{"a", "b", "c"} {
			if err := reach(from, to); err != nil {
				t.Fatalf("%s to %s before any fault: %v", from, to, err)
			}
		}
		if _, err := fromHub(n, addr[from]); err != nil {
			t.Fatalf("hub to %s: %v", from, err)
		}
	}
	// One direction: b drops a's packets; c is untouched.
	if err := n.Block("a", "b"); err != nil {
		t.Fatal(err)
	}
	if err := reach("a", "b"); !timedOut(err) {
		t.Fatalf("a to b with b dropping a's packets: %v, want a time-out", err)
	}
	if err := reach("b", "a"); !timedOut(err) {
		t.Fatalf("b to a with b dropping a's packets: %v, want a time-out (a's answers are dropped)", err)
	}
	if err := reach("a", "c"); err != nil {
		t.Fatalf("a to c: %v", err)
	}
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := reach("a", "b"); err != nil {
		t.Fatalf("a to b after Heal: %v", err)
	}
	// Isolate: nobody reaches c, c reaches nobody, the hub reaches all.
	if err := n.Isolate("c"); err != nil {
		t.Fatal(err)
	}
	if got := len(n.Cut()); got != 4 {
		t.Fatalf("Isolate(c) of three nodes cut %d directed links, want 4: %v", got, n.Cut())
	}
	for _, p := range [][2]string{{"a", "c"}, {"c", "a"}, {"b", "c"}, {"c", "b"}} {
		if err := reach(p[0], p[1]); !timedOut(err) {
			t.Fatalf("%s to %s with c isolated: %v, want a time-out", p[0], p[1], err)
		}
	}
	if err := reach("a", "b"); err != nil {
		t.Fatalf("a to b with c isolated: %v", err)
	}
	if _, err := fromHub(n, addr["c"]); err != nil {
		t.Fatalf("the hub to the isolated c: %v", err)
	}
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := reach("c", "a"); err != nil {
		t.Fatalf("c to a after Heal: %v", err)
	}
}

// A process started with Wrap runs in the node's namespace, and Close
// kills what is left in the namespaces before it removes them.
func TestWrapRunsInTheNamespaceAndCloseKillsWhatIsLeft(t *testing.T) {
	n := newNet(t)
	if _, err := n.Add("a"); err != nil {
		t.Fatal(err)
	}
	wrap, err := n.Wrap("a")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(wrap[0], append(wrap[1:], "ip", "-o", "addr", "show", "dev", "eth0")...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if want := n.subnet + "11/24"; !strings.Contains(string(out), want) {
		t.Fatalf("eth0 in a's namespace: %s, want %s", out, want)
	}
	cmd := exec.Command(wrap[0], append(wrap[1:], "sleep", "60")...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Close kills what is in the namespace: wait until the wrapper has
	// entered it (ip netns exec joins it only after it starts).
	ns, err := n.NS("a")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		out, _ := exec.Command("ip", "netns", "pids", ns).Output()
		if len(strings.Fields(string(out))) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the process never entered a's namespace")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("Close left a process running in a namespace")
	}
}

// The namespaces of a process that is gone are removed by the next New.
func TestStaleNamespacesAreRemoved(t *testing.T) {
	if err := Available(); err != nil {
		t.Fatalf("netfault needs network namespaces (CI runs as root): %v", err)
	}
	// A pid that runs no process: one that has just exited.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	stale := prefix + strconv.Itoa(cmd.ProcessState.Pid()) + "-1"
	if err := ip("netns", "add", stale); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeNS(stale) })
	newNet(t)
	if _, err := os.Stat("/run/netns/" + stale); err == nil {
		t.Fatalf("%s, left by a process that is gone, is still there", stale)
	}
}

func closeFD(fd int) { _ = unix.Close(fd) }
