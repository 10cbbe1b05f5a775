package imposter

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/predicate"
	"github.com/riftgate/riftgate/gateway/wsproto"
)

func TestWSAnswerOf(t *testing.T) {
	tests := []struct {
		name  string
		obj   string
		msgs  []string // "t:" or "b:" and the data
		close int
		every time.Duration
		times int
		wire  bool // rendered whole
		err   string
	}{
		{name: "empty", obj: `{}`, wire: true},
		{name: "data", obj: `{"data":"pong"}`, msgs: []string{"t:pong"}, wire: true},
		{name: "empty string is a message", obj: `{"data":""}`, msgs: []string{"t:"}, wire: true},
		{name: "null data is none", obj: `{"data":null}`, wire: true},
		{name: "json data", obj: `{"data":{"a":[1, 2]}}`, msgs: []string{`t:{"a":[1,2]}`}, wire: true},
		{name: "binary", obj: `{"data":"AAE=","type":"binary"}`, msgs: []string{"b:\x00\x01"}, wire: true},
		{name: "type after data", obj: `{"type":"binary","data":"/w=="}`, msgs: []string{"b:\xff"}, wire: true},
		{name: "data first, then messages", obj: `{"messages":["b",{"data":"Ag==","type":"binary"}],"data":"a"}`,
			msgs: []string{"t:a", "t:b", "b:\x02"}, wire: true},
		{name: "a wait", obj: `{"messages":[{"data":"x","wait":5}]}`, msgs: []string{"t:x"}},
		{name: "close true", obj: `{"close":true}`, close: 1000, wire: true},
		{name: "close code", obj: `{"close":4000}`, close: 4000, wire: true},
		{name: "close object", obj: `{"close":{"code":1001,"reason":"away"}}`, close: 1001, wire: true},
		{name: "close false", obj: `{"close":false}`, wire: true},
		{name: "schedule", obj: `{"data":"t","every":100,"times":3}`, msgs: []string{"t:t"}, every: 100 * time.Millisecond, times: 3, wire: true},
		{name: "bad type", obj: `{"data":"x","type":"json"}`, err: "'type'"},
		{name: "bad close code", obj: `{"close":1006}`, err: "close code 1006"},
		{name: "close code too big", obj: `{"close":{"code":5000}}`, err: "close code 5000"},
		{name: "messages not an array", obj: `{"messages":"x"}`, err: "'messages' must be an array"},
		{name: "message not an object", obj: `{"messages":[3]}`, err: "each of 'messages'"},
		{name: "negative every", obj: `{"every":-1}`, err: "'every'"},
		{name: "times fraction", obj: `{"times":1.5}`, err: "'times'"},
		{name: "status", obj: `{"statusCode":99}`, err: "'statusCode'"},
		{name: "status 302 refuses", obj: `{"statusCode":302}`, wire: true},
		{name: "subprotocol with a comma", obj: `{"subprotocol":"a,b"}`, err: "'subprotocol'"},
		{name: "not an object", obj: `"pong"`, err: "must be an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := wsAnswerOf([]byte(tt.obj))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range a.msgs {
				p := "t:"
				if m.binary {
					p = "b:"
				}
				got = append(got, p+string(m.data))
			}
			if strings.Join(got, "|") != strings.Join(tt.msgs, "|") {
				t.Fatalf("messages %q, want %q", got, tt.msgs)
			}
			code := 0
			if a.close != nil {
				code = a.close.code
			}
			if code != tt.close || a.every != tt.every || a.times != tt.times || (a.wire != nil) != tt.wire {
				t.Fatalf("close %d every %v times %d wire %v", code, a.every, a.times, a.wire != nil)
			}
		})
	}
}

func TestOnOpen(t *testing.T) {
	for _, tt := range []struct {
		preds string
		want  bool
	}{
		{`[{"equals":{"type":"open"}}]`, true},
		{`[{"equals":{"TYPE":"OPEN","path":"/x"}}]`, true},
		{`[{"and":[{"equals":{"path":"/x"}},{"equals":{"type":"open"}}]}]`, true},
		{`[{"equals":{"data":"open"}}]`, false},
		{`[{"equals":{"type":"text"}}]`, false},
		{`[]`, false},
	} {
		var raws []json.RawMessage
		if err := json.Unmarshal([]byte(tt.preds), &raws); err != nil {
			t.Fatal(err)
		}
		if got := onOpen(raws); got != tt.want {
			t.Errorf("%s: %v", tt.preds, got)
		}
	}
}

