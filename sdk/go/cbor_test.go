package rift

import (
	"bytes"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The response example of ABI v1 section 5, byte for byte.
const goldenResponse = "a3 01 18 c9 02 a1 6c 43 6f 6e 74 65 6e 74 2d 54 79 70 65 6a 74 65 78 74 2f 70 6c 61 69 6e 03 42 68 69"

func TestResponseGolden(t *testing.T) {
	r := &Response{Status: 201, Headers: []Header{{"Content-Type", "text/plain"}}, Body: []byte("hi")}
	got := r.AppendCBOR(nil)
	want := unhex(t, goldenResponse)
	if !bytes.Equal(got, want) {
		t.Fatalf("got  % x\nwant % x", got, want)
	}
	if len(got) != 34 {
		t.Fatalf("len %d, the ABI says 34", len(got))
	}
}

func TestResponseDefaultsOmitted(t *testing.T) {
	tests := []struct {
		name string
		r    Response
		want string
	}{
		{"empty", Response{}, "a0"},
		{"status only", Response{Status: 404}, "a1 01 19 0194"},
		{"body only", Response{Body: []byte("x")}, "a1 03 41 78"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := tc.r.AppendCBOR(nil), unhex(t, tc.want); !bytes.Equal(got, want) {
				t.Fatalf("got % x, want % x", got, want)
			}
		})
	}
}

// A request envelope as the host writes it: canonical, keys ascending.
const goldenRequest = "a7" +
	"01 63 474554" + // 1: "GET"
	"02 62 2f61" + // 2: "/a"
	"03 a1 616e 6178" + // 3: {"n": "x"}
	"04 a1 6141 6162" + // 4: {"A": "b"}
	"05 42 6869" + // 5: h'6869'
	"06 63 693a66" + // 6: "i:f"
	"07 69 312e322e332e343a35" // 7: "1.2.3.4:5"

// envelope is a request as plain values: what a test expects a Request to
// show, and what it encodes with appendCBOR as the host would.
type envelope struct {
	Method, Path      string
	Query, Headers    map[string]string
	Body              []byte
	Flow, RequestFrom string
	Response          *Response
}

// appendCBOR appends e's request envelope to b, keys ascending as the host
// writes them.
func (e *envelope) appendCBOR(b []byte) []byte {
	n := uint64(7)
	if e.Response != nil {
		n++
	}
	b = appendHead(b, majMap, n)
	b = appendText(appendHead(b, majUint, keyMethod), e.Method)
	b = appendText(appendHead(b, majUint, keyPath), e.Path)
	b = appendTextMap(appendHead(b, majUint, keyQuery), e.Query)
	b = appendTextMap(appendHead(b, majUint, keyHeaders), e.Headers)
	b = appendHead(appendHead(b, majUint, keyBody), majBytes, uint64(len(e.Body)))
	b = append(b, e.Body...)
	b = appendText(appendHead(b, majUint, keyFlow), e.Flow)
	b = appendText(appendHead(b, majUint, keyRequestFrom), e.RequestFrom)
	if e.Response != nil {
		b = e.Response.AppendCBOR(appendHead(b, majUint, keyResponse))
	}
	return b
}

// appendTextMap appends m with its keys sorted, as the host writes maps.
func appendTextMap(b []byte, m map[string]string) []byte {
	b = appendHead(b, majMap, uint64(len(m)))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b = appendText(appendText(b, k), m[k])
	}
	return b
}

// view reads every field of r through its accessors.
func view(r *Request) *envelope {
	e := &envelope{
		Method: r.Method(), Path: r.Path(), Body: bytes.Clone(r.Body()),
		Flow: r.Flow(), RequestFrom: r.RequestFrom(), Response: r.Response(),
	}
	for k, v := range r.QueryParams() {
		if e.Query == nil {
			e.Query = map[string]string{}
		}
		e.Query[k] = v
	}
	for k, v := range r.Headers() {
		if e.Headers == nil {
			e.Headers = map[string]string{}
		}
		e.Headers[k] = v
	}
	return e
}

func parse(t testing.TB, b []byte) *envelope {
	t.Helper()
	r, err := ParseRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	return view(r)
}

func goldenRequestValue() *envelope {
	return &envelope{
		Method: "GET", Path: "/a",
		Query:   map[string]string{"n": "x"},
		Headers: map[string]string{"A": "b"},
		Body:    []byte("hi"), Flow: "i:f", RequestFrom: "1.2.3.4:5",
	}
}

