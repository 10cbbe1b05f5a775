package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestBrowserGuard(t *testing.T) {
	g := newBrowserGuard(Options{Host: "mb.internal", Origin: "http://ui.example", AllowedHosts: []string{"riftgate.test", ".corp.example"}})
	cases := []struct {
		method, host, origin string
		ok                   bool
	}{
		{"GET", "127.0.0.1:2525", "", true},
		{"GET", "[::1]:2525", "", true},
		{"GET", "localhost:2525", "", true},
		{"GET", "LOCALHOST.:2525", "", true},
		{"GET", "app.localhost:2525", "", true},
		{"GET", "10.1.2.3:2525", "", true},
		{"GET", "mb.internal:2525", "", true},
		{"GET", "riftgate.test", "", true},
		{"GET", "a.b.corp.example:2525", "", true},
		{"GET", "corp.example:2525", "", true},
		{"GET", "evil.test:2525", "", false}, // DNS rebinding: refused even for reads
		{"GET", "riftgate.test.evil.test:2525", "", false},
		{"GET", "xcorp.example:2525", "", false},
		{"GET", "", "", true},
		{"POST", "localhost:2525", "", true},                        // curl and mb's clients send no Origin
		{"POST", "localhost:2525", "http://localhost:2525", true},   // the UI itself
		{"DELETE", "127.0.0.1:2525", "http://127.0.0.1:2525", true}, // the UI itself
		{"POST", "localhost:2525", "http://ui.example", true},       // --origin
		{"POST", "localhost:2525", "http://localhost:3000", false},  // another port is another origin
		{"PUT", "localhost:2525", "http://evil.test", false},        // a foreign page
		{"DELETE", "localhost:2525", "null", false},                 // a sandboxed frame or file://
		{"POST", "localhost:2525", "https://localhost:2525", false}, // not the admin API's scheme
		{"GET", "localhost:2525", "http://evil.test", true},         // reads stay unreadable without CORS
		{"OPTIONS", "localhost:2525", "http://evil.test", true},     // a preflight changes nothing
		{"POST", "evil.test:2525", "http://evil.test:2525", false},  // rebinding with its own origin
	}
	for _, c := range cases {
		r := httptest.NewRequest(c.method, "/imposters", nil)
		r.Host = c.host
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		w := httptest.NewRecorder()
		if got := g.check(w, r); got != c.ok {
			t.Errorf("%s Host %q Origin %q: allowed %v, want %v", c.method, c.host, c.origin, got, c.ok)
		}
		if !c.ok && w.Code != http.StatusForbidden {
			t.Errorf("%s Host %q Origin %q: status %d, want 403", c.method, c.host, c.origin, w.Code)
		}
	}
}

// FuzzKnownHost: any Host header is judged without panicking, and a name
// is judged the same with any port.
func FuzzKnownHost(f *testing.F) {
	for _, s := range []string{"localhost:2525", "[::1]:1", "evil.test", "a.corp.example", "[", ":", "]:"} {
		f.Add(s)
	}
	g := newBrowserGuard(Options{AllowedHosts: []string{".corp.example"}})
	f.Fuzz(func(t *testing.T, host string) {
		_ = g.knownHost(host)
	})
}
