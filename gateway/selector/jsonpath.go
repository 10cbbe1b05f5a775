package selector

// JSONPath as mb evaluates it: mb 2.9.1 hands every jsonpath selector to
// jsonpath-plus 7.2.0, whose dialect is not RFC 9535's. A selector is split
// into steps the way jsonpath-plus splits it (splitPath), and the steps are
// followed over the document with its rules (trace): any own property of
// a value is a step (a string's "length" and characters too), `*` and `..`
// walk objects in JavaScript's key order, `[(script)]` names the next step
// and `[?(script)]` filters, `~` gives property names and `^` the parent,
// `@string()` and its kin keep values of a type, and a selector that
// throws in jsonpath-plus (a script error, a step that is not a string and
// not a property) selects nothing at all, as mb catches the throw.
//
// Scripts are JavaScript. mb runs them in Node's vm module, which is no
// security boundary; riftgate runs them in a bare goja runtime: the
// standard built-ins only (no require, process or I/O), and bounded in
// time (jsonpathScriptTimeout). That is the one deliberate difference
// (mbdiff "jsonpath-scripts").

import (
	"encoding/json"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/dop251/goja"
)

// JSONPath is a compiled jsonpath selector. It is safe for concurrent use.
type JSONPath struct {
	src   string
	steps []step
	// plain is set when every step is a property name that no rule of
	// jsonpath-plus gives another meaning: Select then walks it directly.
	plain bool
	// scripts are the compiled scripts, by their text.
	scripts map[string]*script
}

// step is one step of a split path: a string, or (from a slice or a
// script) another JavaScript value, whose property key is key.
type step struct {
	key       string
	nonString bool
	value     any // the value a non-string step is, pushed on the path
}

// name is what the step pushes on the path: the value it is.
func (s step) name() any {
	if s.nonString {
		return s.value
	}
	return s.key
}

type script struct {
	prog *goja.Program
	err  error // a script that does not compile throws when reached
}

// jsonpathScriptTimeout bounds the scripts of one selection.
const jsonpathScriptTimeout = time.Second

// CompileJSONPath compiles expr. Like jsonpath-plus, it accepts any text:
// what jsonpath-plus cannot follow selects nothing when evaluated.
func CompileJSONPath(expr string) (*JSONPath, error) {
	parts := splitPath(expr)
	if len(parts) > 1 && parts[0] == "$" {
		parts = parts[1:]
	}
	p := &JSONPath{src: expr, plain: true}
	for _, s := range parts {
		p.steps = append(p.steps, step{key: s})
		if !plainStep(s) {
			p.plain = false
		}
		var code string
		switch {
		case strings.HasPrefix(s, "?("):
			code = filterCode(s)
		case strings.HasPrefix(s, "("):
			code = s
		default:
			continue
		}
		if p.scripts == nil {
			p.scripts = map[string]*script{}
		}
		if _, ok := p.scripts[code]; !ok {
			prog, err := goja.Compile("jsonpath", scriptSource(code), false)
			p.scripts[code] = &script{prog: prog, err: err}
		}
	}
	return p, nil
}

// plainStep reports whether s can only be a property name.
func plainStep(s string) bool {
	switch s {
	case "*", "..", "^", "~", "$", "":
		return false
	}
	if sliceStep.MatchString(s) || strings.ContainsAny(s, ",(`@") {
		return false
	}
	return true
}

// String returns the selector as written.
func (p *JSONPath) String() string { return p.src }

var (
	typeSelector = regexp.MustCompile(`@(?:null|boolean|number|string|integer|undefined|nonFinite|scalar|array|object|function|other)\(\)`)
	scriptStep   = regexp.MustCompile(`[\['](\??\(.*?\))[\]']`)
	quotedName   = regexp.MustCompile(`\[['"]([^'\]]*)['"]\]`)
	parentSteps  = regexp.MustCompile(`;?(\^+);?`)
	descendants  = regexp.MustCompile(`;;;|;;`)
	trailing     = regexp.MustCompile(`;$|'?\]|'$`)
	scriptIndex  = regexp.MustCompile(`#(\d+)`)
	sliceStep    = regexp.MustCompile(`^(-?\d*):(-?\d*):?(\d*)$`)
)

