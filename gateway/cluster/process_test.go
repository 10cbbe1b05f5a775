package cluster_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/cluster/clustertest"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// get sends one imposter request and returns the status and body, or -1
// when the port does not answer.
func get(url string, header http.Header) (int, string) { return send(http.MethodGet, url, header, "") }

func imposterURL(n *clustertest.Node, port int, path string) string {
	return "http://" + net.JoinHostPort(n.Host, strconv.Itoa(port)) + path
}

// waitServed waits until every node answers body on port.
func waitServed(t *testing.T, c *clustertest.Cluster, port int, body string, nodes ...*clustertest.Node) {
	t.Helper()
	if len(nodes) == 0 {
		nodes = c.Nodes
	}
	for _, n := range nodes {
		clustertest.Eventually(t, 20*time.Second, fmt.Sprintf("%s to serve %q on %d", n.Name, body, port), func() bool {
			code, got := get(imposterURL(n, port, "/"), nil)
			return code == http.StatusOK && got == body
		})
	}
}

type imposterDoc struct {
	NumberOfRequests int `json:"numberOfRequests"`
	Requests         []struct {
		Path      string `json:"path"`
		Timestamp string `json:"timestamp"`
	} `json:"requests"`
}

func imposterOn(t *testing.T, n *clustertest.Node, port int, query string) imposterDoc {
	t.Helper()
	code, body := n.Do("GET", "/imposters/"+strconv.Itoa(port)+query, nil)
	if code != http.StatusOK {
		t.Fatalf("GET /imposters/%d on %s: %d %s", port, n.Name, code, body)
	}
	var doc imposterDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func createImposter(t *testing.T, n *clustertest.Node, port int, body string, record bool) {
	t.Helper()
	code, resp := n.Do("POST", "/imposters", map[string]any{
		"protocol": "http", "port": port, "recordRequests": record,
		"stubs": []any{map[string]any{"responses": []any{map[string]any{"is": map[string]any{"body": body}}}}},
	})
	if code != http.StatusCreated {
		t.Fatalf("POST /imposters on %s: %d %s", n.Name, code, resp)
	}
}

// The commands form a 3-node cluster of real processes on
// 127.0.0.11-13; an imposter made on any node answers on all three, and its
// recorded requests are the cluster's; restarting a node, joining again and
// removing one work.
func TestThreeNodesServeEveryImposterAndShareRecordings(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	port := gatewaytest.FreePort(t)

	// Made on a follower, answered once that node runs it: read your
	// writes there at once; the others follow.
	via := n2
	if c.Leader() == n2 {
		via = n3
	}
	createImposter(t, via, port, "made on "+via.Name, true)
	if code, got := get(imposterURL(via, port, "/"), nil); code != http.StatusOK || got != "made on "+via.Name {
		t.Fatalf("the node that took the write does not serve it at once: %d %q", code, got)
	}
	waitServed(t, c, port, "made on "+via.Name)

	// DELETE savedRequests on one node clears every node's (waitServed's
	// requests were recorded). Then one request on each node: every node
	// reports all three, merged by time; ?local=true reports its own.
	clear := func(n *clustertest.Node) {
		t.Helper()
		if code, body := n.Do("DELETE", "/imposters/"+strconv.Itoa(port)+"/savedRequests", nil); code != http.StatusOK {
			t.Fatalf("DELETE savedRequests on %s: %d %s", n.Name, code, body)
		}
		for _, m := range c.Nodes {
			if doc := imposterOn(t, m, port, ""); doc.NumberOfRequests != 0 || len(doc.Requests) != 0 {
				t.Fatalf("after DELETE savedRequests on %s, %s reports %+v", n.Name, m.Name, doc)
			}
		}
	}
	clear(n1)
	for _, n := range c.Nodes {
		get(imposterURL(n, port, "/from-"+n.Name), nil)
		time.Sleep(5 * time.Millisecond) // distinct timestamps, at the millisecond mb shows
	}
	for _, n := range c.Nodes {
		doc := imposterOn(t, n, port, "")
		if doc.NumberOfRequests != 3 || len(doc.Requests) != 3 {
			t.Fatalf("%s reports %d requests, %d recorded; want 3 of each", n.Name, doc.NumberOfRequests, len(doc.Requests))
		}
		for i, want := range []string{"/from-n1", "/from-n2", "/from-n3"} {
			if doc.Requests[i].Path != want {
				t.Fatalf("%s: request %d is %s, want %s (merged by time)", n.Name, i, doc.Requests[i].Path, want)
			}
		}
		if local := imposterOn(t, n, port, "?local=true"); local.NumberOfRequests != 1 || len(local.Requests) != 1 || local.Requests[0].Path != "/from-"+n.Name {
			t.Fatalf("%s ?local=true: %+v", n.Name, local)
		}
	}
	clear(n3)

	// Every node's metrics describe the same group, one of them leading.
	leaders := 0
	for _, n := range c.Nodes {
		code, body := n.Do("GET", "/metrics", nil)
		if code != http.StatusOK || !strings.Contains(string(body), `riftgate_cluster_members{role="voter"} 3`) {
			t.Fatalf("GET /metrics on %s: %d\n%s", n.Name, code, body)
		}
		leaders += strings.Count(string(body), "riftgate_cluster_leader 1\n")
	}
	if leaders != 1 {
		t.Fatalf("%d nodes report they lead", leaders)
	}

	// A stopped node restarts with the same flags (its --cluster-join is
	// then a no-op) and follows what changed while it was away.
	n3.Stop()
	away := gatewaytest.FreePort(t)
	createImposter(t, n1, away, "while n3 was away", false)
	n3.Restart()
	c.WaitVoters(3)
	waitServed(t, c, away, "while n3 was away", n3)
	if out := n3.Output(); strings.Contains(out, "admitted as a learner") || strings.Contains(out, "cannot join yet") {
		t.Fatalf("the restarted node asked to join again:\n%s", out)
	}

	// Removal: the member goes for good; the others keep serving.
	if code, body := n1.Do("DELETE", "/cluster/members/n3", nil); code != http.StatusOK {
		t.Fatalf("DELETE /cluster/members/n3: %d %s", code, body)
	}
	c.WaitVoters(2, "n1", "n2")
	if code, body := n1.Do("DELETE", "/cluster/members/n3", nil); code != http.StatusNotFound {
		t.Fatalf("removing n3 twice: %d %s", code, body)
	}
	after := gatewaytest.FreePort(t)
	createImposter(t, n2, after, "after removal", false)
	waitServed(t, c, after, "after removal", n1, n2)
	st, err := n3.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Members {
		if m.Name == "n3" {
			t.Fatalf("the removed node still counts itself a member: %+v", st)
		}
	}
	if !st.Isolated {
		t.Fatalf("the removed node is not isolated: %+v", st)
	}
}

// writeUntil retries one create on n until it is made (a retry after an
// unknown outcome may find it made: "already in use" counts), and returns
// how long that took.
func writeUntil(t *testing.T, n *clustertest.Node, port int, body string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		code, resp := n.Do("POST", "/imposters", map[string]any{"protocol": "http", "port": port,
			"stubs": []any{map[string]any{"responses": []any{map[string]any{"is": map[string]any{"body": body}}}}}})
		// A retry after an answer the network lost finds the first attempt
		// applied: in the configuration ("already in use") or, while the
		// node is applying it, on the node's socket (EADDRINUSE). The
		// callers' waitServed checks that the imposter is the one written.
		inUse := strings.Contains(string(resp), "already in use") || strings.Contains(string(resp), "EADDRINUSE")
		switch {
		case code == http.StatusCreated, code == http.StatusBadRequest && inUse:
			return time.Since(start)
		case code != http.StatusServiceUnavailable:
			t.Fatalf("POST /imposters on %s: %d %s", n.Name, code, resp)
		case time.Since(start) > within:
			t.Fatalf("POST /imposters on %s still 503 after %v: %s", n.Name, within, resp)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func others(c *clustertest.Cluster, not *clustertest.Node) []string {
	var names []string
	for _, n := range c.Nodes {
		if n != not {
			names = append(names, n.Name)
		}
	}
	return names
}

// A leader killed with kill -9: the others elect another and take writes;
// the killed node, restarted with the same flags, catches up.
func TestLeaderKilledWritesResume(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	l := c.Leader()
	rest := others(c, l)
	port := gatewaytest.FreePort(t)
	l.Kill()
	took := writeUntil(t, c.Node(rest[0]), port, "after the kill", 20*time.Second)
	t.Logf("a write on %s after the leader was killed took %v", rest[0], took)
	if c.Leader(rest...) == l {
		t.Fatal("the killed node still leads")
	}
	waitServed(t, c, port, "after the kill", c.Node(rest[0]), c.Node(rest[1]))
	l.Restart()
	c.WaitVoters(3)
	waitServed(t, c, port, "after the kill", l)
}

// A node cut off from the others by the fault proxy: it reports itself
// isolated, refuses writes and consistent reads with 503 in bounded time,
// and still answers from its own copy; the majority elects a leader and
// takes writes; once the network heals the node catches up.
func TestIsolatedNodeRefusesThenCatchesUp(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Faults: true})
	l := c.Leader()
	rest := others(c, l)
	before := gatewaytest.FreePort(t)
	createImposter(t, l, before, "before", false)
	waitServed(t, c, before, "before")

	c.Faults.Isolate(l.Name)
	clustertest.Eventually(t, 15*time.Second, l.Name+" to see itself isolated", func() bool {
		st, err := l.Status()
		return err == nil && st.Isolated
	})
	start := time.Now()
	code, body := l.Do("POST", "/imposters", map[string]any{"protocol": "http", "port": before + 1})
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "cluster unavailable") {
		t.Fatalf("a write on the isolated node: %d %s", code, body)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("the isolated node took %v to refuse a write", took)
	}
	if code, body := l.Do("GET", "/imposters?consistent=true", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("a consistent read on the isolated node: %d %s", code, body)
	}
	if code, body := l.Do("GET", "/imposters", nil); code != http.StatusOK || !strings.Contains(string(body), strconv.Itoa(before)) {
		t.Fatalf("a local read on the isolated node: %d %s", code, body)
	}
	if code, got := get(imposterURL(l, before, "/"), nil); code != http.StatusOK || got != "before" {
		t.Fatalf("the isolated node stopped serving its imposters: %d %q", code, got)
	}

	during := gatewaytest.FreePort(t)
	writeUntil(t, c.Node(rest[0]), during, "during", 20*time.Second)
	waitServed(t, c, during, "during", c.Node(rest[0]), c.Node(rest[1]))
	if code, _ := get(imposterURL(l, during, "/"), nil); code != -1 {
		t.Fatalf("the isolated node serves a change it cannot have seen: %d", code)
	}

	c.Faults.Heal()
	c.WaitVoters(3)
	waitServed(t, c, during, "during", l)
	if code, body := l.Do("GET", "/imposters?consistent=true", nil); code != http.StatusOK || !strings.Contains(string(body), strconv.Itoa(during)) {
		t.Fatalf("a consistent read after healing: %d %s", code, body)
	}

	// A lossy, slow network: every write still lands once, on every node.
	c.Faults.SetAll(clustertest.Link{Drop: 0.05, Delay: 2 * time.Millisecond, Jitter: 10 * time.Millisecond})
	lossy := map[*clustertest.Node]int{}
	for _, n := range c.Nodes {
		lossy[n] = gatewaytest.FreePort(t)
		writeUntil(t, n, lossy[n], "lossy "+n.Name, 30*time.Second)
	}
	c.Faults.Heal()
	for _, n := range c.Nodes {
		waitServed(t, c, lossy[n], "lossy "+n.Name)
	}
	t.Logf("fault proxy: %+v", c.Faults.Stats())
}

