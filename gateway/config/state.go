package config

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/riftgate/riftgate/gateway/hashidx"
	"github.com/riftgate/riftgate/gateway/ptree"
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

// Imposter is one imposter's definition. Its stubs are kept in persistent
// trees (gateway/ptree), ordered by an order key, so that a recording makes a new
// version in O(log n) sharing every other stub; Stubs lists them.
type Imposter struct {
	Port int
	// Header is the imposter's JSON without its stubs, as stored.
	Header []byte

	stubs ptree.Map[Key, *Stub]  // in the imposter's order
	ids   ptree.Map[uint64, Key] // stub id → its order key
	// sigs holds the stubs' order keys by the hash of their signature:
	// the first stub after a proxy stub with a recording's signature is
	// the least of a few.
	sigs hashidx.Index[Key]
	list *stubList // Stubs(), made once per version on demand
	// journal lists the ids of the stubs recordings added or extended,
	// since the version that started it: what the reconciler reads to
	// move a running imposter between two versions without comparing
	// every stub. jlen is how much of it this version includes.
	journal *journal
	jlen    int
	// edit is the run of tree Sets that makes this version: a command
	// changes only versions it made itself (NewImposter, derive), so their
	// Sets change in place the nodes the same command made before.
	edit *ptree.Edit
	// parsed holds, by stub id, what the commands that made this version
	// said their stubs parse into: this version's only, so that a parse
	// lives until the reconciler has compiled its stub, not as long as
	// the stub (a recording holds hundreds of thousands).
	parsed map[uint64]any
}

// Key orders an imposter's stubs. A rebuilt imposter numbers its stubs
// (2, 0), (4, 0), ...; proxyOnce puts a recording before its proxy stub
// (m, 0) at (m-1, id), ids growing, and proxyAlways appends a new stub at
// the next even major. Keys are not encoded: a decoded imposter is
// renumbered, which keeps the order, and the order is all they say.
type Key struct{ major, minor uint64 }

// NewKey returns a key (for tests of what orders stubs by key).
func NewKey(major, minor uint64) Key { return Key{major, minor} }

// Compare orders two keys as their stubs are ordered.
func (a Key) Compare(b Key) int {
	if a.major != b.major {
		return cmpU(a.major, b.major)
	}
	return cmpU(a.minor, b.minor)
}

func cmpOkey(a, b Key) int { return a.Compare(b) }

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type stubList struct {
	once  sync.Once
	stubs []Stub
}

// journal is shared by the versions of an imposter that recordings made
// one from another. Only the newest version appends to it; a version made
// from an older one (a state forked, as tests and refused batches do)
// starts a journal of its own.
type journal struct {
	mu  sync.Mutex
	ids []uint64
}

// NewImposter makes an imposter of stubs, in order.
func NewImposter(port int, header []byte, stubs []Stub) *Imposter {
	imp := &Imposter{Port: port, Header: header, list: &stubList{}, journal: &journal{}, edit: &ptree.Edit{},
		stubs: ptree.New[Key, *Stub](cmpOkey), ids: ptree.New[uint64, Key](cmpU)}
	for i := range stubs {
		st := stubs[i]
		imp.put(Key{major: 2 * uint64(i+1)}, &st, true)
	}
	return imp
}

// put sets the stub at k; fresh says it is new to the imposter. What st
// was parsed into moves to the version, and is forgotten once proxyAlways
// added responses to it (its Doc is then more).
func (imp *Imposter) put(k Key, st *Stub, fresh bool) {
	switch {
	case st.nmore > 0:
		delete(imp.parsed, st.ID)
	case st.parsed != nil:
		if imp.parsed == nil {
			imp.parsed = map[uint64]any{}
		}
		imp.parsed[st.ID], st.parsed = st.parsed, nil
	}
	imp.stubs = imp.stubs.SetIn(imp.edit, k, st)
	if fresh {
		imp.ids = imp.ids.SetIn(imp.edit, st.ID, k)
		imp.sigs = imp.sigs.Add(xxhash.Sum64String(st.Signature), k)
	}
}

