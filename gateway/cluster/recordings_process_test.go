package cluster_test

import (
	"bufio"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/cluster/clustertest"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// Every node records under the same rule (here a cap of 4000, oldest
// dropped first), and GET /imposters/:id on any node streams every
// member's requests merged by time, read from the others a page at a
// time: more than a page each here.
func TestRecordingsCappedOnEveryNodeAndMergedAsAStream(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Args: []string{"--maxRecordedRequests", "4000"}})
	port := gatewaytest.FreePort(t)
	createImposter(t, c.Nodes[0], port, "ok", true)
	waitServed(t, c, port, "ok")
	clear := func() {
		if code, body := c.Nodes[0].Do("DELETE", "/imposters/"+strconv.Itoa(port)+"/savedRequests", nil); code != http.StatusOK {
			t.Fatalf("DELETE savedRequests: %d %s", code, body)
		}
	}
	clear()
	// 5000 on n1 (1000 over its cap), 3000 on n2, none on n3; each with
	// a 600-byte body, so that each member's answer takes several pages.
	body := strings.Repeat("x", 600)
	for i, n := range map[int]int{0: 5000, 1: 3000} {
		node := c.Nodes[i]
		out, err := exec.Command(gatewaytest.Binary(t), "loadtest", "run", "-n", strconv.Itoa(n), "-c", "8", "-progress", "never",
			"-method", "POST", "-body", body, fmt.Sprintf("http://%s:%d/from-%s", node.Host, port, node.Name)).CombinedOutput()
		if err != nil {
			t.Fatalf("loadtest on %s: %v\n%s", node.Name, err, out)
		}
	}
	for _, n := range c.Nodes {
		resp, err := http.Get(n.URL + "/imposters/" + strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		var (
			requests, fromN1 int
			numberOf         string
			last             time.Time
		)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			s := strings.TrimSpace(sc.Text())
			switch {
			case strings.HasPrefix(s, `"numberOfRequests":`):
				numberOf = s
			case s == `"path": "/from-n1",`:
				fromN1++
				requests++
			case strings.HasPrefix(s, `"path":`):
				requests++
			case strings.HasPrefix(s, `"timestamp":`):
				at, err := time.Parse(time.RFC3339, strings.Trim(strings.TrimPrefix(s, `"timestamp": `), `",`))
				if err != nil {
					t.Fatal(err)
				}
				if at.Before(last) {
					t.Fatalf("%s: a request of %s comes after one of %s", n.Name, at, last)
				}
				last = at
			}
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if numberOf != `"numberOfRequests": 8000,` || requests != 7000 || fromN1 != 4000 {
			t.Fatalf("%s: %s, %d requests (%d from n1); want 8000 counted, 4000 + 3000 kept", n.Name, numberOf, requests, fromN1)
		}
		if resp.ContentLength != -1 || resp.Header.Get("X-Riftgate-Unreachable-Members") != "" {
			t.Fatalf("%s: Content-Length %d, unreachable %q", n.Name, resp.ContentLength, resp.Header.Get("X-Riftgate-Unreachable-Members"))
		}
	}
	if code, body := c.Nodes[0].Do("GET", "/imposters/"+strconv.Itoa(port)+"/savedRequests?limit=0", nil); code != http.StatusOK ||
		!strings.Contains(string(body), `"dropped": 1000`) || !strings.Contains(string(body), `"total": 4000`) {
		t.Fatalf("n1's own: %d %s", code, body)
	}
	clear()
}
