package gateway

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/riftgate/riftgate/gateway/mberr"
)

// browserGuard refuses the admin requests a hostile web page can make
// through a developer's browser, which Mountebank answers:
//
//   - A request whose Host is not this server's name (DNS rebinding: a page
//     on evil.example whose name now resolves to 127.0.0.1 is same-origin
//     with the admin API in the browser's eyes, and may read and write it).
//     The names are: an IP address, localhost and *.localhost, --host, and
//     --allowedHosts.
//   - A state-changing request (anything but GET, HEAD, OPTIONS) whose
//     Origin is neither the admin API's own nor --origin. A cross-origin
//     text/plain POST or a form post needs no CORS preflight: without this,
//     any page could create an imposter, and with --allowInjection run a
//     shellTransform on the developer's machine.
//
// Clients that send no Origin (curl, mb's client libraries, test suites)
// are not affected; the web UI's own requests carry the API's own origin.
type browserGuard struct {
	bound  string   // --host when it is a name, lowercased
	names  []string // --allowedHosts, lowercased; ".x" also takes its subdomains
	origin string   // --origin
}

func newBrowserGuard(opts Options) browserGuard {
	b := browserGuard{origin: opts.Origin}
	if h := normalHost(opts.Host); h != "" && net.ParseIP(h) == nil {
		b.bound = h
	}
	for _, n := range opts.AllowedHosts {
		if n = normalHost(strings.TrimSpace(n)); n != "" {
			b.names = append(b.names, n)
		}
	}
	return b
}

// normalHost lowercases a host name and drops a trailing dot.
func normalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// check answers the refusal and returns false when r must not go on.
func (b browserGuard) check(w http.ResponseWriter, r *http.Request) bool {
	if !b.knownHost(r.Host) {
		writeErr(w, mberr.New(mberr.InsufficientAccess, fmt.Sprintf(
			"the Host header %q does not name this server; add the name with --allowedHosts (this guards against DNS rebinding)", r.Host)))
		return false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" || strings.EqualFold(origin, "http://"+r.Host) || (b.origin != "" && origin == b.origin) {
		return true
	}
	writeErr(w, mberr.New(mberr.InsufficientAccess, fmt.Sprintf(
		"a web page from %q may not change this server; start it with --origin %s to allow that page", origin, origin)))
	return false
}

// knownHost reports whether hostport (a Host header) names this server.
func (b browserGuard) knownHost(hostport string) bool {
	if hostport == "" {
		return true // HTTP/1.0 without Host: no browser sends that
	}
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = normalHost(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
	if net.ParseIP(h) != nil || h == "localhost" || strings.HasSuffix(h, ".localhost") || h == b.bound {
		// An address cannot be rebound, and *.localhost is loopback by
		// definition (RFC 6761), as browsers resolve it.
		return true
	}
	for _, n := range b.names {
		if h == n || (strings.HasPrefix(n, ".") && (strings.HasSuffix(h, n) || h == n[1:])) {
			return true
		}
	}
	return false
}
