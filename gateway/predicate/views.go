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
	d := jsonDocs.Get().(*jsonDoc)
	d.doc = v.t.tryJSONInto(v.t.str(b2s(r.Body)), &d.room)
	return d
}

// jsonDoc is a parsed body and what jsonpath selectors selected from it,
// so that stubs testing one selector against different values walk the
// document once per request. Its objects are maps that the next request's
// document reuses (Release): a body is parsed on every request.
type jsonDoc struct {
	doc      any
	selected selections // by selector (deep: deepEquals' forcing), shaped
	room     selector.Room
}

var jsonDocs = sync.Pool{New: func() any { return new(jsonDoc) }}

// Release is called when the request is reset (message.View): nothing
// keeps a request's document, or what was selected from it, past it.
func (d *jsonDoc) Release() {
	d.doc, d.selected = nil, selections{}
	d.room.Release()
	jsonDocs.Put(d)
}

func (d *jsonDoc) eval(l *leaf) any {
	key, deep := l.jsonpath.String(), l.op == opDeepEquals
	if v, ok := d.selected.get(key, deep); ok {
		return v
	}
	v := l.selectJSON(d.doc)
	d.selected.add(key, deep, v)
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
	selected selections // by XPath.Key, shaped
}

func (d *xmlDoc) eval(x *selector.XPath) any {
	if v, ok := d.selected.get(x.Key(), false); ok {
		return v
	}
	v := shape(x.Eval(d.doc))
	d.selected.add(x.Key(), false, v)
	return v
}

// selections is what a request's selectors selected, by selector. A
// request's stubs mostly use one selector, whichever value each tests, so
// the first lives in the document's own allocation and the rest in a
// slice, found by comparing strings: a map cost two allocations and a
// hash per lookup, and room for more than one made every parsed body
// larger, equals' too.
type selections struct {
	first selection
	used  bool // first holds one
	more  []selection
}

type selection struct {
	key  string
	deep bool
	v    any
}

func (s *selections) get(key string, deep bool) (any, bool) {
	if e := &s.first; s.used && e.deep == deep && e.key == key {
		return e.v, true
	}
	for i := range s.more {
		if e := &s.more[i]; e.deep == deep && e.key == key {
			return e.v, true
		}
	}
	return nil, false
}

func (s *selections) add(key string, deep bool, v any) {
	if !s.used {
		s.first, s.used = selection{key, deep, v}, true
	} else {
		s.more = append(s.more, selection{key, deep, v})
	}
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
