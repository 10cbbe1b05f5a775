// Command flowbench is the benchmark plugin: per request it does exactly
// one flow_get and one flow_put of a fixed key and answers a fixed body, so
// a load test measures the plugin and flow-store path and nothing else.
package main

import (
	"errors"

	rift "github.com/riftgate/riftgate/sdk/go"
)

var (
	key   = "bench"
	value = []byte("01234567")
	buf   []byte // reused: AppendFlowGet reads without allocating
	ok    = rift.Static(&rift.Response{Headers: []rift.Header{{Name: "Content-Type", Value: "text/plain"}}, Body: []byte("ok")})
)

func main() {}

func init() { rift.Handle(bench) }

func bench(*rift.Request) *rift.Response {
	var err error
	if buf, _, err = rift.AppendFlowGet(buf[:0], key); err != nil && !errors.Is(err, rift.ErrNotFound) {
		return nil // the host answers 503 or 500
	}
	if err := rift.FlowPut(key, value); err != nil {
		return nil
	}
	return ok
}
