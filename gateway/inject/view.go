package inject

import (
	"cmp"
	"slices"
	"strings"

	"github.com/dop251/goja"
	"github.com/riftgate/riftgate/gateway/message"
)

// The config object and mb's request object are views: a property becomes
// a JavaScript value only when a script first reads it, so a script pays
// for the parts of the request it looks at (building both eagerly, query
// and headers included, was two fifths of a counter's run). A view
// behaves as a plain object for reads, writes, deletes, enumeration and
// JSON.stringify; as a goja dynamic object it refuses accessor and
// read-only properties and cannot be frozen (docs/mountebank-differences.md).

// props is the ordered, editable property list under a view: fixed
// fields, materialized on first read, then the properties a script added.
type props struct {
	names []string     // fixed fields, in mb's order
	vals  []goja.Value // nil: not made yet (when !gone)
	gone  []bool       // deleted by the script, or absent
	extra []string     // added by the script, in order
	xvals map[string]goja.Value
	// byName indexes names when there are many (a large state).
	byName map[string]int
}

// indexAbove is how many fixed names are searched in turn before they
// are looked up in a map instead.
const indexAbove = 16

func (p *props) init(names []string) {
	p.names = names
	p.vals = p.vals[:0]
	p.gone = p.gone[:0]
	for range names {
		p.vals = append(p.vals, nil)
		p.gone = append(p.gone, false)
	}
	p.extra = p.extra[:0]
	clear(p.xvals)
	clear(p.byName)
	if len(names) > indexAbove {
		if p.byName == nil {
			p.byName = make(map[string]int, len(names))
		}
		for i, n := range names {
			p.byName[n] = i
		}
	}
}

// drop lets go of the values, keeping the room.
func (p *props) drop() {
	clear(p.vals)
	clear(p.xvals)
}

func (p *props) index(key string) int {
	if len(p.names) > indexAbove {
		if i, ok := p.byName[key]; ok {
			return i
		}
		return -1
	}
	for i, n := range p.names {
		if n == key {
			return i
		}
	}
	return -1
}

// get returns key's value, making a fixed field with make on first read.
func (p *props) get(key string, make func(i int) goja.Value) goja.Value {
	if i := p.index(key); i >= 0 {
		if p.gone[i] {
			return nil
		}
		if p.vals[i] == nil {
			p.vals[i] = make(i)
		}
		return p.vals[i]
	}
	return p.xvals[key]
}

func (p *props) set(key string, val goja.Value) bool {
	if i := p.index(key); i >= 0 {
		p.vals[i], p.gone[i] = val, false
		return true
	}
	if p.xvals == nil {
		p.xvals = map[string]goja.Value{}
	}
	if _, ok := p.xvals[key]; !ok {
		p.extra = append(p.extra, key)
	}
	p.xvals[key] = val
	return true
}

func (p *props) has(key string) bool {
	if i := p.index(key); i >= 0 {
		return !p.gone[i]
	}
	_, ok := p.xvals[key]
	return ok
}

func (p *props) delete(key string) bool {
	if i := p.index(key); i >= 0 {
		p.vals[i], p.gone[i] = nil, true
		return true
	}
	if _, ok := p.xvals[key]; ok {
		delete(p.xvals, key)
		for j, k := range p.extra {
			if k == key {
				p.extra = append(p.extra[:j], p.extra[j+1:]...)
				break
			}
		}
	}
	return true
}

// keys lists the properties in a plain object's order: array indexes
// first, ascending, then the other names in the order they came.
func (p *props) keys() []string {
	out := make([]string, 0, len(p.names)+len(p.extra))
	indexes := false
	for i, n := range p.names {
		if !p.gone[i] {
			out = append(out, n)
			indexes = indexes || isArrayIndex(n)
		}
	}
	for _, n := range p.extra {
		out = append(out, n)
		indexes = indexes || isArrayIndex(n)
	}
	if indexes {
		slices.SortStableFunc(out, func(a, b string) int {
			ia, ib := isArrayIndex(a), isArrayIndex(b)
			switch {
			case ia && ib && len(a) != len(b):
				return cmp.Compare(len(a), len(b))
			case ia && ib:
				return strings.Compare(a, b)
			case ia:
				return -1
			case ib:
				return 1
			}
			return 0
		})
	}
	return out
}

// isArrayIndex reports whether s names an array index (a canonical
// integer below 2³²-1), which an object enumerates before its other keys.
func isArrayIndex(s string) bool {
	if s == "" || len(s) > 10 || s[0] == '0' && len(s) > 1 {
		return false
	}
	n := uint64(0)
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
		n = n*10 + uint64(s[i]-'0')
	}
	return n < 1<<32-1
}

// The fields of mb's request object, in the order message.Request's JSON
// has them; form and timestamp only when the request has them.
const (
	reqRequestFrom = iota
	reqMethod
	reqPath
	reqQuery
	reqHeaders
	reqBody
	reqIP
	reqForm
	reqTimestamp
)

var requestFields = []string{"requestFrom", "method", "path", "query", "headers", "body", "ip", "form", "timestamp"}

// requestView is mb's request object, the one message.Request.MarshalJSON
// renders, over the request.
type requestView struct {
	v    *vm
	r    *message.Request
	p    props
	self *goja.Object // the view's own object
}

func (q *requestView) reset(v *vm, r *message.Request) {
	q.v, q.r = v, r
	q.p.init(requestFields)
	q.p.gone[reqForm] = r.Form() == nil
	q.p.gone[reqTimestamp] = r.Timestamp.IsZero()
}

