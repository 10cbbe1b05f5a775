package ui_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/cluster"
	"github.com/riftgate/riftgate/gateway/cluster/clustertest"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
	"github.com/riftgate/riftgate/raftnode"
	"github.com/riftgate/riftgate/ring"
)

// The UI's cluster runs on addresses of its own: the cluster tests'
// clusters (127.0.0.11 on) may run at the same time.
var clusterHosts = []string{"127.0.0.21", "127.0.0.22", "127.0.0.23"}

// TestClusterPage starts three real members, one named with markup, sends
// stateful requests through one of them, and reads the group, the flows
// each member owns and the owner RPC latency off that node's cluster page;
// then kills another member (SIGKILL) and watches the page mark it.
func TestClusterPage(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Hosts: clusterHosts, Names: []string{"n1", "n2", hostile}})
	n1 := c.Node("n1")
	port := gatewaytest.FreePort(t)
	n1.PostImposter(map[string]any{
		"protocol": "http", "port": port, "name": "shop",
		"_rift": map[string]any{"flowState": map[string]any{"flowIdSource": "header:X-Flow-Id"}},
		"stubs": []any{map[string]any{"scenarioName": "checkout", "requiredScenarioState": "Started", "newScenarioState": "paid",
			"responses": []any{map[string]any{"is": map[string]any{"body": "paid"}}}}},
	})
	const flows = 30
	url := fmt.Sprintf("http://%s:%d/pay", n1.Host, port)
	for i := range flows {
		if status, body, err := doWith("POST", url, http.Header{"X-Flow-Id": {fmt.Sprintf("flow-%d", i)}}); err != nil || status != 200 || body != "paid" {
			t.Fatalf("flow-%d: %d %q %v", i, status, body, err)
		}
	}
	leader := c.Leader()

	p := browser(t)
	p.open(n1.URL + "/cluster")
	p.wait("three members", `document.querySelectorAll("#members tr.member").length === 3`)
	p.wait("the leader", fmt.Sprintf(`document.getElementById("leader").textContent === %q`, leader.Name))
	if got := eval[string](p, `document.getElementById("self").textContent`); got != "n1" {
		t.Errorf("this node shown as %q", got)
	}
	// Every flow has one owner: the members' counts add up to the flows
	// sent, and with 30 flows on three voters more than one owns some.
	p.wait("the flows each member owns", fmt.Sprintf(`document.getElementById("ring-total").textContent === "%d" &&
		[...document.querySelectorAll("#members td.owned")].map(td => Number(td.textContent)).reduce((a, b) => a + b, 0) === %d &&
		[...document.querySelectorAll("#members td.owned")].filter(td => Number(td.textContent) > 0).length > 1 &&
		document.querySelectorAll("#ring path.ring-arc").length > 1`, flows, flows))
	// Each flow has two successors among three voters: every copy arrives.
	p.wait("the replicas", fmt.Sprintf(`[...document.querySelectorAll("#members td.replicas")].map(td => Number(td.textContent)).reduce((a, b) => a + b, 0) === %d`, 2*flows))
	// n1 owns a third of the flows or so; the others went by owner RPC.
	p.wait("owner RPC latency", `Number(document.getElementById("rpc-count").textContent) > 0 && document.getElementById("rpc-p99").textContent !== "–"`)
	// Each request reads its flow's scenario state from the owner: while
	// they come, the latency chart draws.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			_, _, _ = doWith("POST", url, http.Header{"X-Flow-Id": {fmt.Sprintf("flow-%d", i%flows)}})
		}
	})
	p.wait("the latency chart", `document.querySelectorAll("#rpc-chart path.line").length === 2`)
	close(stop)
	wg.Wait()
	p.wait("every member reachable", `document.querySelectorAll("#members td.reach.ok").length === 3 && document.getElementById("isolated").textContent === "none"`)
	names := eval[[]string](p, `[...document.querySelectorAll("#members tr.member .name")].map(e => e.textContent)`)
	if len(names) != 3 || !slices.Contains(names, hostile) {
		t.Fatalf("member names shown as %q, want the hostile one as text %q", names, hostile)
	}
	noScript(t, p)
	p.shot("cluster")

	// Each member owns what the ring, computed here from the names alone,
	// gives it: in the JSON every client gets, and on the page.
	want := map[string]int64{}
	ids := []uint64{}
	for _, n := range c.Nodes {
		ids = append(ids, raftnode.NodeIDFromName(n.Name))
	}
	r, _ := ring.New(0, ids)
	for i := range flows {
		owner := r.Owner(ring.ClassFlow, fmt.Sprintf("i%d:flow-%d", port, i))
		want[c.Nodes[slices.Index(ids, owner)].Name]++
	}
	var own cluster.Ownership
	if status, body := n1.Do("GET", "/cluster/flows", nil); status != 200 || json.Unmarshal(body, &own) != nil {
		t.Fatalf("GET /cluster/flows: %d %s", status, body)
	}
	got := map[string]int64{}
	for _, m := range own.Members {
		got[m.Name] = m.Owned
	}
	shown := eval[map[string]float64](p, `Object.fromEntries([...document.querySelectorAll("#members tr.member")].map(r => [r.querySelector(".name").textContent, Number(r.querySelector("td.owned").textContent)]))`)
	for name, n := range want {
		if got[name] != n || int64(shown[name]) != n {
			t.Errorf("%s owns %d flows by the ring; GET /cluster/flows says %d, the page %v", name, n, got[name], shown[name])
		}
	}

	victim := c.Node("n2")
	victim.Kill()
	p.wait("n2 marked unreachable", `(() => {
		const row = [...document.querySelectorAll("#members tr.member")].find(r => r.querySelector(".name").textContent === "n2");
		return row && row.classList.contains("unreachable") && row.querySelector("td.reach").textContent === "unreachable" &&
			row.querySelector("td.owned").textContent === "?";
	})()`)
	p.wait("the others still reachable", `document.querySelectorAll("#members td.reach.ok").length === 2 &&
		document.getElementById("ring").textContent.includes("1 member not counted")`)
	p.shot("cluster-unreachable")

	// With a second member gone, n1 sees no quorum: it is isolated, and the
	// page says so.
	c.Node(hostile).Kill()
	p.wait("n1 isolated", `document.getElementById("isolated").textContent.startsWith("n1:") &&
		document.getElementById("isolated").classList.contains("badge-bad") &&
		document.querySelector("#members tr.member .tag.isolated") !== null`)
	noScript(t, p)
}

