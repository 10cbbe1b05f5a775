package message

import (
	"encoding/json"
	"testing"
)

func TestWithArray(t *testing.T) {
	for _, tc := range []struct {
		obj   string
		items []json.RawMessage
		want  string
	}{
		{`{}`, nil, `{"stubs":[]}`},
		{`{}`, []json.RawMessage{[]byte(`1`)}, `{"stubs":[1]}`},
		{`{"port":4545}`, []json.RawMessage{[]byte(`{"a":1}`), []byte(`{}`)}, `{"port":4545,"stubs":[{"a":1},{}]}`},
	} {
		got := string(WithArray([]byte(tc.obj), "stubs", tc.items))
		if got != tc.want {
			t.Errorf("WithArray(%s, %s) = %s, want %s", tc.obj, tc.items, got, tc.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("%s is not JSON", got)
		}
	}
}
