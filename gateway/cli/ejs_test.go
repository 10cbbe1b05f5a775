package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// writeFiles creates files (slash-separated relative names) under dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, contents := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(contents), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func render(t testing.TB, dir, root string) (string, error) {
	t.Helper()
	path := filepath.Join(dir, root)
	contents, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return RenderTemplate(ctx, path, string(contents))
}

// ejsCases are templates with the output EJS 2.7.4 under mountebank-formatters
// gives for them; TestRenderMatchesMountebank checks the same files against
// the real thing when it is installed.
var ejsCases = []struct {
	name    string
	files   map[string]string // root is "config.ejs"
	want    string
	wantErr string
}{
	{
		name:  "Node's globals, but not require",
		files: map[string]string{"config.ejs": `<%= typeof process.env %> <%= process.env.RIFTGATE_EJS_TEST %> <%= Buffer.from('hi').toString('base64') %> <%= typeof setTimeout %> <%= typeof require %>`},
		want:  `object set aGk= function undefined`,
	},
	{
		name:  "plain text is unchanged",
		files: map[string]string{"config.ejs": `{"imposters": []}` + "\n"},
		want:  `{"imposters": []}` + "\n",
	},
	{
		name: "include call, relative to the configfile",
		files: map[string]string{
			"config.ejs":   `{"imposters": [<%- include('imp/one.json') %>]}`,
			"imp/one.json": `{"port": 4545}`,
		},
		want: `{"imposters": [{"port": 4545}]}`,
	},
	{
		name: "legacy include directive",
		files: map[string]string{
			"config.ejs":   `{"imposters": [<% include imp/one.json %>]}`,
			"imp/one.json": `{"port": 4545}`,
		},
		want: `{"imposters": [{"port": 4545}]}`,
	},
	{
		name: "nested includes resolve against the including file, .ejs added",
		files: map[string]string{
			"config.ejs":       `[<%- include('imp/one') %>]`,
			"imp/one.ejs":      `{"port": 1, "stubs": [<%- include('stubs/s.json') %>]}`,
			"imp/stubs/s.json": `{"responses": []}`,
		},
		want: `[{"port": 1, "stubs": [{"responses": []}]}]`,
	},
	{
		name: "legacy include nested inside a legacy include",
		files: map[string]string{
			"config.ejs": `[<% include a/one.ejs %>]`,
			"a/one.ejs":  `<% include two.ejs %>!`,
			"a/two.ejs":  `two`,
		},
		want: `[two!]`,
	},
	{
		name: "include passes data and the caller's locals",
		files: map[string]string{
			"config.ejs": `<%- include('greet.ejs', {who: 'world'}) %>`,
			"greet.ejs":  `hello <%= who %> from <%= typeof stringify %>`,
		},
		want: `hello world from function`,
	},
	{
		name: "stringify escapes and trims a file for a JSON string",
		files: map[string]string{
			"config.ejs": `"<%- stringify(filename, 'body.txt') %>"`,
			"body.txt":   "\n  line1\n\"q\"\ttab\\ </script>\n\n",
		},
		want: `"line1\n\"q\"\ttab\\ </script>"`,
	},
	{
		name: "stringify with one argument, and its old name inject",
		files: map[string]string{
			"config.ejs": `<%- stringify('b.txt') %>|<%- inject('b.txt') %>`,
			"b.txt":      "x\ny",
		},
		want: `x\ny|x\ny`,
	},
	{
		name: "stringify from an include is relative to the configfile",
		files: map[string]string{
			"config.ejs":    `<%- include('sub/inner.ejs') %>`,
			"sub/inner.ejs": `<%- stringify(filename, 'top.txt') %>`,
			"top.txt":       `top`,
		},
		want: `top`,
	},
	{
		name: "stringify renders the file with data",
		files: map[string]string{
			"config.ejs": `<%- stringify(filename, 'tpl.ejs', {n: 2}) %>`,
			"tpl.ejs":    `<% for (var i = 0; i < data.n; i++) { %>"<%= i %>"<% } %>`,
		},
		want: `\"0\"\"1\"`,
	},
	{
		name:  "scriptlets, escaping, comments and literals",
		files: map[string]string{"config.ejs": "<% var xs = ['a', '<b>']; %><% xs.forEach(function (x) { %><%= x %>;<% }) %> <%- '<raw>' %> <%# gone %><%% lit %%> %>"},
		want:  "a;&lt;b&gt;; <raw> <% lit %> %>", // EJS stays in literal mode after %%>
	},
	{
		name:  "-%> eats one newline, <%_ _%> slurp spaces",
		files: map[string]string{"config.ejs": "a <% if (true) { -%>\n\nb\n  <%_ } _%>  \nc"},
		want:  "a \nb\nc",
	},
	{
		name:  "a trailing // comment does not swallow the output",
		files: map[string]string{"config.ejs": "<%= 1 + 1 // two %>!"},
		want:  "2!",
	},
	{
		name:  "null and undefined print nothing",
		files: map[string]string{"config.ejs": "[<%- null %><%= undefined %><%- typeof nope %>]"},
		want:  "[undefined]",
	},
	{
		name:    "missing include",
		files:   map[string]string{"config.ejs": "\n<%- include('nope.json') %>"},
		wantErr: `config.ejs:2: Error: Could not find the include file "nope.json"`,
	},
	{
		name:    "missing legacy include",
		files:   map[string]string{"config.ejs": "<% include nope.json %>"},
		wantErr: `Could not find the include file "nope.json"`,
	},
	{
		name:    "missing stringify file",
		files:   map[string]string{"config.ejs": "<%- stringify(filename, 'nope.txt') %>"},
		wantErr: "config.ejs:1: Error: read template: open ",
	},
	{
		name:    "unclosed tag",
		files:   map[string]string{"config.ejs": "x <%= 1"},
		wantErr: `Could not find matching close tag for "<%=".`,
	},
	{
		name:    "script error names the file and line",
		files:   map[string]string{"config.ejs": "line1\nline2 <%- notDefined %>"},
		wantErr: "config.ejs:2: ReferenceError: notDefined is not defined",
	},
	{
		name: "script error inside an include names the include",
		files: map[string]string{
			"config.ejs": "\n\n<%- include('bad.ejs') %>",
			"bad.ejs":    "\n<% null.x %>",
		},
		wantErr: "bad.ejs:2: TypeError",
	},
	{
		name:    "self include is bounded",
		files:   map[string]string{"config.ejs": "<%- include('config.ejs') %>"},
		wantErr: "includes nested deeper than",
	},
	{
		name:    "self legacy include is bounded",
		files:   map[string]string{"config.ejs": "<% include config.ejs %>"},
		wantErr: "includes nested deeper than",
	},
}