// splitPath splits expr into steps as jsonpath-plus's toPathArray does.
func splitPath(expr string) []string {
	var subx []string
	s := typeSelector.ReplaceAllString(expr, ";$0;")
	s = scriptStep.ReplaceAllStringFunc(s, func(m string) string {
		subx = append(subx, scriptStep.FindStringSubmatch(m)[1])
		return "[#" + strconv.Itoa(len(subx)-1) + "]"
	})
	s = quotedName.ReplaceAllStringFunc(s, func(m string) string {
		prop := quotedName.FindStringSubmatch(m)[1]
		prop = strings.ReplaceAll(strings.ReplaceAll(prop, ".", "%@%"), "~", "%%@@%%")
		return "['" + prop + "']"
	})
	s = strings.ReplaceAll(s, "~", ";~;")
	s = splitBoundaries(s)
	s = strings.ReplaceAll(s, "%@%", ".")
	s = strings.ReplaceAll(s, "%%@@%%", "~")
	s = parentSteps.ReplaceAllStringFunc(s, func(m string) string {
		ups := parentSteps.FindStringSubmatch(m)[1]
		return ";" + strings.Join(strings.Split(ups, ""), ";") + ";"
	})
	s = descendants.ReplaceAllString(s, ";..;")
	s = trailing.ReplaceAllString(s, "")
	parts := strings.Split(s, ";")
	for i, part := range parts {
		if m := scriptIndex.FindStringSubmatch(part); m != nil {
			n, err := strconv.Atoi(m[1])
			if err == nil && n < len(subx) {
				parts[i] = subx[n]
			} else {
				parts[i] = "undefined" // subx[n] is undefined, named as a key
			}
		}
	}
	return parts
}

