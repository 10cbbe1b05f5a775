package examples_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/plugins"
	"pgregory.net/rapid"
)

// genInput draws a request with arbitrary text in every field and unique
// query and header names (the host joins repeats, which the model would
// have to copy), so the kits' CBOR decoders see maps, long strings and
// multi-byte UTF-8 of every length class.
func genInput(t *rapid.T) *plugins.Input {
	name := rapid.StringMatching(`[A-Za-z0-9_-]{1,12}`)
	in := &plugins.Input{
		Method:      rapid.SampledFrom([]string{"GET", "POST", "PUT", "DELETE", "PATCH"}).Draw(t, "method"),
		Path:        "/" + rapid.String().Draw(t, "path"),
		Body:        rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "body"),
		FlowID:      "i1:" + rapid.String().Draw(t, "flow"),
		RequestFrom: plugins.Str("127.0.0.1:" + rapid.StringMatching(`[0-9]{1,5}`).Draw(t, "port")),
	}
	seen := map[string]bool{}
	for _, n := range rapid.SliceOfN(name, 0, 30).Draw(t, "query") {
		if !seen[n] {
			seen[n] = true
			in.Query = append(in.Query, plugins.Pair{Name: n, Value: rapid.String().Draw(t, "qv")})
		}
	}
	seen = map[string]bool{}
	for _, n := range rapid.SliceOfN(name, 0, 30).Draw(t, "headers") {
		if !seen[strings.ToLower(n)] {
			seen[strings.ToLower(n)] = true
			in.Headers = append(in.Headers, plugins.Pair{Name: n, Value: rapid.String().Draw(t, "hv")})
		}
	}
	return in
}

// echoModel is what echo-c must produce for one placeholder.
func echoModel(in *plugins.Input, name string) string {
	switch name {
	case "method":
		return in.Method
	case "path":
		return in.Path
	case "body":
		return string(in.Body)
	case "flow":
		return in.FlowID
	case "requestFrom":
		return in.RequestFrom.String()
	}
	if q, ok := strings.CutPrefix(name, "query."); ok {
		for _, p := range in.Query {
			if p.Name == q {
				return p.Value
			}
		}
	}
	if h, ok := strings.CutPrefix(name, "header."); ok {
		for _, p := range in.Headers {
			if strings.EqualFold(p.Name, h) {
				return p.Value
			}
		}
	}
	return ""
}

// TestEchoCProperty checks echo-c against a model on random requests and
// random templates: the C kit's CBOR decoder, its JSON config reader (the
// template goes through json.Marshal, so it holds \u escapes) and the
// template engine together.
func TestEchoCProperty(t *testing.T) {
	h := register(t, "echo-c")
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t)
		var names []string
		names = append(names, "method", "path", "body", "flow", "requestFrom", "nope")
		for _, p := range in.Query {
			names = append(names, "query."+p.Name)
		}
		for _, p := range in.Headers {
			names = append(names, "header."+strings.ToUpper(p.Name), "header."+p.Name)
		}
		var tpl, want strings.Builder
		for range rapid.IntRange(0, 12).Draw(t, "parts") {
			if rapid.Bool().Draw(t, "literal") {
				lit := strings.NewReplacer("{", "", "}", "").Replace(rapid.String().Draw(t, "lit"))
				tpl.WriteString(lit)
				want.WriteString(lit)
				continue
			}
			n := rapid.SampledFrom(names).Draw(t, "name")
			tpl.WriteString("{{" + n + "}}")
			want.WriteString(echoModel(in, n))
		}
		cfg, err := json.Marshal(map[string]string{"template": tpl.String()})
		if err != nil {
			t.Fatal(err)
		}
		in.Config = cfg
		out, err := h.Call(context.Background(), "echo-c", "handle", in)
		if err != nil || !out.Wrote || out.Result != 0 {
			t.Fatalf("call: %v %+v", err, out)
		}
		if got := string(out.Response.Body); got != want.String() {
			t.Fatalf("template %q\ngot  %q\nwant %q", tpl.String(), got, want.String())
		}
	})
}

// TestKitsDecodeEveryEnvelope sends random requests to the Rust, C and
// AssemblyScript examples: each kit must decode whatever the host encodes
// (a decode failure fails the call).
func TestKitsDecodeEveryEnvelope(t *testing.T) {
	modules := map[string]string{
		"tokenbucket-rust": `{"capacity":1000000,"refillPerSecond":0}`,
		"echo-c":           `{"template":"{{path}}"}`,
		"sequence-as":      `null`,
	}
	h := sharedHost(t)
	for m := range modules {
		register(t, m)
	}
	s := newStore(t)
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t)
		in.Flow = newFlow(s, in.FlowID)
		for m, cfg := range modules {
			in.Config = []byte(cfg)
			out, err := h.Call(context.Background(), m, "handle", in)
			if err != nil || !out.Wrote || out.Result != 0 {
				t.Fatalf("%s: %v %+v", m, err, out)
			}
		}
	})
}

// FuzzEchoC feeds the C kit arbitrary request text and templates; every
// call must succeed, and a template without braces must come back as is.
func FuzzEchoC(f *testing.F) {
	f.Add("/greet", "name", "Ada", "X-User", "bob", []byte("body"), "hello {{path}} {{query.name}}")
	f.Add("/", "", "", "", "", []byte(nil), "")
	f.Add("/\u00e9", "q", "\x00\xff", "h", "\"\\", []byte{0, 1, 2}, `{{header.h}}{{body}}{{`)
	f.Add("/x", "a", strings.Repeat("v", 70000), "b", "w", []byte("z"), "{{query.a}}")
	h := register(f, "echo-c")
	f.Fuzz(func(t *testing.T, path, qn, qv, hn, hv string, body []byte, tpl string) {
		in := &plugins.Input{Method: "GET", Path: path, Body: body, FlowID: "i1:f", RequestFrom: plugins.Str("127.0.0.1:1")}
		if qn != "" {
			in.Query = []plugins.Pair{{Name: qn, Value: qv}}
		}
		if hn != "" {
			in.Headers = []plugins.Pair{{Name: hn, Value: hv}}
		}
		cfg, err := json.Marshal(map[string]string{"template": tpl})
		if err != nil {
			return // not UTF-8: JSON cannot carry it as a config
		}
		in.Config = cfg
		out, err := h.Call(context.Background(), "echo-c", "handle", in)
		if err != nil || !out.Wrote || out.Result != 0 {
			t.Fatalf("call: %v %+v", err, out)
		}
		if !strings.ContainsAny(tpl, "{}") && string(out.Response.Body) != tpl && strings.ToValidUTF8(tpl, "\ufffd") == tpl {
			t.Fatalf("template %q came back as %q", tpl, out.Response.Body)
		}
	})
}
