package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// JSObject is a JSON object as JavaScript holds one: its keys in the order
// they were first seen, each with its last value.
type JSObject struct {
	Keys []string
	Vals map[string]any
}

// DecodeJS is JSON.parse: the value is nil, bool, float64, string, []any or
// *JSObject. mb stores what it is given through JSON.parse, so a stored
// body, header or predicate prints as JSON.stringify prints it.
func DecodeJS(data []byte) (any, error) {
	if v, ok := decodeJSFast(data); ok {
		return v, nil
	}
	return decodeJSSlow(data)
}

// decodeJSSlow is DecodeJS on encoding/json: it answers what the scanner
// leaves, and its errors are DecodeJS's.
func decodeJSSlow(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := decodeJS(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data after a JSON value")
	}
	return v, nil
}

// maxJSDepth bounds nesting, as the stack of JSON.parse bounds it.
const maxJSDepth = 10000

func decodeJS(d *json.Decoder, depth int) (any, error) {
	if depth > maxJSDepth {
		return nil, errors.New("JSON nested too deeply")
	}
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &JSObject{Vals: map[string]any{}}
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return nil, err
				}
				key, _ := k.(string)
				v, err := decodeJS(d, depth+1)
				if err != nil {
					return nil, err
				}
				if _, seen := o.Vals[key]; !seen {
					o.Keys = append(o.Keys, key)
				}
				o.Vals[key] = v
			}
			_, err := d.Token()
			return o, err
		case '[':
			a := []any{}
			for d.More() {
				v, err := decodeJS(d, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := d.Token()
			return a, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, err
		}
		return f, nil
	default:
		return t, nil // string, bool or nil
	}
}

// EncodeJS is JSON.stringify(v, null, indent); with sortKeys, keys are
// sorted (as safe-stable-stringify sorts them).
func EncodeJS(v any, indent string, sortKeys bool) []byte {
	var b bytes.Buffer
	encodeJS(&b, v, indent, sortKeys, "")
	return b.Bytes()
}

// CanonicalJSON is JSON.stringify(JSON.parse(data)): the compact JSON mb
// prints for a value it was given.
//
// Its callers ask only whether data is JSON (a proxied body often is not),
// so it does not ask encoding/json to word why not.
func CanonicalJSON(data []byte) ([]byte, error) {
	if isCanonicalJS(data) {
		return append([]byte(nil), data...), nil // a copy, as before: callers keep it
	}
	v, ok := decodeJSFast(data)
	if !ok {
		return nil, errNotJSON
	}
	return EncodeJS(v, "", false), nil
}

var errNotJSON = errors.New("not JSON")

// ProxiedBody is BodyBytes of the body a proxy records for an upstream's
// text body (CanonicalJSON's value, or else the text as a string), made
// without rendering that JSON: an object or array printed as mb sends it,
// other JSON as its text, any other text as it is, and nil for what is
// falsy to JavaScript.
func ProxiedBody(data []byte) (b []byte, isJSON bool) {
	v, ok := decodeJSFast(data)
	if !ok {
		if len(data) == 0 {
			return nil, false
		}
		return data, false
	}
	switch v := v.(type) {
	case *JSObject, []any:
		return EncodeJS(v, "    ", false), true
	case nil:
		return nil, false
	case string:
		if v == "" {
			return nil, false
		}
	case bool:
		if !v {
			return nil, false
		}
	case float64:
		if v == 0 {
			return nil, false
		}
	}
	return []byte(JSString(v)), false
}

func encodeJS(b *bytes.Buffer, v any, indent string, sortKeys bool, prefix string) {
	newline := func(p string) {
		if indent != "" {
			b.WriteByte('\n')
			b.WriteString(p)
		}
	}
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case float64:
		b.WriteString(JSNumber(v))
	case string:
		b.Write(AppendJSONString(nil, v))
	case []any:
		if len(v) == 0 {
			b.WriteString("[]")
			return
		}
		inner := prefix + indent
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			newline(inner)
			encodeJS(b, e, indent, sortKeys, inner)
		}
		newline(prefix)
		b.WriteByte(']')
	case *JSObject:
		if len(v.Keys) == 0 {
			b.WriteString("{}")
			return
		}
		keys := v.Keys
		if sortKeys {
			keys = append([]string(nil), keys...)
			sort.Strings(keys)
		}
		inner := prefix + indent
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			newline(inner)
			b.Write(AppendJSONString(nil, k))
			b.WriteByte(':')
			if indent != "" {
				b.WriteByte(' ')
			}
			encodeJS(b, v.Vals[k], indent, sortKeys, inner)
		}
		newline(prefix)
		b.WriteByte('}')
	}
}

// JSNumber formats a number as JavaScript's String(number) does.
func JSNumber(f float64) string {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return "null" // what JSON.stringify writes for them
	case f == 0:
		return "0"
	}
	s := strconv.FormatFloat(math.Abs(f), 'e', -1, 64) // d.ddde±x
	mant, e, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(e)
	digits := strings.Replace(mant, ".", "", 1)
	n, point := len(digits), exp+1 // value = 0.digits × 10^point
	sign := ""
	if f < 0 {
		sign = "-"
	}
	switch {
	case point >= n && point <= 21:
		return sign + digits + strings.Repeat("0", point-n)
	case point > 0 && point <= 21:
		return sign + digits[:point] + "." + digits[point:]
	case point > -6 && point <= 0:
		return sign + "0." + strings.Repeat("0", -point) + digits
	}
	m := digits[:1]
	if n > 1 {
		m += "." + digits[1:]
	}
	if exp >= 0 {
		return sign + m + "e+" + strconv.Itoa(exp)
	}
	return sign + m + "e" + strconv.Itoa(exp)
}

// JSString is String(v) for a decoded JSON value, as a body or header
// value that is not a string is rendered: objects as "[object Object]",
// arrays joined with commas.
func JSString(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return JSNumber(v)
	case string:
		return v
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			if e != nil {
				parts[i] = JSString(e)
			}
		}
		return strings.Join(parts, ",")
	default:
		return "[object Object]"
	}
}

// ParseInt is JavaScript's parseInt(s, 10): optional space and sign, then
// the longest run of digits (capped at MaxInt32); ok is false for NaN.
func ParseInt(s string) (n int, ok bool) {
	s = strings.TrimLeft(s, " \t\n\r\v\f")
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	digits := 0
	for digits < len(s) && s[digits] >= '0' && s[digits] <= '9' {
		if n < math.MaxInt32 {
			n = n*10 + int(s[digits]-'0')
		}
		digits++
	}
	if digits == 0 {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}
