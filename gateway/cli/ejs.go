package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/riftgate/riftgate/gateway/inject"
	"github.com/riftgate/riftgate/gateway/message"
)

// The configfile templating reproduces what `mb --configfile` does with
// mountebank-formatters 0.0.2 and EJS 2.7.4: the template is compiled into
// JavaScript the way EJS compiles it (so scriptlets, loops and the
// `include`/`stringify` helpers behave the same) and run in goja.

const (
	// maxIncludeDepth bounds include/stringify nesting; a file that includes
	// itself would otherwise recurse until the stack is gone.
	maxIncludeDepth = 64
	// maxJSCallStack bounds JavaScript recursion inside scriptlets.
	maxJSCallStack = 4096
)

var (
	// ejsToken splits a template the way EJS 2.7.4 does; order matters, as
	// Go's regexp alternation is leftmost-first like JavaScript's.
	ejsToken = regexp.MustCompile(`<%%|%%>|<%=|<%-|<%_|<%#|<%|%>|-%>|_%>`)
	// jsSpace is JavaScript's \s, which (unlike Go's) includes Unicode spaces.
	jsSpace          = `[\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}]`
	slurpBefore      = regexp.MustCompile(`[ \t]*<%_`)
	slurpAfter       = regexp.MustCompile(`_%>[ \t]*`)
	legacyInclude    = regexp.MustCompile(`^` + jsSpace + `*include` + jsSpace + `+([^\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}]+)`)
	trailingSemi     = regexp.MustCompile(`;(` + jsSpace + `*)$`)
	absoluteInclude  = regexp.MustCompile(`^[A-Za-z]+:\\|^/`)
	leadingLinebreak = regexp.MustCompile(`^(?:\r\n|\r|\n)`)
)

// TemplateError is a failure while rendering a configfile template, located
// at the innermost file and line where it happened.
type TemplateError struct {
	File string
	Line int
	Msg  string
}

