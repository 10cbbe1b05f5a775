package cluster_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/cluster/clustertest"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// recordingsV1Binary builds riftgate with the tag riftgate_recordings_v1:
// a node of it serves and asks only version 1 of the recordings route, as
// builds before version 2 did.
func recordingsV1Binary(t *testing.T) string {
	t.Helper()
	root, err := gatewaytest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "riftgate-recordings-v1")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "riftgate_recordings_v1", "-o", bin, "./cmd/riftgate")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the version 1 riftgate: %v\n%s", err, out)
	}
	return bin
}

// A rolling upgrade's mixed cluster: n3 runs a build that knows only
// version 1 of the recordings route. GET /imposters/:id on every node,
// of either build, still counts and shows every member's requests,
// merged by time, n3's exactly as n3 shows them itself; DELETE
// savedRequests on a node of either build clears every member. Then n3 is
// upgraded in place, and the view stays whole.
func TestRecordingsAcrossBuildsOfBothVersions(t *testing.T) {
	old := recordingsV1Binary(t)
	c := clustertest.Start(t, clustertest.Options{Binaries: []string{"", "", old}})
	port := gatewaytest.FreePort(t)
	createImposter(t, c.Nodes[0], port, "ok", true)
	waitServed(t, c, port, "ok")
	record := func(each int) {
		t.Helper()
		for _, n := range c.Nodes {
			for i := range each {
				if code, body := send("GET", imposterURLOn(n.Host, port, "/from-"+n.Name+"?i="+strconv.Itoa(i)), nil, ""); code != http.StatusOK {
					t.Fatalf("request to %s: %d %s", n.Name, code, body)
				}
			}
		}
	}
	clear := func(n *clustertest.Node) {
		t.Helper()
		if code, body := n.Do("DELETE", "/imposters/"+strconv.Itoa(port)+"/savedRequests", nil); code != http.StatusOK {
			t.Fatalf("DELETE savedRequests on %s: %d %s", n.Name, code, body)
		}
	}
	// requests is an imposter's requests, each as its JSON.
	requests := func(n *clustertest.Node, query string) (int, []string) {
		t.Helper()
		code, body := n.Do("GET", "/imposters/"+strconv.Itoa(port)+query, nil)
		if code != http.StatusOK {
			t.Fatalf("GET on %s: %d %s", n.Name, code, body)
		}
		var doc struct {
			NumberOfRequests int               `json:"numberOfRequests"`
			Requests         []json.RawMessage `json:"requests"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range doc.Requests {
			out = append(out, string(r))
		}
		return doc.NumberOfRequests, out
	}

	clear(c.Nodes[0]) // the health checks of waitServed
	record(20)
	_, own := requests(c.Nodes[2], "?local=true")
	if len(own) != 20 {
		t.Fatalf("n3's own: %d requests", len(own))
	}
	for _, n := range c.Nodes {
		count, all := requests(n, "")
		if count != 60 || len(all) != 60 {
			t.Fatalf("%s: numberOfRequests %d, %d requests; want 60 of 60", n.Name, count, len(all))
		}
		var last time.Time
		per := map[string]int{}
		var fromN3 []string
		for _, js := range all {
			var r struct {
				Path      string `json:"path"`
				Timestamp string `json:"timestamp"`
			}
			if err := json.Unmarshal([]byte(js), &r); err != nil {
				t.Fatal(err)
			}
			per[r.Path]++
			at, err := time.Parse(time.RFC3339Nano, r.Timestamp)
			if err != nil || at.Before(last) {
				t.Fatalf("%s: out of time order at %s (%v)", n.Name, r.Timestamp, err)
			}
			last = at
			if r.Path == "/from-n3" {
				fromN3 = append(fromN3, js)
			}
		}
		if per["/from-n1"] != 20 || per["/from-n2"] != 20 || per["/from-n3"] != 20 {
			t.Fatalf("%s: requests per node %v", n.Name, per)
		}
		if !slices.Equal(fromN3, own) {
			t.Fatalf("%s shows n3's requests otherwise than n3 does:\n%v\n%v", n.Name, fromN3, own)
		}
	}

	// A clear from either build reaches every member.
	for _, from := range []*clustertest.Node{c.Nodes[0], c.Nodes[2]} {
		clear(from)
		for _, n := range c.Nodes {
			if count, all := requests(n, ""); count != 0 || len(all) != 0 {
				t.Fatalf("after a clear on %s, %s still shows %d (%d)", from.Name, n.Name, count, len(all))
			}
		}
		record(3)
		if count, _ := requests(c.Nodes[1], ""); count != 9 {
			t.Fatalf("%d requests after recording again", count)
		}
	}

	// The upgrade ends: n3 restarts as this build, and every node sees
	// every member's requests as before, every node on this build.
	c.Nodes[2].Stop()
	c.Nodes[2].RestartAs(gatewaytest.Binary(t))
	waitServed(t, c, port, "ok", c.Nodes[2])
	clear(c.Nodes[1])
	record(5)
	for _, n := range c.Nodes {
		if count, all := requests(n, ""); count != 15 || len(all) != 15 {
			t.Fatalf("after the upgrade, %s: numberOfRequests %d, %d requests; want 15 of 15", n.Name, count, len(all))
		}
	}
}
