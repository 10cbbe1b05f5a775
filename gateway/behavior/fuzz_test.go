package behavior

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/riftgate/riftgate/gateway/message"
)

// FuzzCompile feeds arbitrary response JSON to the behavior decoder: it
// must refuse it or compile behaviors that run without panicking.
func FuzzCompile(f *testing.F) {
	for _, c := range table(f.TempDir()) {
		f.Add(c.response, c.req.body)
	}
	for _, c := range errorTable {
		f.Add(c.response, "")
	}
	f.Add(`{"_behaviors":{"wait":[1,2],"copy":{"from":"body","into":"x","using":{"method":"jsonpath","selector":"$.a"}}}}`, `{"a":[1,{"b":null}]}`)
	f.Fuzz(func(t *testing.T, response, body string) {
		b, err := Compile(json.RawMessage(response), Options{})
		if err != nil {
			return
		}
		if b.Repeat() < 0 {
			t.Fatalf("repeat %d", b.Repeat())
		}
		resp := &Response{Response: &message.Response{Headers: []message.KV{{Name: "x", Value: "${x}"}}, Body: []byte(`{"a": "${x}"}`)}, JSONBody: true}
		req := req{method: "POST", target: "/a?b=1", body: body}
		if _, err := b.ApplyDeferred(context.Background(), req.message(), resp); err != nil {
			t.Fatal(err)
		}
	})
}
