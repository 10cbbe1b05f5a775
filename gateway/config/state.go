package config

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// State is the whole imposter configuration.
type State struct {
	// Imposters by port.
	Imposters map[int]*Imposter `cbor:"1,keyasint,omitempty"`
	// Plugins are the modules registered by name with PUT /plugins/:name.
	Plugins map[string]Plugin `cbor:"2,keyasint,omitempty"`
	// Modules holds, by content hash, the bytes of every module a plugin
	// or a stub refers to; a module nothing refers to is dropped.
	Modules map[string][]byte `cbor:"3,keyasint,omitempty"`
	// NextStubID is the id the next new stub gets. Ids are never reused.
	NextStubID uint64 `cbor:"4,keyasint,omitempty"`
}

// Imposter is one imposter's definition.
type Imposter struct {
	Port int `cbor:"1,keyasint"`
	// Header is the imposter's JSON without its stubs, as stored.
	Header []byte `cbor:"2,keyasint"`
	Stubs  []Stub `cbor:"3,keyasint,omitempty"`
}

// Stub is one stub of an imposter.
type Stub struct {
	// ID is stable: edits to other stubs keep it, so what the engine keeps
	// per stub (where its responses cycle is) survives them.
	ID uint64 `cbor:"1,keyasint"`
	// JSON is the stub as stored.
	JSON []byte `cbor:"2,keyasint"`
	// Refs are the modules the stub names.
	Refs Refs `cbor:"3,keyasint,omitempty"`
	// Recorded marks a stub a proxy recorded, which DropRecorded removes.
	Recorded bool `cbor:"4,keyasint,omitempty"`
	// Signature identifies a recorded stub's predicates, canonically:
	// proxyAlways adds a response to the recorded stub of equal signature.
	Signature string `cbor:"5,keyasint,omitempty"`
}

// Refs are the modules a stub's wasm predicates, responses and decorators
// name, as they were resolved when the stub was made.
type Refs struct {
	// Modules are the modules named by path or carried inline (base64),
	// by the hash of their content then, in the order the stub names them.
	Modules []ModuleRef `cbor:"1,keyasint,omitempty"`
	// Plugins lists the registered plugin names the stub uses, sorted.
	Plugins []string `cbor:"2,keyasint,omitempty"`
}

// ModuleRef is one module a stub names by path or carries inline.
type ModuleRef struct {
	// Module is the wasm spec's `module`: a path, or the name an inline
	// module goes by.
	Module string `cbor:"1,keyasint"`
	Hash   string `cbor:"2,keyasint"`
	// Limits are the wasm spec's own `limits`.
	Limits Limits `cbor:"3,keyasint,omitempty"`
}

// Module returns the ref a wasm spec naming module with lim uses.
func (r Refs) Module(module string, lim Limits) (ModuleRef, bool) {
	for _, m := range r.Modules {
		if m.Module == module && m.Limits == lim {
			return m, true
		}
	}
	return ModuleRef{}, false
}

// Plugin is a module registered by name.
type Plugin struct {
	Hash   string `cbor:"1,keyasint"`
	Limits Limits `cbor:"2,keyasint,omitempty"`
}

// Limits are a plugin's limits as PUT /plugins/:name's query gives them;
// zero keeps the plugin host's default, and DeadlineMs -1 turns the
// deadline off.
type Limits struct {
	MemoryPages      uint32 `cbor:"1,keyasint,omitempty" json:"memoryPages,omitempty"`
	DeadlineMs       int64  `cbor:"2,keyasint,omitempty" json:"deadlineMs,omitempty"`
	MaxResponseBytes int    `cbor:"3,keyasint,omitempty" json:"maxResponseBytes,omitempty"`
	PoolSize         int    `cbor:"4,keyasint,omitempty" json:"poolSize,omitempty"`
	RecycleAfter     int    `cbor:"5,keyasint,omitempty" json:"recycleAfter,omitempty"`
}

// Empty is the state before the first command.
func Empty() *State { return &State{NextStubID: 1} }

// Ports lists the imposters' ports in order.
func (s *State) Ports() []int { return slices.Sorted(maps.Keys(s.Imposters)) }

// Imposter returns the imposter on port, or nil.
func (s *State) Imposter(port int) *Imposter { return s.Imposters[port] }

// Index returns the position of the stub with id, or -1.
func (imp *Imposter) Index(id uint64) int {
	return slices.IndexFunc(imp.Stubs, func(st Stub) bool { return st.ID == id })
}

// Equal reports whether two imposters have the same definition, stub ids
// aside: replacing one with the other changes nothing a client can see.
func (imp *Imposter) Equal(o *Imposter) bool {
	if imp.Port != o.Port || !bytes.Equal(imp.Header, o.Header) || len(imp.Stubs) != len(o.Stubs) {
		return false
	}
	for i := range imp.Stubs {
		a, b := imp.Stubs[i], o.Stubs[i]
		if !bytes.Equal(a.JSON, b.JSON) || a.Recorded != b.Recorded || a.Signature != b.Signature || !a.Refs.equal(b.Refs) {
			return false
		}
	}
	return true
}

func (r Refs) equal(o Refs) bool {
	return slices.Equal(r.Modules, o.Modules) && slices.Equal(r.Plugins, o.Plugins)
}

// clone copies the top-level maps, sharing every imposter and module: the
// copy-on-write start of Apply.
func (s *State) clone() *State {
	return &State{
		Imposters:  maps.Clone(s.Imposters),
		Plugins:    maps.Clone(s.Plugins),
		Modules:    maps.Clone(s.Modules),
		NextStubID: s.NextStubID,
	}
}

// referenced reports every module hash a plugin or stub refers to.
func (s *State) referenced() map[string]bool {
	used := map[string]bool{}
	for _, p := range s.Plugins {
		used[p.Hash] = true
	}
	for _, imp := range s.Imposters {
		for _, st := range imp.Stubs {
			for _, m := range st.Refs.Modules {
				used[m.Hash] = true
			}
		}
	}
	return used
}

// usersOf lists, in port then stub order, the imposters whose stubs use the
// plugin registered as name.
func (s *State) usersOf(name string) []int {
	var ports []int
	for _, port := range s.Ports() {
		for _, st := range s.Imposters[port].Stubs {
			if slices.Contains(st.Refs.Plugins, name) {
				ports = append(ports, port)
				break
			}
		}
	}
	return ports
}

// Signature is the canonical form of a stub's predicates: keys sorted at
// every level, as mb 2.9.1 compares predicates (safe-stable-stringify). It
// keys proxyOnce claims and matches proxyAlways recordings to their stub.
func Signature(preds []json.RawMessage) string {
	v := make([]any, 0, len(preds))
	for _, p := range preds {
		var x any
		_ = json.Unmarshal(p, &x)
		v = append(v, x)
	}
	b, _ := json.Marshal(v) // encoding/json sorts map keys: canonical
	return string(b)
}