func TestRenderTemplate(t *testing.T) {
	t.Setenv("RIFTGATE_EJS_TEST", "set")
	for _, tc := range ejsCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			got, err := render(t, dir, "config.ejs")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q (output %q)", err, tc.wantErr, got)
				}
				var te *TemplateError
				if !errors.As(err, &te) {
					t.Fatalf("error %T is not a *TemplateError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			if got != tc.want {
				t.Fatalf("render = %q, want %q", got, tc.want)
			}
		})
	}
}

// mbFormatter finds mountebank-formatters' default formatter next to the
// installed mb ($RIFTGATE_MB, else the Makefile's build/node).
func mbFormatter(t *testing.T) string {
	t.Helper()
	mods := filepath.Join("..", "..", "build", "node", "node_modules")
	if mb := os.Getenv("RIFTGATE_MB"); mb != "" {
		mods = filepath.Join(filepath.Dir(mb), "..")
	}
	p, err := filepath.Abs(filepath.Join(mods, "mountebank-formatters", "src", "default.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("Mountebank is not installed: run `make node`: %v", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: make test needs Node.js")
	}
	return p
}

// mbLoadScript runs the formatter's load() on config.ejs in each directory
// and reports the imposters, or the rendered text it prints when that is not
// JSON, or the error. One Node process serves every case. It runs from a
// file, as mb does (under node -e, require is a global templates would see).
const mbLoadScript = `
const f = require(process.argv[2]);
const results = [];
for (const dir of process.argv.slice(3)) {
  process.chdir(dir);
  const printed = [];
  console.error = (...a) => printed.push(a.join(' '));
  try {
    results.push({ok: f.load({configfile: 'config.ejs'})});
  } catch (e) {
    results.push({rendered: printed[1], error: String(e)});
  }
}
process.stdout.write(JSON.stringify(results));`

