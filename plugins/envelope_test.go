package plugins

import (
	"bytes"
	"encoding/hex"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"pgregory.net/rapid"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// abiExample is the response envelope example in sdk/ABI.md section 5.
const abiExample = "a3 01 18 c9 02 a1 6c 43 6f 6e 74 65 6e 74 2d 54 79 70 65 6a 74 65 78 74 2f 70 6c 61 69 6e 03 42 68 69"

func TestGoldenResponse(t *testing.T) {
	want := unhex(t, abiExample)
	if len(want) != 34 {
		t.Fatalf("ABI example is %d bytes, ABI.md says 34", len(want))
	}
	r := Response{Status: 201, Headers: []Pair{{"Content-Type", "text/plain"}}, Body: []byte("hi")}
	var e encoder
	if got := e.appendResponse(nil, &r); !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%x, want\n%x", got, want)
	}
	got, err := decodeResponse(want, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != 201 || !slices.Equal(got.Headers, r.Headers) || string(got.Body) != "hi" {
		t.Fatalf("decoded %+v", got)
	}
}

func TestGoldenRequest(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{
			name: "plain",
			in: Input{Method: "GET", Path: "/a", Query: []Pair{{"x", "1"}}, Headers: []Pair{{"Host", "h"}},
				Body: []byte("hi"), FlowID: "i1:f", RequestFrom: Str("1.2.3.4:5")},
			want: "a7" +
				"01 63 474554" + // 1: "GET"
				"02 62 2f61" + // 2: "/a"
				"03 a1 6178 6131" + // 3: {"x": "1"}
				"04 a1 64486f7374 6168" + // 4: {"Host": "h"}
				"05 42 6869" + // 5: h'6869'
				"06 64 69313a66" + // 6: "i1:f"
				"07 69 312e322e332e343a35", // 7: "1.2.3.4:5"
		},
		{
			// Repeated names are joined in order received; keys sort
			// shorter first; a decorate call carries the response as key 8.
			name: "joined-and-decorate",
			in: Input{Method: "POST", Path: "/",
				Query:    []Pair{{"b", "2"}, {"a", "1"}, {"b", "3"}},
				Headers:  []Pair{{"Host", "x"}, {"Accept", "a"}, {"Accept", "b"}},
				FlowID:   "f:",
				Response: &Response{Status: 201, Body: []byte("ok")}},
			want: "a8" +
				"01 64 504f5354" + // 1: "POST"
				"02 61 2f" + // 2: "/"
				"03 a2 6161 6131 6162 63322c33" + // 3: {"a": "1", "b": "2,3"}
				"04 a2 64486f7374 6178 66416363657074 64612c2062" + // 4: {"Host": "x", "Accept": "a, b"}
				"05 40" + // 5: h''
				"06 62 663a" + // 6: "f:"
				"07 60" + // 7: ""
				"08 a2 01 18c9 03 42 6f6b", // 8: {1: 201, 3: h'6f6b'}
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e encoder
			got := e.encodeRequest(&tc.in)
			if want := unhex(t, tc.want); !bytes.Equal(got, want) {
				t.Fatalf("encoded\n%x, want\n%x", got, want)
			}
		})
	}
}

