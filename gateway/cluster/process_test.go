package cluster_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/cluster/clustertest"
)

// get sends one imposter request and returns the status and body, or -1
// when the port does not answer.
func get(url string, header http.Header) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

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
// 127.0.0.1-3; an imposter made on any node answers on all three, and its
// recorded requests are the cluster's; restarting a node, joining again and
// removing one work.
func TestThreeNodesServeEveryImposterAndShareRecordings(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	port := clustertest.FreePort(t, n1.Host, n2.Host, n3.Host)

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

	// A stopped node restarts with the same flags (its --cluster-join is
	// then a no-op) and follows what changed while it was away.
	n3.Stop()
	createImposter(t, n1, port+1, "while n3 was away", false)
	n3.Restart()
	c.WaitVoters(3)
	waitServed(t, c, port+1, "while n3 was away", n3)
	if out := n3.Output(); strings.Contains(out, "admitted as a learner") && strings.Count(out, "admitted as a learner") > 1 {
		t.Fatalf("the restarted node joined again:\n%s", out)
	}

	// Removal: the member goes for good; the others keep serving.
	if code, body := n1.Do("DELETE", "/cluster/members/n3", nil); code != http.StatusOK {
		t.Fatalf("DELETE /cluster/members/n3: %d %s", code, body)
	}
	c.WaitVoters(2, "n1", "n2")
	if code, body := n1.Do("DELETE", "/cluster/members/n3", nil); code != http.StatusNotFound {
		t.Fatalf("removing n3 twice: %d %s", code, body)
	}
	createImposter(t, n2, port+2, "after removal", false)
	waitServed(t, c, port+2, "after removal", n1, n2)
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