// drop lets go of the request and what was made of it.
func (q *requestView) drop() { q.r = nil; q.p.drop() }

// field makes fixed field i. Strings are copied: a request borrows the
// connection's buffers, and a script may keep what it reads.
func (q *requestView) field(i int) goja.Value {
	r, v := q.r, q.v
	switch i {
	case reqRequestFrom:
		return v.str(r.RequestFrom())
	case reqMethod:
		return v.str(r.Method)
	case reqPath:
		return v.str(r.Path)
	case reqQuery:
		return v.multiMap(r.Query)
	case reqHeaders:
		return v.multiMap(r.Headers)
	case reqBody:
		return v.rt.ToValue(string(r.Body))
	case reqIP:
		return v.str(r.IP())
	case reqForm:
		return v.multiMap(r.Form())
	case reqTimestamp:
		return v.rt.ToValue(r.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	return goja.Undefined()
}

func (q *requestView) Get(key string) goja.Value           { return q.p.get(key, q.field) }
func (q *requestView) Set(key string, val goja.Value) bool { return q.p.set(key, val) }
func (q *requestView) Has(key string) bool                 { return q.p.has(key) }
func (q *requestView) Delete(key string) bool              { return q.p.delete(key) }
func (q *requestView) Keys() []string                      { return q.p.keys() }

// The fields of a config object, in mb's order: config's own, then (as
// mb's downcastInjectionConfig copies them for the older call form) the
// request's.
const (
	cfgRequest = iota
	cfgState
	cfgLogger
	cfgCallback
	cfgResponse
	cfgOwn // the request's fields follow
)

var configFields = append([]string{"request", "state", "logger", "callback", "response"}, requestFields...)

// configView is the config object a script gets: {request, state, logger}
// and callback (response injection) or response (decorate), then the
// request's fields, which are the request object's own values (config.query
// is config.request.query) until a script replaces either.
type configView struct {
	req           *requestView
	reqObj        *goja.Object
	state, logger goja.Value
	extra         goja.Value // callback or response
	p             props
}

// reset makes c the config over request object reqObj, which is req's
// view for an http request and a plain object for another kind.
func (c *configView) reset(reqObj *goja.Object, req *requestView, state, logger goja.Value, callback, response goja.Value) {
	c.req, c.reqObj, c.state, c.logger = req, reqObj, state, logger
	c.p.init(configFields)
	c.p.gone[cfgState] = state == nil
	c.p.gone[cfgCallback] = callback == nil
	c.p.gone[cfgResponse] = response == nil
	c.extra = callback
	if response != nil {
		c.extra = response
	}
	if reqObj != req.self {
		// A tcp or smtp request: mb copies its fields when it has data.
		for i := cfgOwn; i < len(configFields); i++ {
			c.p.gone[i] = true
		}
		if d := reqObj.Get("data"); d != nil && d.ToBoolean() {
			for _, k := range reqObj.Keys() {
				c.p.set(k, reqObj.Get(k))
			}
		}
		return
	}
	// mb copies an http request's fields only when it has a method.
	copied := req.r.Method != ""
	for i := cfgOwn; i < len(configFields); i++ {
		c.p.gone[i] = !copied || req.p.gone[i-cfgOwn]
	}
}

// drop lets go of the run's values.
func (c *configView) drop() {
	c.state, c.extra = nil, nil
	c.p.drop()
}

func (c *configView) field(i int) goja.Value {
	switch i {
	case cfgRequest:
		return c.reqObj
	case cfgState:
		return c.state
	case cfgLogger:
		return c.logger
	case cfgCallback, cfgResponse:
		return c.extra
	}
	// The request object's value of the field, as mb's copy has it.
	if v := c.req.Get(configFields[i]); v != nil {
		return v
	}
	return goja.Undefined()
}

func (c *configView) Get(key string) goja.Value           { return c.p.get(key, c.field) }
func (c *configView) Set(key string, val goja.Value) bool { return c.p.set(key, val) }
func (c *configView) Has(key string) bool                 { return c.p.has(key) }
func (c *configView) Delete(key string) bool              { return c.p.delete(key) }
func (c *configView) Keys() []string                      { return c.p.keys() }

// str is s as a JavaScript string the script may keep.
func (v *vm) str(s string) goja.Value { return v.rt.ToValue(strings.Clone(s)) }

// multiMap is message.WriteMultiMap's object: names in first-seen order, a
// repeated name with an array of its values.
func (v *vm) multiMap(kvs []message.KV) *goja.Object {
	o := v.rt.NewObject()
	for i, kv := range kvs {
		if seenBefore(kvs[:i], kv.Name) {
			continue
		}
		var vals []any
		for _, kv2 := range kvs[i:] {
			if kv2.Name == kv.Name {
				vals = append(vals, strings.Clone(kv2.Value))
			}
		}
		// Defined, not assigned, so that a name such as __proto__ is an
		// own property, as JSON.parse would make it.
		val := v.rt.ToValue(vals[0])
		if len(vals) > 1 {
			val = v.rt.NewArray(vals...)
		}
		_ = o.DefineDataProperty(strings.Clone(kv.Name), val, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE)
	}
	return o
}

func seenBefore(kvs []message.KV, name string) bool {
	for _, kv := range kvs {
		if kv.Name == name {
			return true
		}
	}
	return false
}
