package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ParseCustomCallback reads a custom protocol's callback body,
// {"request": {...}}, into a Custom request: the object as sent (Raw) and
// decoded (Fields, numbers as json.Number so that they compare as mb
// compares them). A request that is absent or not an object is an empty
// one, as mb's request would have no fields.
func ParseCustomCallback(body []byte) (*Request, error) {
	var in struct {
		Request json.RawMessage `json:"request"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("callback body: %w", err)
	}
	raw := bytes.TrimSpace(in.Request)
	if len(raw) == 0 || raw[0] != '{' {
		raw = []byte(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var fields map[string]any
	if err := dec.Decode(&fields); err != nil {
		return nil, fmt.Errorf("callback request: %w", err)
	}
	if fields == nil {
		return nil, errors.New("callback request: not an object")
	}
	return &Request{Kind: Custom, Fields: fields, Raw: bytes.Clone(raw)}, nil
}
