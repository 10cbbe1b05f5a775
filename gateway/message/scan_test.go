package message

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

// The fast readers must answer exactly as their encoding/json twins: the
// same error-ness and deeply equal results. These tests and fuzz targets
// compare the exported reader (fast path with fallback) to the ...Slow
// one, and check that the fast path alone takes what the slow one takes
// (short of deep nesting, which it leaves to the slow one on purpose).

// jsonSeeds are inputs that exercise the scanner's edges.
var jsonSeeds = []string{
	``, ` `, `null`, `true`, `false`, `nul`, `truex`, `0`, `-0`, `-0.0`, `1`, `01`, `1.`, `.5`, `-`, `+1`,
	`1e400`, `-1e400`, `1e-400`, `1E+2`, `1e`, `1e+`, `12345678901234567890123`, `0.1e-5`, `2.5E-3`,
	`1 2`, `1x`, `[1,]`, `[,1]`, `[1 2]`, `[01]`, `[1-2]`, `{}`, `[]`, ` {} `, "\t{}\r\n", "\v{}", "\f{}",
	"\xef\xbb\xbf{}", "\u00a0{}", `{"a":1}x`, `{"a":1}}`, `{"a":1]`, `{"a":1,}`, `{"a" 1}`, `{"a"::1}`,
	`{"a":1 "b":2}`, `{1:2}`, `{"a"}`, `{"a":}`, `{"a":1,"a":2}`, `{"a":1,"b":2,"a":3}`, `{"a":{"b":1,"b":[]}}`,
	`{"a":"b"`, `{"a":1`, `{"a":"b",`, `{`, `{"a":"b"} garbage`, `[{}]`, `[}`, `{]`, `{"a":[1,"x",null,true,{"z":1,"y":"<&>"},[]]}`,
	`"\u0000"`, `"\ud800"`, `"\ud800\udc00"`, `"\udc00\ud800"`, `"\ud800\u0041"`, `"\ud800\n"`, `"\uD83D\uDE00x"`,
	`"\ud800\ud800\udc00"`, `"\u12"`, `"\u12G4"`, `"\x"`, `"\'"`, `"\/\b\f\n\r\t\\\""`, "\"a\x01\"", "\"a\x7f\"",
	"\"\xff\"", "\"a\xc3\"", "\"\xc3\xa9\"", "\"\xed\xa0\x80\"", "\"\xef\xbf\xbd\"", "\"\xf4\x90\x80\x80\"", `"abc`,
	"{\"\xff\":1}", `{"\u0041":1,"A":2}`, `{"statusCode":200,"headers":{"A":"1","A":["2",3]},"body":"x","_mode":"text"}`,
	`{"headers":{"A":null,"B":true,"C":1.50,"D":[],"E":[[1],{"b":2,"a":1}]}}`, `{"body":{"x":[1,2]}}`, `{"Body":1,"body":2}`,
	strings.Repeat("[", 9999) + strings.Repeat("]", 9999),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat("[", 10001) + "1" + strings.Repeat("]", 10001),
	strings.Repeat("[", 10002) + strings.Repeat("]", 10002),
	`{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
	`{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
	`{"a":` + strings.Repeat("{\"b\":", 2000) + "1" + strings.Repeat("}", 2000) + `}`,
}

// jsEqual is reflect.DeepEqual for DecodeJS's values, except that numbers
// compare by their bits (so -0 differs from 0) and NaN equals NaN.
func jsEqual(a, b any) bool {
	switch a := a.(type) {
	case float64:
		b, ok := b.(float64)
		return ok && (math.Float64bits(a) == math.Float64bits(b) || math.IsNaN(a) && math.IsNaN(b))
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for i := range a {
			if !jsEqual(a[i], b[i]) {
				return false
			}
		}
		return true
	case *JSObject:
		b, ok := b.(*JSObject)
		if !ok || !reflect.DeepEqual(a.Keys, b.Keys) || len(a.Vals) != len(b.Vals) || (a.Vals == nil) != (b.Vals == nil) {
			return false
		}
		for k, v := range a.Vals {
			w, ok := b.Vals[k]
			if !ok || !jsEqual(v, w) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(a, b)
	}
}

// deep reports input the fast path may leave to the slow one for its
// nesting.
func deep(data []byte) bool {
	return bytes.Count(data, []byte("["))+bytes.Count(data, []byte("{")) >= fastDepth
}

func checkDecodeJS(t *testing.T, data []byte) {
	t.Helper()
	got, err := DecodeJS(data)
	want, werr := decodeJSSlow(data)
	if (err != nil) != (werr != nil) || (err != nil && err.Error() != werr.Error()) {
		t.Fatalf("DecodeJS(%q): error %v, slow %v", data, err, werr)
	}
	if !jsEqual(got, want) {
		t.Fatalf("DecodeJS(%q) = %#v, slow %#v", data, got, want)
	}
	if _, ok := decodeJSFast(data); ok != (werr == nil) {
		t.Fatalf("decodeJSFast(%q) ok=%v, slow error %v", data, ok, werr)
	}
}

func checkObjectFields(t *testing.T, data []byte) {
	t.Helper()
	got, err := ObjectFields(data)
	want, werr := objectFieldsSlow(data)
	if (err != nil) != (werr != nil) || (err != nil && err.Error() != werr.Error()) {
		t.Fatalf("ObjectFields(%q): error %v, slow %v", data, err, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ObjectFields(%q) = %q, slow %q", data, got, want)
	}
	if _, ok := objectFieldsFast(data); !ok && werr == nil && !deep(data) {
		t.Fatalf("objectFieldsFast(%q) refused what the slow one takes", data)
	} else if ok && werr != nil {
		t.Fatalf("objectFieldsFast(%q) took what the slow one refuses: %v", data, werr)
	}
}

func checkReadMultiMap(t *testing.T, data []byte) {
	t.Helper()
	got, err := ReadMultiMap(data)
	want, werr := readMultiMapSlow(data)
	if (err != nil) != (werr != nil) || (err != nil && err.Error() != werr.Error()) {
		t.Fatalf("ReadMultiMap(%q): error %v, slow %v", data, err, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ReadMultiMap(%q) = %q, slow %q", data, got, want)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return
	}
	if _, ok := readMultiMapFast(trimmed); !ok && werr == nil && !deep(data) {
		t.Fatalf("readMultiMapFast(%q) refused what the slow one takes", data)
	} else if ok && werr != nil {
		t.Fatalf("readMultiMapFast(%q) took what the slow one refuses: %v", data, werr)
	}
}

func checkMembers(t *testing.T, data []byte, names ...string) {
	t.Helper()
	got, err := Members(data, names...)
	want, werr := membersSlow(data, names...)
	if (err != nil) != (werr != nil) || (err != nil && err.Error() != werr.Error()) {
		t.Fatalf("Members(%q, %q): error %v, slow %v", data, names, err, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Members(%q, %q) = %q, slow %q", data, names, got, want)
	}
	if _, ok := membersFast(data, names); !ok && werr == nil && !deep(data) {
		t.Fatalf("membersFast(%q) refused what the slow one takes", data)
	} else if ok && werr != nil {
		t.Fatalf("membersFast(%q) took what the slow one refuses: %v", data, werr)
	}
}

// checkWithin holds Within and Elements to encoding/json: what they take,
// it takes, with the same values, and those values are parts of data.
func checkWithin(t *testing.T, data []byte) {
	t.Helper()
	if got, ok := Within(data, memberNames...); ok {
		want, err := membersSlow(data, memberNames...)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("Within(%q) = %q, encoding/json %q (%v)", data, got, want, err)
		}
		for _, v := range got {
			if v != nil && !bytes.Contains(data, v) {
				t.Fatalf("Within(%q): %q is not a part of it", data, v)
			}
		}
	}
	if got, ok := Elements(data); ok {
		var want []json.RawMessage
		if err := json.Unmarshal(data, &want); err != nil || len(got) != len(want) {
			t.Fatalf("Elements(%q) = %q, encoding/json %q (%v)", data, got, want, err)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("Elements(%q)[%d] = %q, encoding/json %q", data, i, got[i], want[i])
			}
		}
	}
}

var memberNames = []string{"a", "A", "body", "statusCode", "headers", "_mode", "", "\ufffd", "\x00"}

func TestJSONReadersMatchEncodingJSON(t *testing.T) {
	for _, s := range jsonSeeds {
		for _, data := range [][]byte{[]byte(s), []byte(" " + s + "\n"), []byte(`{"a":` + s + `}`), []byte(`[` + s + `]`)} {
			checkDecodeJS(t, data)
			checkObjectFields(t, data)
			checkReadMultiMap(t, data)
			checkMembers(t, data, memberNames...)
			checkWithin(t, data)
		}
	}
}

// TestJSONReadersEdges pins a few answers down, besides matching the slow
// readers.
func TestJSONReadersEdges(t *testing.T) {
	v, err := DecodeJS([]byte(`{"b":1,"a":"\ud800x\u00e9\ud83d\ude00","b":[-0,1e400,{}]}`))
	if err != nil {
		t.Fatal(err)
	}
	o := v.(*JSObject)
	if !reflect.DeepEqual(o.Keys, []string{"b", "a"}) || o.Vals["a"] != "\ufffdx\u00e9\U0001F600" {
		t.Fatalf("got %#v", o)
	}
	arr := o.Vals["b"].([]any)
	if f := arr[0].(float64); f != 0 || !math.Signbit(f) || !math.IsInf(arr[1].(float64), 1) || arr[2].(*JSObject).Keys != nil {
		t.Fatalf("got %#v", arr)
	}
	for _, bad := range []string{"\xef\xbb\xbf1", "1 2", "01", "1.", ".5", "-", `"\'"`, "\"\x01\"", "[1,]", "\v1"} {
		if _, err := DecodeJS([]byte(bad)); err == nil {
			t.Errorf("DecodeJS(%q) took it", bad)
		}
	}
	if _, err := DecodeJS([]byte(strings.Repeat("[", maxJSDepth+1) + strings.Repeat("]", maxJSDepth+1))); err != nil {
		t.Errorf("an empty array at the depth limit: %v", err)
	}
	if _, err := DecodeJS([]byte(strings.Repeat("[", maxJSDepth+1) + "1" + strings.Repeat("]", maxJSDepth+1))); err == nil {
		t.Errorf("a value past the depth limit was taken")
	}

	fields, err := ObjectFields([]byte(` {"x" : [1, 2] ,"y":"\u0041","x": {"z" :null} } `))
	want := []Field{{"x", json.RawMessage(`{"z" :null}`)}, {"y", json.RawMessage(`"\u0041"`)}}
	if err != nil || !reflect.DeepEqual(fields, want) {
		t.Fatalf("ObjectFields = %q, %v", fields, err)
	}
	if _, err := ObjectFields([]byte(`{"a":1} x`)); err == nil {
		t.Errorf("ObjectFields took trailing data")
	}

	kvs, err := ReadMultiMap(json.RawMessage(`{"A":["1",2,null],"B":true,"C":{"y":"<","x":1.0}`))
	wantKV := []KV{{"A", "1"}, {"A", "2"}, {"A", "null"}, {"B", "true"}, {"C", `{"x":1.0,"y":"\u003c"}`}}
	if err != nil || !reflect.DeepEqual(kvs, wantKV) {
		t.Fatalf("ReadMultiMap = %q, %v", kvs, err)
	}

	m, err := Members([]byte(`{"body":1,"Body":2,"body":"x"}`), "body", "Body", "BODY")
	if err != nil || !reflect.DeepEqual(m, []json.RawMessage{json.RawMessage(`"x"`), json.RawMessage(`2`), nil}) {
		t.Fatalf("Members = %q, %v", m, err)
	}
}

// TestJSONFastValuesAreCopies checks that the raw values handed out do not
// alias the input or each other.
func TestJSONFastValuesAreCopies(t *testing.T) {
	raw := []byte(`{"a":[1],"b":"x"}`)
	fields, _ := ObjectFields(raw)
	m, _ := Members(raw, "a", "b")
	fields[0].Value = append(fields[0].Value, '!')
	m[0] = append(m[0], '!')
	raw[6] = '9'
	if string(fields[1].Value) != `"x"` || string(m[1]) != `"x"` || string(fields[0].Value) != "[1]!" || string(m[0]) != "[1]!" {
		t.Fatalf("values alias: %q %q", fields, m)
	}
}

func addSeeds(f *testing.F) {
	for _, s := range jsonSeeds {
		if len(s) < 1000 { // deep nesting is left to the table test: it slows the fuzzer down
			f.Add([]byte(s))
		}
	}
	f.Add([]byte(strings.Repeat("[", 50) + strings.Repeat("]", 50)))
	f.Add([]byte(benchStub))
}

func FuzzDecodeJSFast(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) { checkDecodeJS(t, data) })
}

func FuzzObjectFieldsFast(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) { checkObjectFields(t, data) })
}

