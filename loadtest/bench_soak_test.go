package loadtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// The soak alone, briefly, against the real binary: its section replaces
// the last one in the report and leaves the rest as it was, with one row
// per interval and every request counted by the imposter.
func TestBenchSoakAlone(t *testing.T) {
	dir := t.TempDir()
	md := benchPartAlone(t, soakPart, "## Soak: ", "-mb", filepath.Join(dir, "no-mb"), "-only", "^soak$", "-soak", "4s")
	for _, want := range []string{"| until (s after the warm-up) | req/s |", "\n| 1 | ", "\n| 4 | ", "`numberOfRequests` says", ": PASS.\n- RSS:", "GET /imposters/:id afterwards"} {
		if !strings.Contains(md, want) {
			t.Errorf("the soak's section lacks %q:\n%s", want, md)
		}
	}
}

func TestSplicePart(t *testing.T) {
	sec := soakPart.begin + "\nnew\n" + soakPart.end + "\n"
	for _, c := range []struct{ doc, want string }{
		{"a\n", "a\n\n" + sec},
		{"a\n" + soakPart.begin + "\nold\n" + soakPart.end + "\nb\n", "a\n" + soakPart.begin + "\nnew\n" + soakPart.end + "\nb\n"},
		{"", "\n\n" + sec},
	} {
		if got := soakPart.splice(c.doc, sec); got != c.want {
			t.Errorf("splice(%q) = %q, want %q", c.doc, got, c.want)
		}
	}
}

func TestLongestPause(t *testing.T) {
	before := map[string]uint64{"0.001": 5, "0.01": 7, "+Inf": 7}
	for _, c := range []struct {
		after map[string]uint64
		want  float64
	}{
		{map[string]uint64{"0.001": 5, "0.01": 7, "+Inf": 7}, 0},       // no pause
		{map[string]uint64{"0.001": 8, "0.01": 10, "+Inf": 10}, 0.001}, // all three under 1 ms
		{map[string]uint64{"0.001": 6, "0.01": 9, "+Inf": 9}, 0.01},
		{map[string]uint64{"0.001": 6, "0.01": 8, "+Inf": 9}, -1}, // one past every bound
	} {
		if got := longestPause(before, c.after); got != c.want {
			t.Errorf("%v: %v, want %v", c.after, got, c.want)
		}
	}
}

// benchPartAlone runs `riftload bench` with args (and the real binary)
// on a report that holds an old section of pt between two others, checks
// that only that section changed, into one that starts with title, and
// returns the report.
func benchPartAlone(t *testing.T, pt part, title string, args ...string) string {
	t.Helper()
	t.Setenv("RIFTLOAD_TEST_AS_MAIN", "1")
	bin := gatewaytest.Binary(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "benchmarks.md")
	before := "# Benchmarks\n\nthe rest\n\n" + pt.begin + "\nan old one\n" + pt.end + "\n\n## After\n"
	if err := os.WriteFile(out, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), append([]string{"bench",
		"-riftgate", bin, "-wasm-dir", dir, "-wrk", "", "-server-cpu", "", "-c", "4", "-out", out}, args...), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	if !strings.HasPrefix(md, "# Benchmarks\n\nthe rest\n\n"+pt.begin+"\n"+title) || !strings.HasSuffix(md, pt.end+"\n\n## After\n") || strings.Contains(md, "an old one") {
		t.Fatalf("the report around the section changed:\n%s", md)
	}
	return md
}
