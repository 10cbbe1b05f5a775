package cluster_test

import (
	"encoding/json"
	"fmt"
	"github.com/anishathalye/porcupine"
	"github.com/riftgate/riftgate/gateway/cluster"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/cluster/clustertest"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
	"github.com/riftgate/riftgate/raftnode"
	"github.com/riftgate/riftgate/ring"
)

// The flow runtime with real processes: each node a riftgate started with
// the command line on its own 127.0.0.x, killed with SIGKILL, cut
// off by the fault proxy in front of its peer listener.

// send sends one request and returns the status and body, or -1 when the
// port does not answer. Connections are not kept: a test must not hold
// one to a node it kills.
func send(method, url string, header http.Header, body string) (int, string) {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
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

// flowOwner is who owns a flow of an imposter on port with the given
// voters: the ring the nodes compute, computed here from the names alone.
func flowOwner(port int, flowID string, voters ...string) string {
	ids := make([]uint64, len(voters))
	for i, v := range voters {
		ids[i] = raftnode.NodeIDFromName(v)
	}
	r, _ := ring.New(0, ids)
	o := r.Owner(ring.ClassFlow, "i"+strconv.Itoa(port)+":"+flowID)
	for i, id := range ids {
		if id == o {
			return voters[i]
		}
	}
	return ""
}

// scenarioImposter is a checkout scenario per X-Flow-Id under sync.
func scenarioImposter(port int) map[string]any {
	is := func(body string) []any { return []any{map[string]any{"is": map[string]any{"body": body}}} }
	eq := func(method, path string) []any {
		return []any{map[string]any{"equals": map[string]any{"method": method, "path": path}}}
	}
	return map[string]any{
		"protocol": "http", "port": port,
		"_rift": map[string]any{"flowState": map[string]any{"flowIdSource": "header:X-Flow-Id", "durability": "sync"}},
		"stubs": []any{
			map[string]any{"scenarioName": "checkout", "requiredScenarioState": "Started", "newScenarioState": "carted",
				"predicates": eq("POST", "/cart"), "responses": is("added")},
			map[string]any{"scenarioName": "checkout", "requiredScenarioState": "carted", "newScenarioState": "paid",
				"predicates": eq("POST", "/pay"), "responses": is("paid")},
			map[string]any{"scenarioName": "checkout", "requiredScenarioState": "paid", "newScenarioState": "Started",
				"predicates": eq("POST", "/done"), "responses": is("thanks")},
			map[string]any{"scenarioName": "checkout", "requiredScenarioState": "carted",
				"predicates": eq("GET", "/status"), "responses": is("in cart")},
			map[string]any{"scenarioName": "checkout", "requiredScenarioState": "paid",
				"predicates": eq("GET", "/status"), "responses": is("paid already")},
			map[string]any{"responses": []any{map[string]any{"is": map[string]any{"statusCode": 409, "body": "not now"}}}},
		},
	}
}

func post(t *testing.T, in *gatewaytest.Instance, imposter any) {
	t.Helper()
	if code, body := in.Do("POST", "/imposters", imposter); code != http.StatusCreated {
		t.Fatalf("POST /imposters: %d %s", code, body)
	}
}

// postServed posts imposter to the first node and waits until every node
// has it: the others apply the change a moment later.
func postServed(t *testing.T, c *clustertest.Cluster, port int, imposter any) {
	t.Helper()
	post(t, c.Nodes[0].Instance, imposter)
	for _, n := range c.Nodes {
		clustertest.Eventually(t, 10*time.Second, n.Name+" to serve the imposter", func() bool {
			code, _ := n.Do("GET", "/imposters/"+strconv.Itoa(port), nil)
			return code == http.StatusOK
		})
	}
}

func imposterURLOn(host string, port int, path string) string {
	return "http://" + host + ":" + strconv.Itoa(port) + path
}

// 60 header-keyed sync scenario flows, each step of each sent to another
// node than the step before, answer exactly as one node answers them.
func TestScenarioFlowsAnswerAsOnOneNode(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	const alone = "127.0.0.19"
	single := gatewaytest.StartOn(t, alone, gatewaytest.FreePort(t))
	port := gatewaytest.FreePort(t)
	postServed(t, c, port, scenarioImposter(port))
	post(t, single, scenarioImposter(port))
	steps := [][2]string{{"POST", "/cart"}, {"POST", "/pay"}, {"POST", "/done"}, {"GET", "/status"}}
	var wg sync.WaitGroup
	for f := range 60 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(f), 3))
			flow := http.Header{"X-Flow-Id": {"user-" + strconv.Itoa(f)}}
			for i := range 12 {
				st := steps[rng.IntN(len(steps))]
				n := c.Nodes[(f+i)%len(c.Nodes)]
				gotCode, got := send(st[0], imposterURLOn(n.Host, port, st[1]), flow, "")
				wantCode, want := send(st[0], imposterURLOn(alone, port, st[1]), flow, "")
				if gotCode != wantCode || got != want {
					t.Errorf("flow %d step %d %s %s on %s: %d %q, one node answers %d %q", f, i, st[0], st[1], n.Name, gotCode, got, wantCode, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// flowValue is what the flow admin routes answer for one key.
type flowValue struct {
	Value   string `json:"value"`
	Version uint64 `json:"version"`
}

func flowKeyURL(n *clustertest.Node, port int, flow, key string) string {
	return n.URL + "/imposters/" + strconv.Itoa(port) + "/flows/" + flow + "/" + key
}

// syncImposter is an imposter whose flows are written under sync, with one
// stub that answers from a scenario (so a request needs its flow's owner).
func syncImposter(port int) map[string]any {
	return map[string]any{
		"protocol": "http", "port": port,
		"_rift": map[string]any{"flowState": map[string]any{"flowIdSource": "header:X-Flow-Id", "durability": "sync"}},
		"stubs": []any{
			map[string]any{"scenarioName": "s", "requiredScenarioState": "Started", "predicates": []any{map[string]any{"equals": map[string]any{"path": "/state"}}},
				"responses": []any{map[string]any{"is": map[string]any{"body": "started"}}}},
		},
	}
}

func putFlow(n *clustertest.Node, port int, flow, key, val string) (int, flowValue, string) {
	code, body := send("PUT", flowKeyURL(n, port, flow, key), nil, val)
	var v flowValue
	if code == http.StatusOK {
		_ = json.Unmarshal([]byte(body), &v)
	}
	return code, v, body
}

func getFlow(n *clustertest.Node, port int, flow, key string) (int, flowValue, string) {
	code, body := send("GET", flowKeyURL(n, port, flow, key), nil, "")
	var v flowValue
	if code == http.StatusOK {
		_ = json.Unmarshal([]byte(body), &v)
	}
	return code, v, body
}

func names(nodes []*clustertest.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}

// A node killed with SIGKILL: the flows it owns answer 503 from every
// node until it returns, never a wrong value; every other flow is served
// throughout; back, it serves its flows with what they held.
func TestKilledOwnerAnswers503UntilItReturns(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	port := gatewaytest.FreePort(t)
	postServed(t, c, port, syncImposter(port))
	voters := names(c.Nodes)
	owned := map[string][]string{}
	for i := range 60 {
		flow := "f" + strconv.Itoa(i)
		o := flowOwner(port, flow, voters...)
		owned[o] = append(owned[o], flow)
		if code, _, body := putFlow(c.Nodes[i%3], port, flow, "k", "v"+strconv.Itoa(i)); code != http.StatusOK {
			t.Fatalf("PUT %s: %d %s", flow, code, body)
		}
	}
	victim := c.Nodes[2]
	victim.Kill()
	for _, n := range c.Nodes[:2] {
		for o, flows := range owned {
			for _, flow := range flows {
				i, _ := strconv.Atoi(flow[1:])
				code, v, body := getFlow(n, port, flow, "k")
				switch {
				case o == victim.Name && code != http.StatusServiceUnavailable:
					t.Fatalf("%s answered %s, owned by the killed %s: %d %s", n.Name, flow, o, code, body)
				case o == victim.Name && !strings.Contains(body, "flow unavailable"):
					t.Fatalf("503 for %s is not mb's flow-unavailable error: %s", flow, body)
				case o != victim.Name && (code != http.StatusOK || v.Value != "v"+strconv.Itoa(i)):
					t.Fatalf("%s: %s (owner %s alive) = %d %s", n.Name, flow, o, code, body)
				}
			}
		}
		// The imposter's own requests on the killed owner's flows: 503.
		if code, body := send("GET", imposterURLOn(n.Host, port, "/state"), http.Header{"X-Flow-Id": {owned[victim.Name][0]}}, ""); code != http.StatusServiceUnavailable {
			t.Fatalf("a request on a flow of the killed owner: %d %s", code, body)
		}
		if code, body := send("GET", imposterURLOn(n.Host, port, "/state"), http.Header{"X-Flow-Id": {owned[c.Nodes[0].Name][0]}}, ""); code != http.StatusOK || body != "started" {
			t.Fatalf("a request on a live owner's flow: %d %s", code, body)
		}
	}
	victim.Restart()
	for _, flow := range owned[victim.Name] {
		i, _ := strconv.Atoi(flow[1:])
		clustertest.Eventually(t, 20*time.Second, flow+" to answer again", func() bool {
			code, v, _ := getFlow(c.Nodes[0], port, flow, "k")
			return code == http.StatusOK && v.Value == "v"+strconv.Itoa(i)
		})
	}
}

// No acknowledged sync write is lost when any one node is killed, whether
// it comes back or is removed: writers keep writing through the live nodes
// while it dies, and every write that was answered 200 is read back.
func TestNoSyncWriteLostWhenANodeIsKilled(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	port := gatewaytest.FreePort(t)
	postServed(t, c, port, syncImposter(port))
	var mu sync.Mutex
	acked := map[string]string{} // flow/key -> value
	write := func(live []*clustertest.Node, round string, stop <-chan struct{}) {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					flow, key := "w"+strconv.Itoa(w)+"-"+strconv.Itoa(i%20), round+strconv.Itoa(i)
					val := flow + "=" + key
					if code, _, _ := putFlow(live[i%len(live)], port, flow, key, val); code == http.StatusOK {
						mu.Lock()
						acked[flow+"/"+key] = val
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
	}
	check := func(live []*clustertest.Node) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for fk, val := range acked {
			flow, key, _ := strings.Cut(fk, "/")
			var code int
			var v flowValue
			var body string
			clustertest.Eventually(t, 20*time.Second, "acknowledged "+fk+" to be readable", func() bool {
				code, v, body = getFlow(live[0], port, flow, key)
				return code != http.StatusServiceUnavailable
			})
			if code != http.StatusOK || v.Value != val {
				t.Fatalf("acknowledged write %s = %q is lost: %d %s", fk, val, code, body)
			}
		}
		t.Logf("%d acknowledged sync writes all read back", len(acked))
	}
	// killWhileWriting kills victim with SIGKILL half a second into a
	// second of writes.
	killWhileWriting := func(round string, victim *clustertest.Node) {
		stop, done := make(chan struct{}), make(chan struct{})
		go func() { write(c.Nodes, round, stop); close(done) }()
		time.Sleep(500 * time.Millisecond)
		victim.Kill()
		time.Sleep(500 * time.Millisecond)
		close(stop)
		<-done
	}
	// Killed, then back.
	killWhileWriting("a", c.Nodes[1])
	c.Nodes[1].Restart()
	c.WaitVoters(3)
	check(c.Nodes)
	// Killed, then removed.
	killWhileWriting("b", c.Nodes[2])
	if code, body := c.Nodes[0].Do("DELETE", "/cluster/members/"+c.Nodes[2].Name, nil); code != http.StatusOK {
		t.Fatalf("DELETE /cluster/members/%s: %d %s", c.Nodes[2].Name, code, body)
	}
	c.WaitVoters(2, c.Nodes[0].Name, c.Nodes[1].Name)
	check(c.Nodes[:2])
	if len(acked) < 100 {
		t.Fatalf("only %d writes were acknowledged: the test proved little", len(acked))
	}
}

// A stub with several responses goes through them once across the cluster,
// whichever node takes each request; a stub with one costs nothing.
func TestResponsesCycleAcrossNodes(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	port := gatewaytest.FreePort(t)
	is := func(body string) map[string]any { return map[string]any{"is": map[string]any{"body": body}} }
	postServed(t, c, port, map[string]any{"protocol": "http", "port": port, "stubs": []any{
		map[string]any{"responses": []any{is("a"), map[string]any{"is": map[string]any{"body": "b"}, "repeat": 2}, is("c")}},
	}})
	want := []string{"a", "b", "b", "c"}
	for i := range 12 {
		n := c.Nodes[i%3]
		var code int
		var body string
		clustertest.Eventually(t, 10*time.Second, n.Name+" to serve the imposter", func() bool {
			code, body = send("GET", imposterURLOn(n.Host, port, "/"), nil, "")
			return code != -1
		})
		if code != http.StatusOK || body != want[i%len(want)] {
			t.Fatalf("request %d on %s: %d %q, want %q", i, n.Name, code, body, want[i%len(want)])
		}
	}
}

// proxyOnce: 64 concurrent first requests spread over three nodes reach
// the upstream once; with the claim's owner down, the answer is 503 and the
// upstream is not called.
func TestProxyOnceAcrossNodes(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		time.Sleep(100 * time.Millisecond) // long enough that the first hits overlap
		_, _ = io.WriteString(w, "upstream "+r.URL.Path)
	}))
	defer upstream.Close()
	c := clustertest.Start(t, clustertest.Options{})
	port := gatewaytest.FreePort(t)
	postServed(t, c, port, map[string]any{"protocol": "http", "port": port, "stubs": []any{
		map[string]any{"responses": []any{map[string]any{"proxy": map[string]any{"to": upstream.URL, "mode": "proxyOnce",
			"predicateGenerators": []any{map[string]any{"matches": map[string]any{"path": true}}}}}}},
	}})
	for _, n := range c.Nodes {
		clustertest.Eventually(t, 10*time.Second, n.Name+" to serve the imposter", func() bool {
			code, _ := send("GET", imposterURLOn(n.Host, port, "/warm"), nil, "")
			return code == http.StatusOK
		})
	}
	var wg sync.WaitGroup
	var bad []string
	for i := range 64 {
		n := c.Nodes[i%3]
		wg.Go(func() {
			code, body := send("GET", imposterURLOn(n.Host, port, "/first"), nil, "")
			if code != http.StatusOK || body != "upstream /first" {
				mu.Lock()
				bad = append(bad, fmt.Sprintf("%s: %d %s", n.Name, code, body))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	mu.Lock()
	if len(bad) > 0 || hits["/first"] != 1 {
		t.Fatalf("64 first hits: upstream called %d times; wrong answers: %v", hits["/first"], bad)
	}
	mu.Unlock()
	// The claim's owner is down: those first hits answer 503 and reach
	// no upstream; the others are proxied once each.
	c.Nodes[2].Kill()
	unavailable := 0
	for i := range 30 {
		path := "/p" + strconv.Itoa(i)
		code, body := send("GET", imposterURLOn(c.Nodes[0].Host, port, path), nil, "")
		mu.Lock()
		n := hits[path]
		mu.Unlock()
		switch {
		case code == http.StatusServiceUnavailable && n == 0 && strings.Contains(body, "proxyOnce claim"):
			unavailable++
		case code == http.StatusOK && n == 1:
		default:
			t.Fatalf("%s with a node down: %d %s, upstream called %d times", path, code, body, n)
		}
	}
	if unavailable == 0 {
		t.Fatal("no claim was owned by the killed node: the test proved nothing")
	}
	t.Logf("%d of 30 claims had their owner down: 503, upstream not called", unavailable)
}

// Per-flow histories of reads and writes sent to every node, through the
// flow admin routes, are linearizable (porcupine) while the owner of some
// flows is partitioned away, another is killed and restarted, and a third
// is killed and removed and a new node takes its place. A write answered
// 503 as refused never happened; any other failure is an unknown outcome.

func TestLinearizableAcrossProcessesThroughFaults(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Faults: true})
	port := gatewaytest.FreePort(t)
	postServed(t, c, port, syncImposter(port))
	voters := names(c.Nodes)
	var flows []string
	for _, want := range voters {
		for i, n := 0, 0; n < 2; i++ {
			if f := "lin" + strconv.Itoa(i); flowOwner(port, f, voters...) == want {
				flows = append(flows, f)
				n++
			}
		}
	}
	var (
		mu      sync.Mutex
		live    = slices.Clone(c.Nodes)
		history []porcupine.Operation
		next    atomic.Int64
	)
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for id := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(id), 11))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				n := live[(id+i)%len(live)]
				mu.Unlock()
				in := cluster.LinIn{Flow: flows[rng.IntN(len(flows))], Op: []string{"get", "put"}[rng.IntN(2)], Val: int(next.Add(1))}
				call := time.Since(start).Nanoseconds()
				var code int
				var v flowValue
				var body string
				put := in.Op == "put"
				if put {
					code, v, body = putFlow(n, port, in.Flow, "k", strconv.Itoa(in.Val))
				} else {
					code, v, body = getFlow(n, port, in.Flow, "k")
				}
				ret := time.Since(start).Nanoseconds()
				out := cluster.LinOut{V: v.Version}
				switch {
				case code == http.StatusOK:
					out.OK = true
					out.Val, _ = strconv.Atoi(v.Value)
				case code == http.StatusNotFound && !put:
				case !put, strings.Contains(body, "unavailable: refused"):
					time.Sleep(5 * time.Millisecond)
					continue // a failed read, or a refused write: nothing happened
				default:
					out, ret = cluster.LinOut{Unknown: true}, math.MaxInt64
				}
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	setLive := func(nodes ...*clustertest.Node) {
		mu.Lock()
		live = nodes
		mu.Unlock()
	}
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	time.Sleep(time.Second)
	t.Log("n3 partitioned away")
	c.Faults.Isolate(n3.Name)
	time.Sleep(1500 * time.Millisecond)
	// The isolated owner refuses its flows; the others cannot reach it
	// and refuse them too: nobody serves them twice.
	for _, f := range flows {
		if flowOwner(port, f, voters...) != n3.Name {
			continue
		}
		if code, _, body := getFlow(n3, port, f, "k"); code != http.StatusServiceUnavailable || !strings.Contains(body, "isolated") {
			t.Errorf("the isolated owner answered %s: %d %s", f, code, body)
		}
		if code, _, body := getFlow(n1, port, f, "k"); code != http.StatusServiceUnavailable {
			t.Errorf("n1 answered %s, whose owner is cut off: %d %s", f, code, body)
		}
	}
	time.Sleep(500 * time.Millisecond)
	c.Faults.Heal()
	c.WaitVoters(3)
	time.Sleep(500 * time.Millisecond)
	t.Log("n2 killed and restarted")
	setLive(n1, n3)
	n2.Kill()
	time.Sleep(time.Second)
	n2.Restart()
	c.WaitVoters(3)
	setLive(n1, n2, n3)
	time.Sleep(500 * time.Millisecond)
	t.Log("n3 killed and removed; n4 joins")
	setLive(n1, n2)
	n3.Kill()
	if code, body := n1.Do("DELETE", "/cluster/members/"+n3.Name, nil); code != http.StatusOK {
		t.Fatalf("DELETE /cluster/members/n3: %d %s", code, body)
	}
	c.WaitVoters(2, n1.Name, n2.Name)
	n4 := c.Add()
	c.WaitVoters(3, n1.Name, n2.Name, n4.Name)
	setLive(n1, n2, n4)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	cluster.CheckLinearizable(t, history, 200)
}

