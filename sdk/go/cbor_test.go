package rift

import (
	"bytes"
	"encoding/hex"
	"errors"
	"maps"
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
	r := &Response{Status: 201, Headers: map[string]string{"Content-Type": "text/plain"}, Body: []byte("hi")}
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

func goldenRequestValue() *Request {
	return &Request{
		Method: "GET", Path: "/a",
		Query:   map[string]string{"n": "x"},
		Headers: map[string]string{"A": "b"},
		Body:    []byte("hi"), Flow: "i:f", RequestFrom: "1.2.3.4:5",
	}
}

func TestRequestGolden(t *testing.T) {
	want := goldenRequestValue()
	b := unhex(t, goldenRequest)
	got, err := DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if !requestEqual(got, want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
	if enc := want.AppendCBOR(nil); !bytes.Equal(enc, b) {
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
	got, err := DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := goldenRequestValue(); !requestEqual(got, want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
}

func TestRequestDecorate(t *testing.T) {
	req := goldenRequestValue()
	req.Response = &Response{Status: 201, Headers: map[string]string{"Content-Type": "text/plain"}, Body: []byte("hi")}
	b := req.AppendCBOR(nil)
	if !bytes.Contains(b, unhex(t, "08"+goldenResponse)) {
		t.Fatalf("key 8 does not hold the response envelope: % x", b)
	}
	got, err := DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if !requestEqual(got, req) {
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
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRequest(unhex(t, tc.hex))
			var ee *EnvelopeError
			if !errors.As(err, &ee) {
				t.Fatalf("err = %v, want *EnvelopeError", err)
			}
		})
	}
}

func TestHeaderCaseInsensitive(t *testing.T) {
	r := &Request{Headers: map[string]string{"X-Flow-Id": "a"}}
	for _, name := range []string{"X-Flow-Id", "x-flow-id", "X-FLOW-ID"} {
		if got := r.Header(name); got != "a" {
			t.Errorf("Header(%q) = %q", name, got)
		}
	}
	if got := r.Header("X-Flow"); got != "" {
		t.Errorf("Header(X-Flow) = %q", got)
	}
}

func requestEqual(a, b *Request) bool {
	return a.Method == b.Method && a.Path == b.Path && maps.Equal(a.Query, b.Query) &&
		maps.Equal(a.Headers, b.Headers) && bytes.Equal(a.Body, b.Body) && a.Flow == b.Flow &&
		a.RequestFrom == b.RequestFrom && responseEqual(a.Response, b.Response)
}

func responseEqual(a, b *Response) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && maps.Equal(a.Headers, b.Headers) && bytes.Equal(a.Body, b.Body)
}

// FuzzDecodeRequest checks that no input panics the decoder, and that what
// it accepts re-encodes to an envelope that decodes to the same request.
func FuzzDecodeRequest(f *testing.F) {
	f.Add(unhex(f, goldenRequest))
	f.Add(unhex(f, "a0"))
	f.Add(unhex(f, "a1 08 a3 01 18 c9 02 a1 6141 6162 03 42 6869"))
	f.Add(unhex(f, "a2 18 63 c1 f9 3c00 01 63 474554"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRequest(b)
		if err != nil {
			return
		}
		if r.Response != nil && r.Response.Status > 999 {
			t.Fatalf("status %d accepted", r.Response.Status)
		}
		again, err := DecodeRequest(r.AppendCBOR(nil))
		if err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		if !requestEqual(normalize(r), normalize(again)) {
			t.Fatalf("round trip changed %+v into %+v", r, again)
		}
	})
}

// normalize maps the absent and the empty forms to one value, since the
// encoder writes absent maps and bodies as empty ones.
func normalize(r *Request) *Request {
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
			resp.Headers = map[string]string{hk: hv}
		}
		req := &Request{Response: resp}
		got, err := DecodeRequest(req.AppendCBOR(nil))
		if err != nil {
			t.Fatal(err)
		}
		if !requestEqual(normalize(got), normalize(req)) {
			t.Fatalf("got %+v, want %+v", got.Response, resp)
		}
	})
}
