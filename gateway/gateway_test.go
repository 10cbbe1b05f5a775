package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/plugins"
	"go.uber.org/goleak"
)

// fasthttp's worker pool cleaner sleeps out its idle period (10 s) after
// the server it served has stopped; BenchmarkServe starts imposters.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"))
}

func TestLogRingKeepsAbsoluteIndexes(t *testing.T) {
	r := newLogRing(3)
	for _, m := range []string{"a", "b", "c", "d", "e"} {
		r.add(LogEntry{Message: m})
	}
	for _, tc := range []struct {
		start, end int
		want       string
	}{
		{0, -1, "cde"}, {3, 3, "d"}, {4, 100, "e"}, {0, 1, ""}, {5, -1, ""},
	} {
		got := ""
		for _, e := range r.slice(tc.start, tc.end) {
			got += e.Message
		}
		if got != tc.want {
			t.Errorf("slice(%d, %d) = %q, want %q", tc.start, tc.end, got, tc.want)
		}
	}
}

func TestAccessRules(t *testing.T) {
	if _, err := newAccess(false, []string{"nonsense"}, slog.Default()); err == nil {
		t.Fatal("a whitelist entry that is not an IP must be refused")
	}
	for _, tc := range []struct {
		local bool
		list  []string
		ip    string
		want  bool
	}{
		{false, nil, "10.0.0.1", true},
		{false, []string{"*"}, "10.0.0.1", true},
		{true, nil, "10.0.0.1", false},
		{true, nil, "127.0.0.1", true},
		{true, nil, "::1", true},
		{false, []string{"127.0.0.1", "::1"}, "127.0.0.2", false},
		{false, []string{"127.0.0.1"}, "::ffff:127.0.0.1", true},
	} {
		a, err := newAccess(tc.local, tc.list, slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		if got := a.permits(net.ParseIP(tc.ip)); got != tc.want {
			t.Errorf("localOnly=%v whitelist=%v: %s permitted=%v, want %v", tc.local, tc.list, tc.ip, got, tc.want)
		}
	}
}

// The plugin host refuses flow keys and values past its own caps before
// they reach the flow store: the two must agree.
func TestPluginFlowCapsAreTheStoresCaps(t *testing.T) {
	if plugins.MaxFlowKeyBytes != flow.MaxKeyBytes || plugins.MaxFlowValueBytes != flow.MaxValueBytes {
		t.Fatalf("plugins caps %d/%d, flow store caps %d/%d",
			plugins.MaxFlowKeyBytes, plugins.MaxFlowValueBytes, flow.MaxKeyBytes, flow.MaxValueBytes)
	}
}

// TestDataDirIsMade: --datadir names a directory that need not exist yet,
// as with mb; the gateway makes it and its stores in it.
func TestDataDirIsMade(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet")
	opts := Options{Logger: slog.New(slog.DiscardHandler), DataDir: dir}
	g, err := newGateway(context.Background(), opts, newLogRing(10))
	if err != nil {
		t.Fatal(err)
	}
	g.close()
	if _, err := os.Stat(filepath.Join(dir, "flow.db")); err != nil {
		t.Fatal(err)
	}
}

// A plugin answer whose status and headers repeat shares them, rendered
// once; the body is each answer's own (in the call's scratch response, not
// a new one), and a repeat of the shared answer is that answer again.
func TestPluginAnswersShareTheirHead(t *testing.T) {
	w := &wasmCall{}
	head := []plugins.Pair{{Name: "Content-Type", Value: "text/plain"}}
	var room []byte     // every body in one room, as the host decodes them (plugins.Input.BodyRoom)
	var bodies []string // each answer's body as it was written
	answer := func(body string) *message.Response {
		room = append(room[:0], body...)
		r := w.response(&plugins.Response{Status: 201, Headers: head, Body: room}, new(message.Response))
		bodies = append(bodies, string(r.Body))
		return r
	}
	first, second, third, again := answer("1"), answer("2"), answer("3"), answer("2")
	if first.Rendered != nil || second.Rendered == nil || third.Rendered != second.Rendered {
		t.Fatalf("rendered: %p %p %p", first.Rendered, second.Rendered, third.Rendered)
	}
	for i, r := range []*message.Response{first, second, third} {
		if r.StatusCode != 201 || bodies[i] != fmt.Sprint(i+1) || len(r.Headers) != 2 || r.Headers[1].Name != "Connection" {
			t.Fatalf("answer %d: %d %v %q", i+1, r.StatusCode, r.Headers, bodies[i])
		}
	}
	if again != second {
		t.Error("a whole repeat was built again")
	}
	if third == second {
		t.Error("another body was answered with the shared answer")
	}
	if string(second.Body) != "2" {
		t.Fatalf("the shared answer's body became %q with the room", second.Body)
	}
	if c := third.Clone(); c.Rendered != nil || &c.Headers[0] == &third.Headers[0] {
		t.Error("a clone shares what a behavior would change")
	}
	p, scratch := &plugins.Response{Status: 201, Headers: head, Body: []byte("4")}, new(message.Response)
	if n := testing.AllocsPerRun(100, func() { w.response(p, scratch) }); n != 0 {
		t.Errorf("an answer with a new body costs %v allocations", n)
	}
	if r := w.response(&plugins.Response{Status: 200, Headers: head, Body: []byte("x")}, new(message.Response)); r.Rendered != nil || r.StatusCode != 200 {
		t.Fatalf("a new status kept the old head: %d", r.StatusCode)
	}
}
