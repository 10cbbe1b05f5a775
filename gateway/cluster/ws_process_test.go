package cluster_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/riftgate/riftgate/gateway/cluster/clustertest"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// WebSocket flows across a 3-node cluster: a user's connections to
// different nodes share one flow (query:user), so a scenario one moves is
// seen by the others, and responses cycle per user across the nodes.
func TestWebSocketFlowsAcrossNodes(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	port := gatewaytest.FreePort(t)
	is := func(data string) map[string]any { return map[string]any{"is": map[string]any{"data": data}} }
	eq := func(data string) []any { return []any{map[string]any{"equals": map[string]any{"data": data}}} }
	postServed(t, c, port, map[string]any{
		"protocol": "ws", "port": port,
		"_rift": map[string]any{"flowState": map[string]any{"flowIdSource": "query:user", "durability": "sync", "cycles": "flow"}},
		"stubs": []any{
			map[string]any{"scenarioName": "session", "requiredScenarioState": "Started", "newScenarioState": "in",
				"predicates": eq("login"), "responses": []any{is("welcome")}},
			map[string]any{"scenarioName": "session", "requiredScenarioState": "in",
				"predicates": eq("whoami"), "responses": []any{is("logged in")}},
			map[string]any{"predicates": eq("whoami"), "responses": []any{is("anonymous")}},
			map[string]any{"predicates": eq("next"), "responses": []any{is("1"), is("2"), is("3")}},
		},
	})
	dial := func(n *clustertest.Node, user string) *websocket.Conn {
		t.Helper()
		url := fmt.Sprintf("ws://%s:%d/?user=%s", n.Host, port, user)
		var conn *websocket.Conn
		clustertest.Eventually(t, 10*time.Second, n.Name+" to accept a websocket", func() bool {
			var err error
			conn, _, err = websocket.DefaultDialer.Dial(url, nil)
			return err == nil
		})
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	ask := func(conn *websocket.Conn, msg string) string {
		t.Helper()
		_ = conn.NetConn().SetDeadline(time.Now().Add(10 * time.Second))
		if err := conn.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, p, err := conn.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		return string(p)
	}
	ann := []*websocket.Conn{dial(c.Nodes[0], "ann"), dial(c.Nodes[1], "ann"), dial(c.Nodes[2], "ann")}
	bob := dial(c.Nodes[1], "bob")
	if got := ask(ann[0], "login"); got != "welcome" {
		t.Fatalf("login on n1: %q", got)
	}
	for i, conn := range ann {
		if got := ask(conn, "whoami"); got != "logged in" {
			t.Fatalf("ann on n%d after logging in on n1: %q", i+1, got)
		}
	}
	if got := ask(bob, "whoami"); got != "anonymous" {
		t.Fatalf("bob: %q", got)
	}
	var seq []string
	for i := range 4 {
		seq = append(seq, ask(ann[i%3], "next"))
	}
	seq = append(seq, ask(bob, "next"))
	if strings.Join(seq, ",") != "1,2,3,1,1" {
		t.Fatalf("cycles per user across nodes: %v", seq)
	}
	code, body := c.Nodes[2].Do("GET", "/imposters/"+strconv.Itoa(port)+"/scenarios?flowId=ann", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"in"`) {
		t.Fatalf("ann's scenario seen from n3: %d %s", code, body)
	}
}
