package examples_test

import (
	"context"
	"os"
	"testing"

	"github.com/riftgate/riftgate/plugins"
)

// BenchmarkExamples measures one handle call per example in the real host
// against the real flow store (memory durability), through the engine's
// flow glue: envelope encoding, the guest's decode, its flow calls and the
// response; with the default deadline, and with none (deadlineMs -1), to
// show what the stop flag the deadline needs costs each guest. flowbench-wat
// does nothing but the two flow calls and a fixed answer: its time is the
// host's overhead per call. Run with
// `go test -run '^$' -bench . ./examples/` after make wasm.
func BenchmarkExamples(b *testing.B) {
	cases := []struct{ module, config string }{
		{"flowbench", "null"},
		{"counter-go", `{"key":"count"}`},
		{"tokenbucket-rust", `{"capacity":1000000000,"refillPerSecond":0}`},
		{"echo-c", `{"template":"hello {{path}} {{query.name}}"}`},
		{"sequence-as", `{"first":"a","second":"b","third":"c"}`},
		{"counter-wat", "null"},
		{"flowbench-wat", "null"},
	}
	modes := []struct {
		name string
		lim  plugins.Limits
	}{{"deadline", plugins.Limits{}}, {"no-deadline", plugins.Limits{Deadline: -1}}}
	for _, c := range cases {
		for _, m := range modes {
			b.Run(c.module+"/"+m.name, func(b *testing.B) {
				h := sharedHost(b)
				wasm, err := os.ReadFile(modulePath(b, c.module))
				if err != nil {
					b.Fatal(err)
				}
				name := c.module + "-" + m.name
				if _, err := h.Register(context.Background(), name, wasm, m.lim); err != nil {
					b.Fatal(err)
				}
				f := seamFlow{newStore(b), "i1:bench"}
				in := &plugins.Input{
					Method: "GET", Path: "/greet", FlowID: "i1:bench", RequestFrom: plugins.Str("127.0.0.1:1"),
					Query:   []plugins.Pair{{Name: "name", Value: "Ada"}},
					Headers: []plugins.Pair{{Name: "X-Flow-Id", Value: "bench"}, {Name: "User-Agent", Value: "bench"}},
					Config:  []byte(c.config), Flow: f,
				}
				// Warm up outside the timed loop: the first call instantiates
				// (about 8 ms for a Go guest).
				if _, err := h.Call(context.Background(), name, "handle", in); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					out, err := h.Call(context.Background(), name, "handle", in)
					if err != nil || !out.Wrote {
						b.Fatalf("%v %+v", err, out)
					}
				}
			})
		}
	}
}