// wsImposter serves a ws imposter on a loopback port until the test ends.
func wsImposter(tb testing.TB, def string) string {
	tb.Helper()
	spec, err := ParseSpec([]byte(def))
	if err != nil {
		tb.Fatal(err)
	}
	opts := Options{DefaultHost: "127.0.0.1", Compiler: &Compiler{
		Predicates: func(raws []json.RawMessage, b Build) (Matcher, error) {
			return predicate.CompileAll(raws, predicate.Options{Protocol: b.Imposter.Spec().Protocol})
		},
	}}
	imp, err := New(spec, opts, nil)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := Listen(spec, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if err := imp.Serve(ln); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = imp.Stop(context.Background()) })
	return "ws://" + ln.Addr().String() + "/"
}

// A message answered by a static `is` allocates nothing, on the server's
// side or the client's (wsproto's, which the count includes).
func TestWSStaticMessageAllocatesNothing(t *testing.T) {
	url := wsImposter(t, `{"protocol":"ws","stubs":[{"predicates":[{"equals":{"data":"ping"}}],"responses":[{"is":{"data":"pong"}}]}]}`)
	c, _, err := wsproto.Dial(context.Background(), url, wsproto.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.NetConn().SetDeadline(time.Now().Add(time.Minute))
	ping := []byte("ping")
	roundTrip := func() {
		if err := c.WriteMessage(wsproto.OpText, ping); err != nil {
			t.Fatal(err)
		}
		if _, p, err := c.ReadMessage(); err != nil || string(p) != "pong" {
			t.Fatalf("%q %v", p, err)
		}
	}
	for range 100 {
		roundTrip()
	}
	if allocs := testing.AllocsPerRun(1000, roundTrip); allocs > 0.01 {
		t.Errorf("%.2f allocations per message", allocs)
	}
}

func BenchmarkWSStaticMessage(b *testing.B) {
	url := wsImposter(b, `{"protocol":"ws","stubs":[{"predicates":[{"equals":{"data":"ping"}}],"responses":[{"is":{"data":"pong"}}]}]}`)
	c, _, err := wsproto.Dial(context.Background(), url, wsproto.DialOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ping := []byte("ping")
	b.ReportAllocs()
	for b.Loop() {
		if err := c.WriteMessage(wsproto.OpText, ping); err != nil {
			b.Fatal(err)
		}
		if _, _, err := c.ReadMessage(); err != nil {
			b.Fatal(err)
		}
	}
}

// A connection answering messages while a schedule pushes, then closed by
// the schedule's close, and an imposter stopped with connections open:
// for the race detector, and for goroutines that outlive their owner.
func TestWSScheduleBesideMessagesThenStop(t *testing.T) {
	url := wsImposter(t, `{"protocol":"ws","stubs":[
		{"predicates":[{"equals":{"data":"go"}}],"responses":[{"is":{"data":"tick","every":1,"times":200,"close":{"code":4000}}}]},
		{"responses":[{"is":{"data":"ack"}}]}]}`)
	c, _, err := wsproto.Dial(context.Background(), url, wsproto.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.NetConn().SetDeadline(time.Now().Add(time.Minute))
	if err := c.WriteMessage(wsproto.OpText, []byte("go")); err != nil {
		t.Fatal(err)
	}
	ticks, acks := 0, 0
	for i := 0; ; i++ {
		if i < 50 {
			if err := c.WriteMessage(wsproto.OpText, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		_, p, err := c.ReadMessage()
		if err != nil {
			var ce *wsproto.CloseError
			if !errors.As(err, &ce) || ce.Code != 4000 {
				t.Fatalf("after %d ticks, %d acks: %v", ticks, acks, err)
			}
			break
		}
		switch string(p) {
		case "tick":
			ticks++
		case "ack":
			acks++
		}
	}
	if ticks != 200 || acks != 50 {
		t.Fatalf("%d ticks, %d acks", ticks, acks)
	}
	// Connections left open when the imposter stops (the test's cleanup).
	for range 5 {
		o, _, err := wsproto.Dial(context.Background(), url, wsproto.DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		if err := o.WriteMessage(wsproto.OpText, []byte("go")); err != nil {
			t.Fatal(err)
		}
	}
}