func TestDecodeResponse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Response
		wantErr string
	}{
		{name: "abi example", in: abiExample,
			want: Response{Status: 201, Headers: []Pair{{"Content-Type", "text/plain"}}, Body: []byte("hi")}},
		{name: "empty map defaults to 200", in: "a0", want: Response{Status: 200}},
		{name: "any key order, text body", in: "a2 03 62 6869 01 19 0194", want: Response{Status: 404, Body: []byte("hi")}},
		{name: "non-shortest forms", in: "a2 01 1a000000c8 03 5a00000001 21", want: Response{Status: 200, Body: []byte("!")}},
		{
			// Unknown keys of every kind are skipped: 9: [1, {"a": 1(1.5)}],
			// "x": null, -1: h'00'.
			name: "unknown keys", in: "a4 09 82 01 a1 6161 c1 f93e00 6178 f6 20 4100 01 18c8",
			want: Response{Status: 200},
		},
		{name: "indefinite map", in: "bf 01 18c8 ff", wantErr: "indefinite"},
		{name: "indefinite body", in: "a1 03 5f 4100 ff", wantErr: "indefinite"},
		{name: "indefinite in skipped value", in: "a1 09 9f ff", wantErr: "indefinite"},
		{name: "trailing bytes", in: "a0 00", wantErr: "after the map"},
		{name: "status too low", in: "a1 01 18 63", wantErr: "100 to 599"},
		{name: "status too high", in: "a1 01 19 0258", wantErr: "100 to 599"},
		{name: "status as text", in: "a1 01 6131", wantErr: "100 to 599"},
		{name: "repeated key", in: "a2 01 18c8 01 18c8", wantErr: "key 1 repeated"},
		{name: "truncated body", in: "a1 03 45 6869", wantErr: "truncated"},
		{name: "header value not text", in: "a1 02 a1 6161 01", wantErr: "want text"},
		{name: "header name not UTF-8", in: "a1 02 a1 61ff 6161", wantErr: "UTF-8"},
		{name: "headers not a map", in: "a1 02 80", wantErr: "headers must be a map"},
		{name: "body an array", in: "a1 03 80", wantErr: "bytes or text"},
		{name: "not a map", in: "80", wantErr: "want a map"},
		{name: "empty", in: "", wantErr: "truncated"},
		{name: "reserved additional info", in: "a1 09 1c", wantErr: "malformed"},
		{name: "huge count", in: "bb ffffffffffffffff", wantErr: "truncated"},
		{name: "huge skipped array", in: "a1 09 9b ffffffffffffffff", wantErr: "truncated"},
		{name: "deep nesting", in: "a1 09" + strings.Repeat("81", 40) + "00", wantErr: "nested deeper"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeResponse(unhex(t, tc.in), nil, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tc.want.Status || !slices.Equal(got.Headers, tc.want.Headers) || !bytes.Equal(got.Body, tc.want.Body) {
				t.Fatalf("decoded %+v, want %+v", got, tc.want)
			}
		})
	}
}

func genText(t *rapid.T, label string) string {
	return rapid.StringN(0, 12, -1).Draw(t, label)
}

func genPairs(t *rapid.T, label string) []Pair {
	n := rapid.IntRange(0, 6).Draw(t, label+"-n")
	ps := make([]Pair, n)
	for i := range ps {
		// Few distinct names, so repeats (which are joined) are common.
		ps[i] = Pair{Name: rapid.SampledFrom([]string{"a", "b", "Host", "ab", "Accept", ""}).Draw(t, label+"-name"), Value: genText(t, label+"-value")}
	}
	return ps
}

// joined is what the host promises a guest sees for pairs: one key per
// name, its values joined with sep in order received.
func joined(ps []Pair, sep string) map[any]any {
	m := map[any]any{}
	for _, p := range ps {
		if v, ok := m[p.Name]; ok {
			m[p.Name] = v.(string) + sep + p.Value
		} else {
			m[p.Name] = p.Value
		}
	}
	return m
}

// TestRequestEnvelopeProperty: every request envelope decodes, with an
// independent CBOR library, to what the ABI says, and is canonical (that
// library's core deterministic encoding reproduces it byte for byte).
func TestRequestEnvelopeProperty(t *testing.T) {
	enc, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		in := Input{
			Method: genText(t, "method"), Path: genText(t, "path"),
			Query: genPairs(t, "query"), Headers: genPairs(t, "headers"),
			Body:   rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "body"),
			FlowID: genText(t, "flow"), RequestFrom: Str(genText(t, "from")),
		}
		if rapid.Bool().Draw(t, "decorate") {
			in.Response = &Response{Status: rapid.IntRange(100, 599).Draw(t, "status"), Headers: genPairs(t, "rh"), Body: []byte(genText(t, "rb"))}
		}
		var e encoder
		b := e.encodeRequest(&in)
		var got map[any]any
		if err := cbor.Unmarshal(b, &got); err != nil {
			t.Fatalf("%x: %v", b, err)
		}
		again, err := enc.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("not canonical:\n%x\n%x", b, again)
		}
		want := map[any]any{
			uint64(1): in.Method, uint64(2): in.Path,
			uint64(3): joined(in.Query, ","), uint64(4): joined(in.Headers, ", "),
			uint64(5): in.Body, uint64(6): in.FlowID, uint64(7): text(in.RequestFrom),
		}
		if in.Body == nil {
			want[uint64(5)] = []byte{}
		}
		if r := in.Response; r != nil {
			want[uint64(8)] = map[any]any{uint64(1): uint64(r.Status), uint64(2): joined(r.Headers, ", "), uint64(3): r.Body}
			if len(r.Headers) == 0 {
				delete(want[uint64(8)].(map[any]any), uint64(2))
			}
		}
		if !deepEqualCBOR(got, want) {
			t.Fatalf("decoded %#v\nwant %#v", got, want)
		}
	})
}

