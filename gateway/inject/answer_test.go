package inject

import (
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/dop251/goja"
	"github.com/riftgate/riftgate/gateway/message"
	"pgregory.net/rapid"
)

// jsonFields is answerFields through the JSON, always.
func jsonFields(t *rapid.T, v *vm, o *goja.Object) (message.ResponseFields, bool) {
	only := v.rt.NewObject()
	for _, k := range answerKeys {
		if x := o.Get(k); x != nil {
			_ = only.Set(k, x)
		}
	}
	text, err := v.stringify(goja.Undefined(), only)
	if err != nil {
		t.Fatal(err)
	}
	f, err := message.ParseResponseFields([]byte(text.String()))
	return f, err == nil
}

// TestQuickFieldsAgreeWithJSON: reading an answer's fields straight from
// the JavaScript values gives what its JSON gives, whenever it applies.
func TestQuickFieldsAgreeWithJSON(t *testing.T) {
	v := newVM(slog.New(slog.NewTextHandler(io.Discard, nil)))
	scalars := []string{"undefined", "null", "0", "-0", "1", "200", "404.5", "1e3", "1e21", "NaN", "Infinity",
		"true", "false", `""`, `"0"`, `"404"`, `"abc"`, `"é\u2028"`, `"\ud800"`}
	value := rapid.SampledFrom(scalars)
	headerValue := rapid.OneOf(value, rapid.Custom(func(t *rapid.T) string {
		return "[" + strings.Join(rapid.SliceOfN(value, 0, 3).Draw(t, "elems"), ",") + "]"
	}), rapid.SampledFrom([]string{"{}", "[[1]]", "[{}]", "function () {}"}))
	names := rapid.SampledFrom([]string{"a", "B", "Content-Type", "x y", "__proto__", "1", "toJSON"})
	field := func(name string, extra ...string) *rapid.Generator[string] {
		return rapid.Custom(func(t *rapid.T) string {
			choices := append(append([]string{}, scalars...), extra...)
			return rapid.SampledFrom(choices).Draw(t, name)
		})
	}
	headers := rapid.Custom(func(t *rapid.T) string {
		if rapid.Bool().Draw(t, "scalar headers") {
			return value.Draw(t, "headers")
		}
		var b strings.Builder
		b.WriteString("{")
		for i, n := range rapid.SliceOfNDistinct(names, 0, 4, rapid.ID).Draw(t, "names") {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"` + n + `": ` + headerValue.Draw(t, "value"))
		}
		b.WriteString("}")
		return b.String()
	})
	body := field("body", `{"a": [1, "x", null]}`, "[]", "{}", "[1, [2]]", "new Date(0)", "function () {}", `{"toJSON": function () { return "t"; }}`)
	mode := rapid.SampledFrom([]string{"undefined", "null", `"text"`, `"binary"`, "1"})
	rapid.Check(t, func(t *rapid.T) {
		src := "({statusCode: " + field("status").Draw(t, "statusCode") + ", headers: " + headers.Draw(t, "headers") +
			", body: " + body.Draw(t, "body") + ", _mode: " + mode.Draw(t, "_mode") + ", other: 1n})"
		x, err := v.rt.RunString(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		o := x.(*goja.Object)
		var vals [len(answerKeys)]goja.Value
		for i, k := range answerKeys {
			vals[i] = o.Get(k)
		}
		quick, ok := v.quickFields(&vals)
		if !ok {
			return
		}
		want, ok := jsonFields(t, v, o)
		if !ok {
			t.Fatalf("%s: the quick path read what the JSON path refuses: %+v", src, quick)
		}
		if !reflect.DeepEqual(quick, want) {
			t.Fatalf("%s:\nquick %+v\njson  %+v", src, quick, want)
		}
	})
}
