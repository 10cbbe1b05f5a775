package imposter

import (
	"bytes"
	"encoding/json"

	"github.com/riftgate/riftgate/gateway/message"
)

// object is a JSON object that keeps its fields in the order they came in,
// so that what a user stored is what GET shows them, as mb does.
type object []field

type field = message.Field

// decodeObject reads a JSON object, keeping field order.
func decodeObject(data []byte) (object, error) {
	fields, err := message.ObjectFields(data)
	return object(fields), err
}

// get returns the raw value of key, or nil.
func (o object) get(key string) json.RawMessage {
	for _, f := range o {
		if f.Key == key {
			return f.Value
		}
	}
	return nil
}

// with returns o with key set to v, replacing an existing value in place.
func (o object) with(key string, v json.RawMessage) object {
	for i := range o {
		if o[i].Key == key {
			out := append(object(nil), o...)
			out[i].Value = v
			return out
		}
	}
	return append(o[:len(o):len(o)], field{Key: key, Value: v})
}

// without returns o without the given keys.
func (o object) without(keys ...string) object {
	out := make(object, 0, len(o))
next:
	for _, f := range o {
		for _, k := range keys {
			if f.Key == k {
				continue next
			}
		}
		out = append(out, f)
	}
	return out
}

// MarshalJSON writes the fields in order, compactly.
func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	// Sized up front: what is kept (a stub's JSON) has no room to spare.
	size := 2
	for _, f := range o {
		size += len(f.Key) + len(f.Value) + 4
	}
	b.Grow(size)
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(message.AppendJSONString(b.AvailableBuffer(), f.Key))
		b.WriteByte(':')
		if err := json.Compact(&b, f.Value); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// raw encodes v as JSON.stringify would: without encoding/json's HTML
// escaping of <, > and &.
func raw(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only called with values encoding/json always encodes
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}
