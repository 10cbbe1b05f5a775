package imposter

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
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
		{"not an object", `[]`, "'protocol' is a required field"},
		{"no protocol", `{"port":1}`, "'protocol' is a required field"},
		{"unknown protocol", `{"protocol":"gopher"}`, "the gopher protocol is not yet supported"},
		{"port out of range", `{"protocol":"http","port":70000}`, "invalid value for 'port'"},
		{"fractional port", `{"protocol":"http","port":80.5}`, "invalid value for 'port'"},
		{"port of the wrong type", `{"protocol":"http","port":true}`, "invalid value for 'port'"},
		{"stubs not an array", `{"protocol":"http","stubs":{}}`, "'stubs' must be an array"},
		{"empty responses", `{"protocol":"http","stubs":[{"responses":[]}]}`, "'responses' must be a non-empty array"},
		{"no responses", `{"protocol":"http","stubs":[{"predicates":[]}]}`, "'responses' must be a non-empty array"},
		{"a response with no type", `{"protocol":"http","stubs":[{"responses":[{"repeat":2}]}]}`, "unrecognized response type"},
		{"repeat of the wrong type", `{"protocol":"http","stubs":[{"responses":[{"is":{},"repeat":null}]}]}`, `"repeat" field must be an integer greater than 0`},
		{"a negative repeat string", `{"protocol":"http","stubs":[{"responses":[{"is":{},"repeat":"-1x"}]}]}`, `"repeat" field must be an integer greater than 0`},
		{"two response types", `{"protocol":"http","stubs":[{"responses":[{"is":{},"fault":"x"}]}]}`, "each response object must have only one response type"},
		{"unknown response type", `{"protocol":"http","stubs":[{"responses":[{"iz":{}}]}]}`, "unrecognized response type"},
		{"bad repeat", `{"protocol":"http","stubs":[{"responses":[{"is":{},"repeat":0}]}]}`, `"repeat" field must be an integer greater than 0`},
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
	if s.Port != 4545 || len(s.Stubs) != 1 || bytes.Contains(s.Stubs[0].JSON(), []byte("_links")) {
		t.Fatalf("parsed %+v", s)
	}
}

