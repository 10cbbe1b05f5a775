// Package predicate compiles Mountebank predicates (one element of a stub's
// "predicates" array) into matchers over message.Request, with mb 2.9.1's
// exact semantics: the operators equals, deepEquals, contains, startsWith,
// endsWith, matches, exists, not, or, and, inject, riftgate's wasm, and the
// parameters caseSensitive, keyCaseSensitive, except, jsonpath and xpath.
//
// Everything that can be prepared is prepared by Compile: regular
// expressions, lowered expectations and selectors. Matching the common
// predicates (equals, contains, startsWith, endsWith, matches and exists on
// method, path, query, headers, form and a text body) allocates nothing;
// the rest follows mb's generic algorithm over JSON-like values.
package predicate

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
)

// Predicate decides whether a request matches.
type Predicate interface {
	Match(r *message.Request) bool
}

// Options are the hooks for the operators riftgate does not evaluate itself.
type Options struct {
	// Inject compiles a predicate "inject" function. When nil, injection is
	// refused as mb refuses it without --allowInjection.
	Inject func(src string) (Predicate, error)
	// Wasm compiles riftgate's {"wasm": {...}} predicate. When nil, a wasm
	// predicate is refused.
	Wasm func(spec json.RawMessage) (Predicate, error)
	// Protocol is the imposter's ("tcp", "smtp"; otherwise http), which
	// names the request fields predicates reach.
	Protocol string
	// Custom: Protocol is a custom one (mb's --protofile), whose requests
	// are JSON objects with any fields.
	Custom bool
	// Binary is a tcp imposter's binary mode: every string is base64, and
	// mb decodes both sides before comparing.
	Binary bool
}

// injectionDisabled is mb's refusal, from dryRunValidator.js.
const injectionDisabled = "JavaScript injection is not allowed unless mb is run with the --allowInjection flag"

// operators are mb's, plus riftgate's wasm; a predicate's operator is the
// first of its keys, in the JSON's order, that names one.
var operators = map[string]bool{
	"equals": true, "deepEquals": true, "contains": true, "startsWith": true,
	"endsWith": true, "matches": true, "exists": true, "not": true, "or": true,
	"and": true, "inject": true, "wasm": true,
}

// Compile compiles one predicate.
func Compile(raw json.RawMessage, opts Options) (Predicate, error) {
	keys, obj, err := message.ObjectMap(raw)
	if err != nil {
		return nil, mberr.New(mberr.BadData, "missing predicate").WithSource(sourceOf(raw))
	}
	op := ""
	for _, k := range keys {
		if operators[k] {
			op = k
			break
		}
	}
	switch op {
	case "":
		return nil, mberr.New(mberr.BadData, "missing predicate").WithSource(sourceOf(raw))
	case "not":
		p, err := Compile(obj["not"], opts)
		if err != nil {
			return nil, err
		}
		return notP{p}, nil
	case "or", "and":
		var subs []json.RawMessage
		if err := json.Unmarshal(obj[op], &subs); err != nil {
			return nil, mberr.New(mberr.BadData, fmt.Sprintf("%q must be an array of predicates", op)).WithSource(sourceOf(raw))
		}
		ps := make([]Predicate, len(subs))
		for i, s := range subs {
			if ps[i], err = Compile(s, opts); err != nil {
				return nil, err
			}
		}
		if op == "or" {
			return anyP(ps), nil
		}
		return allP(ps), nil
	case "inject":
		var src string
		if err := json.Unmarshal(obj["inject"], &src); err != nil {
			return nil, mberr.New(mberr.BadData, "inject must be a string holding a JavaScript function").WithSource(sourceOf(raw))
		}
		if opts.Inject == nil {
			return nil, mberr.New(mberr.InvalidInjection, injectionDisabled).WithSource(sourceOf(raw))
		}
		p, err := opts.Inject(src)
		if err != nil {
			return nil, fmt.Errorf("predicate inject: %w", err)
		}
		return p, nil
	case "wasm":
		if opts.Wasm == nil {
			return nil, mberr.New(mberr.BadData, "wasm predicates need riftgate's plugin host, which is not configured").WithSource(sourceOf(raw))
		}
		p, err := opts.Wasm(obj["wasm"])
		if err != nil {
			return nil, fmt.Errorf("predicate wasm: %w", err)
		}
		return p, nil
	}
	return compileLeaf(op, obj, raw, opts)
}

// CompileAll compiles a stub's predicates; the result matches when every
// one does, and matches everything when there are none.
func CompileAll(raws []json.RawMessage, opts Options) (Predicate, error) {
	ps := make(allP, 0, len(raws))
	for _, raw := range raws {
		p, err := Compile(raw, opts)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	if len(ps) == 1 {
		return ps[0], nil
	}
	return ps, nil
}

type notP struct{ p Predicate }

func (n notP) Match(r *message.Request) bool { return !n.p.Match(r) }

type anyP []Predicate

func (ps anyP) Match(r *message.Request) bool {
	for _, p := range ps {
		if p.Match(r) {
			return true
		}
	}
	return false
}

type allP []Predicate

func (ps allP) Match(r *message.Request) bool {
	for _, p := range ps {
		if !p.Match(r) {
			return false
		}
	}
	return true
}

// sourceOf returns raw as mb echoes an offending fragment: the JSON value
// itself when it is valid JSON, else the text.
func sourceOf(raw json.RawMessage) any {
	if json.Valid(raw) {
		return json.RawMessage(bytes.Clone(raw))
	}
	return string(raw)
}

// PathKey is a path a matching request may have. Keys are compared without
// regard to ASCII case, whatever the predicate's caseSensitive says: a
// weaker requirement is still a sound one.
type PathKey = message.PathKey

// PathKeys returns the paths of which every request p matches has one, so
// that an engine can index stubs by them, or nil when p says nothing of the
// path. It never claims a requirement p does not have: an `and` gives its
// most selective child's keys, an `or` all its children's (when each has
// some), a `not` none.
func PathKeys(p Predicate) []PathKey {
	switch p := p.(type) {
	case *leaf:
		return p.paths
	case allP:
		var best []PathKey
		for _, c := range p {
			if k := PathKeys(c); k != nil && (best == nil || selectivity(k) < selectivity(best)) {
				best = k
			}
		}
		return best
	case anyP:
		var all []PathKey
		for _, c := range p {
			k := PathKeys(c)
			if k == nil {
				return nil
			}
			all = append(all, k...)
		}
		return all
	}
	return nil
}

// selectivity ranks key sets, lowest best: whole paths before starts, then
// fewer keys.
func selectivity(keys []PathKey) int {
	n := len(keys)
	for _, k := range keys {
		if k.Prefix {
			return 1<<16 + n
		}
	}
	return n
}