func FuzzReadMultiMapFast(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) { checkReadMultiMap(t, data) })
}

func FuzzMembersFast(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) { checkMembers(t, data, memberNames...) })
}

func FuzzWithinElements(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) { checkWithin(t, data) })
}

// benchStub is a recorded stub as the proxy writes one (about 700 bytes).
const benchStub = `{"predicates":[{"deepEquals":{"method":"GET","path":"/r/12/345","query":{"page":"2","sort":"name"}}}],` +
	`"responses":[{"is":{"statusCode":200,"headers":{"Content-Type":"application/json; charset=utf-8",` +
	`"Date":"Sat, 05 Dec 2026 08:00:00 GMT","Content-Length":"171","Cache-Control":"no-cache, no-store",` +
	`"Set-Cookie":["a=1; Path=/","b=2; Path=/; HttpOnly"],"X-Request-Id":"3f2c9a1e-77b0-4d2e-9c51-0a8e6d1b2c44",` +
	`"Connection":"keep-alive"},"body":"{\"id\":345,\"name\":\"r\\u00e9sum\u00e9\",\"tags\":[\"a\",\"b\"],` +
	`\"price\":12.5,\"ok\":true,\"note\":null,\"text\":\"line1\\nline2\\ttab \\\"quoted\\\"\"}",` +
	`"_mode":"text","_proxyResponseTime":1}}]}`

