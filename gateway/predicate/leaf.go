package predicate

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/selector"
)

type opKind int

const (
	opEquals opKind = iota
	opDeepEquals
	opContains
	opStartsWith
	opEndsWith
	opMatches
	opExists
)

var opKinds = map[string]opKind{
	"equals": opEquals, "deepEquals": opDeepEquals, "contains": opContains,
	"startsWith": opStartsWith, "endsWith": opEndsWith, "matches": opMatches,
	"exists": opExists,
}

// leaf is one compiled comparison operator with its parameters.
type leaf struct {
	op opKind
	// lowerValues: actual and expected strings are lowered (caseSensitive
	// false; never for matches, whose regexes get the i flag instead).
	lowerValues bool
	lowerKeys   bool
	except      *regexp.Regexp
	jsonpath    *selector.JSONPath
	xpath       *selector.XPath
	// existsCfg is mb's `predicateConfig.exists` test: a truthy "exists" key
	// makes any array value satisfy a truthy expectation.
	existsCfg bool
	expected  any
	// regexes holds every matches pattern, compiled with mb's flags.
	regexes map[string]*regex
	// deep holds deepEquals' expected fields, stringified once, and
	// deepKeys their names, in the same order.
	deep     []string
	deepKeys []string
	paths    []PathKey // PathKeys'
	// fast is set when the allocation-free path applies.
	fast []fastField
	// fields are the protocol's request fields; base64 is a binary tcp
	// imposter's decoding of every string before it is compared.
	fields *schema
	base64 bool
	// views are the parsed body this leaf reads (views.go).
	views bodyViews
	// parseKey and parseStr are key and str, for the JSON parser, when
	// they change anything (nil otherwise); made once, as a method value
	// made per parse would be allocated per parse.
	parseKey, parseStr func(string) string
}

func badData(msg string, raw json.RawMessage) error {
	return mberr.New(mberr.BadData, msg).WithSource(sourceOf(raw))
}

func compileLeaf(opName string, obj map[string]json.RawMessage, raw json.RawMessage, opts Options) (Predicate, error) {
	l := &leaf{op: opKinds[opName], fields: schemaFor(opts.Protocol, opts.Custom), base64: opts.Binary}
	params, err := decodeParams(obj)
	if err != nil {
		return nil, badData(err.Error(), raw)
	}
	cs := truthy(params["caseSensitive"])
	kcs, kcsSet := params["keyCaseSensitive"]
	if l.op == opMatches {
		// mb matches with caseSensitive forced on (regexes get the i flag
		// instead) and keyCaseSensitive set to the original setting.
		l.lowerKeys = !cs
		kcs, kcsSet = cs, true
	} else {
		l.lowerValues = !cs
		l.lowerKeys = !cs || kcs == false
	}
	l.existsCfg = truthy(params["exists"])
	if ex := params["except"]; truthy(ex) {
		re, err := selector.CompileRegex(jsString(ex), !cs && l.op != opMatches, false)
		if err != nil {
			return nil, badData(fmt.Sprintf("invalid regular expression in except: %v", err), raw)
		}
		l.except = re
	}
	if err := l.compileSelectors(params, cs, kcs, kcsSet, raw); err != nil {
		return nil, err
	}
	if msg := l.binaryRefusal(); l.base64 && msg != "" {
		return nil, badData(msg, raw)
	}
	exp, err := message.DecodeGeneric(obj[opName])
	if err != nil {
		return nil, badData("malformed predicate value", raw)
	}
	switch l.op {
	case opDeepEquals:
		l.expected = l.normalize(forceStrings(exp), true, true)
		l.deepKeys = keysOf(l.expected)
		l.deep = make([]string, len(l.deepKeys))
		for i, k := range l.deepKeys {
			l.deep[i], _ = stableStringify(getProp(l.expected, k))
		}
	case opMatches:
		l.expected = l.normalizeKeysOnly(exp)
		l.regexes = map[string]*regex{}
		if err := collectRegexes(l.expected, !cs, l.regexes); err != nil {
			return nil, badData(err.Error(), raw)
		}
	default:
		l.expected = l.normalize(exp, true, true)
	}
	if !l.base64 {
		l.fast = l.compileFast()
	}
	l.setParse()
	l.views = viewsFor(l)
	l.paths = l.pathKeys()
	if l.op == opDeepEquals {
		// matchDeep reads deep and deepKeys only: a recorded stub's
		// predicate need not hold the map too.
		l.expected = nil
	} else {
		l.expected = compileObjects(l.expected)
	}
	return l, nil
}