func deepEqualCBOR(a, b any) bool {
	switch x := a.(type) {
	case map[any]any:
		y, ok := b.(map[any]any)
		return ok && maps.EqualFunc(x, y, deepEqualCBOR)
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	}
	return a == b
}

// TestResponseRoundTrip: the host's decoder reads back what its encoder
// writes (headers come back in canonical order).
func TestResponseRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		names := rapid.SliceOfNDistinct(rapid.StringN(0, 10, -1), 0, 5, rapid.ID[string]).Draw(t, "names")
		r := Response{Status: rapid.SampledFrom([]int{0, 100, 200, 418, 599}).Draw(t, "status"), Body: rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "body")}
		for _, n := range names {
			r.Headers = append(r.Headers, Pair{Name: n, Value: genText(t, "value")})
		}
		var e encoder
		got, err := decodeResponse(e.appendResponse(nil, &r), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := r
		if want.Status == 0 {
			want.Status = 200
		}
		want.Headers = slices.SortedStableFunc(slices.Values(r.Headers), canonicalLess)
		if got.Status != want.Status || !slices.Equal(got.Headers, want.Headers) || !bytes.Equal(got.Body, want.Body) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})
}

func FuzzDecodeResponse(f *testing.F) {
	for _, s := range []string{
		abiExample, "a0", "a2 03 62 6869 01 19 0194", "a4 09 82 01 a1 6161 c1 f93e00 6178 f6 20 4100 01 18c8",
		"bf 01 18c8 ff", "a1 02 a1 6161 01", "a1 09" + strings.Repeat("81", 40) + "00", "bb ffffffffffffffff",
	} {
		f.Add(unhex(f, s))
	}
	// Nesting limits are each decoder's own; let the reference go deeper
	// than ours so that it judges only well-formedness.
	ref, err := cbor.DecOptions{MaxNestedLevels: 2 * maxNesting}.DecMode()
	if err != nil {
		f.Fatal(err)
	}
	// One memo and one body room across the inputs, as an instance keeps
	// one and a caller lends one across calls.
	var memo headerMemo
	var room []byte
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeResponse(b, nil, nil)
		for range 2 { // the second time, with this input's own headers remembered
			m, merr := decodeResponse(b, &memo, &room)
			if (merr == nil) != (err == nil) || err == nil && (m.Status != r.Status || !slices.Equal(m.Headers, r.Headers) || !bytes.Equal(m.Body, r.Body)) {
				t.Fatalf("with a memo and a room %+v %v, without %+v %v", m, merr, r, err)
			}
		}
		if err != nil {
			if r.Status != 0 || r.Headers != nil || r.Body != nil {
				t.Fatalf("error %v with a partial result %+v", err, r)
			}
			return
		}
		// Whatever the decoder accepts is well-formed CBOR...
		if err := ref.Wellformed(b); err != nil {
			t.Fatalf("accepted %x, which is not well-formed: %v", b, err)
		}
		// ...is a valid response...
		if r.Status < 100 || r.Status > 599 {
			t.Fatalf("status %d", r.Status)
		}
		// ...and survives a round trip through the encoder.
		var e encoder
		again, err := decodeResponse(e.appendResponse(nil, &r), nil, nil)
		if err != nil || again.Status != r.Status || !bytes.Equal(again.Body, r.Body) {
			t.Fatalf("round trip of %+v: %+v, %v", r, again, err)
		}
	})
}

