package mbdiff

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Every listed difference is explained to users, and the page explains no
// difference the list lacks.
func TestEveryDifferenceIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "mountebank-differences.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("\\(`([a-z][a-z0-9-]*)`\\)").FindAllSubmatch(doc, -1) {
		named[string(m[1])] = true
	}
	listed := map[string]bool{}
	for _, d := range Differences {
		if listed[d.ID] {
			t.Errorf("%s is listed twice", d.ID)
		}
		listed[d.ID] = true
		if !named[d.ID] {
			t.Errorf("docs/mountebank-differences.md has no section for %s (%s)", d.ID, d.What)
		}
		if d.What == "" || d.Why == "" {
			t.Errorf("%s: say what differs and why", d.ID)
		}
	}
	for id := range named {
		if !listed[id] {
			t.Errorf("docs/mountebank-differences.md names %s, which gateway/mbdiff does not list", id)
		}
	}
}

// The HTTP/1.0 framing difference removes only the length it explains: a
// chunked answer of mb's is not riftgate's with a length.
func TestContentLengthDifference(t *testing.T) {
	want, _ := ParseAnswer("HTTP/1.1 200 OK\nConnection: close\n\nhello")
	got, _ := ParseAnswer("HTTP/1.1 200 OK\nContent-Length: 5\nConnection: close\n\nhello")
	if used := ReconcileAnswer(want, got); len(used) != 1 || used[0] != "content-length" || got.Text() != want.Text() {
		t.Fatalf("reconciled %v into %q", used, got.Text())
	}
	for _, c := range []struct{ want, got string }{
		{"HTTP/1.1 200 OK\nConnection: close\n\nhello", "HTTP/1.1 200 OK\nContent-Length: 4\nConnection: close\n\nhello"},
		{"HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\nhello", "HTTP/1.1 200 OK\nContent-Length: 5\n\nhello"},
	} {
		want, _ := ParseAnswer(c.want)
		got, _ := ParseAnswer(c.got)
		if used := ReconcileAnswer(want, got); len(used) != 0 {
			t.Fatalf("%q was reconciled with %q by %v", c.got, c.want, used)
		}
	}
}

func TestLineDiff(t *testing.T) {
	if d := LineDiff("a\nb\nc", "a\nx\nc"); d != "  a\n- b\n+ x\n  c\n" {
		t.Fatalf("%q", d)
	}
}
