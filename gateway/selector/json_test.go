package selector

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// refParseJSON is what ParseJSON must agree with: encoding/json, numbers as
// json.Number, nothing after the value.
func refParseJSON(text string) (any, bool) {
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, false
	}
	return v, true
}

var jsonSeeds = []string{
	``, ` `, `0`, `-0`, `01`, `1.`, `.5`, `1e`, `1e+`, `1E-7`, `-`, `12.50e3`, `true`, `tru`, `nullx`, `"`, `"\"`,
	`"a\u00e9\/\b\f\n\r\t\\"`, `"\u004A"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00\ud83d"`, `"\ud83dx"`, `"\ud83d\u0041"`,
	`"\x"`, `"\'"`, "\"\x01\"", "\"\xff\xfe\"", "\"é\"", "\xef\xbb\xbf{}", `{}`, `[]`, `[1,]`, `[,1]`, `{"a":1,}`,
	`{"a" 1}`, `{1:2}`, `{"a":1,"a":2}`, ` {"a" : [ 1 , {"b":null} ] } `, `[1 2]`, `{} {}`, `{"a":"b"}x`, `"abc`,
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001), strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	`{"user":{"name":"Ada","tags":["x","y"],"n":1.5e10}}`, "[\"\t\"]", `"\u0000"`, `123456789012345678901234567890`,
}

func TestParseJSONAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range jsonSeeds {
		got, ok := ParseJSON(s)
		want, wok := refParseJSON(s)
		if ok != wok || !reflect.DeepEqual(got, want) {
			t.Errorf("%.60q: got %v %#v, encoding/json %v %#v", s, ok, got, wok, want)
		}
	}
}

func FuzzParseJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := ParseJSON(s)
		want, wok := refParseJSON(s)
		if ok != wok || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %v %#v, encoding/json %v %#v", s, ok, got, wok, want)
		}
	})
}

// Transforms apply to keys and strings as they are read; a key that two
// transform into keeps the later value, as in document order.
func TestParseJSONWith(t *testing.T) {
	got, ok := ParseJSONWith(`{"b":1,"B":{"X":"Y\u0041"},"c":["Q"]}`, strings.ToLower, strings.ToLower)
	want := map[string]any{"b": map[string]any{"x": "ya"}, "c": []any{"q"}}
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
	}
}

func BenchmarkParseJSON(b *testing.B) {
	doc := `{"user":{"name":"user9","role":"admin","email":"user9@example.com"},"order":{"id":12345,"items":["a1","b2"]}}`
	b.Run("riftgate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ParseJSON(doc)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			refParseJSON(doc)
		}
	})
}

// docs draws JSON documents of a few keys, nested arrays and objects.
var docs = rapid.Custom(func(t *rapid.T) any {
	var gen func(depth int) any
	gen = func(depth int) any {
		switch k := rapid.IntRange(0, 3).Draw(t, "kind"); {
		case depth > 3 || k == 0:
			return rapid.SampledFrom([]any{"x", json.Number("1"), true, nil}).Draw(t, "leaf")
		case k == 1:
			a := []any{}
			for range rapid.IntRange(0, 3).Draw(t, "len") {
				a = append(a, gen(depth+1))
			}
			return a
		default:
			m := map[string]any{}
			for _, k := range rapid.SliceOfN(rapid.SampledFrom([]string{"a", "b", "0"}), 0, 3).Draw(t, "keys") {
				m[k] = gen(depth + 1)
			}
			return m
		}
	}
	return gen(0)
})

// Documents parsed into lent room, one after another with a Release
// between, are each the document ParseJSON makes, and stay so until the
// Release: nothing of an earlier document, nor of a sibling, shows.
func TestPropParseJSONIntoLentRoom(t *testing.T) {
	var m Room
	rapid.Check(t, func(t *rapid.T) {
		for i := range rapid.IntRange(1, 4).Draw(t, "docs") {
			text, _ := json.Marshal(docs.Draw(t, "doc"+strings.Repeat("'", i)))
			got, ok := ParseJSONInto(string(text), nil, nil, &m)
			want, _ := ParseJSON(string(text))
			if !ok || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: got %#v, want %#v", text, got, want)
			}
			m.Release()
		}
	})
}

// TestPlainStepsWalkAsTheTrace: a selector of plain property names and
// indices, which Select walks directly, selects what the general trace
// (jsonpath-plus's rules) does.
func TestPlainStepsWalkAsTheTrace(t *testing.T) {
	steps := rapid.SliceOfN(rapid.SampledFrom([]string{".a", ".b", "['0']", "[0]", "[1]", "[2]", "[9]", ".length"}), 0, 4)
	rapid.Check(t, func(t *rapid.T) {
		expr := "$" + strings.Join(steps.Draw(t, "steps"), "")
		p, err := CompileJSONPath(expr)
		if err != nil {
			t.Fatal(err)
		}
		if !p.plain && expr != "$" {
			t.Fatalf("%s is not walked", expr)
		}
		doc := docs.Draw(t, "doc")
		got := p.Select(doc)
		general := *p
		general.plain = false
		if want := general.Select(doc); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s on %#v: walked %#v, traced %#v", expr, doc, got, want)
		}
	})
}
