package message

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// checkCanonical: whatever isCanonicalJS accepts, CanonicalJSON's slow way
// prints back byte for byte.
func checkCanonical(t *testing.T, data []byte) {
	t.Helper()
	if !isCanonicalJS(data) {
		return
	}
	v, ok := decodeJSFast(data)
	if !ok {
		t.Fatalf("accepted as canonical, but not JSON: %q", data)
	}
	if got := EncodeJS(v, "", false); !bytes.Equal(got, data) {
		t.Fatalf("accepted as canonical:\n%s\nbut JSON.stringify(JSON.parse()) is\n%s", data, got)
	}
}

func TestIsCanonicalJS(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{benchStub, false}, // its body escapes an é
		{benchStubCanonical(), true},
		{`{}`, true}, {`[]`, true}, {`[1,-2,0,"",true,false,null,{"a":[{}]}]`, true},
		{`"\u001f\"\\\n\r\t\b\f é 😀"`, true},
		{`123456789012345`, true},
		{`1234567890123456`, false}, // may not print as written
		{`{"a":1, "b":2}`, false}, {` {}`, false}, {`{} `, false},
		{`1.5`, false}, {`1e3`, false}, {`-0`, false}, {`01`, false}, {`-`, false},
		{`"\/"`, false}, {`"\u0041"`, false}, {`"\u001F"`, false}, {`"\u000a"`, false},
		{"\"\u2028\"", false}, {"\"\xff\"", false}, {"\"a\x01\"", false},
		{`{"a":1,"a":2}`, false}, {`{"__proto__":1}`, false},
		{`{"a":1,}`, false}, {`[1,]`, false}, {`{"a"}`, false}, {`"abc`, false}, {`tru`, false},
		{strings.Repeat("[", 70) + strings.Repeat("]", 70), false},
	} {
		if got := isCanonicalJS([]byte(tc.in)); got != tc.want {
			t.Errorf("isCanonicalJS(%q) = %v, want %v", tc.in, got, tc.want)
		}
		checkCanonical(t, []byte(tc.in))
	}
	for _, s := range jsonSeeds {
		checkCanonical(t, []byte(s))
		// What CanonicalJSON printed is canonical, mostly by the quick check.
		if c, err := CanonicalJSON([]byte(s)); err == nil {
			checkCanonical(t, c)
		}
	}
}

func benchStubCanonical() string {
	c, err := CanonicalJSON([]byte(benchStub))
	if err != nil {
		panic(err)
	}
	return string(c)
}

func FuzzCanonicalJS(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) { checkCanonical(t, data) })
}

func BenchmarkCanonicalJSON(b *testing.B) {
	data := []byte(benchStubCanonical())
	b.Run("quick", func(b *testing.B) {
		for b.Loop() {
			_, _ = CanonicalJSON(data)
		}
	})
	b.Run("slow", func(b *testing.B) {
		for b.Loop() {
			v, _ := decodeJSFast(data)
			_ = EncodeJS(v, "", false)
		}
	})
}

// checkGeneric: DecodeGeneric answers what encoding/json's Decode does.
func checkGeneric(t *testing.T, data []byte) {
	t.Helper()
	got, err := DecodeGeneric(data)
	want, werr := decodeGenericSlow(data)
	if (err == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeGeneric(%q) = %#v, %v; encoding/json %#v, %v", data, got, err, want, werr)
	}
}

func TestDecodeGeneric(t *testing.T) {
	for _, s := range append(jsonSeeds, `{"a":1} x`, ` 12.50 `, `"\xff"`, `{"a":1,"a":{"b":[true,null]}}`, `1e400`, ``) {
		checkGeneric(t, []byte(s))
	}
}

func FuzzDecodeGeneric(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) { checkGeneric(t, data) })
}
