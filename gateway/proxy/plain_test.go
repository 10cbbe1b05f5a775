package proxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/message"
	"pgregory.net/rapid"
)

// A plain answer's response, made straight from the upstream's answer,
// is the one its `is` object builds on an http imposter without a
// defaultResponse: the status, the headers in the `is` object's order,
// the body as mb sends it, and the binary mode.
func TestPlainResponseIsTheIsResponse(t *testing.T) {
	plainImp, err := imposter.New(&imposter.Spec{Protocol: "http", Port: 1}, imposter.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dflt, err := imposter.ParseSpec([]byte(`{"protocol":"http","port":2,"defaultResponse":{"statusCode":404,"headers":{"X-D":"d"},"body":{"d":1},"_mode":"text"}}`))
	if err != nil {
		t.Fatal(err)
	}
	dfltImp, err := imposter.New(dflt, imposter.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bodies := []string{
		"", " ", "hello", `{"a":1,"a":2,"b":[1,2,{}]}`, ` {"x" : "y"} `, `[]`, `[1,"2",null]`,
		`0`, `-0`, `0.0`, `1e-400`, `1e21`, `12.50`, `false`, `true`, `null`, `""`, `"s"`, `"\u2028"`,
		`{"a":`, `nul`, "\xff\xfe", "{\"k\":\"\\ud800\"}", "line\nbreak",
	}
	names := []string{"Content-Type", "content-type", "X-A", "x-a", "123", "__proto__", "Set-Cookie", "Content-Encoding"}
	values := []string{"", "text/plain", "application/json", "image/png", "gzip", "a, b", "1"}
	rapid.Check(t, func(t *rapid.T) {
		a := &answer{status: rapid.SampledFrom([]int{200, 201, 204, 302, 404, 500, 599, 999, 99, 1000}).Draw(t, "status")}
		n := rapid.IntRange(0, 6).Draw(t, "headers")
		for i := 0; i < n; i++ {
			a.headers = append(a.headers, message.KV{
				Name: rapid.SampledFrom(names).Draw(t, "name"), Value: rapid.SampledFrom(values).Draw(t, "value")})
		}
		body := rapid.SampledFrom(bodies).Draw(t, "body")
		if rapid.Bool().Draw(t, "random body") {
			body = rapid.String().Draw(t, "text")
		}
		a.body = []byte(body)

		hasDefault := rapid.Bool().Draw(t, "defaultResponse")
		imp := plainImp
		if hasDefault {
			imp = dfltImp
		}
		want, err := imp.BuildResponse(upstreamIs(a, 1))
		if err != nil {
			t.Fatalf("the is: %v", err)
		}
		got, ok := plainResponse(a, hasDefault)
		if !ok {
			// Only a status mb refuses, or a body the defaultResponse fills.
			if bare, _ := plainResponse(a, false); want.StatusCode != 500 && (!hasDefault || len(bare.Body) > 0) {
				t.Fatalf("no plain response for status %d, body %q, whose is answers %d %q", a.status, a.body, want.StatusCode, want.Body)
			}
			return
		}
		if got.StatusCode != want.StatusCode || got.Binary != want.Binary || got.BinaryText != want.BinaryText ||
			!bytes.Equal(got.Body, want.Body) || !equalKVs(got.Headers, want.Headers) {
			t.Fatalf("plain %+v\nis    %+v", got, want)
		}
	})
}

func equalKVs(a, b []message.KV) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Where no names merge, outgoing's shortcut sends what merging would.
func TestOutgoingDistinctIsOutgoingMerged(t *testing.T) {
	names := []string{"Host", "host", "HOST", "Accept", "accept", "X-A", "Content-Length", "x-b"}
	kvs := func(t *rapid.T, label string) []message.KV {
		var out []message.KV
		for range rapid.IntRange(0, 5).Draw(t, label) {
			out = append(out, message.KV{Name: rapid.SampledFrom(names).Draw(t, "name"), Value: rapid.StringN(0, 3, 3).Draw(t, "value")})
		}
		return out
	}
	shortcuts := 0
	rapid.Check(t, func(t *rapid.T) {
		client, inject := kvs(t, "client"), kvs(t, "inject")
		got, ok := outgoingDistinct(client, "up:1", inject)
		if !ok {
			return
		}
		shortcuts++
		if want := outgoingMerged(client, "up:1", inject); !equalKVs(got, want) {
			t.Fatalf("shortcut %v\nmerged   %v", got, want)
		}
	})
	if shortcuts == 0 {
		t.Fatal("the shortcut was never taken")
	}
}

// headerFields reads every "name: value" line after the status line as
// it was sent: a name holds no colon or line break, a value no line break
// or surrounding blanks.
func FuzzHeaderFields(f *testing.F) {
	f.Add("HTTP/1.1 200 OK\r\nA: 1\r\nb:2\r\n\r\n")
	f.Add("HTTP/1.1 200 OK\nX-Y:  a b \t\r\r\n:bad\r\nnocolon\r\n")
	f.Fuzz(func(t *testing.T, head string) {
		for _, kv := range headerFields(head) {
			if kv.Name == "" || strings.ContainsAny(kv.Name, ":\n") || strings.ContainsAny(kv.Value, "\n") ||
				strings.Trim(kv.Value, " \t") != kv.Value {
				t.Fatalf("headerFields(%q) gave %q", head, kv)
			}
			if !strings.Contains(head, kv.Name+":") {
				t.Fatalf("headerFields(%q): %q was not sent", head, kv.Name)
			}
		}
	})
}

// Generating from plainRequestObject gives what generating from the whole
// request gives, for any http request and generators on its string
// fields; it declines the others.
func TestPlainRequestObjectIsTheFullOne(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		str := rapid.OneOf(rapid.String(), rapid.SampledFrom([]string{"", "/a b", "\xff", "é\u2028", `{"a":1}`, "<x/>"}))
		r := &message.Request{Kind: message.HTTP, Method: str.Draw(t, "method"), Path: str.Draw(t, "path"), Body: []byte(str.Draw(t, "body"))}
		var raws []string
		for range rapid.IntRange(1, 3).Draw(t, "generators") {
			var ms []string
			for _, f := range rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"method", "path", "body", "query", "headers"}), 1, 3, rapid.ID[string]).Draw(t, "fields") {
				ms = append(ms, `"`+f+`":`+rapid.SampledFrom([]string{"true", `{"a":true}`}).Draw(t, "how"))
			}
			g := `{"matches":{` + strings.Join(ms, ",") + `}`
			if rapid.Bool().Draw(t, "caseSensitive") {
				g += `,"caseSensitive":true`
			}
			if rapid.Bool().Draw(t, "operator") {
				g += `,"predicateOperator":"equals"`
			}
			raws = append(raws, g+"}")
		}
		gens, err := parseGenerators(rawJSON(raws))
		if err != nil {
			t.Fatal(err)
		}
		fast, err := generate(gens, r, nil)
		plain, ok := plainRequestObject(r, gens)
		full := fullRequestObject(r)
		if ok {
			for _, k := range plain.Keys {
				if plain.Vals[k] != full.Vals[k] {
					t.Fatalf("%s: %q, the whole request's %q", k, plain.Vals[k], full.Vals[k])
				}
			}
		}
		slow, err2 := generateFrom(gens, full, nil)
		if (err == nil) != (err2 == nil) || string(bytes.Join(rawBytes(fast), []byte(","))) != string(bytes.Join(rawBytes(slow), []byte(","))) {
			t.Fatalf("generated %s (%v), from the whole request %s (%v)", rawBytes(fast), err, rawBytes(slow), err2)
		}
	})
}

func rawJSON(ss []string) []json.RawMessage {
	out := make([]json.RawMessage, len(ss))
	for i, s := range ss {
		out[i] = json.RawMessage(s)
	}
	return out
}

func rawBytes(rs []json.RawMessage) [][]byte {
	out := make([][]byte, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out
}
