package behavior

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"

	"github.com/riftgate/riftgate/gateway/selector"
)

// A JSON body is replaced structurally, as mb's globalObjectReplace does on
// the body object: in every string and every key, a renamed key moving to
// the end of its object; then it is written back as JSON.stringify(body,
// null, 4) writes it. Objects keep JavaScript's key order: integer-like
// keys first, ascending, then the others in insertion order.

type member struct {
	key string
	val any
}

// object is a JSON object with its key order.
type object struct{ members []member }

var errJSON = errors.New("malformed JSON body")

func parseBody(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	v, err := parseValue(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, errJSON // trailing data
	}
	return v, nil
}

func parseValue(d *json.Decoder) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &object{}
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				return nil, err
			}
			k, ok := kt.(string)
			if !ok {
				return nil, errJSON
			}
			v, err := parseValue(d)
			if err != nil {
				return nil, err
			}
			o.set(k, v)
		}
		if _, err := d.Token(); err != nil {
			return nil, err
		}
		return o, nil
	case json.Delim('['):
		a := []any{}
		for d.More() {
			v, err := parseValue(d)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := d.Token(); err != nil {
			return nil, err
		}
		return a, nil
	}
	return tok, nil
}

// set assigns o[k] as JavaScript does: in place when k exists, else at the
// end of the insertion order.
func (o *object) set(k string, v any) {
	for i := range o.members {
		if o.members[i].key == k {
			o.members[i].val = v
			return
		}
	}
	o.members = append(o.members, member{k, v})
}

func (o *object) del(k string) {
	o.members = slices.DeleteFunc(o.members, func(m member) bool { return m.key == k })
}

func (o *object) get(k string) any {
	for _, m := range o.members {
		if m.key == k {
			return m.val
		}
	}
	return nil
}

// keys is Object.keys: integer-like keys ascending, then insertion order.
func (o *object) keys() []string {
	var ints, strs []string
	for _, m := range o.members {
		if isIndex(m.key) {
			ints = append(ints, m.key)
		} else {
			strs = append(strs, m.key)
		}
	}
	slices.SortFunc(ints, func(a, b string) int {
		x, _ := strconv.ParseUint(a, 10, 32)
		y, _ := strconv.ParseUint(b, 10, 32)
		return int(int64(x) - int64(y))
	})
	return append(ints, strs...)
}

// isIndex reports whether k is a canonical array index, which JavaScript
// orders before other keys.
func isIndex(k string) bool {
	if k == "" || (len(k) > 1 && k[0] == '0') {
		return false
	}
	n, err := strconv.ParseUint(k, 10, 32)
	return err == nil && n < 1<<32-1
}

// replaceIn is mb's globalObjectReplace on one value.
func replaceIn(v any, rep func(string) string) any {
	switch v := v.(type) {
	case string:
		return rep(v)
	case []any:
		for i, e := range v {
			v[i] = replaceIn(e, rep)
		}
	case *object:
		type rename struct{ from, to string }
		var renames []rename
		for _, k := range v.keys() {
			switch e := v.get(k).(type) {
			case string:
				v.set(k, rep(e))
			case *object, []any:
				replaceIn(e, rep)
			}
			if nk := rep(k); nk != k {
				renames = append(renames, rename{k, nk})
			}
		}
		for _, r := range renames {
			v.set(r.to, v.get(r.from))
			v.del(r.from)
		}
	}
	return v
}

// writeBody writes v as JSON.stringify(v, null, 4).
func writeBody(b *bytes.Buffer, v any, indent string) {
	switch v := v.(type) {
	case string:
		b.WriteByte('"')
		b.Write(jsonContent(v))
		b.WriteByte('"')
	case json.Number:
		b.WriteString(selector.JSNumber(v))
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	case []any:
		if len(v) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[\n")
		for i, e := range v {
			if i > 0 {
				b.WriteString(",\n")
			}
			b.WriteString(indent + "    ")
			writeBody(b, e, indent+"    ")
		}
		b.WriteString("\n" + indent + "]")
	case *object:
		keys := v.keys()
		if len(keys) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{\n")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(",\n")
			}
			b.WriteString(indent + "    \"")
			b.Write(jsonContent(k))
			b.WriteString("\": ")
			writeBody(b, v.get(k), indent+"    ")
		}
		b.WriteString("\n" + indent + "}")
	}
}