func (e *TemplateError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// RenderTemplate renders the contents of the configfile at path as mb's
// default formatter does: EJS with the locals `filename` (path as given),
// `stringify` and its old name `inject`. include() paths are relative to the
// including file; stringify() paths are relative to the configfile's
// directory. ctx bounds the run (scriptlets are arbitrary JavaScript).
func RenderTemplate(ctx context.Context, path string, contents string) (string, error) {
	if !strings.Contains(contents, "<%") && !strings.Contains(contents, "%>") { // every ejsToken has one
		// Without a tag a template renders as itself: a saved file of
		// 100,000 recorded stubs (tens of MB) need not go through the
		// script engine (TestTextWithoutTagsRendersAsItself).
		return validUTF8(contents), nil
	}
	return renderTemplate(ctx, path, contents)
}

// renderTemplate is RenderTemplate through EJS's engine.
func renderTemplate(ctx context.Context, path string, contents string) (string, error) {
	// Templates see Node's globals (process, Buffer, timers) as in mb; EJS
	// compiles them with new Function, where require is out of scope.
	script := inject.NewScript(ctx, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	defer script.Close()
	r := &renderer{rt: script.Runtime(), root: path}
	r.rt.SetMaxCallStackSize(maxJSCallStack)
	_ = r.rt.GlobalObject().Delete("require")
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("render %s: %w", path, err)
	}
	out, err := r.renderRoot(validUTF8(contents))
	if err != nil {
		var te *TemplateError
		if errors.As(err, &te) {
			return "", te
		}
		var ie *goja.InterruptedError
		if errors.As(err, &ie) {
			return "", fmt.Errorf("render %s: %w", path, ctx.Err())
		}
		return "", &TemplateError{File: path, Msg: err.Error()}
	}
	return out, nil
}

type renderer struct {
	rt    *goja.Runtime
	root  string
	depth int
}

// renderRoot renders the configfile itself.
func (r *renderer) renderRoot(contents string) (string, error) {
	locals, err := r.rootLocals(nil)
	if err != nil {
		return "", err
	}
	return r.render(contents, r.root, locals)
}

// rootLocals are the locals mountebank-formatters gives the configfile and
// every stringify()'d file: `filename` (the configfile, as given),
// `stringify` and its original name `inject`, and for stringify its `data`.
func (r *renderer) rootLocals(data goja.Value) (*goja.Object, error) {
	stringify := r.rt.ToValue(r.stringify)
	values := map[string]goja.Value{"filename": r.rt.ToValue(r.root), "stringify": stringify, "inject": stringify}
	if data != nil {
		values["data"] = data
	}
	locals := r.rt.NewObject()
	for k, v := range values {
		if err := locals.Set(k, v); err != nil {
			return nil, fmt.Errorf("set local %s: %w", k, err)
		}
	}
	return locals, nil
}

// render compiles a template whose own file is filename and runs it with locals.
func (r *renderer) render(contents, filename string, locals *goja.Object) (string, error) {
	if r.depth >= maxIncludeDepth {
		return "", &TemplateError{File: filename, Msg: fmt.Sprintf("includes nested deeper than %d", maxIncludeDepth)}
	}
	r.depth++
	defer func() { r.depth-- }()

	body, err := r.generate(contents, filename, 0)
	if err != nil {
		return "", err
	}
	src := "(function (locals, escapeFn, include, __rethrow) {\n" +
		"  var __line = 1, __filename = " + jsString(filename) + ";\n" +
		"  try {\n" +
		"  var __output = \"\";\n" +
		"  function __append(s) { if (s !== undefined && s !== null) __output += s }\n" +
		"  with (locals || {}) {\n" + body + "  }\n" +
		"  return __output;\n" +
		"  } catch (e) { __rethrow(e, __filename, __line) }\n" +
		"})"
	prg, err := goja.Compile(filename, src, false)
	if err != nil {
		return "", &TemplateError{File: filename, Msg: "cannot compile template: " + err.Error()}
	}
	fnVal, err := r.rt.RunProgram(prg)
	if err != nil {
		return "", fmt.Errorf("load template %s: %w", filename, err)
	}
	fn, ok := goja.AssertFunction(fnVal)
	if !ok {
		return "", &TemplateError{File: filename, Msg: "template did not compile to a function"}
	}
	include := func(call goja.FunctionCall) goja.Value {
		return r.include(filename, locals, call)
	}
	out, err := fn(goja.Undefined(), locals, r.rt.ToValue(r.escapeXML), r.rt.ToValue(include), r.rt.ToValue(r.rethrow))
	if err != nil {
		return "", err
	}
	return out.String(), nil
}

// rethrow gives a script error the file and line it happened at, keeping the
// innermost location when it passes through enclosing includes.
func (r *renderer) rethrow(call goja.FunctionCall) goja.Value {
	e, file, line := call.Argument(0), call.Argument(1).String(), int(call.Argument(2).ToInteger())
	if obj, ok := e.(*goja.Object); ok {
		if v := obj.Get("value"); v != nil {
			if te, ok := v.Export().(*TemplateError); ok {
				panic(r.rt.NewGoError(te))
			}
		}
	}
	panic(r.rt.NewGoError(&TemplateError{File: file, Line: line, Msg: e.String()}))
}

// throw raises err as a JavaScript exception from a Go helper. A
// TemplateError (from a nested template) passes through unchanged; any other
// error becomes a plain Error, which the calling template locates.
func (r *renderer) throw(err error) {
	var te *TemplateError
	if errors.As(err, &te) {
		panic(r.rt.NewGoError(te))
	}
	obj, nerr := r.rt.New(r.rt.Get("Error"), r.rt.ToValue(err.Error()))
	if nerr != nil {
		panic(r.rt.NewGoError(err))
	}
	panic(obj)
}

// include is EJS's runtime include(path, data): the named file rendered with
// a shallow copy of the caller's locals plus data.
func (r *renderer) include(from string, locals *goja.Object, call goja.FunctionCall) goja.Value {
	path, err := includePath(call.Argument(0).String(), from)
	if err != nil {
		r.throw(err)
	}
	data := r.rt.NewObject()
	copyProps(locals, data)
	if extra, ok := call.Argument(1).(*goja.Object); ok {
		copyProps(extra, data)
	}
	contents, err := readTemplate(path)
	if err != nil {
		r.throw(err)
	}
	out, err := r.render(strings.TrimPrefix(contents, "\uFEFF"), path, data)
	if err != nil {
		r.throw(err)
	}
	return r.rt.ToValue(out)
}

// stringify is mountebank-formatters' stringify(filename, includeFile, data):
// the file (relative to the configfile's directory) rendered, trimmed and
// escaped for use inside a JSON string. The first argument is a legacy
// placeholder; called with one argument, that one is the file.
func (r *renderer) stringify(call goja.FunctionCall) goja.Value {
	name := call.Argument(1)
	if !name.ToBoolean() {
		name = call.Argument(0)
	}
	path := filepath.Join(filepath.Dir(r.root), name.String())
	contents, err := readTemplate(path)
	if err != nil {
		r.throw(err)
	}
	locals, err := r.rootLocals(call.Argument(2))
	if err != nil {
		r.throw(err)
	}
	out, err := r.render(contents, r.root, locals)
	if err != nil {
		r.throw(err)
	}
	quoted := jsonQuote(strings.TrimFunc(out, isJSSpace))
	return r.rt.ToValue(quoted[1 : len(quoted)-1])
}

// generate turns a template into the body of EJS's compiled function.
// Legacy `<% include file %>` directives are inlined at compile time, as
// EJS does, so depth counts them too.
func (r *renderer) generate(text, filename string, depth int) (string, error) {
	if r.depth+depth >= maxIncludeDepth {
		return "", &TemplateError{File: filename, Msg: fmt.Sprintf("includes nested deeper than %d", maxIncludeDepth)}
	}
	text = slurpBefore.ReplaceAllString(text, "<%_")
	text = slurpAfter.ReplaceAllString(text, "_%>")
	tokens := splitTemplate(text)
	g := &generator{line: 1}
	for i, tok := range tokens {
		if strings.HasPrefix(tok, "<%") && !strings.HasPrefix(tok, "<%%") {
			if i+2 >= len(tokens) || (tokens[i+2] != "%>" && tokens[i+2] != "-%>" && tokens[i+2] != "_%>") {
				return "", &TemplateError{File: filename, Line: g.line, Msg: fmt.Sprintf("Could not find matching close tag for %q.", tok)}
			}
		}
		if m := legacyInclude.FindStringSubmatch(tok); m != nil && i > 0 {
			if open := tokens[i-1]; open == "<%" || open == "<%-" || open == "<%_" {
				path, err := includePath(m[1], filename)
				if err != nil {
					return "", &TemplateError{File: filename, Line: g.line, Msg: err.Error()}
				}
				contents, err := readTemplate(path)
				if err != nil {
					return "", &TemplateError{File: filename, Line: g.line, Msg: err.Error()}
				}
				inner, err := r.generate(strings.TrimPrefix(contents, "\uFEFF"), path, depth+1)
				if err != nil {
					return "", err
				}
				g.src.WriteString("    ; (function(){\n      var __line = 1, __filename = " + jsString(path) + ";\n      try {\n")
				g.src.WriteString(inner)
				g.src.WriteString("      } catch (e) { __rethrow(e, __filename, __line) }\n    ; }).call(this)\n")
				continue
			}
		}
		g.scan(tok)
	}
	return g.src.String(), nil
}

// splitTemplate cuts text into literal runs and tag tokens.
func splitTemplate(text string) []string {
	var out []string
	for {
		loc := ejsToken.FindStringIndex(text)
		if loc == nil {
			break
		}
		if loc[0] > 0 {
			out = append(out, text[:loc[0]])
		}
		out = append(out, text[loc[0]:loc[1]])
		text = text[loc[1]:]
	}
	if text != "" {
		out = append(out, text)
	}
	return out
}

type ejsMode int

const (
	modeText ejsMode = iota
	modeEval
	modeEscaped
	modeRaw
	modeComment
	modeLiteral
)

// generator holds the state EJS keeps while scanning one template.
type generator struct {
	src      strings.Builder
	mode     ejsMode
	truncate bool
	line     int
}

func (g *generator) scan(tok string) {
	switch tok {
	case "<%", "<%_":
		g.mode = modeEval
	case "<%=":
		g.mode = modeEscaped
	case "<%-":
		g.mode = modeRaw
	case "<%#":
		g.mode = modeComment
	case "<%%":
		g.mode = modeLiteral
		g.src.WriteString("    ; __append(\"<%\")\n")
	case "%%>":
		g.mode = modeLiteral
		g.src.WriteString("    ; __append(\"%>\")\n")
	case "%>", "-%>", "_%>":
		if g.mode == modeLiteral {
			g.text(tok)
		}
		g.mode = modeText
		g.truncate = tok[0] == '-' || tok[0] == '_'
	default:
		code := tok
		switch g.mode {
		case modeEval, modeEscaped, modeRaw:
			// A trailing // comment would swallow the code EJS appends.
			if strings.LastIndex(code, "//") > strings.LastIndex(code, "\n") {
				code += "\n"
			}
		}
		switch g.mode {
		case modeEval:
			g.src.WriteString("    ; " + code + "\n")
		case modeEscaped:
			g.src.WriteString("    ; __append(escapeFn(" + trailingSemi.ReplaceAllString(code, "$1") + "))\n")
		case modeRaw:
			g.src.WriteString("    ; __append(" + trailingSemi.ReplaceAllString(code, "$1") + ")\n")
		case modeComment:
		case modeText, modeLiteral:
			g.text(code)
		}
	}
	if n := strings.Count(tok, "\n"); n > 0 {
		g.line += n
		g.src.WriteString("    ; __line = " + strconv.Itoa(g.line) + "\n")
	}
}

// text appends literal output, dropping one linebreak after a -%> or _%>.
func (g *generator) text(s string) {
	if g.truncate {
		s = leadingLinebreak.ReplaceAllString(s, "")
		g.truncate = false
	}
	if s == "" {
		return
	}
	g.src.WriteString("    ; __append(" + jsString(s) + ")\n")
}

// includePath resolves an EJS include name against the including file: an
// absolute name is taken from the filesystem root, a relative one from the
// including file's directory and must exist; without an extension ".ejs" is
// added.
func includePath(name, from string) (string, error) {
	var p string
	if absoluteInclude.MatchString(name) {
		p = filepath.Join("/", strings.TrimLeft(name, "/"))
	} else {
		abs, err := filepath.Abs(filepath.Join(filepath.Dir(from), name))
		if err != nil {
			return "", fmt.Errorf("resolve include %q: %w", name, err)
		}
		p = abs
	}
	if nodeExtname(name) == "" {
		p += ".ejs"
	}
	if !absoluteInclude.MatchString(name) {
		if _, err := os.Stat(p); err != nil {
			//lint:ignore ST1005 EJS's wording, shown to users as is
			return "", fmt.Errorf("Could not find the include file %q", name)
		}
	}
	return p, nil
}

// nodeExtname is Node's path.extname: a leading dot does not start an extension.
func nodeExtname(p string) string {
	base := p[strings.LastIndex(p, "/")+1:]
	i := strings.LastIndex(base, ".")
	if i <= 0 || strings.Trim(base, ".") == "" {
		return ""
	}
	return base[i:]
}

// readTemplate reads a file as Node's utf8 decoding would, replacing
// invalid bytes.
func readTemplate(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read template: %w", err)
	}
	return validUTF8(string(b)), nil
}

