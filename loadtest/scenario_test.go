package loadtest

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestParseScenario(t *testing.T) {
	for _, tc := range []struct {
		name, in, err string
	}{
		{"minimal", `{"steps":[{"path":"/"}]}`, ""},
		{"full", `{"name":"n","flowIdHeader":"X-F","flowIdPrefix":"a.b","flowPerIteration":true,
			"steps":[{"name":"s","method":"PUT","path":"/x/{{flowId}}/{{ vu }}/{{iter}}",
			"headers":{"A":"{{flowId}}"},"body":"raw {{iter}}","expectStatus":204}]}`, ""},
		{"json body", `{"steps":[{"path":"/","body":{"a":[1, 2]}}]}`, ""},
		{"no steps", `{"steps":[]}`, "no steps"},
		{"missing steps", `{}`, "no steps"},
		{"unknown field", `{"steps":[{"path":"/"}],"stpes":1}`, "unknown field"},
		{"trailing", `{"steps":[{"path":"/"}]} {}`, "trailing"},
		{"relative path", `{"steps":[{"path":"x"}]}`, "must start with /"},
		{"space in path", `{"steps":[{"path":"/a b"}]}`, "whitespace"},
		{"bad method", `{"steps":[{"path":"/","method":"GE T"}]}`, "not an HTTP token"},
		{"bad header name", `{"steps":[{"path":"/","headers":{"A:B":"x"}}]}`, "not an HTTP token"},
		{"header injection", `{"steps":[{"path":"/","headers":{"A":"x\r\nB: y"}}]}`, "line break"},
		{"unknown variable", `{"steps":[{"path":"/{{user}}"}]}`, "unknown template variable"},
		{"unclosed", `{"steps":[{"path":"/{{flowId"}]}`, "unclosed"},
		{"bad status", `{"steps":[{"path":"/","expectStatus":99}]}`, "not an HTTP status"},
		{"bad prefix", `{"flowIdPrefix":"a/b","steps":[{"path":"/"}]}`, "flowIdPrefix"},
		{"bad flow header", `{"flowIdHeader":"X Flow","steps":[{"path":"/"}]}`, "flowIdHeader"},
		{"not json", `steps:`, "invalid character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseScenario([]byte(tc.in))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

func TestTemplateRendering(t *testing.T) {
	v := &vars{flowID: []byte("p-7"), vu: 7, iter: 12}
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"/plain", "/plain"},
		{"/f/{{flowId}}", "/f/p-7"},
		{"{{vu}}{{iter}}", "712"},
		{`{"a":"{{ flowId }}"}`, `{"a":"p-7"}`},
		{"}} {", "}} {"},
	} {
		tm, err := parseTemplate(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if got := string(tm.render(nil, v)); got != tc.want {
			t.Errorf("render(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Rendering a template is the same as substituting its variables as text.
func TestTemplateRenderProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lit := rapid.StringMatching(`[a-z/{}: "]{0,12}`).Filter(func(s string) bool {
			return !strings.Contains(s, "{{") && !strings.HasSuffix(s, "{")
		})
		parts := rapid.SliceOfN(lit, 1, 5).Draw(t, "parts")
		names := rapid.SliceOfN(rapid.SampledFrom([]string{"flowId", "vu", "iter"}), len(parts)-1, len(parts)-1).Draw(t, "vars")
		v := &vars{
			flowID: []byte(rapid.StringMatching(`[a-z0-9-]{1,10}`).Draw(t, "flow")),
			vu:     rapid.Int64Range(0, 1e6).Draw(t, "vu"),
			iter:   rapid.Int64Range(0, 1e9).Draw(t, "iter"),
		}
		var src, want strings.Builder
		for i, p := range parts {
			src.WriteString(p)
			want.WriteString(p)
			if i < len(names) {
				src.WriteString("{{" + names[i] + "}}")
				want.WriteString(map[string]string{
					"flowId": string(v.flowID),
					"vu":     itoa(v.vu),
					"iter":   itoa(v.iter),
				}[names[i]])
			}
		}
		tm, err := parseTemplate(src.String())
		if err != nil {
			t.Fatalf("%q: %v", src.String(), err)
		}
		if got := string(tm.render([]byte("pre"), v)); got != "pre"+want.String() {
			t.Fatalf("render(%q) = %q, want %q", src.String(), got, want.String())
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// FuzzParseScenario: the parser never panics, and whatever it accepts
// compiles and renders.
func FuzzParseScenario(f *testing.F) {
	for _, seed := range []string{
		`{"steps":[{"path":"/"}]}`,
		`{"name":"n","flowIdHeader":"X-F","flowIdPrefix":"a","flowPerIteration":true,"steps":[{"method":"POST","path":"/x/{{flowId}}","headers":{"A":"{{vu}}"},"body":{"k":"{{iter}}"},"expectStatus":201}]}`,
		`{"steps":[{"path":"/{{"}]}`,
		`{"steps":[{"path":"/","body":"\u0000"}]}`,
		`{"noFlowHeader":true,"steps":[{"path":"/a"},{"path":"/b","body":null}]}`,
		`[]`, `null`, `{"steps":null}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseScenario(data)
		if err != nil {
			return
		}
		steps, err := s.compile()
		if err != nil {
			t.Fatalf("accepted scenario does not compile: %v", err)
		}
		v := &vars{flowID: []byte("f-1"), vu: 1, iter: 2}
		for _, st := range steps {
			if p := st.path.render(nil, v); len(p) == 0 || p[0] != '/' {
				t.Fatalf("path renders to %q", p)
			}
			_ = st.body.render(nil, v)
			for _, h := range st.headers {
				_ = h.value.render(nil, v)
			}
		}
	})
}

// The scenario example in README.md is valid: the documentation cannot
// drift from the parser.
func TestReadmeScenarioParses(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "```json\n")
	if !ok {
		t.Fatal("README.md has no ```json block")
	}
	block, _, _ := strings.Cut(rest, "```")
	sc, err := ParseScenario([]byte(block))
	if err != nil {
		t.Fatalf("README scenario: %v", err)
	}
	if len(sc.Steps) != 3 || sc.flowHeader() != "X-Flow-Id" || len(sc.Thresholds) != 2 || len(sc.Steps[2].Checks) != 1 {
		t.Errorf("README scenario parsed as %+v", sc)
	}
	// The ramp fragment, in a scenario of its own.
	_, rest, ok = strings.Cut(string(data), "```\n\"ramp\":")
	if !ok {
		t.Fatal("README.md has no ramp fragment")
	}
	block, _, _ = strings.Cut(rest, "```")
	sc, err = ParseScenario([]byte(`{"steps":[{"path":"/"}],"ramp":` + block + `}`))
	if err != nil || len(sc.Ramp.Stages) != 3 || sc.Ramp.Total() != 210*time.Second || sc.Ramp.stageName(2) != "stage 3" {
		t.Errorf("README ramp: %v %+v", err, sc)
	}
}