func appliedIndex(t *testing.T, n *clustertest.Node) uint64 {
	t.Helper()
	st, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	return st.AppliedIndex
}

// A plugin module larger than one Raft entry travels in parts and loads on
// every node; a stub that names the same module again by its path sends
// its hash, not its bytes, because the cluster has them.
func TestLargeModulesTravelInPartsAndByHash(t *testing.T) {
	path := filepath.Join(gatewaytest.WasmDir(t), "examples", "counter-go.wasm")
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.Start(t, clustertest.Options{})
	n2, n3 := c.Nodes[1], c.Nodes[2]
	before := appliedIndex(t, n2)
	if code, body := n2.Do("PUT", "/plugins/counter", wasm); code != http.StatusOK {
		t.Fatalf("PUT /plugins/counter (%d bytes): %d %s", len(wasm), code, body)
	}
	parts := appliedIndex(t, n2) - before
	if want := uint64((len(wasm) + 768<<10 - 1) / (768 << 10)); parts < want {
		t.Fatalf("a %d-byte module took %d entries, want at least %d parts", len(wasm), parts, want)
	}
	for _, n := range c.Nodes {
		clustertest.Eventually(t, 20*time.Second, n.Name+" to hold the plugin", func() bool {
			code, _ := n.Do("GET", "/plugins/counter", nil)
			return code == http.StatusOK
		})
	}
	port := gatewaytest.FreePort(t)
	before = appliedIndex(t, n3)
	code, body := n3.Do("POST", "/imposters", map[string]any{
		"protocol": "http", "port": port,
		"_rift": map[string]any{"flowState": map[string]any{"flowIdSource": "header:X-Flow-Id"}},
		"stubs": []any{
			map[string]any{"predicates": []any{map[string]any{"equals": map[string]any{"path": "/by-path"}}},
				"responses": []any{map[string]any{"wasm": map[string]any{"module": path}}}},
			map[string]any{"responses": []any{map[string]any{"wasm": map[string]any{"module": "counter"}}}},
		},
	})
	if code != http.StatusCreated {
		t.Fatalf("POST /imposters: %d %s", code, body)
	}
	if entries := appliedIndex(t, n3) - before; entries != 1 {
		t.Fatalf("an imposter bringing a module the cluster has took %d entries, want 1 (the hash, not the bytes)", entries)
	}
	for _, n := range c.Nodes {
		for _, path := range []string{"/", "/by-path"} {
			clustertest.Eventually(t, 30*time.Second, n.Name+" to run the plugin at "+path, func() bool {
				code, got := get(imposterURL(n, port, path), http.Header{"X-Flow-Id": {"alice"}})
				return code == http.StatusOK && strings.HasPrefix(got, `{"count":`)
			})
		}
	}
}

// A leader stopped with SIGTERM (a rolling restart) hands leadership to
// another voter before it leaves, and comes back as a follower.
func TestStoppedLeaderHandsOver(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	l := c.Leader()
	l.Stop()
	if !strings.Contains(l.Output(), "leadership handed over before leaving") || !strings.Contains(l.Output(), "done=true") {
		t.Fatalf("the leader left without handing over:\n%s", l.Output())
	}
	next := c.Leader(others(c, l)...)
	l.Restart()
	c.WaitVoters(3)
	if got := c.Leader(); got != next {
		t.Logf("leadership moved again, to %s", got.Name)
	}
}
