package proxy

import "testing"

// TestJSURLValid holds jsURLValid to what Node 20's new URL(s) does with
// each input (checked with node -e 'new URL(s)').
func TestJSURLValid(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"http://localhost:8080", true}, {"https://a.b/", true}, {"tcp://x:1", true},
		{"localhost:8080", true}, {"http:a", true}, {"  http://a  ", true}, {"mailto:x", true},
		{"http://[::1]:80/", true}, {"http://u:p@h:1/", true}, {"file:///etc", true},
		{"nonsense", false}, {"123", false}, {"true", false}, {"", false}, {"[object Object]", false},
		{"http://", false}, {"http://a:70000", false}, {"http://a b", false}, {":x", false},
		{"1http://a", false}, {"http://[::1", false}, {"http://a:x", false},
	} {
		if got := jsURLValid(c.in); got != c.ok {
			t.Errorf("jsURLValid(%q) = %v, Node says %v", c.in, got, c.ok)
		}
	}
}

// FuzzJSURLValid checks jsURLValid never panics, and that every input it
// accepts has a scheme.
func FuzzJSURLValid(f *testing.F) {
	for _, s := range []string{"http://a:1", "tcp://x", "[", "http://[::1]:", "a:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if jsURLValid(s) && checkTo(s) != nil {
			t.Fatalf("%q: valid, and yet refused", s)
		}
	})
}