func TestRequestGolden(t *testing.T) {
	want := goldenRequestValue()
	b := unhex(t, goldenRequest)
	if got := parse(t, b); !requestEqual(got, want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
	if enc := want.appendCBOR(nil); !bytes.Equal(enc, b) {
		t.Fatalf("encoded % x\nwant    % x", enc, b)
	}
}

func TestRequestAnyOrderAndUnknownKeys(t *testing.T) {
	// Keys reversed, plus unknown keys of every kind a later host might add:
	// an integer key 99 with a nested map, a text key, a tag and a float.
	b := unhex(t, "aa"+
		"07 69 312e322e332e343a35"+
		"18 63 a2 01 82 01 02 02 c1 1a 00000001"+
		"06 63 693a66"+
		"61 7a f9 3c00"+
		"05 62 6869"+ // body as text is accepted too
		"04 a1 6141 6162"+
		"03 a1 616e 6178"+
		"18 64 fb 3ff0000000000000"+
		"02 62 2f61"+
		"01 63 474554")
	if got, want := parse(t, b), goldenRequestValue(); !requestEqual(got, want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
}

func TestRequestDecorate(t *testing.T) {
	req := goldenRequestValue()
	req.Response = &Response{Status: 201, Headers: []Header{{"Content-Type", "text/plain"}}, Body: []byte("hi")}
	b := req.appendCBOR(nil)
	if !bytes.Contains(b, unhex(t, "08"+goldenResponse)) {
		t.Fatalf("key 8 does not hold the response envelope: % x", b)
	}
	if got := parse(t, b); !requestEqual(got, req) {
		t.Fatalf("decoded %+v, want %+v", got, req)
	}
}

func TestRequestMalformed(t *testing.T) {
	tests := []struct{ name, hex string }{
		{"empty", ""},
		{"not a map", "80"},
		{"truncated map", "a2 01 63 474554"},
		{"indefinite map", "bf ff"},
		{"indefinite text", "a1 01 7f ff"},
		{"huge map", "bb ffffffffffffffff"},
		{"string past end", "a1 01 78 40 41"},
		{"method not text", "a1 01 01"},
		{"trailing bytes", "a0 00"},
		{"deep nesting", "a1 18 63" + strings.Repeat("81", 40) + "00"},
		{"header value not text", "a1 04 a1 6141 01"},
		{"query key not text", "a1 03 a1 01 6178"},
		{"body not bytes", "a1 05 01"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRequest(unhex(t, tc.hex))
			var ee *EnvelopeError
			if !errors.As(err, &ee) {
				t.Fatalf("err = %v, want *EnvelopeError", err)
			}
		})
	}
}

func TestHeaderAndQueryLookup(t *testing.T) {
	e := &envelope{Headers: map[string]string{"X-Flow-Id": "a"}, Query: map[string]string{"Name": "q"}}
	r, err := ParseRequest(e.appendCBOR(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"X-Flow-Id", "x-flow-id", "X-FLOW-ID"} {
		if got := r.Header(name); got != "a" {
			t.Errorf("Header(%q) = %q", name, got)
		}
	}
	if got := r.Header("X-Flow"); got != "" {
		t.Errorf("Header(X-Flow) = %q", got)
	}
	// Query names are exact, as mb compares them.
	if got, none := r.Query("Name"), r.Query("name"); got != "q" || none != "" {
		t.Errorf("Query(Name) = %q, Query(name) = %q", got, none)
	}
}

// TestHotPathDoesNotAllocate pins the point of the lazy view: reading the
// envelope, looking a header up and encoding a kept response cost no
// allocation in a guest.
func TestHotPathDoesNotAllocate(t *testing.T) {
	b := goldenRequestValue().appendCBOR(nil)
	load := func() ([]byte, error) { return b, nil }
	var r Request
	n := testing.AllocsPerRun(100, func() {
		r.reset(load)
		if err := r.index(); err != nil {
			t.Fatal(err)
		}
		_ = r.find(keyHeaders, "a", true)
		_ = r.Body()
	})
	if n != 0 {
		t.Fatalf("%v allocations per parse and lookup", n)
	}
	resp := &Response{Headers: []Header{{"Content-Type", "text/plain"}, {"X-A", "1"}}, Body: []byte("ok")}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf = resp.AppendCBOR(buf[:0]) }); n != 0 {
		t.Fatalf("%v allocations per response encoding", n)
	}
}

func requestEqual(a, b *envelope) bool {
	return a.Method == b.Method && a.Path == b.Path && maps.Equal(a.Query, b.Query) &&
		maps.Equal(a.Headers, b.Headers) && bytes.Equal(a.Body, b.Body) && a.Flow == b.Flow &&
		a.RequestFrom == b.RequestFrom && responseEqual(a.Response, b.Response)
}

func responseEqual(a, b *Response) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && slices.Equal(a.Headers, b.Headers) && bytes.Equal(a.Body, b.Body)
}

