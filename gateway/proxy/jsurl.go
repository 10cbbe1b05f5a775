package proxy

import (
	"strconv"
	"strings"

	"github.com/riftgate/riftgate/gateway/mberr"
)

// specialSchemes are the WHATWG URL standard's special schemes, whose URLs
// must have a host (file's may be empty).
var specialSchemes = map[string]bool{"http": true, "https": true, "ws": true, "wss": true, "ftp": true, "file": true}

// jsURLValid reports whether Node's new URL(s) parses s, as mb's dry run
// calls it on a proxy's `to`: a scheme, then for a special scheme a host
// and a port in range; anything after a non-special scheme parses.
func jsURLValid(s string) bool {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	s = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(s)
	colon := strings.IndexByte(s, ':')
	if colon <= 0 {
		return false
	}
	scheme := strings.ToLower(s[:colon])
	for i, c := range scheme {
		alpha := 'a' <= c && c <= 'z'
		if !alpha && (i == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	if !specialSchemes[scheme] {
		return true
	}
	rest := strings.TrimLeft(s[colon+1:], `/\`)
	if end := strings.IndexAny(rest, `/\?#`); end >= 0 {
		rest = rest[:end]
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		rest = rest[at+1:]
	}
	host, port := rest, ""
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return false
		}
		host, port = rest[:end+1], strings.TrimPrefix(rest[end+1:], ":")
		if rest[end+1:] != "" && !strings.HasPrefix(rest[end+1:], ":") {
			return false
		}
	} else if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		host, port = rest[:i], rest[i+1:]
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 0 || n > 65535 || strings.ContainsAny(port, "+-") {
			return false
		}
	}
	if host == "" {
		return scheme == "file"
	}
	return !strings.ContainsAny(strings.Trim(host, "[]"), " #%/<>?@\\^|\x7f") || strings.HasPrefix(host, "[")
}

// checkTo is mb's dry run's new URL(to) on a proxy's `to`, as JavaScript's
// String renders it: Node's ERR_INVALID_URL when it does not parse.
func checkTo(to string) error {
	if jsURLValid(to) {
		return nil
	}
	return mberr.InvalidURL(to)
}
