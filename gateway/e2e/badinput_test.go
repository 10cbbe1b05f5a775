package e2e_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// TestBadInputChangesNothing sends malformed, refused and huge input to
// every writing route, and checks for a clear 4xx in mb's shape and an
// unchanged imposter set. (What mb accepts, unknown fields among it, is
// accepted: the differential harness holds riftgate to that.)
func TestBadInputChangesNothing(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"http","name":"keep","stubs":[{"responses":[{"is":{"body":"ok"}}]}]}`)
	_, before := rg.Do("GET", "/imposters?replayable=true", nil)
	huge := strings.Repeat("x", 17<<20)
	stubs := fmt.Sprintf("/imposters/%d/stubs", port)
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "/imposters", `{"protocol":`, 400, "invalid JSON"},
		{"POST", "/imposters", `{"protocol":"http","port":"x"}`, 400, "bad data"},
		{"POST", "/imposters", `{"protocol":"http","stubs":[{"responses":[{"is":{},"repeat":0}]}]}`, 400, "bad data"},
		{"POST", "/imposters", `{"protocol":"http","stubs":"none"}`, 400, "bad data"},
		{"POST", "/imposters", fmt.Sprintf(`{"protocol":"http","port":%d}`, port), 400, "EADDRINUSE"},
		{"POST", "/imposters", `{"protocol":"http","stubs":[{"predicates":[{"equalz":{}}],"responses":[{"is":{}}]}]}`, 400, "bad data"},
		{"POST", "/imposters", `{"protocol":"http","stubs":[{"responses":[{"inject":"function(){}"}]}]}`, 400, "invalid injection"},
		{"POST", "/imposters", `{"protocol":"http","body":"` + huge + `"}`, 413, "payload too large"},
		{"PUT", "/imposters", `{"imposters":[{"protocol":"http"},{"protocol":"nope"}]}`, 400, "bad data"},
		{"PUT", "/imposters", `{"imposters":{}}`, 400, "invalid JSON"},
		{"PUT", stubs, `{"stubs":[{"responses":[{"is":{}}]},{"responses":"no"}]}`, 400, "bad data"},
		{"POST", stubs, `{"stub":{"responses":[{"is":{"body":"x"}}]},"index":"first"}`, 400, "invalid JSON"},
		{"PUT", stubs + "/0", `{"responses":[{"iz":{}}]}`, 400, "bad data"},
		{"PUT", stubs + "/0", `not json`, 400, "bad data"},
	} {
		// A client sending a huge body asks first, or it may see its write
		// fail before it reads the 413.
		status, body := gatewaytest.Do(t, tc.method, rg.URL+tc.path, tc.body, http.Header{"Expect": {"100-continue"}})
		if status != tc.status || len(body) == 0 || errorCode(t, body) != tc.code {
			t.Errorf("%s %s %.60q = %d %s, want %d %q", tc.method, tc.path, tc.body, status, body, tc.status, tc.code)
		}
	}
	_, after := rg.Do("GET", "/imposters?replayable=true", nil)
	if !bytes.Equal(before, after) {
		t.Fatalf("bad input changed the imposters:\nbefore %s\nafter  %s", before, after)
	}
	if _, body := flowGet(t, port, "", "/"); body != "ok" {
		t.Fatalf("imposter answers %q after bad input", body)
	}
}
