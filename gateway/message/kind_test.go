package message

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
)

// FuzzDecodeBase64 holds the lenient decoder to the standard one on what
// the standard one accepts, and to never panicking on the rest.
func FuzzDecodeBase64(f *testing.F) {
	f.Add("AQID")
	f.Add("AQI=")
	f.Add("A Q\nI-_=junk")
	f.Fuzz(func(t *testing.T, s string) {
		got := DecodeBase64(s)
		if want, err := base64.StdEncoding.DecodeString(s); err == nil && !bytes.Equal(got, want) {
			t.Fatalf("DecodeBase64(%q) = %v, want %v", s, got, want)
		}
		if raw := base64.StdEncoding.EncodeToString(got); !bytes.Equal(DecodeBase64(raw), got) {
			t.Fatalf("round trip of %v", got)
		}
	})
}

func TestDecodeBase64LikeNode(t *testing.T) {
	for in, want := range map[string][]byte{
		"AQID":       {1, 2, 3},
		"AQI":        {1, 2},             // no padding
		"AQ==AQID":   {1},                // stops at '='
		"A-_/":       {0x03, 0xef, 0xff}, // both alphabets
		"AQIDB":      {1, 2, 3},          // a lone last character is dropped
		"A Q\nI D !": {1, 2, 3},          // other characters are skipped
	} {
		if got := DecodeBase64(in); !bytes.Equal(got, want) {
			t.Errorf("DecodeBase64(%q) = %v, want %v", in, got, want)
		}
	}
	if got := DecodeUTF8([]byte{'a', 0xff, 0xfe, 'b'}); got != "a\uFFFD\uFFFDb" {
		t.Errorf("DecodeUTF8: %q", got)
	}
}

func TestTCPDataAsBufferFrom(t *testing.T) {
	errBody := `{"errors":[{"code":"ERR_INVALID_ARG_TYPE"}]}`
	for _, c := range []struct {
		raw    string
		binary bool
		want   string
		isNil  bool
	}{
		{raw: ``, isNil: true},
		{raw: `null`, isNil: true},
		{raw: `0`, isNil: true},
		{raw: `false`, isNil: true},
		{raw: `""`, isNil: true},
		{raw: `-0`, isNil: true},
		{raw: `0.0`, isNil: true},
		{raw: `[]`, want: ""},
		{raw: `"="`, binary: true, want: ""},
		{raw: `"ok"`, want: "ok"},
		{raw: `"AQI="`, binary: true, want: "\x01\x02"},
		{raw: `[1, "x", 257, -1, true, " 7 ", "", null, 3.9, {}]`, want: "\x01\x00\x01\xff\x01\x07\x00\x00\x03\x00"},
		{raw: `[1]`, binary: true, want: "\x01"},
		{raw: `5`, want: errBody},
		{raw: `true`, want: errBody},
		{raw: `{"a":1}`, want: errBody},
		// Node's Buffer.from of an object: a Buffer as JSON.stringify
		// shows one, or an array-like.
		{raw: `{"type":"Buffer","data":[104,105]}`, want: "hi"},
		{raw: `{"type":"Buffer","data":[]}`, want: ""},
		{raw: `{"type":"Buffer","data":"x"}`, want: errBody},
		{raw: `{"type":"Other","data":[1]}`, want: errBody},
		{raw: `{"length":2,"0":104,"1":"105"}`, want: "hi"},
		{raw: `{"length":2,"0":104}`, want: "h\x00"},
		{raw: `{"length":"x"}`, want: ""},
	} {
		got := TCPData([]byte(c.raw), c.binary)
		if c.isNil != (got == nil) || (!c.isNil && string(got) != c.want) {
			t.Errorf("TCPData(%s, %v) = %q, want %q (nil %v)", c.raw, c.binary, got, c.want, c.isNil)
		}
		// A truthy data of no bytes writes nothing; only a falsy one takes
		// the defaultResponse's.
		r := Response{Binary: c.binary}
		obj := `{}`
		if c.raw != "" {
			obj = `{"data":` + c.raw + `}`
		}
		SetTCPData(&r, []byte(obj))
		if want := !c.isNil && c.want == ""; r.NoDefault != want {
			t.Errorf("SetTCPData(%s, %v): NoDefault %v, want %v", c.raw, c.binary, r.NoDefault, want)
		}
	}
}

func TestTCPDefaultDataIsTheLastResort(t *testing.T) {
	errBody := `{"errors":[{"code":"ERR_INVALID_ARG_TYPE"}]}`
	for raw, want := range map[string]string{``: errBody, `null`: errBody, `0`: errBody, `false`: errBody, `""`: "", `"d"`: "d", `[65]`: "A"} {
		if got := TCPDefaultData([]byte(raw), false); string(got) != want {
			t.Errorf("TCPDefaultData(%s) = %q, want %q", raw, got, want)
		}
	}
}

// FuzzTCPData holds TCPData to never panicking, and to a string's bytes
// for any JSON string that is not empty.
func FuzzTCPData(f *testing.F) {
	for _, s := range []string{`"a"`, `[1,"x"]`, `0`, `{"a":1}`, `[`, ` [1e400, -0.5, "0x10"] `} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, raw string, binary bool) {
		got := TCPData([]byte(raw), binary)
		var s string
		if !binary && json.Unmarshal([]byte(raw), &s) == nil && s != "" && string(got) != s {
			t.Fatalf("TCPData(%q) = %q, want the string %q", raw, got, s)
		}
	})
}

func TestFalsyAsJavaScript(t *testing.T) {
	for raw, want := range map[string]bool{
		``: true, `null`: true, `false`: true, `0`: true, `""`: true, `-0`: true, `0.0`: true, `0e5`: true, ` 0 `: true,
		`1`: false, `-1`: false, `0.5`: false, `"0"`: false, `" "`: false, `[]`: false, `{}`: false, `true`: false,
	} {
		if got := Falsy([]byte(raw)); got != want {
			t.Errorf("Falsy(%s) = %v, want %v", raw, got, want)
		}
	}
}

// SetTCPData keeps the object as mb shows it in a match unless
// {"data": ...} of the bytes prints it back.
func TestSetTCPDataKeepsWhatDoesNotPrintBack(t *testing.T) {
	for _, c := range []struct {
		obj    string
		binary bool
		kept   bool
	}{
		{`{"data":"x"}`, false, false},
		{`{"data":"QUJD"}`, true, false},
		{`{"data":"QQ"}`, true, true},
		{`{"data":"x","foo":1}`, false, true},
		{`{}`, false, true},
		{`{"data":[65]}`, false, true},
	} {
		r := Response{Binary: c.binary}
		SetTCPData(&r, []byte(c.obj))
		if kept := r.MB != nil; kept != c.kept || (kept && string(r.MB) != c.obj) {
			t.Errorf("SetTCPData(%s, %v): MB %s, want kept %v", c.obj, c.binary, r.MB, c.kept)
		}
	}
}

func TestTCPShowsOnlyWhatStillRenders(t *testing.T) {
	for _, c := range []struct {
		mb, data string
		binary   bool
		want     bool
	}{
		{`{"data":[65]}`, "A", false, true},
		{`{"data":[65]}`, "B", false, false}, // a copy rewrote it
		{`{"data":"="}`, "", true, true},
		{`{"data":"QQ"}`, "A", true, true},
		{`{"nodata":1}`, "x", false, false},
	} {
		if got := TCPShows([]byte(c.mb), []byte(c.data), c.binary); got != c.want {
			t.Errorf("TCPShows(%s, %q, %v) = %v, want %v", c.mb, c.data, c.binary, got, c.want)
		}
	}
}
