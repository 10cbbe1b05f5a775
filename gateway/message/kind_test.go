package message

import (
	"bytes"
	"encoding/base64"
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
