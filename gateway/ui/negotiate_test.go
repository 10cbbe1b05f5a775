package ui

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// The browser tests hold these against a live mb 2.9.1; this table keeps
// the cases readable and fast.
func TestPrefersHTML(t *testing.T) {
	for accept, want := range map[string]bool{
		"":                                  false,
		"*/*":                               false,
		"application/json":                  false,
		"text/html":                         true,
		"text/*":                            true,
		"text/plain":                        false,
		"application/json, text/html":       false,
		"text/html, application/json":       true,
		"text/html;q=0.5, application/json": false,
		"application/json;q=0.2, text/html": true,
		"*/*;q=0.8, text/html;q=0.8":        true,
		"text/html;q=0, */*":                false,
		"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8": true,
	} {
		if got := PrefersHTML(accept); got != want {
			t.Errorf("PrefersHTML(%q) = %v, want %v", accept, got, want)
		}
	}
}

func FuzzPrefersHTML(f *testing.F) {
	f.Add("text/html;q=0.5, application/json;q=0.9")
	f.Add(";;,,/;q=")
	f.Fuzz(func(t *testing.T, accept string) {
		if PrefersHTML(accept) && !strings.Contains(strings.ToLower(accept), "/") {
			t.Fatalf("%q names no media type, but picked HTML", accept)
		}
	})
}

// TestAssetsUseNoHTMLSink: the scripts put what they show into the DOM as
// text. The pages' Trusted Types policy enforces it in the browser; this
// catches it before.
func TestAssetsUseNoHTMLSink(t *testing.T) {
	sink := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|srcdoc|createContextualFragment`)
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		b, _ := assets.ReadFile(p)
		if m := sink.Find(b); m != nil {
			t.Errorf("%s uses %s", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