// TestRenderMatchesMountebank renders every case with mb's own formatter
// (EJS 2.7.4 under Node) and with RenderTemplate, and compares.
func TestRenderMatchesMountebank(t *testing.T) {
	formatter := mbFormatter(t)
	t.Setenv("RIFTGATE_EJS_TEST", "set")
	dirs := make([]string, len(ejsCases))
	for i, tc := range ejsCases {
		dirs[i] = t.TempDir()
		writeFiles(t, dirs[i], tc.files)
	}
	script := filepath.Join(t.TempDir(), "load.js")
	if err := os.WriteFile(script, []byte(mbLoadScript), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("node", append([]string{script, formatter}, dirs...)...).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var results []struct {
		OK       json.RawMessage `json:"ok"`
		Rendered *string         `json:"rendered"`
		Error    string          `json:"error"`
	}
	if err := json.Unmarshal(out, &results); err != nil || len(results) != len(dirs) {
		t.Fatalf("node printed %s: %v", out, err)
	}
	for i, tc := range ejsCases {
		t.Run(tc.name, func(t *testing.T) {
			mb := results[i]
			got, err := render(t, dirs[i], "config.ejs")
			switch {
			case mb.OK != nil:
				if err != nil {
					t.Fatalf("mb rendered, riftgate failed: %v", err)
				}
				wrapped, err := wrapImposters([]byte(got))
				if err != nil {
					t.Fatalf("mb parsed its rendering, riftgate cannot parse %q: %v", got, err)
				}
				assertSameJSON(t, wrapped, mb.OK)
			case mb.Rendered != nil:
				if err != nil {
					t.Fatalf("mb rendered %q, riftgate failed: %v", *mb.Rendered, err)
				}
				if got != *mb.Rendered {
					t.Fatalf("riftgate rendered %q, mb %q", got, *mb.Rendered)
				}
			default:
				if err == nil {
					t.Fatalf("mb failed (%s), riftgate rendered %q", mb.Error, got)
				}
			}
		})
	}
}

func assertSameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("decode %s: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("decode %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestRenderFilenameLocal(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"config.ejs": "<%= filename %>"})
	got, err := render(t, dir, "config.ejs")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "config.ejs"); got != want {
		t.Fatalf("filename = %q, want %q", got, want)
	}
}

func TestRenderStopsRunawayScripts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := RenderTemplate(ctx, filepath.Join(t.TempDir(), "c.ejs"), "<% while (true) {} %>")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want the deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v to stop", d)
	}
	_, err = RenderTemplate(context.Background(), "c.ejs", "<% function f() { return f() } f() %>")
	if err == nil {
		t.Fatal("unbounded recursion rendered")
	}
}

// Text without a tag is never changed: EJS only acts on its tags, and
// RenderTemplate's shortcut for such text answers as the engine does.
func TestRenderPlainTextIsIdentity(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringMatching(`[^%]*`).Draw(t, "text")
		if rapid.Bool().Draw(t, "bytes") {
			s = string(rapid.SliceOf(rapid.Byte()).Draw(t, "raw"))
			if ejsToken.MatchString(s) {
				return
			}
		}
		got, err := RenderTemplate(context.Background(), "c.ejs", s)
		if err != nil {
			t.Fatalf("render %q: %v", s, err)
		}
		engine, err := renderTemplate(context.Background(), "c.ejs", s)
		if err != nil {
			t.Fatalf("engine render %q: %v", s, err)
		}
		if got != engine || (utf8.ValidString(s) && got != s) {
			t.Fatalf("render %q = %q, the engine's %q", s, got, engine)
		}
	})
}

// stringify's output placed between quotes always decodes, as JSON, to the
// trimmed file contents.
func TestStringifyRoundTrips(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "config.ejs")
	rapid.Check(t, func(t *rapid.T) {
		body := rapid.StringMatching(`[^%]*`).Draw(t, "body")
		if err := os.WriteFile(filepath.Join(dir, "body.txt"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := RenderTemplate(context.Background(), root, `"<%- stringify(filename, 'body.txt') %>"`)
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		var decoded string
		if err := json.Unmarshal([]byte(got), &decoded); err != nil {
			t.Fatalf("stringify of %q gave invalid JSON %s: %v", body, got, err)
		}
		if want := strings.TrimFunc(body, isJSSpace); decoded != want {
			t.Fatalf("decoded %q, want %q", decoded, want)
		}
	})
}

func FuzzRenderTemplate(f *testing.F) {
	for _, tc := range ejsCases {
		f.Add(tc.files["config.ejs"])
	}
	f.Add("<%")
	f.Add("%><%%-%>_%>")
	f.Add("<%_ include inc %>")
	dir := f.TempDir()
	writeFiles(f, dir, map[string]string{"inc.ejs": "<%= 1 %>", "body.txt": "b\n", "one.json": "{}"})
	root := filepath.Join(dir, "config.ejs")
	f.Fuzz(func(t *testing.T, tmpl string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		out, err := RenderTemplate(ctx, root, tmpl)
		if err != nil {
			var te *TemplateError
			if !errors.As(err, &te) && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("error %T %v is neither a template error nor the deadline", err, err)
			}
			return
		}
		if !strings.Contains(tmpl, "%") && out != validUTF8(tmpl) {
			t.Fatalf("plain text %q rendered as %q", tmpl, out)
		}
	})
}
