package selector

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// hostileUnits are texts that, repeated, make a reader that rescans its
// input cost its length squared: tags, end tags, declarations and quotes
// that never end, or end only at the very end.
var hostileUnits = []string{
	"<", "</", "</ ", "</ <", "\n</ <", "</ \n<", "</\n<", "<a", "<a>", "</a>", "<a/>", "<a b", "<a b=", `<a x="`,
	"<a '", "<a b=<", "<a b=<a/", "<a b='<a b=\"", "<?", "<?a", "<? ", "<?<", "<!", "<!-", "<!--", "<!x", "<!D",
	"<!DOCTYPE", "<!DOCTYPE ", "<!DOCTYPE '", "<!DOCTYPE '<", "<!x '<", "<![CDATA[", "<r>", "<a><b>", "<r>x</r>",
	"&#1;", "&", "<x:a xmlns:x='u'>", "<script xmlns='http://www.w3.org/1999/xhtml'>", "<r/><a b=<a", "\u00e9</ <",
	"</\u00e9 <", "</ <\u2028", "<a b=\"\n", "<?xml 0e", "<?xml version='1' encoding=\"",
}

// hostileTail ends the units' texts, so that what never ended ends at the
// very end, after the reader has looked for it from everywhere.
const hostileTail = ">?>-->]]>'\"</a>\n>"

// parseTime is the least of runs parses of s, in the CPU time of the
// thread that parses (threadCPU): a machine whose other work keeps this
// test from a core (CI's packages run side by side) stretches the wall
// clock, not the work, and the work is what a rescanning reader adds.
func parseTime(s string, runs int) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	best := time.Duration(1<<63 - 1)
	for range runs {
		runtime.GC() // not the last parse's garbage
		start := threadCPU()
		parseXMLLikeMB(s)
		best = min(best, threadCPU()-start)
	}
	return best
}

// hostileTexts are texts of about n bytes that repeat no one unit: deep
// elements each binding a namespace prefix of its own, and tags of many
// attributes.
var hostileTexts = map[string]func(n int) string{
	"nested bindings": func(n int) string {
		var b strings.Builder
		k := 0
		for ; b.Len() < n; k++ {
			fmt.Fprintf(&b, "<a xmlns:p%d='u' p%d:b='1'>", k, k)
		}
		return b.String() + strings.Repeat("</a>", k)
	},
	"many attributes": func(n int) string {
		var b strings.Builder
		b.WriteString("<a")
		for k := 0; b.Len() < n; k++ {
			fmt.Fprintf(&b, " b%d='1'", k)
		}
		return b.String() + "/>"
	},
	"a repeated attribute": func(n int) string { return "<a" + strings.Repeat(" b='1'", n/6) + "/>" },
}

// TestHostileXMLIsLinear: a body is the client's to choose, so reading it
// must cost about its length, however it is made. Each hostile text is
// read at 16, 64 and 256 KiB, and the time may grow about fourfold from 64
// to 256 KiB, not sixteenfold as a reader that rescans grows. (From 16 to
// 64 KiB a deep tree outgrows the caches, and the time can grow tenfold;
// there a reader that rescans fails when it takes seconds, so that the
// test fails soon.)
func TestHostileXMLIsLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("times reads of large texts; skipped in -short mode")
	}
	texts := map[string]func(n int) string{}
	for _, unit := range hostileUnits {
		for _, tail := range []string{"", hostileTail} {
			texts[fmt.Sprintf("%q + %q", unit, tail)] = func(n int) string { return strings.Repeat(unit, n/len(unit)) + tail }
		}
	}
	maps.Copy(texts, hostileTexts)
	const small, medium, large = 16 << 10, 64 << 10, 256 << 10
	for _, name := range slices.Sorted(maps.Keys(texts)) {
		text := texts[name]
		ts, tm := parseTime(text(small), 2), parseTime(text(medium), 2)
		if tm > 2*time.Second { // some 40 times what -race on a loaded machine takes
			t.Errorf("%s: %v for %d bytes, %v for %d: the reader rescans", name, tm, medium, ts, small)
			continue
		}
		tl := parseTime(text(large), 2)
		// Below tens of milliseconds a loaded machine's noise is all there
		// is to see, and a pause can make a reading slow once: a slow one
		// is timed again, up to three times, before it fails, unless it is
		// very slow. (Under -race beside other packages' tests, two linear
		// texts once measured 13x and 15x after one retiming: the
		// collector's share of a 256 KiB parse varies the most.)
		slow := func() bool { return tl > 50*time.Millisecond && tl > 10*tm }
		for try := 0; try < 3 && slow() && tl < 5*time.Second; try++ {
			tm, tl = parseTime(text(medium), 5), parseTime(text(large), 5)
		}
		if slow() {
			t.Errorf("%s: %v for %d bytes, %v for %d: the reader rescans", name, tl, large, tm, medium)
		}
		if testing.Verbose() {
			t.Logf("%s: %v, %v, %v", name, ts, tm, tl)
		}
	}
}
