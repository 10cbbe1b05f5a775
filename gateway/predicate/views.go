package predicate

import (
	"sync"

	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/selector"
)

// Views of the body, which a request makes at most once however many
// stubs' predicates read them (message.Request.View): the body's text
// transformed as mb transforms every request string (lowered unless
// caseSensitive, except removed), then parsed as JSON (mb's tryJSON, keys
// and strings transformed too) or as XML. Leaves that transform alike
// share one view, so ten stubs' jsonpath predicates parse the body once.

// transform is what a view depends on: a leaf's transforms.
type transform struct {
	lowerValues, lowerKeys bool
	except                 string // the compiled pattern, flags included; "" none
	base64                 bool   // a binary tcp imposter's decoding first
}

// jsonView is tryJSON of the transformed body: a value decoded as
// encoding/json decodes, or the text itself when it is not JSON.
type jsonView struct{ t *leaf }

func (v *jsonView) Make(r *message.Request) any {
	return &jsonDoc{doc: v.t.tryJSON(v.t.str(b2s(r.Body)))}
}

// jsonDoc is a parsed body and what jsonpath selectors selected from it,
// so that stubs testing one selector against different values walk the
// document once per request.
type jsonDoc struct {
	doc      any
	selected map[string]any // by selector (and deepEquals' forcing), shaped
}

func (d *jsonDoc) eval(l *leaf) any {
	key := l.jsonpath.String()
	if l.op == opDeepEquals {
		key = "\x00deep\x00" + key
	}
	if v, ok := d.selected[key]; ok {
		return v
	}
	v := l.selectJSON(d.doc)
	if d.selected == nil {
		d.selected = map[string]any{}
	}
	d.selected[key] = v
	return v
}

// xmlView is the transformed body parsed as XML.
type xmlView struct{ t *leaf }

func (v *xmlView) Make(r *message.Request) any {
	return &xmlDoc{doc: selector.ParseXML(v.t.str(b2s(r.Body)))}
}

// xmlDoc is a parsed body and what selectors selected from it: stubs that
// test one xpath against different values (the common case) evaluate it
// once per request.
type xmlDoc struct {
	doc      *selector.XMLDoc
	selected map[string]any // by XPath.Key, shaped
}

func (d *xmlDoc) eval(x *selector.XPath) any {
	if v, ok := d.selected[x.Key()]; ok {
		return v
	}
	v := shape(x.Eval(d.doc))
	if d.selected == nil {
		d.selected = map[string]any{}
	}
	d.selected[x.Key()] = v
	return v
}

type bodyViews struct {
	json *jsonView
	xml  *xmlView
}

// maxViews bounds the shared views; past it (a churn of except patterns)
// a leaf gets views of its own, which only it uses.
const maxViews = 1024

var (
	viewsMu sync.Mutex
	views   = map[transform]bodyViews{}
)

// viewsFor returns the body views of leaves that transform as l does. The
// transforms are copied into a leaf of the views' own, so that the views
// do not keep l alive.
func viewsFor(l *leaf) bodyViews {
	t := transform{lowerValues: l.lowerValues, lowerKeys: l.lowerKeys, base64: l.base64}
	if l.except != nil {
		t.except = l.except.String()
	}
	viewsMu.Lock()
	defer viewsMu.Unlock()
	if v, ok := views[t]; ok {
		return v
	}
	tl := &leaf{lowerValues: l.lowerValues, lowerKeys: l.lowerKeys, except: l.except, base64: l.base64}
	tl.setParse()
	v := bodyViews{json: &jsonView{tl}, xml: &xmlView{tl}}
	if len(views) < maxViews {
		views[t] = v
	}
	return v
}
