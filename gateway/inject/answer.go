package inject

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"

	"github.com/dop251/goja"
	"github.com/riftgate/riftgate/gateway/message"
)

// ErrBadResponse is wrapped by the error of a script whose answer is an
// object that is not a response (headers that are not an object, say).
var ErrBadResponse = errors.New("inject: the answer is not a valid response")

// answerFields reads the response object a script answered. As in mb,
// only its statusCode, headers, body and _mode count; they are read as
// their JSON says (JSON.stringify, then message.ParseResponseFields),
// directly from the JavaScript values for the shapes scripts answer with
// (strings, numbers, booleans or null, headers an object of those or of
// arrays of them, an object body), through the JSON for anything else.
// Making and reading that JSON cost a quarter of a counter's request.
func (v *vm) answerFields(o *goja.Object) (message.ResponseFields, error) {
	var vals [len(answerKeys)]goja.Value
	for i, k := range answerKeys {
		vals[i] = o.Get(k)
	}
	if f, ok := v.quickFields(&vals); ok {
		return f, nil
	}
	only := v.rt.NewObject()
	for i, k := range answerKeys {
		if vals[i] != nil {
			_ = only.Set(k, vals[i])
		}
	}
	text, err := v.stringify(goja.Undefined(), only)
	if err != nil {
		return message.ResponseFields{}, script(err)
	}
	f, err := message.ParseResponseFields([]byte(text.String()))
	if err != nil {
		return f, fmt.Errorf("%w: %w (%s)", ErrBadResponse, err, text)
	}
	return f, nil
}

// answerKeys are the fields of a response object, in the order of vals.
var answerKeys = [...]string{"statusCode", "headers", "body", "_mode"}

// scalarKind is what JSON a scalar becomes.
type scalarKind uint8

const (
	kindOther   scalarKind = iota // an object, a symbol, a BigInt: left to the JSON
	kindOmitted                   // undefined: JSON.stringify leaves the field out
	kindNull
	kindBool
	kindNumber
	kindString
)

// scalar is x as its JSON reads back: the text of a number, a boolean or
// null, a string's own value. It reads the value's type rather than
// exporting it, which would box a string or a number for nothing.
func scalar(x goja.Value) (string, scalarKind) {
	switch x.(type) {
	case nil: // no such property
		return "", kindOmitted
	case *goja.Object, *goja.Symbol:
		return "", kindOther
	}
	switch x.ExportType() {
	case nil:
		if goja.IsNull(x) {
			return "null", kindNull
		}
		return "", kindOmitted
	case boolType:
		return strconv.FormatBool(x.ToBoolean()), kindBool
	case intType:
		return strconv.FormatInt(x.ToInteger(), 10), kindNumber
	case floatType:
		if f := x.ToFloat(); math.IsNaN(f) || math.IsInf(f, 0) {
			return "null", kindNull
		}
		return x.String(), kindNumber // JavaScript's number text
	case stringType:
		return x.String(), kindString
	}
	return "", kindOther // a BigInt
}

var (
	boolType   = reflect.TypeFor[bool]()
	intType    = reflect.TypeFor[int64]()
	floatType  = reflect.TypeFor[float64]()
	stringType = reflect.TypeFor[string]()
)

// falsy reports whether a scalar's JSON is one mb's `||` passes over.
func falsy(s string, k scalarKind) bool {
	switch k {
	case kindOmitted, kindNull:
		return true
	case kindBool:
		return s == "false"
	case kindNumber:
		return s == "0"
	case kindString:
		return s == ""
	}
	return false
}

// quickFields is answerFields without the JSON, for plain values only;
// ok is false for anything else.
func (v *vm) quickFields(vals *[len(answerKeys)]goja.Value) (f message.ResponseFields, ok bool) {
	status, headers, body, mode := vals[0], vals[1], vals[2], vals[3]
	if s, k := scalar(status); k == kindOther {
		return f, false
	} else if !falsy(s, k) {
		f.HasStatus = true
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 100 && n <= 999 {
			f.Status = int(n)
		}
	}
	switch h := headers.(type) {
	case *goja.Object:
		if f.Headers, ok = headerKVs(h); !ok {
			return f, false
		}
		f.HasHeaders = true
	default:
		if s, k := scalar(h); !falsy(s, k) {
			return f, false // not an object: the JSON path refuses it
		}
	}
	switch b := body.(type) {
	case *goja.Object:
		// A plain object or an array, whose JSON is never falsy.
		if _, isFn := goja.AssertFunction(b); isFn || !plainObject(b) {
			return f, false
		}
		text, ok, err := v.objectJSON(b)
		if err != nil || !ok {
			return f, false
		}
		f.Body, f.BodyJSON = message.BodyBytes([]byte(text))
		f.HasBody = true
	default:
		s, k := scalar(b)
		if k == kindOther {
			return f, false
		}
		if !falsy(s, k) {
			f.Body, f.HasBody = []byte(s), true
		}
	}
	switch m, k := scalar(mode); k {
	case kindString:
		f.Mode = m
	case kindOmitted, kindNull:
	default:
		return f, false
	}
	return f, true
}

// headerKVs reads a headers object; ok is false for a shape the quick path
// leaves to the JSON.
func headerKVs(h *goja.Object) ([]message.KV, bool) {
	if !plainObject(h) {
		return nil, false
	}
	keys := h.Keys()
	kvs := make([]message.KV, 0, len(keys))
	for _, name := range keys {
		if isIndex(name) {
			return nil, false // JSON orders such names apart
		}
		switch x := h.Get(name).(type) {
		case *goja.Object:
			if x.ClassName() != "Array" || !plainObject(x) {
				return nil, false
			}
			n := x.Get("length").ToInteger()
			for i := range n {
				s, k := scalar(x.Get(strconv.FormatInt(i, 10)))
				switch k {
				case kindOther:
					return nil, false
				case kindOmitted: // an array's hole or undefined is null in JSON
					s = "null"
				}
				kvs = append(kvs, message.KV{Name: name, Value: s})
			}
		default:
			s, k := scalar(x)
			switch k {
			case kindOther:
				return nil, false
			case kindOmitted:
				continue
			}
			kvs = append(kvs, message.KV{Name: name, Value: s})
		}
	}
	if len(kvs) == 0 {
		kvs = nil // as the JSON path reads {}
	}
	return kvs, true
}

// plainObject reports whether o's JSON is its own enumerable properties:
// it has no toJSON.
func plainObject(o *goja.Object) bool {
	t := o.Get("toJSON")
	return t == nil || goja.IsUndefined(t)
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
