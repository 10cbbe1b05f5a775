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

// The chunked framing difference rewrites only what it explains.
func TestContentLengthDifference(t *testing.T) {
	want, _ := ParseAnswer("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\nhello")
	got, _ := ParseAnswer("HTTP/1.1 200 OK\nContent-Length: 5\n\nhello")
	if used := ReconcileAnswer(want, got); len(used) != 1 || used[0] != "content-length" || got.Text() != want.Text() {
		t.Fatalf("reconciled %v into %q", used, got.Text())
	}
	wrong, _ := ParseAnswer("HTTP/1.1 200 OK\nContent-Length: 4\n\nhello")
	if used := ReconcileAnswer(want, wrong); len(used) != 0 {
		t.Fatalf("a wrong length was reconciled by %v", used)
	}
	// In a recorded stub too, in place.
	want = &Answer{StatusLine: "HTTP/1.1 200 OK", Body: []byte(`{"headers":{"A":"1","Transfer-Encoding":"chunked","B":"2"}}`)}
	got = &Answer{StatusLine: "HTTP/1.1 200 OK", Body: []byte(`{"headers":{"A":"1","Content-Length":"9","B":"2"}}`)}
	if used := ReconcileAnswer(want, got); len(used) != 1 || string(got.Body) != string(want.Body) {
		t.Fatalf("reconciled %v into %s", used, got.Body)
	}
}

func TestLineDiff(t *testing.T) {
	if d := LineDiff("a\nb\nc", "a\nx\nc"); d != "  a\n- b\n+ x\n  c\n" {
		t.Fatalf("%q", d)
	}
}