func benchReader(b *testing.B, name string, fast, slow func([]byte) error) {
	for _, c := range []struct {
		name string
		fn   func([]byte) error
	}{{"slow", slow}, {"fast", fast}} {
		b.Run(c.name, func(b *testing.B) {
			data := []byte(name)
			if err := c.fn(data); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				_ = c.fn(data)
			}
		})
	}
}

func BenchmarkDecodeJS(b *testing.B) {
	benchReader(b, benchStub,
		func(d []byte) error { _, err := DecodeJS(d); return err },
		func(d []byte) error { _, err := decodeJSSlow(d); return err })
}

func BenchmarkObjectFields(b *testing.B) {
	benchReader(b, benchStub,
		func(d []byte) error { _, err := ObjectFields(d); return err },
		func(d []byte) error { _, err := objectFieldsSlow(d); return err })
}

// benchIs is the stub's `is` response, as ParseResponseFields reads it.
var benchIs = func() string {
	v, _ := DecodeJS([]byte(benchStub))
	is := v.(*JSObject).Vals["responses"].([]any)[0].(*JSObject).Vals["is"]
	return string(EncodeJS(is, "", false))
}()

func BenchmarkMembers(b *testing.B) {
	names := []string{"statusCode", "headers", "body", "_mode"}
	benchReader(b, benchIs,
		func(d []byte) error { _, err := Members(d, names...); return err },
		func(d []byte) error { _, err := membersSlow(d, names...); return err })
}

func BenchmarkReadMultiMap(b *testing.B) {
	m, _ := Members([]byte(benchIs), "headers")
	benchReader(b, string(m[0]),
		func(d []byte) error { _, err := ReadMultiMap(d); return err },
		func(d []byte) error { _, err := readMultiMapSlow(d); return err })
}