func decodeParams(obj map[string]json.RawMessage) (map[string]any, error) {
	params := map[string]any{}
	for _, k := range []string{"caseSensitive", "keyCaseSensitive", "except", "exists", "jsonpath", "xpath"} {
		if raw, ok := obj[k]; ok {
			v, err := message.DecodeGeneric(raw)
			if err != nil {
				return nil, fmt.Errorf("malformed %s", k)
			}
			params[k] = v
		}
	}
	return params, nil
}

func (l *leaf) compileSelectors(params map[string]any, cs bool, kcs any, kcsSet bool, raw json.RawMessage) error {
	if jp, ok := params["jsonpath"]; ok && truthy(jp) {
		m, _ := jp.(map[string]any)
		sel, ok := m["selector"].(string)
		if !ok {
			return badData("jsonpath predicate parameter needs a selector string", raw)
		}
		// mb lowers the jsonpath selector unless keyCaseSensitive (which
		// defaults to caseSensitive) is on.
		kcsEffective := kcs
		if !kcsSet {
			kcsEffective = cs
		}
		if !truthy(kcsEffective) {
			sel = lower(sel)
		}
		p, err := selector.CompileJSONPath(sel)
		if err != nil {
			return badData("malformed jsonpath predicate selector", raw)
		}
		l.jsonpath = p
		return nil
	}
	if xp, ok := params["xpath"]; ok && truthy(xp) {
		m, _ := xp.(map[string]any)
		sel, ok := m["selector"].(string)
		if !ok {
			return badData("xpath predicate parameter needs a selector string", raw)
		}
		ns := map[string]string{}
		if nsm, ok := m["ns"].(map[string]any); ok {
			for k, v := range nsm {
				ns[k] = jsString(v)
			}
		}
		// mb lowers the xpath selector and namespace URIs unless
		// caseSensitive; matches always counts as case sensitive here.
		if !cs && l.op != opMatches {
			sel = lower(sel)
			for k, v := range ns {
				ns[k] = lower(v)
			}
		}
		p, err := selector.CompileXPath(sel, ns)
		if err != nil {
			return mberr.New(mberr.BadData, "malformed xpath predicate selector").WithSource(sel)
		}
		l.xpath = p
	}
	return nil
}

// str applies mb's value transforms to one string: lower case, then the
// except pattern removed.
func (l *leaf) str(s string) string {
	if l.base64 {
		s = message.DecodeUTF8(message.DecodeBase64(s))
	}
	if l.lowerValues {
		s = lower(s)
	}
	if l.except != nil {
		s = l.except.ReplaceAllString(s, "")
	}
	return s
}

func (l *leaf) key(k string) string {
	if l.lowerKeys {
		return lower(k)
	}
	return k
}

// normalize is mb's transformAll: keys and strings transformed, arrays
// sorted when sortArrays. withExcept false skips except (mb's matches).
func (l *leaf) normalize(v any, withExcept, sortArrays bool) any {
	switch v := v.(type) {
	case string:
		if !withExcept {
			if l.lowerValues {
				return lower(v)
			}
			return v
		}
		return l.str(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = l.normalize(e, withExcept, sortArrays)
		}
		if sortArrays {
			sortValues(out)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for _, k := range keysOf(v) {
			out[l.key(k)] = l.normalize(v[k], withExcept, sortArrays)
		}
		return out
	}
	return v
}

// normalizeKeysOnly is the expected side of matches: keys transformed,
// patterns untouched, arrays sorted.
func (l *leaf) normalizeKeysOnly(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = l.normalizeKeysOnly(e)
		}
		sortValues(out)
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for _, k := range keysOf(v) {
			out[l.key(k)] = l.normalizeKeysOnly(v[k])
		}
		return out
	}
	return v
}

