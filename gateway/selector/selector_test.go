package selector

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestJSNumber(t *testing.T) {
	for in, want := range map[string]string{
		"1": "1", "1.50": "1.5", "1e2": "100", "-0": "0", "1e21": "1e+21", "123456789012345678901": "123456789012345680000",
		"0.000001": "0.000001", "1e-7": "1e-7", "2.5E-8": "2.5e-8", "-1.25e+30": "-1.25e+30",
	} {
		if got := JSNumber(json.Number(in)); got != want {
			t.Errorf("JSNumber(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestString(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{"x", "x"}, {json.Number("2.0"), "2"}, {true, "true"}, {nil, "null"},
		{[]any{"a", json.Number("1"), nil, []any{"b", "c"}}, "a,1,,b,c"},
		{map[string]any{"a": "b"}, "[object Object]"}, {3.5, "3.5"},
	} {
		if got := String(c.v); got != c.want {
			t.Errorf("String(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

const books = `{"store":{"book":[{"title":"A","price":8},{"title":"B","price":12.5}],"owner":"Zed"}}`

func TestJSONPath(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []any
	}{
		{"$..title", []any{"A", "B"}},
		{"$.store.book[1].price", []any{json.Number("12.5")}},
		{"store.owner", []any{"Zed"}}, // jsonpath-plus accepts a path without "$"
		{"$.store.book[?(@.price < 10)].title", []any{"A"}},
		{"$.store.book[-1:].title", []any{"B"}},
		{"$.nope", nil},
	} {
		p, err := CompileJSONPath(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if got := p.SelectText(books); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %#v, want %#v", c.expr, got, c.want)
		}
	}
	p, _ := CompileJSONPath("$.a")
	if got := p.SelectText("not json"); got != nil {
		t.Errorf("not json selected %v", got)
	}
	// jsonpath-plus takes any text; what it cannot follow selects nothing.
	if p, err := CompileJSONPath("$..[["); err != nil || p.SelectText(books) != nil {
		t.Errorf("$..[[: %v", err)
	}
}

const doc = `<r xmlns:b="urn:b"><b:t lang="en">one</b:t><b:t>two</b:t><e><x/></e><empty/><ws>  </ws></r>`

func TestXPath(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []any
	}{
		{"//b:t", []any{"one", "two"}},
		{"//b:t/@lang", []any{"en"}},
		{"//b:t/text()", []any{"one", "two"}},
		{"count(//b:t)", []any{float64(2)}},
		{"boolean(//e)", []any{true}},
		{"//e", []any{"undefined"}},     // first child is an element: mb renders String(undefined)
		{"//empty", []any{"undefined"}}, // no child at all
		{"//ws", []any{"  "}},
		{"//nope", nil},
	} {
		x, err := CompileXPath(c.expr, map[string]string{"b": "urn:b"})
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if got := x.Select(doc); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %#v, want %#v", c.expr, got, c.want)
		}
	}
	x, _ := CompileXPath("//a", nil)
	if got := x.Select("not xml <"); got != nil {
		t.Errorf("not xml selected %v", got)
	}
	if _, err := CompileXPath("//a[[", nil); err == nil {
		t.Error("compiled a malformed xpath")
	}
}

func TestShape(t *testing.T) {
	if Shape(nil) != nil || Shape([]any{"a"}) != "a" || !reflect.DeepEqual(Shape([]any{"a", "b"}), []any{"a", "b"}) {
		t.Fatal("Shape")
	}
}

func FuzzJSONPath(f *testing.F) {
	for _, s := range []string{"$..title", "store.owner", "$.a[?(@.b == 1)]", "$['a','b']", "$..*"} {
		f.Add(s, books)
	}
	f.Fuzz(func(t *testing.T, expr, text string) {
		p, err := CompileJSONPath(expr)
		if err != nil {
			return
		}
		for _, v := range p.SelectText(text) {
			_ = String(v)
		}
	})
}

func FuzzXPath(f *testing.F) {
	for _, s := range []string{"//b:t", "count(//x)", "//@lang", "/r/e/x", "string(//b:t)"} {
		f.Add(s, doc)
	}
	f.Fuzz(func(t *testing.T, expr, text string) {
		x, err := CompileXPath(expr, map[string]string{"b": "urn:b"})
		if err != nil {
			return
		}
		_ = x.Select(text)
	})
}

// Compiled selectors are shared by every request of a stub.
func TestConcurrentSelect(t *testing.T) {
	x, err := CompileXPath("//b:t", map[string]string{"b": "urn:b"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := CompileXPath("count(//b:t)", map[string]string{"b": "urn:b"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := CompileJSONPath("$..title")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 200 {
				if len(x.Select(doc)) != 2 || c.Select(doc)[0] != float64(2) || len(p.SelectText(books)) != 2 {
					t.Error("wrong selection under concurrency")
					return
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}

// Matches over an object's members come in document order, as
// jsonpath-plus gives them; unions keep their own order.
func TestJSONPathOrder(t *testing.T) {
	const text = `{"z":{"t":"1","p":1},"a":{"t":"2"},"m":{"t":"3","p":2,"k":{"t":"4"}}}`
	for _, c := range []struct {
		expr, in string
		want     []any
	}{
		{"$.*.t", text, []any{"1", "2", "3"}},
		{"$..t", text, []any{"1", "2", "3", "4"}},
		{"$[?(@.p)].t", text, []any{"1", "3"}},
		{"$[m,z].t", text, []any{"3", "1"}},
		{"$['m','z'].t", text, nil}, // jsonpath-plus splits it into m' and 'z
		{"$.m.*", text, []any{"3", json.Number("2"), map[string]any{"t": "4"}}},
		// A node's own match comes before matches under it, whatever the
		// key order: mb answers 2 before 1 here.
		{"$.x..t", `{"x":{"k":{"t":"1"},"t":"2"}}`, []any{"2", "1"}},
		{"$..*", `{"b":{"c":"1"},"a":"2"}`, []any{map[string]any{"c": "1"}, "2", "1"}},
	} {
		p, err := CompileJSONPath(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		for range 20 { // map iteration order varies from run to run
			if got := p.SelectText(c.in); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("%s: %#v, want %#v", c.expr, got, c.want)
			}
		}
	}
}

// FuzzParseOrdered checks that the order-keeping JSON parser reads exactly
// what encoding/json reads.
func FuzzParseOrdered(f *testing.F) {
	for _, s := range []string{books, `{"a":1,"a":2}`, `[1,{"b":[null,true]}]`, `"x"`, `{"a":}`, `1 2`, `0A`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		v1, ok1 := ParseJSON(text)
		v2, _, ok2 := parseOrdered(text)
		if ok1 != ok2 || !reflect.DeepEqual(v1, v2) {
			t.Fatalf("%q: ParseJSON %v %#v, parseOrdered %v %#v", text, ok1, v1, ok2, v2)
		}
	})
}

func TestCompileRegex(t *testing.T) {
	for _, c := range []struct {
		src              string
		ignoreCase, mult bool
		in               string
		want             bool
	}{
		{`^caf\u00e9$`, false, false, "café", true},
		{`[\u0041-\u0043]+`, false, false, "ABC", true},
		{`^abc$`, true, false, "ABC", true},
		{`^b$`, false, true, "a\nb", true},
		{`^b$`, false, false, "a\nb", false},
		{`\\u0041`, false, false, `\u0041`, true}, // an escaped backslash stays one
	} {
		re, err := CompileRegex(c.src, c.ignoreCase, c.mult)
		if err != nil {
			t.Fatal(err)
		}
		if got := re.MatchString(c.in); got != c.want {
			t.Errorf("%s on %q: %v, want %v", c.src, c.in, got, c.want)
		}
	}
	if _, err := CompileRegex(`(?=a)`, false, false); err == nil {
		t.Error("compiled a lookahead")
	}
}

// A script runs in a bare runtime, bounded in time: one that loops
// selects nothing once its time is up, and one that reaches for the host
// (as a Node vm context lets it) finds nothing there.
func TestJSONPathScriptsAreBounded(t *testing.T) {
	for _, expr := range []string{
		"$[?((function () { for (;;) {} })())]",
		"$[?(this.constructor.constructor('return process')().pid)]",
		"$[?(require('fs'))]",
	} {
		p, err := CompileJSONPath(expr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if got := p.SelectText(`{"a":1}`); got != nil {
			t.Errorf("%s selected %v", expr, got)
		}
		if d := time.Since(start); d > jsonpathScriptTimeout+time.Second {
			t.Errorf("%s ran %v", expr, d)
		} else if strings.Contains(expr, "for (;;)") && d < jsonpathScriptTimeout {
			t.Errorf("%s ended after %v, before its time was up: it did not run", expr, d)
		}
	}
	// The runtime it ran on is fit for the next selection.
	p, _ := CompileJSONPath("$[?(@ > 0)]")
	if got := p.SelectText(`{"a":1,"b":0}`); !reflect.DeepEqual(got, []any{json.Number("1")}) {
		t.Errorf("after a timeout: %v", got)
	}
}
