package loadtest

import (
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// The large recording alone, small, against the real binary and the real
// mb: every operation is timed and finds every stub, on riftgate (a stop
// and a start on its --datadir included) and on mb given riftgate's save;
// its section replaces the last one and leaves the rest of the report.
func TestBenchLargeAlone(t *testing.T) {
	md := benchPartAlone(t, largePart, "## A large recording, used",
		"-mb", gatewaytest.Mountebank(t), "-only", "^"+largeID+"$", "-large", "300")
	rows := map[string]int{}
	for _, line := range strings.Split(md, "\n") {
		f := strings.Split(line, " | ")
		if len(f) != 7 || !strings.HasPrefix(f[0], "| riftgate") && !strings.HasPrefix(f[0], "| mb") {
			continue
		}
		rows[strings.TrimPrefix(f[0], "| ")]++
		if f[6] != "ok |" {
			t.Errorf("an operation failed: %s", line)
		}
	}
	// riftgate: record, settle, GET, replayable GET, save, stop, start,
	// replay, settle; mb: PUT, GET, replayable GET, save, replay.
	if rows["riftgate, --datadir"] != 9 || rows["mb 2.9.1"] != 5 {
		t.Errorf("rows %v, want 9 of riftgate's and 5 of mb's:\n%s", rows, md)
	}
	for _, want := range []string{"| riftgate, --datadir | `GET /imposters/:id` | ", " | 302 | ", " | 301 | ", "every read found every stub (the 300 recorded, the probe's and the proxy stub; the proxy stub is left out where proxies are removed): PASS."} {
		if !strings.Contains(md, want) {
			t.Errorf("the section lacks %q:\n%s", want, md)
		}
	}
}
