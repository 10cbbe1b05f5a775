package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/selector"
)

// generator is one element of predicateGenerators.
type generator struct {
	matches  map[string]json.RawMessage // field → true, or an object naming sub-fields
	order    []string                   // matches' fields in the order given
	operator string                     // predicateOperator; "" is deepEquals/equals
	ignore   map[string]json.RawMessage
	params   []message.Field // every other key, copied into each predicate
	jsonpath *selector.JSONPath
	xpath    *selector.XPath
	inject   string
}

func parseGenerators(raws []json.RawMessage) ([]*generator, error) {
	out := make([]*generator, 0, len(raws))
	for _, raw := range raws {
		g, err := parseGenerator(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

func parseGenerator(raw json.RawMessage) (*generator, error) {
	fields, err := message.ObjectFields(raw)
	if err != nil {
		return nil, mberr.New(mberr.BadData, "each predicateGenerator must be an object").WithSource(raw)
	}
	g := &generator{}
	for _, f := range fields {
		switch f.Key {
		case "matches":
			mf, err := message.ObjectFields(f.Value)
			if err != nil {
				return nil, mberr.New(mberr.BadData, "predicateGenerator 'matches' must be an object").WithSource(raw)
			}
			g.matches = map[string]json.RawMessage{}
			for _, m := range mf {
				g.matches[m.Key] = m.Value
				g.order = append(g.order, m.Key)
			}
		case "predicateOperator":
			if err := json.Unmarshal(f.Value, &g.operator); err != nil {
				return nil, mberr.New(mberr.BadData, "predicateOperator must be a string").WithSource(raw)
			}
		case "ignore":
			if err := json.Unmarshal(f.Value, &g.ignore); err != nil {
				return nil, mberr.New(mberr.BadData, "predicateGenerator 'ignore' must be an object").WithSource(raw)
			}
		case "inject":
			if err := json.Unmarshal(f.Value, &g.inject); err != nil {
				return nil, mberr.New(mberr.BadData, "predicateGenerator 'inject' must be a function's source").WithSource(raw)
			}
		default:
			g.params = append(g.params, f)
			if err := g.selector(f); err != nil {
				return nil, err
			}
		}
	}
	if g.matches == nil && g.inject == "" {
		return nil, mberr.New(mberr.BadData, "a predicateGenerator needs 'matches' or 'inject'").WithSource(raw)
	}
	return g, nil
}

func (g *generator) selector(f message.Field) error {
	var sel struct {
		Selector string            `json:"selector"`
		NS       map[string]string `json:"ns"`
	}
	switch f.Key {
	case "jsonpath":
		if err := json.Unmarshal(f.Value, &sel); err != nil {
			return mberr.New(mberr.BadData, "jsonpath must be an object with a selector").WithSource(f.Value)
		}
		p, err := selector.CompileJSONPath(sel.Selector)
		if err != nil {
			return mberr.New(mberr.BadData, "invalid jsonpath: "+err.Error()).WithSource(f.Value)
		}
		g.jsonpath = p
	case "xpath":
		if err := json.Unmarshal(f.Value, &sel); err != nil {
			return mberr.New(mberr.BadData, "xpath must be an object with a selector").WithSource(f.Value)
		}
		p, err := selector.CompileXPath(sel.Selector, sel.NS)
		if err != nil {
			return mberr.New(mberr.BadData, "invalid xpath: "+err.Error()).WithSource(f.Value)
		}
		g.xpath = p
	}
	return nil
}

// requestObject is the request as gens see it: plainRequestObject where
// it can, else the whole of fullRequestObject.
func requestObject(r *message.Request, gens []*generator) *message.JSObject {
	if o, ok := plainRequestObject(r, gens); ok {
		return o
	}
	return fullRequestObject(r)
}

// plainRequestObject is fullRequestObject's fields that gens read, where
// they read only an http request's method, path or body by name (no
// inject, no predicateOperator, which see the whole request): those are
// strings, which the JSON round trip gives back as they are when they are
// valid UTF-8. A proxyAlways recording generates on every request, and
// the round trip was most of its cost.
func plainRequestObject(r *message.Request, gens []*generator) (*message.JSObject, bool) {
	if r.Kind != message.HTTP {
		return nil, false
	}
	o := &message.JSObject{Vals: make(map[string]any, 2)}
	for _, g := range gens {
		if g.inject != "" || g.operator != "" {
			return nil, false
		}
		for _, f := range g.order {
			if _, done := o.Vals[f]; done {
				continue
			}
			var s string
			switch f {
			case "method":
				s = r.Method
			case "path":
				s = r.Path
			case "body":
				s = string(r.Body)
			default:
				return nil, false
			}
			if !utf8.ValidString(s) {
				return nil, false
			}
			o.Keys, o.Vals[f] = append(o.Keys, f), s
		}
	}
	return o, true
}

// fullRequestObject is the request as mb's generators see it: a
// JavaScript object, fields and keys in mb's order (no timestamp: mb
// generates before it saves the request).
func fullRequestObject(r *message.Request) *message.JSObject {
	b, _ := r.MarshalJSON()
	v, _ := message.DecodeJS(b)
	o, _ := v.(*message.JSObject)
	if o == nil {
		return &message.JSObject{Vals: map[string]any{}}
	}
	out := &message.JSObject{Vals: map[string]any{}}
	for _, k := range o.Keys {
		if k != "timestamp" {
			out.Keys = append(out.Keys, k)
			out.Vals[k] = o.Vals[k]
		}
	}
	return out
}

// generate builds the predicates that a recorded stub gets for r, as mb's
// predicatesFor does: each predicate holds the generator's other fields in
// their order, then its operator.
func generate(gens []*generator, r *message.Request, inject InjectGenerator) ([]json.RawMessage, error) {
	return generateFrom(gens, requestObject(r, gens), inject)
}

// generateFrom is generate from the request's object.
func generateFrom(gens []*generator, req *message.JSObject, inject InjectGenerator) ([]json.RawMessage, error) {
	var preds []json.RawMessage
	for _, g := range gens {
		if g.inject != "" {
			if inject == nil {
				return nil, mberr.New(mberr.InvalidInjection,
					"JavaScript injection is not allowed unless mb is run with the --allowInjection flag")
			}
			more, err := inject(g.inject, jsToMap(req).(map[string]any))
			if err != nil {
				return nil, err
			}
			preds = append(preds, more...)
			continue
		}
		for _, field := range g.order {
			want := g.matches[field]
			var op string
			var value any
			switch {
			case g.operator == "exists":
				// mb 2.9.1 refuses these generators (its dry run throws);
				// riftgate makes the predicate the docs describe.
				op, value = "exists", jsObject(field, existsShape(req.Vals[field]))
			case g.operator != "":
				// mb hands the whole request to the operator.
				op, value = g.operator, g.valueOf(req)
			case bytes.Equal(bytes.TrimSpace(want), []byte("true")):
				op, value = "deepEquals", jsObject(field, g.valueOf(withoutIgnored(req.Vals[field], g.ignore[field])))
			default:
				sub, err := message.DecodeJS(want)
				wantObj, ok := sub.(*message.JSObject)
				if err != nil || !ok {
					return nil, mberr.New(mberr.BadData, fmt.Sprintf("predicateGenerator matches.%s must be true or an object", field))
				}
				op, value = "equals", jsObject(field, g.subset(req.Vals[field], wantObj))
			}
			p := &message.JSObject{Vals: map[string]any{}}
			for _, pf := range g.params {
				v, err := message.DecodeJS(pf.Value)
				if err != nil {
					return nil, err
				}
				p.Keys = append(p.Keys, pf.Key)
				p.Vals[pf.Key] = v
			}
			p.Keys = append(p.Keys, op)
			p.Vals[op] = value
			preds = append(preds, message.EncodeJS(p, "", false))
		}
	}
	return preds, nil
}

func jsObject(key string, v any) *message.JSObject {
	return &message.JSObject{Keys: []string{key}, Vals: map[string]any{key: v}}
}

// jsToMap converts a JavaScript value into encoding/json's shapes, for the
// injection engine.
func jsToMap(v any) any {
	switch v := v.(type) {
	case *message.JSObject:
		m := make(map[string]any, len(v.Keys))
		for _, k := range v.Keys {
			m[k] = jsToMap(v.Vals[k])
		}
		return m
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = jsToMap(e)
		}
		return out
	}
	return v
}

// fromSelector converts a selector's result (encoding/json shapes) into a
// JavaScript value.
func fromSelector(v any) any {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	out, err := message.DecodeJS(b)
	if err != nil {
		return v
	}
	return out
}

// valueOf applies the generator's selector to a field, as mb's valueOf.
func (g *generator) valueOf(v any) any {
	s, isString := v.(string)
	switch {
	case g.jsonpath != nil && isString:
		return orEmpty(fromSelector(selector.Shape(g.jsonpath.SelectText(s))))
	case g.xpath != nil && isString:
		return orEmpty(fromSelector(selector.Shape(g.xpath.Select(s))))
	}
	return v
}

func orEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}

// subset keeps the keys of an object field that matches names.
func (g *generator) subset(field any, want *message.JSObject) any {
	obj, ok := field.(*message.JSObject)
	if !ok {
		return g.valueOf(field)
	}
	out := &message.JSObject{Vals: map[string]any{}}
	for _, k := range want.Keys {
		v, present := obj.Vals[k]
		if !present {
			continue // mb's undefined, which JSON drops
		}
		out.Keys = append(out.Keys, k)
		if sub, ok := want.Vals[k].(*message.JSObject); ok {
			out.Vals[k] = g.subset(v, sub)
		} else {
			out.Vals[k] = g.valueOf(v)
		}
	}
	return out
}

// withoutIgnored drops the keys ignore names from an object field.
func withoutIgnored(field any, ignore json.RawMessage) any {
	obj, ok := field.(*message.JSObject)
	if !ok || len(ignore) == 0 {
		return field
	}
	var names []string
	var one string
	switch {
	case json.Unmarshal(ignore, &names) == nil:
	case json.Unmarshal(ignore, &one) == nil:
		names = []string{one}
	}
	drop := map[string]bool{}
	for _, n := range names {
		drop[n] = true
	}
	out := &message.JSObject{Vals: map[string]any{}}
	for _, k := range obj.Keys {
		if !drop[k] {
			out.Keys = append(out.Keys, k)
			out.Vals[k] = obj.Vals[k]
		}
	}
	return out
}

// existsShape turns every leaf of a value into true.
func existsShape(v any) any {
	if obj, ok := v.(*message.JSObject); ok {
		out := &message.JSObject{Keys: obj.Keys, Vals: make(map[string]any, len(obj.Keys))}
		for _, k := range obj.Keys {
			out.Vals[k] = existsShape(obj.Vals[k])
		}
		return out
	}
	return true
}
