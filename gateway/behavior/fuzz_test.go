package behavior

import (
	"bytes"
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
	f.Add(`{"behaviors":[{"wait":1},{"wait":2},{"copy":{"from":"body","into":"x","using":{"method":"jsonpath","selector":"$.a"}}}]}`, `{"a":[1,{"b":null}]}`)
	f.Fuzz(func(t *testing.T, response, body string) {
		b, err := Compile(json.RawMessage(response), Options{})
		if err != nil {
			return
		}
		resp := &Response{Response: &message.Response{Headers: []message.KV{{Name: "x", Value: "${x}"}}, Body: []byte(`{"a": "${x}"}`)}, JSONBody: true}
		req := req{method: "POST", target: "/a?b=1", body: body}
		if _, err := b.ApplyDeferred(context.Background(), req.message(), resp); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzJSONBody checks the body codec: valid JSON parses, is written back as
// valid JSON, and writing is a fixed point.
func FuzzJSONBody(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":null}],"2":true,"10":"x"}`, `[]`, `"s\u0001"`, `{"a":1,"a":2}`, `1e400`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseBody(b)
		if (err == nil) != json.Valid(b) {
			if err == nil || json.Valid(b) {
				t.Fatalf("%q: parse error %v, json.Valid %v", b, err, json.Valid(b))
			}
		}
		if err != nil {
			return
		}
		var once bytes.Buffer
		writeBody(&once, v, "")
		v2, err := parseBody(once.Bytes())
		if err != nil {
			t.Fatalf("%q wrote %q: %v", b, once.Bytes(), err)
		}
		var twice bytes.Buffer
		writeBody(&twice, v2, "")
		if !bytes.Equal(once.Bytes(), twice.Bytes()) {
			t.Fatalf("%q: %q then %q", b, once.Bytes(), twice.Bytes())
		}
	})
}
