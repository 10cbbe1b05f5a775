// Package ui is riftgate's web UI on the admin port. A browser that asks for
// HTML at /, /imposters, /imposters/:id, /logs, /config, /plugins or
// /cluster gets a page; an API client gets the JSON it always got (with
// Vary: Accept), as Mountebank negotiates. A page is a static shell: the
// script under /ui/ fetches everything it shows from the admin API, with
// the same calls any client makes, so that the UI holds no data of its own
// and needs no privilege the API does not grant.
//
// The assets are embedded (go:embed), so the binary serves the UI offline.
// Every page carries a strict Content-Security-Policy with Trusted Types:
// the scripts build the DOM from text nodes only, and the browser refuses
// any HTML sink, so a hostile imposter name stays text.
//
// A page is one entry in pages and one module under assets/pages/.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// pages maps the paths a browser may open to the module that draws them.
// Every one of them, but /traffic, is also an API route: HTML only when
// the browser prefers it, and the route's JSON otherwise.
var pages = []struct {
	pattern *regexp.Regexp
	module  string
	apiToo  bool // the path is also a JSON route: negotiate
}{
	{regexp.MustCompile(`^/$`), "home", true},
	{regexp.MustCompile(`^/imposters$`), "home", true},
	{regexp.MustCompile(`^/imposters/[0-9]+$`), "imposter", true},
	{regexp.MustCompile(`^/plugins$`), "plugins", true},
	{regexp.MustCompile(`^/logs$`), "logs", true},
	{regexp.MustCompile(`^/config$`), "config", true},
	{regexp.MustCompile(`^/cluster$`), "cluster", true}, // JSON only in a cluster; a page everywhere
	{regexp.MustCompile(`^/traffic$`), "traffic", false},
}

// CSP is the pages' Content-Security-Policy: scripts, styles and fetches
// from the admin port only, nothing inline, no frames, no forms, and
// Trusted Types with no policy, so no string ever reaches an HTML sink.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'"

// UI serves the pages and their assets.
type UI struct {
	files map[string]asset // "/ui/app.js" -> its bytes
	shell asset
}

type asset struct {
	body  []byte
	ctype string
	etag  string
}

// New loads the embedded assets.
func New() *UI {
	u := &UI{files: map[string]asset{}}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		if path.Ext(p) == ".js" {
			ct = "text/javascript; charset=utf-8" // mime's table varies by machine
		}
		a := asset{body: b, ctype: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		if p == "assets/index.html" {
			u.shell = a
		}
		u.files["/ui/"+strings.TrimPrefix(p, "assets/")] = a
		return nil
	})
	if err != nil {
		panic(err) // the assets are compiled in: a failure here is a build bug
	}
	return u
}

// Serve answers r when it is the UI's: a page the browser asked for, or an
// asset. It returns false for API requests, after adding Vary: Accept to
// those whose answer depends on it. The UI's requests need no API key: a
// page or an asset holds no data (a browser cannot send the key's header on
// a navigation); the data it then fetches goes through the key check.
func (u *UI) Serve(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	if a, ok := u.files[r.URL.Path]; ok && r.URL.Path != "/ui/index.html" {
		u.write(w, r, a)
		return true
	}
	for _, p := range pages {
		if !p.pattern.MatchString(r.URL.Path) {
			continue
		}
		if p.apiToo {
			w.Header().Add("Vary", "Accept")
			if !PrefersHTML(r.Header.Get("Accept")) {
				return false
			}
		}
		u.write(w, r, u.shell)
		return true
	}
	return false
}

func (u *UI) write(w http.ResponseWriter, r *http.Request, a asset) {
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