// FuzzParseRequest checks that no input panics the parser or an accessor,
// and that what it accepts re-encodes to an envelope that reads the same.
func FuzzParseRequest(f *testing.F) {
	f.Add(unhex(f, goldenRequest))
	f.Add(unhex(f, "a0"))
	f.Add(unhex(f, "a1 08 a3 01 18 c9 02 a1 6141 6162 03 42 6869"))
	f.Add(unhex(f, "a2 18 63 c1 f9 3c00 01 63 474554"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRequest(b)
		if err != nil {
			return
		}
		if r.Response() != nil && r.Response().Status > 999 {
			t.Fatalf("status %d accepted", r.Response().Status)
		}
		_ = r.Header("x-any")
		_ = r.Query("any")
		e := view(r)
		again, err := ParseRequest(e.appendCBOR(nil))
		if err != nil {
			t.Fatalf("re-encoded request does not parse: %v", err)
		}
		if !requestEqual(normalize(e), normalize(view(again))) {
			t.Fatalf("round trip changed %+v into %+v", e, view(again))
		}
	})
}

// normalize maps the absent and the empty forms to one value, since the
// encoder writes absent maps and bodies as empty ones.
func normalize(r *envelope) *envelope {
	c := *r
	if c.Query == nil {
		c.Query = map[string]string{}
	}
	if c.Headers == nil {
		c.Headers = map[string]string{}
	}
	if len(c.Body) == 0 {
		c.Body = nil
	}
	if c.Response != nil {
		resp := *c.Response
		if len(resp.Headers) == 0 {
			resp.Headers = nil
		}
		if len(resp.Body) == 0 {
			resp.Body = nil
		}
		c.Response = &resp
	}
	return &c
}

// FuzzResponseRoundTrip encodes arbitrary responses and decodes them back
// through a decorate envelope.
func FuzzResponseRoundTrip(f *testing.F) {
	f.Add(201, "Content-Type", "text/plain", []byte("hi"))
	f.Add(0, "", "", []byte(nil))
	f.Add(599, "a", strings.Repeat("v", 300), bytes.Repeat([]byte{0xff}, 70000))
	f.Fuzz(func(t *testing.T, status int, hk, hv string, body []byte) {
		if status < 0 || status > 999 {
			return
		}
		resp := &Response{Status: status, Body: body}
		if hk != "" {
			resp.Headers = []Header{{hk, hv}}
		}
		req := &envelope{Response: resp}
		if got := parse(t, req.appendCBOR(nil)); !requestEqual(normalize(got), normalize(req)) {
			t.Fatalf("got %+v, want %+v", got.Response, resp)
		}
	})
}

// TestRequestIsReadOnlyWhenUsed holds the kit's lazy read: the envelope is
// fetched on the first accessor call, once, and a failed fetch is the
// request's error, which the kit turns into a failed call.
func TestRequestIsReadOnlyWhenUsed(t *testing.T) {
	b := goldenRequestValue().appendCBOR(nil)
	loads := 0
	var r Request
	r.reset(func() ([]byte, error) { loads++; return b, nil })
	if loads != 0 {
		t.Fatalf("read %d times before any accessor", loads)
	}
	if r.Method() == "" || r.Path() == "" || loads != 1 {
		t.Fatalf("method %q path %q after %d reads, want one read", r.Method(), r.Path(), loads)
	}
	r.reset(func() ([]byte, error) { return nil, ErrTooLarge })
	if r.Method() != "" || !errors.Is(r.Err(), ErrTooLarge) {
		t.Fatalf("a failed read: method %q, Err %v", r.Method(), r.Err())
	}
}

// TestStaticSendsWhatItEncoded holds Static to the plain encoding, and
// SetHeader to dropping it.
func TestStaticSendsWhatItEncoded(t *testing.T) {
	mk := func() *Response {
		return &Response{Status: 429, Headers: []Header{{"Retry-After", "1"}}, Body: []byte("slow down")}
	}
	want := mk().AppendCBOR(nil)
	r := Static(mk())
	if got := r.AppendCBOR([]byte{0xff}); !bytes.Equal(got[1:], want) || got[0] != 0xff {
		t.Fatalf("static envelope %x, want ff%x", got, want)
	}
	r.SetHeader("Retry-After", "2")
	plain := mk()
	plain.SetHeader("Retry-After", "2")
	if got, want := r.AppendCBOR(nil), plain.AppendCBOR(nil); !bytes.Equal(got, want) {
		t.Fatalf("after SetHeader %x, want %x", got, want)
	}
	if Static(r); !bytes.Equal(r.AppendCBOR(nil), plain.AppendCBOR(nil)) {
		t.Fatal("Static again must encode the current fields")
	}
}