// Recordings from every node reach the log in batches: 3 nodes take 16
// concurrent requests each, every one of a new path, through proxyOnce
// and proxyAlways. Every path reaches the upstream once per mode and ends
// recorded on every node, and the log grew by fewer entries than there
// were recordings.
func TestRecordingsFromEveryNodeAreBatched(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		_, _ = io.WriteString(w, "upstream "+r.URL.Path)
	}))
	defer upstream.Close()
	c := clustertest.Start(t, clustertest.Options{})
	ports := map[string]int{}
	for _, mode := range []string{"proxyOnce", "proxyAlways"} {
		port := gatewaytest.FreePort(t)
		ports[mode] = port
		postServed(t, c, port, map[string]any{"protocol": "http", "port": port, "stubs": []any{
			map[string]any{"responses": []any{map[string]any{"proxy": map[string]any{"to": upstream.URL, "mode": mode,
				"predicateGenerators": []any{map[string]any{"matches": map[string]any{"path": true}}}}}}},
		}})
	}
	before, err := c.Nodes[0].Status()
	if err != nil {
		t.Fatal(err)
	}
	const perWorker = 25
	var wg sync.WaitGroup
	var bad atomic.Int32
	for w := range 48 {
		n := c.Nodes[w%3]
		wg.Go(func() {
			for i := range perWorker {
				for mode, port := range ports {
					path := fmt.Sprintf("/%s/%d/%d", mode, w, i)
					if code, body := send("GET", imposterURLOn(n.Host, port, path), nil, ""); code != http.StatusOK || body != "upstream "+path {
						if bad.Add(1) == 1 {
							t.Errorf("%s %s: %d %s", n.Name, path, code, body)
						}
					}
				}
			}
		})
	}
	wg.Wait()
	recordings := 48 * perWorker * len(ports)
	mu.Lock()
	for p, n := range hits {
		if n != 1 {
			t.Errorf("%s reached the upstream %d times", p, n)
		}
	}
	if len(hits) != recordings {
		t.Errorf("%d paths reached the upstream, want %d", len(hits), recordings)
	}
	mu.Unlock()
	after, err := c.Nodes[0].Status()
	if err != nil {
		t.Fatal(err)
	}
	entries := after.AppliedIndex - before.AppliedIndex
	t.Logf("%d recordings took %d log entries", recordings, entries)
	if entries >= uint64(recordings) {
		t.Errorf("%d recordings took %d log entries: not batched", recordings, entries)
	}
	for _, n := range c.Nodes {
		for mode, port := range ports {
			want := 48*perWorker + 1
			clustertest.Eventually(t, 20*time.Second, fmt.Sprintf("%s to show the %s recordings", n.Name, mode), func() bool {
				code, body := n.Do("GET", "/imposters/"+strconv.Itoa(port), nil)
				var doc struct {
					Stubs []json.RawMessage `json:"stubs"`
				}
				return code == http.StatusOK && json.Unmarshal(body, &doc) == nil && len(doc.Stubs) == want
			})
		}
	}
}
