package imposter

import (
	"encoding/json"
	"testing"
)

// withStubs splices the stubs into the object as encoding/json would have
// encoded the whole, with the fields after them or none.
func TestWithStubs(t *testing.T) {
	head := mustJSON(object{{Key: "protocol", Value: raw("http")}, {Key: "port", Value: raw(4545)}})
	links := mustJSON(object{{Key: "_links", Value: raw(map[string]any{"self": map[string]string{"href": "/imposters/4545"}})}})
	for _, c := range []struct {
		name  string
		stubs []json.RawMessage
		tail  json.RawMessage
	}{
		{"none, nothing after", nil, mustJSON(nil)},
		{"none, links after", nil, links},
		{"two, nothing after", []json.RawMessage{json.RawMessage(`{"responses":[]}`), json.RawMessage(`{"predicates":[{"equals":{"path":"/a"}}]}`)}, mustJSON(nil)},
		{"one, links after", []json.RawMessage{json.RawMessage(`{"responses":[{"is":{"body":"x"}}]}`)}, links},
	} {
		var tail object
		if len(c.tail) > 2 {
			tail = mustJSONObject(t, c.tail)
		}
		stubs := c.stubs
		if stubs == nil {
			stubs = []json.RawMessage{}
		}
		whole := append(object{}, mustJSONObject(t, head)...)
		whole = append(whole, field{Key: "stubs", Value: raw(stubs)})
		want := mustJSON(append(whole, tail...))
		if got := withStubs(head, c.stubs, c.tail); string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, want)
		}
	}
}

func mustJSONObject(t *testing.T, b json.RawMessage) object {
	t.Helper()
	o, err := decodeObject(b)
	if err != nil {
		t.Fatal(err)
	}
	return o
}
