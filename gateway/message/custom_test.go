package message

import (
	"encoding/json"
	"testing"
	"time"
)

// TestCustomRequestJSON pins the bytes a custom protocol's request is
// recorded as: the object as sent, with the timestamp after its fields.
func TestCustomRequestJSON(t *testing.T) {
	ts := time.Date(2026, 12, 5, 7, 0, 0, 123e6, time.UTC)
	for _, tc := range []struct{ body, want string }{
		{`{"request":{"verb":"GET","n":1.50,"tags":["a"]}}`, `{"verb":"GET","n":1.50,"tags":["a"],"timestamp":"2026-12-05T07:00:00.123Z"}`},
		{`{"request":{}}`, `{"timestamp":"2026-12-05T07:00:00.123Z"}`},
		{`{"request":"not an object"}`, `{"timestamp":"2026-12-05T07:00:00.123Z"}`},
		{`{}`, `{"timestamp":"2026-12-05T07:00:00.123Z"}`},
	} {
		r, err := ParseCustomCallback([]byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		r.Timestamp = ts
		got, _ := r.MarshalJSON()
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.body, got, tc.want)
		}
	}
	for _, bad := range []string{``, `[`, `{"request":{"a":}}`, `{"request":{"a":1}`} {
		if _, err := ParseCustomCallback([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// FuzzCustomCallback: whatever a protocol's process sends, parsing does
// not panic, and what is recorded is one valid JSON object.
func FuzzCustomCallback(f *testing.F) {
	for _, s := range []string{`{"request":{"a":1}}`, `{"request":{}}`, `{"request":null}`, `{"request":{"a":{"b":[1,"x",null]}}}`, `{"request": { "x" : 1 } }`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseCustomCallback(body)
		if err != nil {
			return
		}
		r.Timestamp = time.Unix(1, 0)
		out, _ := r.MarshalJSON()
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("%q recorded as %q: %v", body, out, err)
		}
		if _, ok := m["timestamp"]; !ok {
			t.Fatalf("%q recorded without its timestamp: %q", body, out)
		}
	})
}
