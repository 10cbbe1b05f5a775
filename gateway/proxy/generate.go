package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"

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

// requestObject is the request as mb's generators see it: a JSON object.
func requestObject(r *message.Request) map[string]any {
	b, _ := r.MarshalJSON()
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// generate builds the predicates that a recorded stub gets for r, as mb's
// predicatesFor does.
func generate(gens []*generator, r *message.Request, inject InjectGenerator) ([]json.RawMessage, error) {
	req := requestObject(r)
	var preds []json.RawMessage
	for _, g := range gens {
		if g.inject != "" {
			if inject == nil {
				return nil, mberr.New(mberr.InvalidInjection,
					"JavaScript injection is not allowed unless riftgate is run with the --allowInjection flag")
			}
			more, err := inject(g.inject, req)
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
				op, value = "exists", existsShape(req[field])
			case g.operator != "":
				op, value = g.operator, g.valueOf(req[field])
			case bytes.Equal(bytes.TrimSpace(want), []byte("true")):
				op, value = "deepEquals", g.valueOf(withoutIgnored(req[field], g.ignore[field]))
			default:
				var sub map[string]any
				if err := json.Unmarshal(want, &sub); err != nil {
					return nil, mberr.New(mberr.BadData, fmt.Sprintf("predicateGenerator matches.%s must be true or an object", field))
				}
				op, value = "equals", g.subset(req[field], sub)
			}
			p := map[string]any{op: map[string]any{field: value}}
			for _, pf := range g.params {
				p[pf.Key] = pf.Value
			}
			b, err := json.Marshal(p)
			if err != nil {
				return nil, err
			}
			preds = append(preds, b)
		}
	}
	return preds, nil
}

// valueOf applies the generator's selector to a field, as mb's valueOf.
func (g *generator) valueOf(v any) any {
	s, isString := v.(string)
	switch {
	case g.jsonpath != nil && isString:
		return orEmpty(selector.Shape(g.jsonpath.SelectText(s)))
	case g.xpath != nil && isString:
		return orEmpty(selector.Shape(g.xpath.Select(s)))
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
func (g *generator) subset(field any, want map[string]any) any {
	obj, ok := field.(map[string]any)
	if !ok {
		return g.valueOf(field)
	}
	out := map[string]any{}
	for k, w := range want {
		if _, present := obj[k]; !present {
			continue // mb's undefined, which JSON drops
		}
		if sub, ok := w.(map[string]any); ok {
			out[k] = g.subset(obj[k], sub)
		} else {
			out[k] = g.valueOf(obj[k])
		}
	}
	return out
}

// withoutIgnored drops the keys ignore names from an object field.
func withoutIgnored(field any, ignore json.RawMessage) any {
	obj, ok := field.(map[string]any)
	if !ok || len(ignore) == 0 {
		return field
	}
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	var names []string
	var one string
	switch {
	case json.Unmarshal(ignore, &names) == nil:
	case json.Unmarshal(ignore, &one) == nil:
		names = []string{one}
	}
	for _, n := range names {
		delete(out, n)
	}
	return out
}

// existsShape turns every leaf of a field into true.
func existsShape(v any) any {
	if obj, ok := v.(map[string]any); ok {
		out := make(map[string]any, len(obj))
		for k, x := range obj {
			out[k] = existsShape(x)
		}
		return out
	}
	return true
}
