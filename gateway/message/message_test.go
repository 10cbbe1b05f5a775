package message

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestRequestJSONHasMountebanksShape(t *testing.T) {
	r := &Request{
		Method:    "POST",
		Path:      "/a b",
		Query:     []KV{{"q", "1"}, {"r", "x"}, {"q", "2"}},
		Headers:   []KV{{"Content-Type", "application/x-www-form-urlencoded"}, {"X-A", "<&>"}},
		Body:      []byte("k=v+w&k=z"),
		Timestamp: time.Date(2026, 11, 29, 10, 0, 0, 123e6, time.UTC),
	}
	r.SetRemote("127.0.0.1:5555", "127.0.0.1")
	got, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"requestFrom":"127.0.0.1:5555","method":"POST","path":"/a b","query":{"q":["1","2"],"r":"x"},` +
		`"headers":{"Content-Type":"application/x-www-form-urlencoded","X-A":"<&>"},"body":"k=v+w&k=z","ip":"127.0.0.1",` +
		`"form":{"k":["v w","z"]},"timestamp":"2026-11-29T10:00:00.123Z"}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	var back Request
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	again, _ := back.MarshalJSON()
	if !bytes.Equal(again, got) {
		t.Fatalf("round trip changed the request:\n%s\n%s", again, got)
	}
}

func TestWriteStringEscapesLikeJSONStringify(t *testing.T) {
	for in, want := range map[string]string{
		"plain":     `"plain"`,
		"a\"b\\c":   `"a\"b\\c"`,
		"\n\t\x01":  `"\n\t\u0001"`,
		"<html>&":   `"<html>&"`,
		"bad\xffok": `"bad` + "\uFFFD" + `ok"`,
	} {
		var b bytes.Buffer
		writeString(&b, in)
		if b.String() != want {
			t.Errorf("writeString(%q) = %s, want %s", in, b.String(), want)
		}
		if !json.Valid(b.Bytes()) {
			t.Errorf("writeString(%q) is not valid JSON", in)
		}
	}
}

// countingView counts how often it is made.
type countingView struct{ n int }

func (c *countingView) Make(r *Request) any { c.n++; return string(r.Body) }

func TestViewIsMadeOncePerRequest(t *testing.T) {
	a, b := &countingView{}, &countingView{}
	r := &Request{Body: []byte("one")}
	for range 3 {
		if r.View(a) != "one" || r.View(b) != "one" {
			t.Fatal("wrong view")
		}
	}
	if a.n != 1 || b.n != 1 {
		t.Fatalf("made %d and %d times, want once each", a.n, b.n)
	}
	r.Reset()
	r.Body = []byte("two")
	if r.View(a) != "two" || a.n != 2 {
		t.Fatalf("after Reset: %v, made %d times", r.View(a), a.n)
	}
}

func TestSetHeaderReplacesAllValues(t *testing.T) {
	r := &Response{Headers: []KV{{"content-type", "a"}, {"X", "1"}, {"Content-Type", "b"}}}
	r.SetHeader("Content-Type", "c")
	want := []KV{{"content-type", "c"}, {"X", "1"}}
	if len(r.Headers) != 2 || r.Headers[0] != want[0] || r.Headers[1] != want[1] {
		t.Fatalf("got %v", r.Headers)
	}
}

func FuzzRequestUnmarshal(f *testing.F) {
	f.Add([]byte(`{"method":"GET","path":"/","query":{"a":["1",2,null]},"headers":{"h":true},"body":{"x":1}}`))
	f.Add([]byte(`{"body":"x","timestamp":"2020-01-01T00:00:00Z"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Request
		if err := json.Unmarshal(data, &r); err != nil {
			return
		}
		out, err := json.Marshal(&r)
		if err != nil || !json.Valid(out) {
			t.Fatalf("marshal of a decoded request failed: %v %s", err, out)
		}
	})
}

func TestRawPathCutsTheTarget(t *testing.T) {
	for _, tc := range []struct{ uri, want string }{
		{"/a/b", "/a/b"},
		{"/a/b?x=1#f", "/a/b"},
		{"/a%2Fb?x", "/a%2Fb"},
		{"/redirect?to=http://elsewhere/x", "/redirect"}, // a scheme in the query is not the target's
		{"http://host:80/p/q?x=1", "/p/q"},
		{"http://host", "/"},
		{"", "/"},
		{"?x", "/"},
	} {
		if got := string(rawPath([]byte(tc.uri))); got != tc.want {
			t.Errorf("rawPath(%q) = %q, want %q", tc.uri, got, tc.want)
		}
	}
}

// A gRPC request's JSON, byte for byte, and back.
func TestGRPCRequestJSONGolden(t *testing.T) {
	r := &Request{Kind: GRPC, Path: "/p.S/M", Body: []byte(`{"name":"bob","tags":[]}`),
		Headers: []KV{{"x-a", "1"}, {"x-a", "2"}, {"k-bin", "AAE="}}, Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)}
	r.SetRemote("127.0.0.1:5000", "127.0.0.1")
	const golden = `{"path":"/p.S/M","value":{"name":"bob","tags":[]},"metadata":{"x-a":["1","2"],"k-bin":"AAE="},"peer":"127.0.0.1:5000","timestamp":"2026-01-02T03:04:05.006Z"}`
	b, err := r.MarshalJSON()
	if err != nil || string(b) != golden {
		t.Fatalf("got %s (%v)\nwant %s", b, err, golden)
	}
	var back Request
	if err := back.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	if back.Kind != GRPC || back.Path != r.Path || string(back.Body) != string(r.Body) || len(back.Headers) != 3 || back.RequestFrom() != "127.0.0.1:5000" || back.IP() != "127.0.0.1" {
		t.Fatalf("back %+v", back)
	}
	again, _ := back.MarshalJSON()
	if string(again) != golden {
		t.Fatalf("again %s", again)
	}
	// A message that is not JSON is shown as null.
	r.Body = []byte("{")
	if b, _ := r.MarshalJSON(); !strings.Contains(string(b), `"value":null`) {
		t.Fatalf("bad value %s", b)
	}
}
