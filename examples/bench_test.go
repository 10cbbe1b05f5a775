package examples_test

import (
	"context"
	"testing"

	"github.com/riftgate/riftgate/plugins"
)

// BenchmarkExamples measures one handle call per example in the real host
// against the real flow store (memory durability): envelope encoding, the
// guest's decode, its flow calls and the response. Run with
// `go test -run '^$' -bench . ./examples/` after make wasm.
func BenchmarkExamples(b *testing.B) {
	cases := []struct{ module, config string }{
		{"flowbench", "null"},
		{"counter-go", `{"key":"count"}`},
		{"tokenbucket-rust", `{"capacity":1000000000,"refillPerSecond":0}`},
		{"echo-c", `{"template":"hello {{path}} {{query.name}}"}`},
		{"sequence-as", `{"first":"a","second":"b","third":"c"}`},
		{"counter-wat", "null"},
	}
	for _, c := range cases {
		b.Run(c.module, func(b *testing.B) {
			h := register(b, c.module)
			f := newFlow(newStore(b), "i1:bench")
			in := &plugins.Input{
				Method: "GET", Path: "/greet", FlowID: "i1:bench", RequestFrom: "127.0.0.1:1",
				Query:   []plugins.Pair{{Name: "name", Value: "Ada"}},
				Headers: []plugins.Pair{{Name: "X-Flow-Id", Value: "bench"}, {Name: "User-Agent", Value: "bench"}},
				Config:  []byte(c.config), Flow: f,
			}
			// Warm up outside the timed loop: the first call instantiates
			// (about 8 ms for a Go guest).
			if _, err := h.Call(context.Background(), c.module, "handle", in); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				out, err := h.Call(context.Background(), c.module, "handle", in)
				if err != nil || !out.Wrote {
					b.Fatalf("%v %+v", err, out)
				}
			}
		})
	}
}