func collectRegexes(v any, ignoreCase bool, into map[string]*regex) error {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			if err := collectRegexes(e, ignoreCase, into); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		for _, e := range v {
			if err := collectRegexes(e, ignoreCase, into); err != nil {
				return err
			}
		}
		return nil
	}
	src := jsString(v)
	if _, ok := into[src]; ok {
		return nil
	}
	re, err := selector.CompileRegex(src, ignoreCase, false)
	if err != nil {
		return fmt.Errorf("invalid regular expression: %w", err)
	}
	into[src] = newRegex(re)
	return nil
}

// Match reports whether r satisfies the predicate.
func (l *leaf) Match(r *message.Request) bool {
	if l.fast != nil {
		return l.matchFast(r)
	}
	if l.op == opDeepEquals {
		return l.matchDeep(r)
	}
	return l.matchSlow(r)
}

// The request's top-level fields as mb's simplified request names them,
// and lowered, as they are when keys are not case sensitive.
var (
	requestFields      = []string{"requestFrom", "method", "path", "query", "headers", "body", "ip", "form"}
	requestFieldsLower = []string{"requestfrom", "method", "path", "query", "headers", "body", "ip", "form"}
)

// fieldOf resolves an expected key to a request field name, or "".
func (l *leaf) fieldOf(key string) string {
	if l.fields == customSchema {
		return key
	}
	names := l.fields.names
	if l.lowerKeys {
		names = l.fields.lower
	}
	for i, f := range names {
		if f == key {
			return l.fields.fields[i]
		}
	}
	return ""
}

// actualField returns request field f normalized as mb normalizes the
// request: strings through case, except and the selector; multi-valued
// maps as objects whose repeated names hold sorted arrays.
func (l *leaf) actualField(r *message.Request, f string) any {
	if r.Kind == message.Custom {
		return l.customField(r, f)
	}
	switch f {
	case "requestFrom":
		return l.top(r.RequestFrom())
	case "method":
		return l.top(r.Method)
	case "path":
		return l.top(r.Path)
	case "body":
		return l.topBody(r)
	case "ip":
		return l.top(r.IP())
	case "query":
		return l.multi(r.Query, false)
	case "headers":
		return l.multi(r.Headers, true)
	case "form":
		if len(r.Body) == 0 || !r.IsForm() {
			return undefined
		}
		return l.multi(r.Form(), false)
	case "type":
		return l.top(r.MessageType)
	case "connection":
		return l.top(r.Connection)
	}
	return l.mailField(r, f)
}

// multi builds mb's object for a query, headers or form: one key per
// exact name (in order of first appearance) holding its value or its
// values; when keys are lowered, names that differ only in case collide
// and the one that appeared last wins, as in mb's key transform. headers
// selects mb's header quirk (see skipEmpty).
func (l *leaf) multi(kvs []message.KV, headers bool) any {
	out := map[string]any{}
	for i, kv := range kvs {
		if !firstOf(kvs, i) {
			continue
		}
		start := i
		if headers {
			start = skipEmpty(kvs, kv.Name)
		}
		var vals []any
		for _, o := range kvs[start:] {
			if o.Name == kv.Name {
				vals = append(vals, l.top(o.Value))
			}
		}
		if len(vals) == 1 {
			out[l.key(kv.Name)] = vals[0]
			continue
		}
		sortValues(vals)
		out[l.key(kv.Name)] = vals
	}
	return out
}

// firstOf reports whether kvs[i] is the first appearance of its exact name.
func firstOf(kvs []message.KV, i int) bool {
	for _, o := range kvs[:i] {
		if o.Name == kvs[i].Name {
			return false
		}
	}
	return true
}

// top transforms one of the request's own strings: case, except, then the
// selector, whose result is mb's single value or sorted array.
func (l *leaf) top(s string) any {
	s = l.str(s)
	switch {
	case l.jsonpath != nil:
		return l.selectJSON(l.tryJSON(s))
	case l.xpath != nil:
		return shape(l.xpath.Select(s))
	}
	return s
}

