package behavior

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/selector"
)

var known = map[string]bool{"wait": true, "copy": true, "lookup": true, "shellTransform": true, "decorate": true}

// compileOne validates one behavior object as mb's behaviorsValidator does
// (reporting the first of its errors) and compiles it.
func (b *Behaviors) compileOne(raw json.RawMessage, opts Options) (step, error) {
	keys, obj, err := message.ObjectMap(raw)
	if err != nil {
		return nil, mberr.New(mberr.BadData, "each behavior must be an object").WithSource(source(raw))
	}
	var valid []string
	for _, k := range keys {
		if known[k] {
			valid = append(valid, k)
		}
	}
	switch {
	case len(valid) == 0 && len(keys) > 0:
		return nil, mberr.New(mberr.BadData, fmt.Sprintf("Unrecognized behavior: %q", keys[0])).WithSource(source(raw))
	case len(valid) == 0:
		return nil, nil
	case len(valid) > 1:
		return nil, mberr.New(mberr.BadData, "Each behavior object must have only one behavior type").WithSource(source(raw))
	}
	key := valid[0]
	v := obj[key]
	fail := func(field, msg string) error {
		return mberr.New(mberr.BadData, fmt.Sprintf("%s behavior %q field %s", key, field, msg)).WithSource(source(raw))
	}
	switch key {
	case "wait":
		return compileWait(v, opts, raw, fail)
	case "copy":
		var c map[string]json.RawMessage
		_ = json.Unmarshal(v, &c)
		return compileCopy(c, fail)
	case "lookup":
		var c map[string]json.RawMessage
		_ = json.Unmarshal(v, &c)
		return b.compileLookup(c, fail)
	case "shellTransform":
		var cmd string
		if err := json.Unmarshal(v, &cmd); err != nil {
			return nil, fail("shellTransform", "must be a string, representing the path to a command line application")
		}
		if opts.Inject.ShellTransform == nil {
			return nil, mberr.New(mberr.InvalidInjection, shellDisabled).WithSource(source(raw))
		}
		d, err := opts.Inject.ShellTransform(cmd)
		if err != nil {
			return nil, fmt.Errorf("shellTransform: %w", err)
		}
		return decorateStep{d}, nil
	}
	// decorate: a JavaScript function, or riftgate's {"wasm": {...}}.
	var wasm struct {
		Wasm json.RawMessage `json:"wasm"`
	}
	if bytes.HasPrefix(bytes.TrimSpace(v), []byte("{")) && json.Unmarshal(v, &wasm) == nil && wasm.Wasm != nil {
		if opts.Wasm == nil {
			return nil, mberr.New(mberr.BadData, "wasm decorators need riftgate's plugin host, which is not configured").WithSource(source(raw))
		}
		d, err := opts.Wasm(wasm.Wasm)
		if err != nil {
			return nil, fmt.Errorf("wasm decorate: %w", err)
		}
		return decorateStep{d}, nil
	}
	var src string
	if err := json.Unmarshal(v, &src); err != nil {
		return nil, fail("decorate", "must be a string, representing a JavaScript function")
	}
	if opts.Inject.Decorate == nil {
		return nil, mberr.New(mberr.InvalidInjection, injectionDisabled).WithSource(source(raw))
	}
	d, err := opts.Inject.Decorate(src)
	if err != nil {
		return nil, fmt.Errorf("decorate: %w", err)
	}
	return decorateStep{d}, nil
}

func compileWait(v json.RawMessage, opts Options, raw json.RawMessage, fail func(string, string) error) (step, error) {
	var x any
	_ = json.Unmarshal(v, &x)
	switch x := x.(type) {
	case float64:
		if x < 0 {
			return nil, fail("wait", "must be an integer greater than or equal to 0")
		}
		// message.ParseInt(number) reads the number's decimal form.
		if x >= 1e21 {
			n, _ := message.ParseInt(fmt.Sprint(x))
			return waitStep{ms: n}, nil
		}
		return waitStep{ms: int(math.Trunc(x))}, nil
	case string:
		// mb counts any string wait as injection.
		if opts.Inject.Wait == nil {
			return nil, mberr.New(mberr.InvalidInjection, injectionDisabled).WithSource(source(raw))
		}
		if n, ok := message.ParseInt(x); ok {
			return waitStep{ms: n}, nil
		}
		w, err := opts.Inject.Wait(x)
		if err != nil {
			return nil, fmt.Errorf("wait: %w", err)
		}
		return waitStep{fn: w}, nil
	}
	return nil, fail("wait", "must be a string or a number")
}