// splitBoundaries is toPathArray's
// .replace(/['"]?\.['"]?(?![^[]*\])|\[['"]?/g, ';'): a dot outside
// brackets (with the quotes around it) or an opening bracket (with its
// quote) becomes a step boundary.
func splitBoundaries(s string) string {
	isQuote := func(i int) bool { return i < len(s) && (s[i] == '\'' || s[i] == '"') }
	// outside reports the lookahead (?![^[]*\]) at i.
	outside := func(i int) bool {
		j := strings.IndexAny(s[i:], "[]")
		return j < 0 || s[i+j] == '['
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		// The first alternative, with or without its leading quote.
		matched := false
		for _, lead := range []int{1, 0} {
			if lead == 1 && !isQuote(i) {
				continue
			}
			dot := i + lead
			if dot >= len(s) || s[dot] != '.' {
				continue
			}
			end := dot + 1
			if isQuote(end) && outside(end+1) {
				end++
			} else if !outside(end) {
				continue
			}
			b.WriteByte(';')
			i, matched = end, true
			break
		}
		if matched {
			continue
		}
		if s[i] == '[' {
			i++
			if isQuote(i) {
				i++
			}
			b.WriteByte(';')
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// filterCode is a filter step's script: ?(code) without its marks.
func filterCode(s string) string {
	if strings.HasPrefix(s, "?(") && strings.HasSuffix(s, ")") {
		return s[2 : len(s)-1]
	}
	return s
}

var scriptVars = regexp.MustCompile(`@([.\s)\[])`)

// scriptSource rewrites jsonpath-plus's @ names into the variables the
// evaluation sets.
func scriptSource(code string) string {
	s := strings.ReplaceAll(code, "@parentProperty", "_$_parentProperty")
	s = strings.ReplaceAll(s, "@parent", "_$_parent")
	s = strings.ReplaceAll(s, "@property", "_$_property")
	s = strings.ReplaceAll(s, "@root", "_$_root")
	s = scriptVars.ReplaceAllString(s, "_$$_v$1")
	if strings.Contains(code, "@path") {
		s = strings.ReplaceAll(s, "@path", "_$_path")
	}
	return s
}

// Select returns the values expr selects from doc, a value decoded by
// encoding/json or ParseJSON (numbers as json.Number). It returns nil when
// nothing matches. Members of an object are walked in JavaScript's order
// of their keys, their document order unknown here: use SelectText where
// order matters.
func (p *JSONPath) Select(doc any) []any { return p.selectFrom(doc, nil) }

// SelectText parses text as JSON and selects from it, in mb's order; text
// that is not JSON selects nothing, as in mb.
func (p *JSONPath) SelectText(text string) []any {
	if p.plain {
		doc, ok := ParseJSON(text)
		if !ok {
			return nil
		}
		return p.selectFrom(doc, nil)
	}
	doc, order, ok := parseOrdered(text)
	if !ok {
		return nil
	}
	return p.selectFrom(doc, order)
}

func (p *JSONPath) selectFrom(doc any, order keyOrder) []any {
	if !jsTruthy(doc) {
		return nil // jsonpath-plus evaluates nothing on a falsy document
	}
	if p.plain {
		v := doc
		for _, s := range p.steps {
			var ok bool
			if v, ok = ownProperty(v, s.key); !ok {
				return nil
			}
		}
		return []any{v}
	}
	ev := &evaluation{p: p, root: doc, order: order}
	defer ev.close()
	items, single, err := ev.trace(p.steps, doc, &pathNode{key: "$"}, nil, nil, false)
	if err != nil || single {
		return nil // jsonpath-plus threw (a lone result object cannot be filtered)
	}
	var out []any
	for _, it := range items {
		if !it.parentSel {
			out = append(out, it.value)
		}
	}
	return out
}

// pathNode is a path from the root, its last step last.
type pathNode struct {
	up  *pathNode
	key any // "$", a string, or an int index
}

func (n *pathNode) push(key any) *pathNode { return &pathNode{up: n, key: key} }

// pathString is jsonpath-plus's toPathString.
func (n *pathNode) pathString() string {
	var keys []string
	for ; n != nil && n.up != nil; n = n.up {
		keys = append(keys, keyString(n.key))
	}
	slices.Reverse(keys)
	var b strings.Builder
	b.WriteString("$")
	for _, k := range keys {
		if k == "~" || k == "^" || (strings.HasPrefix(k, "@") && strings.HasSuffix(k, "()")) {
			continue
		}
		if k != "" && strings.Trim(k, "0123456789*") == "" {
			b.WriteString("[" + k + "]")
		} else {
			b.WriteString("['" + k + "']")
		}
	}
	return b.String()
}

func keyString(k any) string {
	switch k := k.(type) {
	case int:
		return strconv.Itoa(k)
	case string:
		return k
	case nil:
		return "null"
	case float64:
		return formatFloat(k)
	case bool:
		return strconv.FormatBool(k)
	}
	return "undefined"
}

// item is one result of a trace: a value, or a parent selection still to
// be followed from the frame above.
type item struct {
	value     any
	parentSel bool
	path      *pathNode
	rest      []step
}

type errThrow struct{}

func (errThrow) Error() string { return "jsonpath-plus throws" }

// evaluation is one selection: its document and, once a script runs, a
// runtime.
type evaluation struct {
	p     *JSONPath
	root  any
	order keyOrder
	rt    *goja.Runtime
	timer *time.Timer
	conv  map[any]goja.Value
}

func (ev *evaluation) close() {
	if ev.rt == nil {
		return
	}
	if !ev.timer.Stop() {
		// The timeout fired, or is firing: the runtime may yet be
		// interrupted, so it is not reused.
		return
	}
	ev.rt.ClearInterrupt()
	for _, k := range []string{"_$_v", "_$_parent", "_$_parentProperty", "_$_property", "_$_root", "_$_path"} {
		_ = ev.rt.GlobalObject().Delete(k)
	}
	runtimes.Put(ev.rt)
}

// runtimes are bare goja runtimes for scripts.
var runtimes = sync.Pool{New: func() any {
	rt := goja.New()
	rt.SetMaxCallStackSize(256)
	return rt
}}

// trace follows steps from val, as jsonpath-plus's _trace; single reports
// that it returned one result object rather than a list.
func (ev *evaluation) trace(steps []step, val any, path *pathNode, parent any, parentProp any, literal bool) (items []item, single bool, err error) {
	if len(steps) == 0 {
		return []item{{value: val, path: path}}, true, nil
	}
	loc, rest := steps[0], steps[1:]
	var out []item
	add := func(its []item, _ bool, err error) error {
		out = append(out, its...)
		return err
	}
	if loc.nonString || literal {
		if v, ok := ownProperty(val, loc.key); ok && jsTruthy(val) {
			if err := add(ev.trace(rest, v, path.push(loc.name()), val, loc.name(), false)); err != nil {
				return nil, false, err
			}
			return ev.parents(out, val, parent, parentProp)
		}
	}
	if loc.nonString {
		return nil, false, errThrow{} // loc.indexOf is not a function
	}
	s := loc.key
	switch {
	case s == "*":
		for _, m := range ev.keys(val) {
			v, _ := ownProperty(val, keyString(m))
			if err := add(ev.trace(rest, v, path.push(m), val, m, true)); err != nil {
				return nil, false, err
			}
		}
	case s == "..":
		if err := add(ev.trace(rest, val, path, parent, parentProp, false)); err != nil {
			return nil, false, err
		}
		for _, m := range ev.keys(val) {
			v, _ := ownProperty(val, keyString(m))
			if jsTypeof(v) == "object" {
				if err := add(ev.trace(steps, v, path.push(m), val, m, false)); err != nil {
					return nil, false, err
				}
			}
		}
	case s == "^":
		return []item{{parentSel: true, path: path.up, rest: rest}}, true, nil
	case s == "~":
		name := parentProp
		switch k := name.(type) {
		case int:
			name = json.Number(strconv.Itoa(k))
		case undefinedKey:
			name = nil // JSON.stringify shows undefined in a list as null
		}
		return []item{{value: name, path: path.push("~")}}, true, nil
	case s == "$":
		if err := add(ev.trace(rest, val, path, nil, nil, false)); err != nil {
			return nil, false, err
		}
	case sliceStep.MatchString(s):
		if err := ev.slice(s, rest, val, path, parent, parentProp, &out); err != nil {
			return nil, false, err
		}
	case strings.HasPrefix(s, "?("):
		code := filterCode(s)
		for _, m := range ev.keys(val) {
			v, _ := ownProperty(val, keyString(m))
			ok, err := ev.eval(code, v, m, path, parent, parentProp)
			if err != nil {
				return nil, false, err
			}
			if ok.ToBoolean() {
				if err := add(ev.trace(rest, v, path.push(m), val, m, false)); err != nil {
					return nil, false, err
				}
			}
		}
	case strings.HasPrefix(s, "("):
		var last any = "$"
		var up *pathNode
		if path != nil {
			last, up = path.key, path.up
		}
		r, err := ev.eval(s, val, last, up, parent, parentProp)
		if err != nil {
			return nil, false, err
		}
		next := stepOf(r)
		if err := add(ev.trace(append([]step{next}, rest...), val, path, parent, parentProp, false)); err != nil {
			return nil, false, err
		}
	case strings.HasPrefix(s, "@"):
		keep, err := typeMatches(s, val)
		if err != nil {
			return nil, false, err
		}
		if keep {
			return []item{{value: val, path: path}}, true, nil
		}
	case strings.HasPrefix(s, "`") && jsTruthy(val) && hasOwn(val, s[1:]):
		v, _ := ownProperty(val, s[1:])
		if err := add(ev.trace(rest, v, path.push(s[1:]), val, s[1:], true)); err != nil {
			return nil, false, err
		}
	case strings.Contains(s, ","):
		for _, part := range strings.Split(s, ",") {
			if err := add(ev.trace(append([]step{{key: part}}, rest...), val, path, parent, parentProp, false)); err != nil {
				return nil, false, err
			}
		}
	case !literal && jsTruthy(val) && hasOwn(val, s):
		v, _ := ownProperty(val, s)
		if err := add(ev.trace(rest, v, path.push(s), val, s, true)); err != nil {
			return nil, false, err
		}
	}
	return ev.parents(out, val, parent, parentProp)
}

// parents follows, from val, the parent selections among out.
func (ev *evaluation) parents(out []item, val, parent, parentProp any) ([]item, bool, error) {
	for t := 0; t < len(out); t++ {
		if !out[t].parentSel {
			continue
		}
		sel := out[t]
		tmp, single, err := ev.trace(sel.rest, val, sel.path, parent, parentProp, false)
		if err != nil {
			return nil, false, err
		}
		if single {
			out[t] = tmp[0]
			continue
		}
		if len(tmp) == 0 {
			// ret[t] = tmp[0] is undefined, which the top level drops.
			out = slices.Delete(out, t, t+1)
			t--
			continue
		}
		out = slices.Replace(out, t, t+1, tmp...)
		t += len(tmp) - 1
	}
	return out, false, nil
}

// slice follows a slice step, as jsonpath-plus's _slice.
func (ev *evaluation) slice(loc string, rest []step, val any, path *pathNode, parent, parentProp any, out *[]item) error {
	a, ok := val.([]any)
	if !ok {
		return nil
	}
	n := len(a)
	parts := strings.Split(loc, ":")
	at := func(i, dflt int) int {
		if i >= len(parts) || parts[i] == "" {
			return dflt
		}
		v, ok := parseIntJS(parts[i])
		if !ok || v == 0 {
			return dflt
		}
		return v
	}
	stepN, start, end := at(2, 1), at(0, 0), at(1, n)
	if start < 0 {
		start = max(0, start+n)
	} else {
		start = min(n, start)
	}
	if end < 0 {
		end = max(0, end+n)
	} else {
		end = min(n, end)
	}
	for i := start; i < end; i += stepN {
		its, _, err := ev.trace(append([]step{{key: strconv.Itoa(i), nonString: true, value: i}}, rest...), val, path, parent, parentProp, false)
		if err != nil {
			return err
		}
		*out = append(*out, its...)
	}
	return nil
}

// parseIntJS is Number.parseInt of a slice part (digits with an optional
// minus sign); ok is false where it is NaN.
func parseIntJS(s string) (int, bool) {
	v, err := strconv.Atoi(s)
	if err != nil {
		if s == "-" {
			return 0, false
		}
		return math.MaxInt32, true // more digits than any array has
	}
	return v, true
}

// stepOf is the step a script's value names: a string as it is, any
// other value by its property key.
func stepOf(v goja.Value) step {
	if v == nil || goja.IsUndefined(v) {
		return step{key: "undefined", nonString: true, value: undefinedKey{}}
	}
	switch x := v.Export().(type) {
	case string:
		return step{key: x}
	case int64:
		return step{key: v.String(), nonString: true, value: int(x)}
	case float64, bool, nil:
		return step{key: v.String(), nonString: true, value: x}
	}
	return step{key: v.String(), nonString: true, value: v.String()}
}

// undefinedKey is a script's undefined used as a step.
type undefinedKey struct{}

// typeMatches is a type selector (@string() and its kin) on val.
func typeMatches(loc string, val any) (bool, error) {
	name := ""
	if len(loc) >= 3 {
		name = loc[1 : len(loc)-2]
	}
	switch name {
	case "scalar":
		return !jsTruthy(val) || jsTypeof(val) != "object", nil
	case "boolean", "string", "undefined", "function":
		return jsTypeof(val) == name, nil
	case "integer":
		f, ok := jsNumber(val)
		return ok && !math.IsInf(f, 0) && !math.IsNaN(f) && f == math.Trunc(f), nil
	case "number":
		f, ok := jsNumber(val)
		return ok && !math.IsInf(f, 0) && !math.IsNaN(f), nil
	case "nonFinite":
		f, ok := jsNumber(val)
		return ok && (math.IsInf(f, 0) || math.IsNaN(f)), nil
	case "object":
		return jsTruthy(val) && jsTypeof(val) == "object", nil
	case "array":
		_, ok := val.([]any)
		return ok, nil
	case "null":
		return val == nil, nil
	}
	// @other() needs a callback mb does not give; anything else is
	// jsonpath-plus's TypeError.
	return false, errThrow{}
}

// eval runs a script with jsonpath-plus's variables: v the value at hand,
// name its property, path the path of the value the step is on.
func (ev *evaluation) eval(code string, v, name any, path *pathNode, parent, parentProp any) (goja.Value, error) {
	sc := ev.p.scripts[code]
	if sc == nil || sc.err != nil {
		return nil, errThrow{}
	}
	if ev.rt == nil {
		ev.rt = runtimes.Get().(*goja.Runtime)
		rt := ev.rt
		ev.timer = time.AfterFunc(jsonpathScriptTimeout, func() { rt.Interrupt("jsonpath script timeout") })
		ev.conv = map[any]goja.Value{}
	}
	rt := ev.rt
	set := func(k string, x goja.Value) { _ = rt.Set(k, x) }
	set("_$_parentProperty", ev.js(parentProp))
	set("_$_parent", ev.js(parent))
	set("_$_property", ev.js(name))
	set("_$_root", ev.js(ev.root))
	set("_$_v", ev.js(v))
	if strings.Contains(code, "@path") {
		p := path
		if p == nil {
			p = &pathNode{key: "$"}
		}
		set("_$_path", rt.ToValue(p.push(name).pathString()))
	}
	r, err := rt.RunProgram(sc.prog)
	if err != nil {
		return nil, errThrow{}
	}
	return r, nil
}

// js converts a document value into a JavaScript one, each object and
// array once per evaluation, so that scripts may compare identities.
func (ev *evaluation) js(v any) goja.Value {
	rt := ev.rt
	switch x := v.(type) {
	case nil:
		return goja.Null()
	case bool:
		return rt.ToValue(x)
	case string:
		return rt.ToValue(x)
	case int:
		return rt.ToValue(x)
	case float64:
		return rt.ToValue(x)
	case json.Number:
		f, _ := jsNumber(x)
		return rt.ToValue(f)
	case map[string]any:
		id := mapID(x)
		if c, ok := ev.conv[id]; ok {
			return c
		}
		o := rt.NewObject()
		ev.conv[id] = o
		for _, k := range ev.keys(x) {
			_ = o.Set(k.(string), ev.js(x[k.(string)]))
		}
		return o
	case []any:
		var id any
		if len(x) > 0 {
			id = &x[0]
		}
		if c, ok := ev.conv[id]; ok && id != nil {
			return c
		}
		vals := make([]any, len(x))
		for i, e := range x {
			vals[i] = ev.js(e)
		}
		a := rt.NewArray(vals...)
		if id != nil {
			ev.conv[id] = a
		}
		return a
	}
	return goja.Undefined()
}

// keys are what jsonpath-plus's _walk visits: an array's indices, an
// object's keys in JavaScript's order (array-index keys ascending, then
// the rest in document order).
func (ev *evaluation) keys(val any) []any {
	switch x := val.(type) {
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = i
		}
		return out
	case map[string]any:
		var names []string
		if ev.order != nil {
			names = ev.order[mapID(x)]
		}
		if len(names) != len(x) {
			names = slices.Sorted(func(yield func(string) bool) {
				for k := range x {
					if !yield(k) {
						return
					}
				}
			})
		}
		var idx []string
		var rest []string
		for _, k := range names {
			if _, ok := arrayIndex(k); ok {
				idx = append(idx, k)
			} else {
				rest = append(rest, k)
			}
		}
		slices.SortFunc(idx, func(a, b string) int {
			x, _ := arrayIndex(a)
			y, _ := arrayIndex(b)
			return x - y
		})
		out := make([]any, 0, len(names))
		for _, k := range idx {
			out = append(out, k)
		}
		for _, k := range rest {
			out = append(out, k)
		}
		return out
	}
	return nil
}

// arrayIndex reports whether k is a canonical array index, as JavaScript
// orders such keys first.
func arrayIndex(k string) (int, bool) {
	if k == "" || len(k) > 10 || (len(k) > 1 && k[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(k, 10, 32)
	if err != nil || n >= math.MaxUint32 {
		return 0, false
	}
	return int(n), true
}

// hasOwn is Object.prototype.hasOwnProperty.call(val, key).
func hasOwn(val any, key string) bool {
	_, ok := ownProperty(val, key)
	return ok
}

// ownProperty returns val[key] when key is an own property of val: an
// object's member, an array's element or length, a string's character
// (a UTF-16 unit) or length.
func ownProperty(val any, key string) (any, bool) {
	switch x := val.(type) {
	case map[string]any:
		v, ok := x[key]
		return v, ok
	case []any:
		if key == "length" {
			return json.Number(strconv.Itoa(len(x))), true
		}
		if i, ok := arrayIndex(key); ok && i < len(x) {
			return x[i], true
		}
	case string:
		units := utf16.Encode([]rune(x))
		if key == "length" {
			return json.Number(strconv.Itoa(len(units))), true
		}
		if i, ok := arrayIndex(key); ok && i < len(units) {
			return string(utf16.Decode(units[i : i+1])), true
		}
	}
	return nil, false
}

// jsTruthy is Boolean(v) for a document value.
func jsTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case json.Number, float64, int:
		f, _ := jsNumber(x)
		return f != 0 && !math.IsNaN(f)
	}
	return true
}

// jsTypeof is typeof v for a document value.
func jsTypeof(v any) string {
	switch v.(type) {
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number, float64, int:
		return "number"
	}
	return "object"
}

func jsNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			// Out of float64's range: JSON.parse makes it Infinity.
			if strings.HasPrefix(string(x), "-") {
				return math.Inf(-1), true
			}
			return math.Inf(1), true
		}
		return f, true
	case float64:
		return x, true
	case int:
		return float64(x), true
	}
	return 0, false
}
