// Package selector evaluates the jsonpath and xpath selectors that
// Mountebank's predicates and copy/lookup behaviors share. Selectors are
// compiled once; selecting returns node values in mb's shapes: a JSON value
// per jsonpath match (json.Number for numbers), and a string per xpath node,
// or one number or boolean when the xpath expression computes one.
package selector

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/antchfx/xmlquery"
	"github.com/antchfx/xpath"
)

// XPath is a compiled xpath selector with its namespace map. It is safe
// for concurrent use.
type XPath struct {
	src string
	key string // src and the namespace map: equal keys select alike
	// antchfx/xpath keeps evaluation state inside a compiled expression, so
	// each concurrent evaluation takes its own copy from the pool.
	pool sync.Pool
}

// CompileXPath compiles expr with the ns prefix-to-URI map.
func CompileXPath(expr string, ns map[string]string) (*XPath, error) {
	e, err := xpath.CompileWithNS(expr, ns)
	if err != nil {
		return nil, fmt.Errorf("xpath %q: %w", expr, err)
	}
	nsCopy := maps.Clone(ns)
	key := expr
	for _, p := range slices.Sorted(maps.Keys(ns)) {
		key += "\x00" + p + "\x00" + ns[p]
	}
	x := &XPath{src: expr, key: key}
	x.pool.New = func() any {
		e, _ := xpath.CompileWithNS(expr, nsCopy) // compiled once above, so it cannot fail
		return e
	}
	x.pool.Put(e)
	return x, nil
}

// String returns the selector as written.
func (x *XPath) String() string { return x.src }

// Key identifies what x selects: two selectors with one key select the
// same nodes from any document.
func (x *XPath) Key() string { return x.key }

// XMLDoc is text parsed as XML for XPath: parse a body once, and evaluate
// every selector on it. Text is read as mb's DOM parser reads it, malformed
// or not (parseXMLLikeMB); only the empty string has no document at all (a
// nil *XMLDoc).
type XMLDoc struct{ root *xmlquery.Node }

// ParseXML parses text for Eval: XML of the usual kind with a parser made
// for it, anything else as mb's parser would.
func ParseXML(text string) *XMLDoc {
	if text == "" {
		return nil
	}
	if doc, ok := parseXMLQuick(text); ok {
		return &XMLDoc{doc}
	}
	doc, ok := parseXMLLikeMB(text)
	if !ok {
		// Where mb's parser throws, mb's xpath fails; nothing is selected.
		doc = &xmlquery.Node{Type: xmlquery.DocumentNode}
	}
	return &XMLDoc{doc}
}

// Select evaluates the selector on text parsed as XML: Eval(ParseXML(text)).
func (x *XPath) Select(text string) []any { return x.Eval(ParseXML(text)) }

// Eval evaluates the selector on doc, which it does not change. It returns
// nil when nothing matches; otherwise node values as strings, or a single
// float64 or bool when the expression computes a number or a boolean
// (count(//a), boolean(//a)), as mb does.
func (x *XPath) Eval(doc *XMLDoc) []any {
	if doc == nil {
		return nil
	}
	e := x.pool.Get().(*xpath.Expr)
	defer x.pool.Put(e)
	switch v := e.Evaluate(xmlquery.CreateXPathNavigator(doc.root)).(type) {
	case float64:
		return []any{v}
	case bool:
		return []any{v}
	case string:
		return []any{v}
	case *xpath.NodeIterator:
		var out []any
		for v.MoveNext() {
			n, ok := v.Current().(*xmlquery.NodeNavigator)
			if !ok {
				continue
			}
			if n.NodeType() == xpath.AttributeNode {
				out = append(out, n.Value())
				continue
			}
			out = append(out, nodeValue(n.Current()))
		}
		return out
	}
	return nil
}

// nodeValue renders a node as mb's xpath.js does: a text or attribute node's
// value; an element's first child's data (a text's, a comment's or a
// processing instruction's), or "undefined" when the first child has none
// (mb stringifies a missing value), so exists still sees the node.
func nodeValue(n *xmlquery.Node) string {
	if v, ok := nodeData(n); ok {
		return v
	}
	if c := n.FirstChild; c != nil {
		if v, ok := nodeData(c); ok {
			return v
		}
	}
	return "undefined"
}

// nodeData is the DOM's data of a character data node or a processing
// instruction.
func nodeData(n *xmlquery.Node) (string, bool) {
	switch n.Type {
	case xmlquery.TextNode, xmlquery.CharDataNode, xmlquery.CommentNode:
		return n.Data, true
	case xmlquery.DeclarationNode:
		if n.ProcInst != nil {
			return n.ProcInst.Inst, true
		}
	}
	return "", false
}

// Shape returns vals in mb's form: nil for no match, the value itself for
// one match, the slice for several.
func Shape(vals []any) any {
	switch len(vals) {
	case 0:
		return nil
	case 1:
		return vals[0]
	}
	return vals
}

// String renders a selected value as JavaScript's String() does, which is
// what mb substitutes into a response token.
func String(v any) string {
	if s, ok := scalarJS(v); ok { // without a buffer
		return s
	}
	var b bytes.Buffer
	writeJS(&b, v)
	return b.String()
}

// scalarJS is String of a scalar; ok is false for an array or an object.
func scalarJS(v any) (s string, ok bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return JSNumber(v), true
	case float64:
		return formatFloat(v), true
	case bool:
		if v {
			return "true", true
		}
		return "false", true
	case nil:
		return "null", true
	}
	return "", false
}

func writeJS(b *bytes.Buffer, v any) {
	if s, ok := scalarJS(v); ok {
		b.WriteString(s)
		return
	}
	switch v := v.(type) {
	case []any:
		// Array.prototype.toString joins the elements with commas; null
		// and undefined elements render empty.
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if e != nil {
				writeJS(b, e)
			}
		}
	default:
		b.WriteString("[object Object]")
	}
}