// topBody is top(body), with the body parsed (as JSON or XML) once per
// request for every leaf that transforms it alike.
func (l *leaf) topBody(r *message.Request) any {
	switch {
	case l.jsonpath != nil:
		return r.View(l.views.json).(*jsonDoc).eval(l)
	case l.xpath != nil:
		return r.View(l.views.xml).(*xmlDoc).eval(l.xpath)
	}
	return l.top(b2s(r.Body))
}

// selectJSON applies the jsonpath selector to a tryJSON result, which it
// does not change (requests share it).
func (l *leaf) selectJSON(doc any) any {
	if l.op == opDeepEquals {
		doc = forceStrings(doc)
	}
	if t, ok := doc.(string); ok {
		var parsed bool
		if doc, parsed = selector.ParseJSON(t); !parsed {
			return undefined
		}
	}
	return shape(l.jsonpath.Select(doc))
}

func shape(vals []any) any {
	switch len(vals) {
	case 0:
		return undefined
	case 1:
		return vals[0]
	}
	sortValues(vals)
	return vals
}

// tryJSON is mb's tryJSON: s parsed as JSON with keys and strings
// transformed (arrays kept in order), or s itself when it is not JSON.
func (l *leaf) tryJSON(s string) any { return l.tryJSONInto(s, nil) }

// tryJSONInto is tryJSON with the objects and arrays made in the room it lends.
func (l *leaf) tryJSONInto(s string, room *selector.Room) any {
	v, ok := selector.ParseJSONInto(s, l.parseKey, l.parseStr, room)
	if !ok {
		return s
	}
	return v
}

// setParse sets parseKey and parseStr from the leaf's settings.
func (l *leaf) setParse() {
	l.parseKey, l.parseStr = nil, nil
	if l.lowerKeys {
		l.parseKey = lower // what key does then; a method value would be an object per leaf
	}
	switch {
	case l.except != nil || l.base64 && l.lowerValues:
		l.parseStr = l.str
	case l.lowerValues:
		l.parseStr = lower // what str does then
	}
}

// matchSlow is mb's predicateSatisfied over the normalized request, with
// the request's fields normalized only as the expectation reaches them.
func (l *leaf) matchSlow(r *message.Request) bool {
	return each(l.expected, func(k string, ef any) bool {
		af := undefined
		switch f := l.fieldOf(k); {
		case f == "body" && r.Kind != message.Custom && isObject(ef) && l.jsonpath == nil && l.xpath == nil:
			// predicateSatisfied reads the transformed body as JSON.
			af = r.View(l.views.json).(*jsonDoc).doc
		case f != "":
			af = l.actualField(r, f)
		}
		// The request object itself is neither a string nor an array.
		return l.field(l.expected, ef, nil, af)
	})
}

// each calls fn for every key of an expectation (Object.keys: an object's
// keys, an array's or a string's indices) until fn returns false.
func each(exp any, fn func(k string, v any) bool) bool {
	switch e := exp.(type) {
	case *object:
		for i, k := range e.keys {
			if !fn(k, e.vals[i]) {
				return false
			}
		}
	case map[string]any:
		for k, v := range e {
			if !fn(k, v) {
				return false
			}
		}
	case []any:
		for i, v := range e {
			if !fn(strconv.Itoa(i), v) {
				return false
			}
		}
	case string:
		for i := 0; i < len(e); i++ {
			if !fn(strconv.Itoa(i), e[i:i+1]) {
				return false
			}
		}
	}
	return true
}

// satisfied is mb's predicateSatisfied.
func (l *leaf) satisfied(exp, act any) bool {
	if !truthy(act) {
		return false
	}
	if s, ok := act.(string); ok {
		act = l.tryJSON(s)
	}
	return each(exp, func(k string, ef any) bool {
		return l.field(exp, ef, act, getProp(act, k))
	})
}

