package imposter

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestParseCustomSpec: a protofile protocol is accepted, its own fields
// go to its process and are not reported as ignored, and what it does not
// read (a misspelt stub field) still is.
func TestParseCustomSpec(t *testing.T) {
	SetCustomProtocols(map[string]CustomProtocol{"line": {CreateCommand: "node line.js"}})
	t.Cleanup(func() { SetCustomProtocols(nil) })
	s, err := ParseSpec([]byte(`{"protocol":"line","port":3000,"name":"n","greeting":{"a":1},"recordRequests":true,
		"defaultResponse":{"reply":"d"},"stubs":[{"predicat":[],"responses":[{"is":{"reply":"x"}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Custom == nil || s.Custom.CreateCommand != "node line.js" {
		t.Fatalf("custom = %+v", s.Custom)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(s.CustomFields, &fields); err != nil {
		t.Fatalf("%s: %v", s.CustomFields, err)
	}
	if len(fields) != 1 || string(fields["greeting"]) != `{"a":1}` {
		t.Fatalf("custom fields %s", s.CustomFields)
	}
	if got := strings.Join(s.Ignored, ","); got != "stubs[0].predicat" {
		t.Fatalf("ignored %q", got)
	}
	if _, err := ParseSpec([]byte(`{"protocol":"other","port":3001}`)); err == nil || !strings.Contains(err.Error(), "not yet supported") {
		t.Fatalf("an unknown protocol: %v", err)
	}
}