// TestClusterJSONIsUnaffected: GET /cluster answers API clients the bytes
// the cluster's handler writes, whatever JSON-ish Accept they send, with
// Vary: Accept; only a browser's Accept gets the page.
func TestClusterJSONIsUnaffected(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Nodes: 1, Hosts: clusterHosts[2:]})
	n := c.Nodes[0]
	get := func(accept string) (string, []byte, http.Header) {
		h := http.Header{}
		if accept != "" {
			h.Set("Accept", accept)
		}
		resp, err := gatewaytest.Request("GET", n.URL+"/cluster", nil, h)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Split(resp.Header.Get("Content-Type"), ";")[0], b, resp.Header
	}
	for _, accept := range []string{"", "*/*", "application/json", "application/json, text/html"} {
		ct, body, hdr := get(accept)
		if ct != "application/json" || hdr.Get("Vary") != "Accept" {
			t.Fatalf("Accept %q: %s, Vary %q", accept, ct, hdr.Get("Vary"))
		}
		// The body is the Status the handler encodes, and nothing else.
		var st cluster.Status
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatalf("Accept %q: %v: %s", accept, err, body)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		_ = enc.Encode(st)
		if !bytes.Equal(body, want.Bytes()) || st.Self != "n1" || len(st.Members) != 1 {
			t.Fatalf("Accept %q: GET /cluster is\n%s\nwant\n%s", accept, body, want.Bytes())
		}
	}
	if ct, _, _ := get("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"); ct != "text/html" {
		t.Fatalf("a browser got %s", ct)
	}
}

// TestClusterPageOnASingleNode: without a cluster, GET /cluster stays the
// API's 404 for clients, and the page says the node is alone, behind the
// API key like every page's data.
func TestClusterPageOnASingleNode(t *testing.T) {
	rg := gatewaytest.Start(t, "--apikey", "s3cret")
	key := http.Header{"X-Api-Key": {"s3cret"}}
	status, body := gatewaytest.Do(t, "GET", rg.URL+"/cluster", nil, key)
	_, other := gatewaytest.Do(t, "GET", rg.URL+"/no-such-route", nil, key)
	other = bytes.ReplaceAll(other, []byte("/no-such-route"), []byte("/cluster")) // the page names the path
	if status != 404 || !bytes.Equal(body, other) {
		t.Fatalf("GET /cluster on a single node: %d %s, want the API's 404 %s", status, body, other)
	}
	p := browser(t)
	p.open(rg.URL + "/cluster")
	p.wait("the key prompt", `document.getElementById("apikey") !== null`)
	eval[bool](p, `(() => { document.getElementById("apikey").value = "s3cret"; document.getElementById("apikey-go").click(); return true })()`)
	p.wait("the single-node notice", `document.getElementById("single") !== null && document.getElementById("single").textContent.includes("not in a cluster")`)
	if got := eval[string](p, `[...document.querySelectorAll("#nav a.active")].map(a => a.textContent).join()`); got != "Cluster" {
		t.Errorf("active navigation entry %q, want Cluster", got)
	}
	p.shot("cluster-single")
}