// derive returns a version of imp for a recording to change: it shares
// every tree, and the journal when imp is its newest version.
func (imp *Imposter) derive() *Imposter {
	d := *imp
	d.list, d.edit, d.parsed = &stubList{}, &ptree.Edit{}, nil
	imp.journal.mu.Lock()
	if len(imp.journal.ids) != imp.jlen {
		d.journal, d.jlen = &journal{}, 0
	}
	imp.journal.mu.Unlock()
	return &d
}

// changed notes in the journal that the stub id was added or extended.
func (imp *Imposter) changed(id uint64) {
	j := imp.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.ids) != imp.jlen {
		// Another version was made from the one imp came from meanwhile:
		// imp's history starts here.
		imp.journal, imp.jlen = &journal{}, 0
		j = imp.journal
	}
	j.ids = append(j.ids, id)
	imp.jlen++
}

// Changes returns the ids of the stubs (each once, in the order first
// changed) that recordings added or gave responses to on the way from
// prev to imp; ok is false when imp was not made from prev by recordings
// alone, and every stub is to be compared.
func (imp *Imposter) Changes(prev *Imposter) (ids []uint64, ok bool) {
	if prev == nil || imp.journal != prev.journal || prev.jlen > imp.jlen {
		return nil, false
	}
	imp.journal.mu.Lock()
	span := slices.Clone(imp.journal.ids[prev.jlen:imp.jlen])
	imp.journal.mu.Unlock()
	seen := make(map[uint64]bool, len(span))
	for _, id := range span {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, true
}

// Key returns the order key of the stub with id.
func (imp *Imposter) Key(id uint64) (Key, bool) { return imp.ids.Get(id) }

// EachKeyed calls fn on every stub, with its order key, in order until fn
// returns false.
func (imp *Imposter) EachKeyed(fn func(Key, *Stub) bool) { imp.stubs.Each(fn) }

// Len is the number of stubs.
func (imp *Imposter) Len() int { return imp.stubs.Len() }

// Stub returns the stub with id, as stored, and its position's key.
func (imp *Imposter) Stub(id uint64) (*Stub, bool) {
	k, ok := imp.ids.Get(id)
	if !ok {
		return nil, false
	}
	return imp.stubs.Get(k)
}

// Each calls fn on every stub in order until fn returns false; the stubs
// are as stored (Stub.Doc gives their whole JSON).
func (imp *Imposter) Each(fn func(*Stub) bool) {
	imp.stubs.Each(func(_ Key, st *Stub) bool { return fn(st) })
}

// Stubs lists the stubs in order, each with its whole JSON. It is made
// once per version: O(n), for the admin API and the edits that rebuild.
func (imp *Imposter) Stubs() []Stub {
	imp.list.once.Do(func() {
		out := make([]Stub, 0, imp.stubs.Len())
		imp.stubs.Each(func(_ Key, st *Stub) bool {
			c := *st
			c.JSON, c.more, c.nmore = st.Doc(), nil, 0
			out = append(out, c)
			return true
		})
		imp.list.stubs = out
	})
	return imp.list.stubs
}

// Stub is one stub of an imposter.
type Stub struct {
	// ID is stable: edits to other stubs keep it, so what the engine keeps
	// per stub (where its responses cycle is) survives them.
	ID uint64 `cbor:"1,keyasint"`
	// JSON is the stub as stored; for a stub proxyAlways recorded into,
	// without the responses in More (Doc has them all).
	JSON []byte `cbor:"2,keyasint"`
	// Refs are the modules the stub names.
	Refs Refs `cbor:"3,keyasint,omitempty"`
	// Recorded marks a stub a proxy recorded, which DropRecorded removes.
	Recorded bool `cbor:"4,keyasint,omitempty"`
	// Signature identifies a recorded stub's predicates, canonically:
	// proxyAlways adds a response to the recorded stub of equal signature.
	Signature string `cbor:"5,keyasint,omitempty"`

	// more holds, in order, the responses proxyAlways added after JSON
	// was made; the first nmore are this version's. Appending one shares
	// the list with the version before (more's owner check).
	more  *moreList
	nmore int
	// parsed is the StubDoc's Parsed, until put moves it to the version.
	parsed any
}

// moreList is the responses proxyAlways added to a stub, shared by the
// versions of the stub like a journal.
type moreList struct {
	mu sync.Mutex
	rs []json.RawMessage
	// parsed holds, beside each of rs, what the recording's StubDoc said
	// it parses into, or nil.
	parsed []any
}

// withMore returns a copy of st with rs added to its responses, parsed
// into parsed (nil, or one per response, each possibly nil).
func (st *Stub) withMore(rs []json.RawMessage, parsed []any) *Stub {
	c := *st
	l := st.more
	if l == nil {
		l = &moreList{}
	}
	l.mu.Lock()
	if len(l.rs) != st.nmore {
		// A version made from st already added to the list: copy.
		nl := &moreList{rs: slices.Clone(l.rs[:st.nmore]), parsed: slices.Clone(l.parsed[:st.nmore])}
		l.mu.Unlock()
		l = nl
		l.mu.Lock()
	}
	l.rs = append(l.rs, rs...)
	if parsed == nil {
		parsed = make([]any, len(rs))
	}
	l.parsed = append(l.parsed, parsed...)
	c.more, c.nmore = l, len(l.rs)
	l.mu.Unlock()
	return &c
}

// More returns the responses proxyAlways added to the stub after its JSON
// was made, from the from-th on.
func (st *Stub) More(from int) []json.RawMessage {
	if st.more == nil || from >= st.nmore {
		return nil
	}
	st.more.mu.Lock()
	defer st.more.mu.Unlock()
	return st.more.rs[from:st.nmore:st.nmore]
}

// MoreParsed returns, beside More(from), what the commands that added
// those responses said each parses into (nil where they did not say).
func (st *Stub) MoreParsed(from int) []any {
	if st.more == nil || from >= st.nmore {
		return nil
	}
	st.more.mu.Lock()
	defer st.more.mu.Unlock()
	return st.more.parsed[from:st.nmore:st.nmore]
}

// Parsed is what the command that made stub id in this version said its
// JSON parses into, or nil: nil too once proxyAlways added responses, as
// its Doc is then more, and in any later version.
func (imp *Imposter) Parsed(id uint64) any { return imp.parsed[id] }

// NumMore is how many responses proxyAlways added after the JSON.
func (st *Stub) NumMore() int { return st.nmore }

// Doc is the stub's whole JSON: its responses with those proxyAlways
// added, as mb stores them.
func (st *Stub) Doc() []byte {
	if st.nmore == 0 {
		return st.JSON
	}
	b, ok := appendResponses(st.JSON, st.More(0))
	if !ok {
		return st.JSON
	}
	return b
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
	return slices.IndexFunc(imp.Stubs(), func(st Stub) bool { return st.ID == id })
}

// Equal reports whether two imposters have the same definition, stub ids
// aside: replacing one with the other changes nothing a client can see.
func (imp *Imposter) Equal(o *Imposter) bool {
	if imp.Port != o.Port || !bytes.Equal(imp.Header, o.Header) || imp.Len() != o.Len() {
		return false
	}
	as, bs := imp.Stubs(), o.Stubs()
	for i := range as {
		a, b := as[i], bs[i]
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
		imp.Each(func(st *Stub) bool {
			for _, m := range st.Refs.Modules {
				used[m.Hash] = true
			}
			return true
		})
	}
	return used
}

// usersOf lists, in port then stub order, the imposters whose stubs use the
// plugin registered as name.
func (s *State) usersOf(name string) []int {
	var ports []int
	for _, port := range s.Ports() {
		s.Imposters[port].Each(func(st *Stub) bool {
			if slices.Contains(st.Refs.Plugins, name) {
				ports = append(ports, port)
				return false
			}
			return true
		})
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
