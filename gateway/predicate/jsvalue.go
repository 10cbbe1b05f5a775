package predicate

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/selector"
)

// Values follow encoding/json's decoding (string, json.Number, bool, nil,
// []any, map[string]any), plus undefined for JavaScript's undefined, which mb
// tells apart from null.
type undefinedT struct{}

var undefined any = undefinedT{}

func isUndefined(v any) bool { _, ok := v.(undefinedT); return ok }

// isObject is mb's helpers.isObject: objects and arrays.
func isObject(v any) bool {
	switch v.(type) {
	case map[string]any, []any, *object:
		return true
	}
	return false
}

// object is an expected object as matching walks it: its keys, sorted,
// and their values. An expectation is compiled into objects once, since
// ranging over a Go map costs a random start every time.
type object struct {
	keys []string
	vals []any
}

// compileObjects returns v with every object in it an *object.
func compileObjects(v any) any {
	switch v := v.(type) {
	case map[string]any:
		o := &object{keys: keysOf(v)}
		for _, k := range o.keys {
			o.vals = append(o.vals, compileObjects(v[k]))
		}
		return o
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = compileObjects(e)
		}
		return out
	}
	return v
}

func isArray(v any) bool { _, ok := v.([]any); return ok }

// truthy is JavaScript's truthiness.
func truthy(v any) bool {
	switch v := v.(type) {
	case undefinedT, nil:
		return false
	case string:
		return v != ""
	case bool:
		return v
	case json.Number:
		f, err := v.Float64()
		return err == nil && f != 0
	case float64:
		return v != 0 && v == v
	}
	return true
}

// toString is mb's toString helper: String(v) except that null and
// undefined stay as they are.
func toString(v any) (string, bool) {
	switch v.(type) {
	case undefinedT, nil:
		return "", false
	}
	return jsString(v), true
}

func jsString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case undefinedT:
		return "undefined"
	}
	return selector.String(v)
}

// lower is JavaScript's toLowerCase, with an allocation-free answer for the
// common case of a string that is already lower case.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			return strings.ToLower(s)
		}
	}
	return s
}

// getProp reads property key of v as JavaScript does for the shapes mb's
// matching meets: object fields, array indices and string characters.
func getProp(v any, key string) any {
	switch v := v.(type) {
	case map[string]any:
		if e, ok := v[key]; ok {
			return e
		}
	case []any:
		if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(v) && strconv.Itoa(i) == key {
			return v[i]
		}
	case string:
		if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(v) && strconv.Itoa(i) == key {
			return v[i : i+1]
		}
	}
	return undefined
}

// keysOf is Object.keys for the values an expectation can hold.
func keysOf(v any) []string {
	switch v := v.(type) {
	case map[string]any:
		ks := make([]string, 0, len(v))
		for k := range v {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return ks
	case []any:
		ks := make([]string, len(v))
		for i := range v {
			ks[i] = strconv.Itoa(i)
		}
		return ks
	case string:
		ks := make([]string, len(v))
		for i := range v {
			ks[i] = strconv.Itoa(i)
		}
		return ks
	}
	return nil
}

// stableStringify is safe-stable-stringify, which mb's deepEquals compares:
// JSON.stringify with object keys sorted. ok is false for undefined.
func stableStringify(v any) (string, bool) {
	if isUndefined(v) {
		return "", false
	}
	var b bytes.Buffer
	writeStable(&b, v)
	return b.String(), true
}

func writeStable(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case string:
		writeJSONString(b, v)
	case json.Number:
		b.WriteString(selector.JSNumber(v))
	case float64:
		b.WriteString(selector.String(v))
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil, undefinedT:
		b.WriteString("null")
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeStable(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		ks := keysOf(v)
		b.WriteByte('{')
		n := 0
		for _, k := range ks {
			if isUndefined(v[k]) {
				continue
			}
			if n > 0 {
				b.WriteByte(',')
			}
			n++
			writeJSONString(b, k)
			b.WriteByte(':')
			writeStable(b, v[k])
		}
		b.WriteByte('}')
	}
}

func writeJSONString(b *bytes.Buffer, s string) {
	b.Write(message.AppendJSONString(b.AvailableBuffer(), s))
}

// sortValues sorts an array as mb's sortObjects does: objects by their
// stable JSON, everything else by its string form.
func sortValues(a []any) {
	key := func(v any) string {
		if isObject(v) {
			s, _ := stableStringify(v)
			return s
		}
		return jsString(v)
	}
	sort.SliceStable(a, func(i, j int) bool { return key(a[i]) < key(a[j]) })
}

// forceStrings is mb's forceStrings: every scalar becomes its string form,
// null becomes "null".
func forceStrings(v any) any {
	switch v := v.(type) {
	case nil:
		return "null"
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = forceStrings(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = forceStrings(e)
		}
		return out
	case undefinedT, string:
		return v
	}
	return jsString(v)
}

// b2s views b as a string without copying; the string must not outlive b.
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
