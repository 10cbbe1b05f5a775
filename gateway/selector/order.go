package selector

import (
	"reflect"
	"slices"
	"unsafe"

	"github.com/theory/jsonpath/spec"
)

// jsonpath-plus, which mb uses, walks objects in their keys' order; Go
// maps have no order. For selectors that walk an object's members (a
// wildcard, a filter, a descendant segment) the matches are sorted back
// into mb's order, which copy's indexed tokens (${T}[1]) depend on: by
// position in the document, except that a descendant segment lists the
// matches found at each node it visits (in pre-order) before those found
// deeper, so for "$..t" the t of a node comes before any t under it.

// docOrder returns whether q's matches must be sorted, and how many path
// steps follow the context node of its descendant segment (-1 when it has
// none). Unions and reversed slices impose an order of their own, and
// several descendant segments are left in the library's order.
func docOrder(q *spec.PathQuery) (bool, int) {
	walks, after := false, -1
	segs := q.Segments()
	for i, seg := range segs {
		sels := seg.Selectors()
		if len(sels) != 1 {
			return false, -1
		}
		if seg.IsDescendant() {
			if after >= 0 {
				return false, -1
			}
			walks, after = true, len(segs)-i
		}
		switch s := sels[0].(type) {
		case spec.WildcardSelector, *spec.FilterSelector:
			walks = true
		case spec.SliceSelector:
			if s.Step() < 0 {
				return false, -1
			}
		}
	}
	return walks, after
}

// keyOrder records each decoded object's keys in document order.
type keyOrder map[unsafe.Pointer][]string

func mapID(m map[string]any) unsafe.Pointer { return reflect.ValueOf(m).UnsafePointer() }

// parseOrdered parses text as ParseJSON does and records object key order.
func parseOrdered(text string) (any, keyOrder, bool) {
	p := jsonParser{s: text, order: keyOrder{}}
	v, ok := p.document()
	return v, p.order, ok
}

// position returns where path lies in doc, as the index of each step among
// its siblings.
func position(doc any, path spec.NormalizedPath, order keyOrder) []int {
	pos := make([]int, 0, len(path))
	cur := doc
	for _, step := range path {
		switch s := step.(type) {
		case spec.Name:
			m, _ := cur.(map[string]any)
			pos = append(pos, slices.Index(order[mapID(m)], string(s)))
			cur = m[string(s)]
		case spec.Index:
			a, _ := cur.([]any)
			pos = append(pos, int(s))
			if int(s) >= 0 && int(s) < len(a) {
				cur = a[int(s)]
			}
		}
	}
	return pos
}

// selectOrdered selects from text in document order.
func (p *JSONPath) selectOrdered(text string) []any {
	doc, order, ok := parseOrdered(text)
	if !ok {
		return nil
	}
	located := p.path.SelectLocated(doc)
	if len(located) == 0 {
		return nil
	}
	type hit struct {
		ctx, rest []int
		v         any
	}
	hits := make([]hit, len(located))
	for i, n := range located {
		pos := position(doc, n.Path, order)
		split := 0
		if p.after >= 0 {
			split = max(len(pos)-p.after, 0)
		}
		hits[i] = hit{pos[:split], pos[split:], n.Node}
	}
	slices.SortStableFunc(hits, func(a, b hit) int {
		if c := slices.Compare(a.ctx, b.ctx); c != 0 {
			return c
		}
		return slices.Compare(a.rest, b.rest)
	})
	out := make([]any, len(hits))
	for i, h := range hits {
		out[i] = h.v
	}
	return out
}