type waitStep struct {
	ms int
	fn Waiter
}

func (w waitStep) run(ctx context.Context, req *message.Request, _ *Response, sleep bool) (time.Duration, error) {
	ms := w.ms
	if w.fn != nil {
		var err error
		if ms, err = w.fn.WaitMillis(ctx, req); err != nil {
			return 0, fmt.Errorf("wait: %w", err)
		}
	}
	d := time.Duration(max(ms, 0)) * time.Millisecond
	if !sleep || d == 0 {
		return d, nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return d, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

type decorateStep struct{ d Decorator }

func (s decorateStep) run(ctx context.Context, req *message.Request, resp *Response, _ bool) (time.Duration, error) {
	return 0, s.d.Decorate(ctx, req, resp)
}

// from is a compiled copy/lookup "from": a request field, optionally one
// name inside the query, headers or form.
type from struct {
	field string
	name  string
	// exact: the object form names the field exactly; only the string
	// form, and the name inside the object form, ignore case in mb.
	exact bool
	ok    bool // false: mb's getFrom finds nothing
}

// selection is a compiled "using".
type selection struct {
	re *regexp.Regexp
	jp *selector.JSONPath
	xp *selector.XPath
}

func compileFrom(raw json.RawMessage, path string, fail func(string, string) error) (from, error) {
	if raw == nil {
		return from{}, fail(path, "required")
	}
	if isNull(raw) {
		return from{}, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return from{field: s, ok: true}, nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
			return from{}, nil // an array passes mb's check and selects nothing
		}
		return from{}, fail(path, "must be a string or an object, representing the request field to select from")
	}
	if len(obj) != 1 {
		return from{}, fail(path, "must have exactly one key")
	}
	for k, v := range obj {
		var name string
		if json.Unmarshal(v, &name) != nil {
			return from{}, nil // deeper nesting selects nothing in an http request
		}
		return from{field: k, name: name, exact: true, ok: true}, nil
	}
	return from{}, nil
}

func compileUsing(raw json.RawMessage, path string, fail func(string, string) error) (selection, error) {
	if raw == nil {
		return selection{}, fail(path, "required")
	}
	var u struct {
		Method   *json.RawMessage  `json:"method"`
		Selector *json.RawMessage  `json:"selector"`
		NS       map[string]string `json:"ns"`
		Options  struct {
			IgnoreCase bool `json:"ignoreCase"`
			Multiline  bool `json:"multiline"`
		} `json:"options"`
	}
	if !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) || json.Unmarshal(raw, &u) != nil {
		return selection{}, fail(path, "must be an object")
	}
	if u.Method == nil {
		return selection{}, fail(path+".method", "required")
	}
	var method string
	if json.Unmarshal(*u.Method, &method) != nil {
		return selection{}, fail(path+".method", "must be a string")
	}
	if method != "regex" && method != "xpath" && method != "jsonpath" {
		return selection{}, fail(path+".method", "must be one of [regex, xpath, jsonpath]")
	}
	if u.Selector == nil {
		return selection{}, fail(path+".selector", "required")
	}
	var sel string
	if json.Unmarshal(*u.Selector, &sel) != nil {
		return selection{}, fail(path+".selector", "must be a string")
	}
	switch method {
	case "regex":
		re, err := selector.CompileRegex(sel, u.Options.IgnoreCase, u.Options.Multiline)
		if err != nil {
			return selection{}, fail(path+".selector", fmt.Sprintf("is not a valid regular expression: %v", err))
		}
		return selection{re: re}, nil
	case "xpath":
		xp, err := selector.CompileXPath(sel, u.NS)
		if err != nil {
			return selection{}, fail(path+".selector", "is not a valid xpath selector")
		}
		return selection{xp: xp}, nil
	}
	jp, err := selector.CompileJSONPath(sel)
	if err != nil {
		return selection{}, fail(path+".selector", "is not a valid jsonpath selector")
	}
	return selection{jp: jp}, nil
}

func compileInto(raw json.RawMessage, fail func(string, string) error) (string, error) {
	if raw == nil {
		return "", fail("into", "required")
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", fail("into", "must be a string, representing the token to replace in response fields")
	}
	return s, nil
}

type copyStep struct {
	from from
	sel  selection
	into string
}