func TestDecoderErrorsWrap(t *testing.T) {
	_, err := decodeResponse(unhex(t, "bf"), nil, nil)
	if !errors.Is(err, errIndefinite) {
		t.Fatalf("%v does not wrap errIndefinite", err)
	}
}

// TestRequestSizeProperty holds requestSize, which the host passes as the
// entry point's argument before (and often instead of) encoding, to the
// encoder's own length: with repeated names, and with lengths on either
// side of each CBOR head size.
func TestRequestSizeProperty(t *testing.T) {
	sized := func(t *rapid.T, label string) string {
		n := rapid.SampledFrom([]int{0, 1, 23, 24, 255, 256, 65535, 65536}).Draw(t, label)
		return strings.Repeat("x", n)
	}
	pairs := func(t *rapid.T, label string) []Pair {
		ps := make([]Pair, rapid.IntRange(0, 20).Draw(t, label+"-n"))
		for i := range ps {
			ps[i] = Pair{Name: rapid.SampledFrom([]string{"a", "b", "Host", "A", ""}).Draw(t, label+"-name"), Value: sized(t, label+"-value")}
		}
		return ps
	}
	rapid.Check(t, func(t *rapid.T) {
		in := Input{
			Method: sized(t, "method"), Path: sized(t, "path"),
			Query: pairs(t, "query"), Headers: pairs(t, "headers"),
			Body: []byte(sized(t, "body")), FlowID: sized(t, "flow"), RequestFrom: Str(sized(t, "from")),
		}
		if rapid.Bool().Draw(t, "decorate") {
			in.Response = &Response{Status: 200, Body: []byte("x")}
		}
		var e encoder
		want := len(e.encodeRequest(&in))
		got, ok := requestSize(&in)
		if ok && got != want {
			t.Fatalf("requestSize = %d, encoded %d bytes", got, want)
		}
		if !ok && in.Response == nil && len(in.Query) <= 16 && len(in.Headers) <= 16 {
			t.Fatalf("requestSize declined a plain request of %d query and %d header pairs", len(in.Query), len(in.Headers))
		}
	})
}

// TestHeaderMemo: a guest whose body changes and whose headers do not is
// decoded without decoding (or allocating) its headers again, and headers
// that change are decoded afresh.
func TestHeaderMemo(t *testing.T) {
	var e encoder
	var memo headerMemo
	h1 := []Pair{{Name: "Content-Type", Value: "text/plain"}}
	h2 := []Pair{{Name: "X-A", Value: "1"}, {Name: "Content-Type", Value: "application/json"}} // canonical order
	decode := func(h []Pair, body string) Response {
		t.Helper()
		r, err := decodeResponse(e.appendResponse(nil, &Response{Headers: h, Body: []byte(body)}), &memo, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.Headers, h) || string(r.Body) != body {
			t.Fatalf("decoded %+v, want headers %+v body %q", r, h, body)
		}
		return r
	}
	first := decode(h1, "1")
	if again := decode(h1, "2"); &again.Headers[0] != &first.Headers[0] {
		t.Error("the same header bytes were decoded again")
	}
	decode(h2, "3")
	decode(h1, "4")
	b := e.appendResponse(nil, &Response{Headers: h1, Body: []byte("5")})
	if n := testing.AllocsPerRun(100, func() { _, _ = decodeResponse(b, &memo, nil) }); n != 1 {
		t.Errorf("%v allocations per decode with remembered headers, want 1 (the body)", n)
	}
	var room []byte
	if n := testing.AllocsPerRun(100, func() { _, _ = decodeResponse(b, &memo, &room) }); n != 0 {
		t.Errorf("%v allocations per decode with remembered headers and a body room, want 0", n)
	}
	if r, _ := decodeResponse(b, &memo, &room); &r.Body[0] != &room[0] {
		t.Error("the body was not decoded into the room")
	}
}
