package imposter

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/mberr"
	"go.uber.org/goleak"
)

// fasthttp keeps one process-wide goroutine that refreshes the Date header
// once a response has needed it; it is not ours to stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"))
}

func TestParseSpecRejectsBadDefinitions(t *testing.T) {
	for _, tc := range []struct {
		name, json, message string
	}{
		{"not an object", `[]`, "imposter must be a JSON object"},
		{"no protocol", `{"port":1}`, "'protocol' is a required field"},
		{"unknown protocol", `{"protocol":"gopher"}`, "the gopher protocol is not yet supported"},
		{"port out of range", `{"protocol":"http","port":70000}`, "invalid value for 'port'"},
		{"fractional port", `{"protocol":"http","port":80.5}`, "invalid value for 'port'"},
		{"port of the wrong type", `{"protocol":"http","port":true}`, "invalid value for 'port'"},
		{"unknown field", `{"protocol":"http","prot":1}`, `unrecognized field "prot" in imposter`},
		{"stubs not an array", `{"protocol":"http","stubs":{}}`, "'stubs' must be an array"},
		{"empty responses", `{"protocol":"http","stubs":[{"responses":[]}]}`, "'responses' must be a non-empty array"},
		{"two response types", `{"protocol":"http","stubs":[{"responses":[{"is":{},"fault":"x"}]}]}`, "each response object must have only one response type"},
		{"unknown response type", `{"protocol":"http","stubs":[{"responses":[{"iz":{}}]}]}`, "unrecognized response type"},
		{"bad fault", `{"protocol":"http","stubs":[{"responses":[{"fault":"BOOM"}]}]}`, "fault must be"},
		{"bad repeat", `{"protocol":"http","stubs":[{"responses":[{"is":{},"repeat":0}]}]}`, `"repeat" field must be an integer greater than 0`},
		{"bad status", `{"protocol":"http","stubs":[{"responses":[{"is":{"statusCode":"abc"}}]}]}`, "statusCode must be"},
		{"bad headers", `{"protocol":"http","stubs":[{"responses":[{"is":{"headers":[1]}}]}]}`, "headers must be an object"},
		{"bad mode", `{"protocol":"http","stubs":[{"responses":[{"is":{"_mode":"hex"}}]}]}`, "_mode must be"},
		{"scenario state without name", `{"protocol":"http","stubs":[{"newScenarioState":"x"}]}`, "need a 'scenarioName'"},
		{"bad durability", `{"protocol":"http","_rift":{"flowState":{"durability":"disk"}}}`, "durability must be"},
		{"unknown _rift field", `{"protocol":"http","_rift":{"flows":{}}}`, "invalid _rift"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpec([]byte(tc.json))
			var e *mberr.Error
			if !errors.As(err, &e) || e.Code != mberr.BadData || !strings.Contains(e.Message, tc.message) {
				t.Fatalf("ParseSpec(%s) = %v, want bad data %q", tc.json, err, tc.message)
			}
		})
	}
}

func TestParseSpecAcceptsWhatMbSaves(t *testing.T) {
	// The shape `mb save` writes, with runtime fields mb prints.
	saved := `{"protocol":"https","port":4545,"numberOfRequests":3,"recordRequests":false,
		"key":"k","cert":"c","mutualAuth":false,"rejectUnauthorized":false,"ca":null,"requests":[],
		"stubs":[{"responses":[{"is":{"body":"x","_proxyResponseTime":4}}],"_links":{"self":{"href":"h"}}}],
		"_links":{"self":{"href":"h"}}}`
	s, err := ParseSpec([]byte(saved))
	if err != nil {
		t.Fatal(err)
	}
	if s.Port != 4545 || len(s.Stubs) != 1 || s.Stubs[0].obj.get("_links") != nil {
		t.Fatalf("parsed %+v", s)
	}
}

func TestStubWithoutResponsesGetsAnEmptyIs(t *testing.T) {
	st, err := ParseStub([]byte(`{"predicates":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Responses) != 1 || st.Responses[0].Kind != "is" {
		t.Fatalf("responses = %+v", st.Responses)
	}
}

// FuzzParseSpec feeds the imposter decoder arbitrary bytes: it must return
// a spec or an mb-shaped error, never panic, and a spec it accepts must
// render and parse again to the same JSON.
func FuzzParseSpec(f *testing.F) {
	for _, seed := range []string{
		`{"protocol":"http","port":4545,"stubs":[{"predicates":[{"equals":{"path":"/"}}],"responses":[{"is":{"body":{"a":1}}}]}]}`,
		`{"protocol":"https","defaultResponse":{"statusCode":404},"_rift":{"flowState":{"flowIdSource":"header:X-Flow-Id","durability":"sync"}}}`,
		`{"protocol":"http","stubs":[{"responses":[{"is":{},"_behaviors":{"repeat":2}},{"fault":"CONNECTION_RESET_BY_PEER"}]}]}`,
		`{"protocol":"http","stubs":[{"scenarioName":"s","newScenarioState":"b"}]}`,
		`{}`, `null`, `{"protocol":"http","port":"80"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec(data)
		if err != nil {
			var e *mberr.Error
			if !errors.As(err, &e) {
				t.Fatalf("error not in mb's shape: %v", err)
			}
			return
		}
		imp := &Imposter{spec: s}
		imp.table.Store(newTable(nil))
		out := imp.JSON(View{Replayable: true})
		if !json.Valid(out) {
			t.Fatalf("rendered invalid JSON: %s", out)
		}
	})
}