func compileCopy(c map[string]json.RawMessage, fail func(string, string) error) (step, error) {
	f, err := compileFrom(c["from"], "from", fail)
	if err != nil {
		return nil, err
	}
	into, err := compileInto(c["into"], fail)
	if err != nil {
		return nil, err
	}
	sel, err := compileUsing(c["using"], "using", fail)
	if err != nil {
		return nil, err
	}
	return copyStep{from: f, sel: sel, into: into}, nil
}

func (c copyStep) run(_ context.Context, req *message.Request, resp *Response, _ bool) (time.Duration, error) {
	values := c.sel.values(requestValue(req, c.from))
	var pairs [][2]string
	for i, v := range values {
		pairs = append(pairs, [2]string{fmt.Sprintf("%s[%d]", c.into, i), v})
	}
	if len(values) > 0 {
		pairs = append(pairs, [2]string{c.into, values[0]})
	}
	replaceTokens(resp, pairs)
	return 0, nil
}

// requestValue is mb's getFrom over the simplified request: field names
// ignore case, and a repeated query, header or form name gives its first
// value. It returns a string, a map for a whole query/headers/form, or
// nil for undefined.
func requestValue(r *message.Request, f from) any {
	if !f.ok {
		return nil
	}
	field := f.field
	if r.Kind == message.TCP {
		return tcpValue(r, f)
	}
	if r.Kind == message.Custom {
		return customValue(r, f)
	}
	if r.Kind == message.GRPC {
		// {path, value, metadata, peer}: the message (JSON), the metadata
		// as headers are, the client's address.
		switch lf := strings.ToLower(field); {
		case f.exact && field != lf:
			return nil
		case lf == "value":
			return scalar(string(r.Body), f)
		case lf == "peer":
			return scalar(r.RequestFrom(), f)
		case lf == "metadata":
			field, f.exact = "headers", false
		case lf != "path":
			return nil
		}
	}
	if r.Kind == message.WS {
		switch lf := strings.ToLower(field); {
		case f.exact && field != lf && field != "requestFrom":
			return nil
		case lf == "data":
			return scalar(string(r.Body), f)
		case lf == "type":
			return scalar(r.MessageType, f)
		case lf == "connection":
			return scalar(r.Connection, f)
		case lf == "method" || lf == "body" || lf == "form":
			return nil // a message has none; path, query, headers are the handshake's
		}
	}
	if !f.exact {
		field = strings.ToLower(field)
	} else if !validField[field] {
		return nil
	}
	var kvs []message.KV
	switch strings.ToLower(field) {
	case "requestfrom":
		return scalar(r.RequestFrom(), f)
	case "method":
		return scalar(r.Method, f)
	case "path":
		return scalar(r.Path, f)
	case "body":
		return scalar(string(r.Body), f)
	case "ip":
		return scalar(r.IP(), f)
	case "query":
		kvs = r.Query
	case "headers":
		kvs = r.Headers
	case "form":
		if len(r.Body) == 0 || !r.IsForm() {
			return nil
		}
		kvs = r.Form()
	default:
		return nil
	}
	if f.name == "" {
		// The whole object, as mb's request holds it: a repeated name
		// has an array (a header's empty values before a non-empty one
		// are dropped, as mb's `current ? concat : value` does). It is
		// kept as JSON text in the request's order, because a jsonpath
		// wildcard over it yields values in key order.
		var names []string
		vals := map[string][]string{}
		for _, kv := range kvs {
			prev, seen := vals[kv.Name]
			switch {
			case !seen:
				names = append(names, kv.Name)
				vals[kv.Name] = []string{kv.Value}
			case len(prev) == 1 && prev[0] == "" && field == "headers":
				vals[kv.Name] = []string{kv.Value}
			default:
				vals[kv.Name] = append(prev, kv.Value)
			}
		}
		b := []byte{'{'}
		for i, n := range names {
			if i > 0 {
				b = append(b, ',')
			}
			b = message.AppendJSONString(b, n)
			b = append(b, ':')
			v := vals[n]
			if len(v) == 1 {
				b = message.AppendJSONString(b, v[0])
				continue
			}
			b = append(b, '[')
			for j, x := range v {
				if j > 0 {
					b = append(b, ',')
				}
				b = message.AppendJSONString(b, x)
			}
			b = append(b, ']')
		}
		return objectText(append(b, '}'))
	}
	for i, kv := range kvs {
		if !strings.EqualFold(kv.Name, f.name) {
			continue
		}
		if field == "headers" {
			// mb drops a repeated header's empty values until a non-empty
			// one arrives (its `current ? concat : value`).
			for _, o := range kvs[i:] {
				if o.Name == kv.Name && o.Value != "" {
					return o.Value
				}
			}
		}
		return kv.Value
	}
	return nil
}