// validUTF8 replaces each invalid byte with U+FFFD, as Node's decoder does.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string([]rune(s))
}

func copyProps(from, to *goja.Object) {
	for _, k := range from.Keys() {
		// Set only fails on frozen targets, and to is always a fresh object.
		_ = to.Set(k, from.Get(k))
	}
}

// escapeXML is EJS's escape for <%= %>.
func (r *renderer) escapeXML(call goja.FunctionCall) goja.Value {
	v := call.Argument(0)
	if goja.IsUndefined(v) || goja.IsNull(v) {
		return r.rt.ToValue("")
	}
	return r.rt.ToValue(xmlEscaper.Replace(v.String()))
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")

// jsString quotes s as a JavaScript string literal for generated source.
// It is jsonQuote plus U+2028/U+2029, which ES5 forbids inside literals.
func jsString(s string) string {
	q := jsonQuote(s)
	if !strings.ContainsAny(q, "\u2028\u2029") {
		return q
	}
	return strings.NewReplacer("\u2028", `\u2028`, "\u2029", `\u2029`).Replace(q)
}

// jsonQuote quotes s as JavaScript's JSON.stringify does (no HTML escaping).
func jsonQuote(s string) string {
	return string(message.AppendJSONString(nil, s))
}

func isJSSpace(c rune) bool {
	switch c {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return c >= 0x2000 && c <= 0x200a
}
