package cluster_test

import (
	"fmt"
	"io"
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

// WebSocket flows through a kill -9. A user whose flow's owner lives keeps
// its state (scenario and response cycle) on the nodes that live, over the
// connections it had and over new ones, when a node that does not own it
// is killed. A user whose flow's owner is the killed node gets an honest
// refusal, never an answer from a stale copy: each message closes its
// connection with 1013 (try again later) naming the flow as unavailable,
// and a handshake whose stubs need the flow is refused with 503 and mb's
// error. Back, the owner serves the flow with what it held (sync).
func TestWebSocketFlowsThroughAKilledNode(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	port := gatewaytest.FreePort(t)
	is := func(data string) map[string]any { return map[string]any{"is": map[string]any{"data": data}} }
	eq := func(data string) []any { return []any{map[string]any{"equals": map[string]any{"data": data}}} }
	postServed(t, c, port, map[string]any{
		"protocol": "ws", "port": port,
		"_rift": map[string]any{"flowState": map[string]any{"flowIdSource": "query:user", "durability": "sync", "cycles": "flow"}},
		"stubs": []any{
			// A handshake that needs the flow: a user already in is greeted.
			map[string]any{"scenarioName": "session", "requiredScenarioState": "in",
				"predicates": []any{map[string]any{"equals": map[string]any{"type": "open"}}}, "responses": []any{is("welcome back")}},
			map[string]any{"scenarioName": "session", "requiredScenarioState": "Started", "newScenarioState": "in",
				"predicates": eq("login"), "responses": []any{is("welcome")}},
			map[string]any{"scenarioName": "session", "requiredScenarioState": "in",
				"predicates": eq("whoami"), "responses": []any{is("logged in")}},
			map[string]any{"predicates": eq("whoami"), "responses": []any{is("anonymous")}},
			map[string]any{"predicates": eq("next"), "responses": []any{is("1"), is("2"), is("3"), is("4"), is("5"), is("6")}},
		},
	})
	victim := c.Nodes[2]
	voters := names(c.Nodes)
	// kept: a user whose owner is not the victim; lost: one whose owner is.
	var kept, lost string
	for i := 0; kept == "" || lost == ""; i++ {
		u := "u" + strconv.Itoa(i)
		switch o := flowOwner(port, u, voters...); {
		case o == victim.Name && lost == "":
			lost = u
		case o != victim.Name && kept == "":
			kept = u
		}
	}
	t.Logf("%s owned by %s, %s by the victim %s", kept, flowOwner(port, kept, voters...), lost, victim.Name)

	dialOn := func(n *clustertest.Node, user string) (*websocket.Conn, *http.Response, error) {
		d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
		return d.Dial(fmt.Sprintf("ws://%s:%d/?user=%s", n.Host, port, user), nil)
	}
	dial := func(n *clustertest.Node, user string) *websocket.Conn {
		t.Helper()
		conn, resp, err := dialOn(n, user)
		if err != nil {
			t.Fatalf("%s on %s: %v %+v", user, n.Name, err, resp)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	read := func(conn *websocket.Conn) (string, error) {
		_ = conn.NetConn().SetDeadline(time.Now().Add(10 * time.Second))
		_, p, err := conn.ReadMessage()
		return string(p), err
	}
	ask := func(conn *websocket.Conn, msg string) string {
		t.Helper()
		_ = conn.NetConn().SetDeadline(time.Now().Add(10 * time.Second))
		if err := conn.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		got, err := read(conn)
		if err != nil {
			t.Fatalf("%s: %v", msg, err)
		}
		return got
	}
	// Both users log in and walk their cycles on every node, the victim
	// included, before the kill.
	keptOn := []*websocket.Conn{dial(c.Nodes[0], kept), dial(c.Nodes[1], kept), dial(victim, kept)}
	lostOn := []*websocket.Conn{dial(c.Nodes[0], lost), dial(c.Nodes[1], lost)}
	if got := ask(keptOn[2], "login"); got != "welcome" {
		t.Fatalf("%s login on %s: %q", kept, victim.Name, got)
	}
	if got := ask(lostOn[0], "login"); got != "welcome" {
		t.Fatalf("%s login: %q", lost, got)
	}
	for i, conn := range []*websocket.Conn{keptOn[0], keptOn[1], keptOn[2], lostOn[0], lostOn[1]} {
		want := map[int]string{0: "1", 1: "2", 2: "3", 3: "1", 4: "2"}[i]
		if got := ask(conn, "next"); got != want {
			t.Fatalf("next #%d before the kill: %q, want %q", i, got, want)
		}
	}

	victim.Kill()
	// The killed node's connection ends.
	if _, err := read(keptOn[2]); err == nil {
		t.Fatal("a connection to the killed node still reads")
	}
	// The kept user's state, on the live nodes, over the old connections
	// and a new one (whose handshake stub reads the flow).
	for i, conn := range keptOn[:2] {
		if got := ask(conn, "whoami"); got != "logged in" {
			t.Fatalf("%s on n%d after the kill: %q", kept, i+1, got)
		}
	}
	if got := ask(keptOn[0], "next"); got != "4" {
		t.Fatalf("%s's cycle after the kill: %q, want 4", kept, got)
	}
	fresh := dial(c.Nodes[1], kept)
	if got, err := read(fresh); err != nil || got != "welcome back" {
		t.Fatalf("%s's new connection after the kill: %q %v", kept, got, err)
	}
	if got := ask(fresh, "next"); got != "5" {
		t.Fatalf("%s's cycle on a new connection: %q, want 5", kept, got)
	}

	// The lost user: a message closes with 1013, naming the flow.
	for i, conn := range lostOn {
		_ = conn.NetConn().SetDeadline(time.Now().Add(10 * time.Second))
		if err := conn.WriteMessage(websocket.TextMessage, []byte("whoami")); err != nil {
			t.Fatal(err)
		}
		got, err := read(conn)
		ce, ok := err.(*websocket.CloseError)
		if !ok || ce.Code != websocket.CloseTryAgainLater || !strings.HasPrefix(ce.Text, "flow unavailable: ") {
			t.Fatalf("%s on n%d, whose owner was killed: message %q, %v; want a close 1013 naming the flow", lost, i+1, got, err)
		}
	}
	// A handshake whose stubs need the flow: 503 and mb's error.
	_, resp, err := dialOn(c.Nodes[0], lost)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("%s's handshake, whose owner was killed: %v %+v", lost, err, resp)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"code": "flow unavailable"`) && !strings.Contains(string(body), `"code":"flow unavailable"`) {
		t.Fatalf("the refusal is not mb's flow-unavailable error: %s", body)
	}

	// Back, the owner serves the lost user's flow as it was.
	victim.Restart()
	var back *websocket.Conn
	clustertest.Eventually(t, 30*time.Second, lost+"'s flow to answer again", func() bool {
		conn, _, err := dialOn(c.Nodes[0], lost)
		if err != nil {
			return false
		}
		if got, err := read(conn); err != nil || got != "welcome back" {
			conn.Close()
			return false
		}
		back = conn
		return true
	})
	t.Cleanup(func() { back.Close() })
	if got := ask(back, "next"); got != "3" {
		t.Fatalf("%s's cycle after the owner came back: %q, want 3", lost, got)
	}
}