// tcpValue is getFrom over a tcp request: requestFrom, ip and data.
func tcpValue(r *message.Request, f from) any {
	field := f.field
	if !f.exact {
		field = strings.ToLower(field)
	}
	switch field {
	case "requestFrom", "requestfrom":
		return scalar(r.RequestFrom(), f)
	case "ip":
		return scalar(r.IP(), f)
	case "data":
		return scalar(string(r.Body), f)
	}
	return nil
}

// customValue is mb's getFrom over a custom protocol's request, which is
// the protocol's own object: the field by name ignoring case (an object
// from names it exactly, and its one sub-field ignoring case), an array's
// first element, and a value that is not a string as the text mb's
// selectors see (String(value), an object as JSON for jsonpath).
func customValue(r *message.Request, f from) any {
	v := keyIgnoringCase(r.Raw, f.field, f.exact)
	if f.name != "" {
		v = keyIgnoringCase(v, f.name, false)
	}
	v = bytes.TrimSpace(v)
	if len(v) > 0 && v[0] == '[' {
		var elems []json.RawMessage
		if json.Unmarshal(v, &elems) != nil || len(elems) == 0 {
			return nil
		}
		v = bytes.TrimSpace(elems[0])
	}
	if len(v) == 0 {
		return nil
	}
	switch v[0] {
	case '"':
		var s string
		_ = json.Unmarshal(v, &s)
		return s
	case '{':
		return objectText(v)
	case '[':
		return "" // a nested array's String() joins its elements; mb users do not copy those
	}
	js, err := message.DecodeJS(v)
	if err != nil {
		return nil
	}
	return message.JSString(js)
}

// keyIgnoringCase is the member of the object obj named key (exactly, or
// the first whose name is key ignoring case, in the object's order), nil
// when obj is no object or has none.
func keyIgnoringCase(obj json.RawMessage, key string, exact bool) json.RawMessage {
	fields, err := message.ObjectFields(obj)
	if err != nil {
		return nil
	}
	for _, fl := range fields {
		if fl.Key == key || !exact && strings.EqualFold(fl.Key, key) {
			return fl.Value
		}
	}
	return nil
}

// objectText is a request object field (query, headers, form) as JSON text
// in the request's order.
type objectText string

// validField holds the simplified request's field names as mb spells them.
var validField = map[string]bool{"requestFrom": true, "method": true, "path": true, "query": true, "headers": true, "body": true, "ip": true, "form": true}

func scalar(s string, f from) any {
	if f.name != "" {
		return nil // a string has no named fields
	}
	return s
}

// values selects from v as mb's regexValue, xpathValue and jsonpathValue
// do, rendered as the strings mb substitutes.
func (s selection) values(v any) []string {
	switch {
	case s.re != nil:
		text := "undefined" // mb runs the regex on String(undefined)
		switch v := v.(type) {
		case string:
			text = v
		case objectText:
			text = "[object Object]"
		}
		m := s.re.FindStringSubmatchIndex(text)
		if m == nil {
			return nil
		}
		out := make([]string, len(m)/2)
		for i := range out {
			if m[2*i] < 0 {
				// An unmatched group is undefined, and mb's
				// split(token).join(undefined) joins with commas.
				out[i] = ","
				continue
			}
			out[i] = text[m[2*i]:m[2*i+1]]
		}
		return out
	case s.xp != nil:
		text, ok := v.(string)
		if !ok {
			return nil
		}
		var out []string
		for _, e := range s.xp.Select(text) {
			str, ok := e.(string)
			if !ok {
				return nil // a number or boolean result selects nothing in mb
			}
			out = append(out, str)
		}
		return out
	case s.jp != nil:
		var vals []any
		switch v := v.(type) {
		case string:
			vals = s.jp.SelectText(v)
		case objectText:
			vals = s.jp.SelectText(string(v))
		}
		out := make([]string, len(vals))
		for i, e := range vals {
			out[i] = selector.String(e)
		}
		return out
	}
	return nil
}
