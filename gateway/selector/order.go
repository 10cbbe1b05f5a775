package selector

import (
	"reflect"
	"unsafe"
)

// jsonpath-plus, which mb uses, walks objects in their keys' order; Go
// maps have no order, so text is parsed with each object's keys recorded
// in document order (jsonpath.go puts them in JavaScript's order), which
// copy's indexed tokens (${T}[1]) depend on.

// keyOrder records each decoded object's keys in document order.
type keyOrder map[unsafe.Pointer][]string

func mapID(m map[string]any) unsafe.Pointer { return reflect.ValueOf(m).UnsafePointer() }

// parseOrdered parses text as ParseJSON does and records object key order.
func parseOrdered(text string) (any, keyOrder, bool) {
	p := jsonParser{s: text, order: keyOrder{}}
	v, ok := p.document()
	return v, p.order, ok
}