// What mb accepts is accepted, and what it ignores is named for a warning.
func TestParseSpecAcceptsWhatMbAccepts(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		ignored    []string
	}{
		{"an unknown imposter field", `{"protocol":"http","prot":1}`, []string{"prot"}},
		{"a stub's name and recordMatches", `{"protocol":"http","stubs":[{"name":"n","recordMatches":true,"responses":[{"is":{}}]}]}`, nil},
		{"query inside is", `{"protocol":"http","stubs":[{"responses":[{"is":{"query":{"a":"1"}}}]}]}`, []string{"stubs[0].responses[0].is.query"}},
		{"proxy null next to is", `{"protocol":"http","stubs":[{"responses":[{"is":{},"proxy":null}]}]}`, nil},
		{"an unknown fault", `{"protocol":"http","stubs":[{"responses":[{"fault":"BOOM"}]}]}`, nil},
		{"a status that is no status", `{"protocol":"http","stubs":[{"responses":[{"is":{"statusCode":"abc"}}]}]}`, nil},
		{"headers that are no object", `{"protocol":"http","stubs":[{"responses":[{"is":{"headers":"x"}}]}]}`, nil},
		{"a defaultResponse holding a proxy", `{"protocol":"http","defaultResponse":{"proxy":{"to":"http://x"}}}`, []string{"defaultResponse.proxy"}},
		{"an unknown response field", `{"protocol":"http","stubs":[{"responses":[{"is":{},"note":"n"}]}]}`, []string{"stubs[0].responses[0].note"}},
		{"a non-string name", `{"protocol":"http","name":5}`, nil},
		{"a port as a string", `{"protocol":"http","port":"4545"}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSpec([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(s.Ignored, ",") != strings.Join(tc.ignored, ",") {
				t.Fatalf("ignored %q, want %q", s.Ignored, tc.ignored)
			}
		})
	}
}

// _behaviors becomes the behaviors array, repeat beside it, as mb stores it;
// with a repeat already there, mb leaves it alone (and never runs it).
func TestLegacyBehaviorsAreUpcast(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"is":{},"_behaviors":{"decorate":"d","wait":5,"repeat":2,"shellTransform":"s"}}`,
			`{"is":{},"repeat":2,"behaviors":[{"wait":5},{"shellTransform":"s"},{"decorate":"d"}]}`},
		{`{"is":{},"_behaviors":{"copy":[{"a":1},{"b":2}]}}`, `{"is":{},"behaviors":[{"copy":{"a":1}},{"copy":{"b":2}}]}`},
		{`{"is":{},"repeat":1,"_behaviors":{"wait":5}}`, `{"is":{},"repeat":1,"_behaviors":{"wait":5}}`},
	} {
		st, err := ParseStub([]byte(`{"responses":[` + tc.in + `]}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(st.Responses[0].json); got != tc.want {
			t.Errorf("%s became %s, want %s", tc.in, got, tc.want)
		}
	}
}

// mb's compatibility.upcast: a tcp proxy's old `to: {host, port}` becomes
// its tcp:// URL; another protocol's, or one without a truthy host and
// port, is left as it is.
func TestOldTCPProxySyntaxIsUpcast(t *testing.T) {
	for _, tc := range []struct{ protocol, to, want string }{
		{"tcp", `{"host":"localhost","port":4546}`, `"tcp://localhost:4546"`},
		{"tcp", `{"host":"h","port":"p","x":1}`, `"tcp://h:p"`},
		{"tcp", `{"host":"localhost","port":0}`, `{"host":"localhost","port":0}`},
		{"tcp", `{"port":1}`, `{"port":1}`},
		{"tcp", `"tcp://a:1"`, `"tcp://a:1"`},
		{"http", `{"host":"localhost","port":4546}`, `{"host":"localhost","port":4546}`},
	} {
		spec, err := ParseSpec([]byte(`{"protocol":"` + tc.protocol + `","stubs":[{"responses":[{"proxy":{"to":` + tc.to + `}}]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		want := `{"proxy":{"to":` + tc.want + `}}`
		if got := string(spec.Stubs[0].Responses[0].json); got != want {
			t.Errorf("%s %s became %s, want %s", tc.protocol, tc.to, got, want)
		}
		st, err := ParseStubFor([]byte(`{"responses":[{"proxy":{"to":`+tc.to+`}}]}`), tc.protocol)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(st.Responses[0].json); got != want {
			t.Errorf("stubs API: %s %s became %s, want %s", tc.protocol, tc.to, got, want)
		}
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
			// One error, or several answered together as mb answers
			// `{"port":""}` (a bad port and no protocol).
			var e *mberr.Error
			var l mberr.List
			if !errors.As(err, &e) && !(errors.As(err, &l) && len(l) > 0) {
				t.Fatalf("error not in mb's shape: %v", err)
			}
			return
		}
		imp := &Imposter{spec: s}
		imp.table.Store(newTable(nil, nil))
		out := imp.JSON(View{Replayable: true})
		if !json.Valid(out) {
			t.Fatalf("rendered invalid JSON: %s", out)
		}
	})
}

// A stub's predicates and responses are parts of its JSON, not copies: a
// recorded stub's JSON is held once (issue 34's memory per stub).
func TestAStubsJSONIsKeptOnce(t *testing.T) {
	st, err := ParseStub([]byte(`{"predicates":[{"deepEquals":{"path":"/a"}},{"exists":{"body":true}}],
		"responses":[{"is":{"body":"x"},"behaviors":[{"wait":1}]},{"_behaviors":{"wait":2},"proxy":{"to":"http://h:1"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	doc := st.JSON()
	within := func(what string, part []byte) {
		t.Helper()
		lo, hi := uintptr(unsafe.Pointer(unsafe.SliceData(doc))), uintptr(unsafe.Pointer(unsafe.SliceData(doc)))+uintptr(len(doc))
		p := uintptr(unsafe.Pointer(unsafe.SliceData(part)))
		if len(part) == 0 || p < lo || p+uintptr(len(part)) > hi || !bytes.Contains(doc, part) {
			t.Errorf("%s %s is not a part of the stub's JSON %s", what, part, doc)
		}
	}
	for _, p := range st.Predicates {
		within("predicate", p)
	}
	for _, rs := range st.Responses {
		within("response", rs.json)
		within("value", rs.Value)
		within("behaviors", rs.Behaviors)
	}
	if got := string(st.Responses[1].Value); got != `{"to":"http://h:1"}` {
		t.Errorf("proxy value %s", got)
	}
}

// stubDoc's short way gives what re-encoding gives: for stubs whose
// responses upcasting leaves as they are, with and without the fields it
// drops.
func TestStubDocIsTheReencodedStub(t *testing.T) {
	for _, in := range []string{
		`{"responses":[{"is":{"body":"a"}}]}`,
		`{"predicates":[{"equals":{"path":"/\u001f\"é"}}],"responses":[{"is":{"statusCode":201}},{"proxy":{"to":"http://x"}}],"_rift":{"k":1}}`,
		`{"responses":[{"is":{}}],"_links":{"self":{"href":"/x"}}}`,
		`{"matches":[],"responses":[{"is":{}}]}`,
		`{"responses":[{"is":{"body":"a"},"_behaviors":{"wait":5}}]}`,
	} {
		data, err := message.CanonicalJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		obj, err := decodeObject(data)
		if err != nil {
			t.Fatal(err)
		}
		responses, _ := message.Elements(obj.get("responses"))
		var upcast []json.RawMessage
		for _, r := range responses {
			rs, _, err := parseResponse(r, "http")
			if err != nil {
				t.Fatal(err)
			}
			upcast = append(upcast, rs.json)
		}
		want := mustJSON(obj.with("responses", raw(upcast)).without("_links", "matches"))
		for _, owned := range []bool{false, true} {
			if got := stubDoc(data, obj, responses, upcast, owned); string(got) != string(want) {
				t.Errorf("%s:\n got %s\nwant %s", in, got, want)
			}
		}
	}
}