// field is the body of predicateSatisfied's loop for one expected field ef
// of exp, whose actual value is af in act.
func (l *leaf) field(exp, ef, act, af any) bool {
	switch {
	case isArray(ef) && isArray(af):
		for _, e := range ef.([]any) {
			if !l.someTest(e, af.([]any)) {
				return false
			}
		}
		return true
	case isArray(af):
		return (l.existsCfg && truthy(ef)) || l.someTest(ef, af.([]any))
	case !isArray(ef) && isUndefined(af) && isArray(act):
		return l.someTest(exp, act.([]any))
	case isObject(ef):
		return l.satisfied(ef, af)
	}
	return l.test(ef, af)
}

func (l *leaf) someTest(e any, as []any) bool {
	for _, a := range as {
		if l.test(e, a) {
			return true
		}
	}
	return false
}

// test is mb's testPredicate.
func (l *leaf) test(e, a any) bool {
	if isUndefined(a) {
		a = ""
	}
	if isObject(e) {
		return l.satisfied(e, a)
	}
	switch l.op {
	case opEquals:
		se, okE := toString(e)
		sa, okA := toString(a)
		return okE == okA && se == sa
	case opContains:
		return bytesContains(jsString(a), jsString(e))
	case opStartsWith:
		s, p := jsString(a), jsString(e)
		return len(s) >= len(p) && s[:len(p)] == p
	case opEndsWith:
		s, p := jsString(a), jsString(e)
		return len(s) >= len(p) && s[len(s)-len(p):] == p
	case opMatches:
		re := l.regexes[jsString(e)]
		return re != nil && re.MatchString(jsString(a))
	case opExists:
		empty := a == ""
		if truthy(e) {
			return !empty
		}
		return empty
	}
	return false
}

func bytesContains(s, sub string) bool { return strings.Contains(s, sub) }

// matchDeep is mb's deepEquals: every expected field equal, as stable JSON
// with arrays sorted, to the request's field with every value a string.
func (l *leaf) matchDeep(r *message.Request) bool {
	for i, k := range l.deepKeys {
		af := undefined
		f := l.fieldOf(k)
		if f != "" {
			af = forceStrings(l.actualField(r, f))
		}
		// The expected value is an object or an array (isObject) when its
		// stable JSON is.
		if s, ok := af.(string); ok && strings.IndexByte("{[", firstByte(l.deep[i])) >= 0 {
			doc := any(nil)
			if f == "body" && r.Kind != message.Custom && l.jsonpath == nil && l.xpath == nil {
				doc = r.View(l.views.json).(*jsonDoc).doc // tryJSON(s), made once
			} else {
				doc = l.tryJSON(s)
			}
			af = l.normalize(forceStrings(doc), true, true)
		}
		got, ok := stableStringify(af)
		if !ok || got != l.deep[i] {
			return false
		}
	}
	return true
}

// firstByte is s's first byte, or 0 when s is empty.
func firstByte(s string) byte {
	if s == "" {
		return 0
	}
	return s[0]
}

// pathKeys works out the leaf's PathKeys, once, when it is compiled.
func (l *leaf) pathKeys() []PathKey {
	if l.fields == customSchema || l.except != nil || l.jsonpath != nil || l.xpath != nil {
		return nil
	}
	m, ok := l.expected.(map[string]any)
	if !ok {
		return nil
	}
	// equals and deepEquals compare a plain field's whole (lowered) text.
	whole := l.op == opEquals || l.op == opDeepEquals
	var keys []PathKey
	for k, v := range m {
		s, ok := toString(v)
		if !ok || isObject(v) || l.fieldOf(k) != "path" {
			continue
		}
		// Every expected key is required: any one of them is a sound key.
		switch {
		case whole:
			keys = []PathKey{{Text: s}}
		case l.op == opStartsWith:
			keys = []PathKey{{Text: s, Prefix: true}}
		case l.op == opMatches:
			if x := l.regexes[s]; x != nil && x.anchored && x.lit != "" {
				keys = []PathKey{{Text: x.lit, Prefix: true}}
			}
		}
	}
	return keys
}
