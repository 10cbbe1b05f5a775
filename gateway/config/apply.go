package config

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"

	"github.com/cespare/xxhash/v2"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
)

// Refusals in mb 2.9.1's words, which the admin API also gives before a
// command is made (an index that is not a number).
const (
	MsgNoImposter = "Try POSTing to /imposters first?"
	MsgStubIndex  = "'stubIndex' must be a valid integer, representing the array index position of the stub to replace"
	MsgIndex      = "'index' must be between 0 and the length of the stubs array"
)

// Apply reduces s and cmd to the next state and the command's result. It
// is pure: the same state and command give byte-identical results on every
// node. A refused command (Result.Err) returns s itself: nothing changed.
func Apply(s *State, cmd *Command) (*State, Result) {
	next := s.clone()
	res := next.apply(cmd)
	if res.Err != nil {
		return s, Result{Err: res.Err}
	}
	if cmd.Op == OpRecordStub || cmd.Op == OpRecordStubs {
		// A recording names no module (record refuses one that does), so
		// no reference can dangle or go: the checks below, which read
		// every stub, have nothing to find.
		return next, res
	}
	for h, b := range cmd.Modules {
		if _, ok := next.Modules[h]; !ok {
			if next.Modules == nil {
				next.Modules = map[string][]byte{}
			}
			next.Modules[h] = b
		}
	}
	if r := next.checkRefs(); r.Err != nil {
		return s, r
	}
	used := next.referenced()
	maps.DeleteFunc(next.Modules, func(h string, _ []byte) bool { return !used[h] })
	return next, res
}

func (s *State) apply(cmd *Command) Result {
	switch cmd.Op {
	case OpCreateImposter, OpReplaceImposter:
		if len(cmd.Imposters) != 1 {
			return refuse(mberr.BadData, "%s needs one imposter", cmd.Op)
		}
		doc := cmd.Imposters[0]
		if r := checkPort(doc.Port); r.Err != nil {
			return r
		}
		old := s.Imposters[doc.Port]
		if old != nil && cmd.Op == OpCreateImposter {
			return refuse(mberr.ResourceConflict, "Port %d is already in use", doc.Port)
		}
		imp := s.imposter(doc)
		if old != nil && old.Equal(imp) {
			return Result{}
		}
		s.setImposter(imp)
		if old != nil {
			return Result{Dropped: []int{doc.Port}}
		}
		return Result{}
	case OpDeleteImposter:
		if s.Imposters[cmd.Port] == nil {
			return Result{}
		}
		delete(s.Imposters, cmd.Port)
		return Result{Dropped: []int{cmd.Port}}
	case OpReplaceAll:
		seen := map[int]bool{}
		for _, doc := range cmd.Imposters {
			if r := checkPort(doc.Port); r.Err != nil {
				return r
			}
			if seen[doc.Port] {
				return refuse(mberr.ResourceConflict, "Port %d is already in use", doc.Port)
			}
			seen[doc.Port] = true
		}
		old := s.Imposters
		s.Imposters = make(map[int]*Imposter, len(cmd.Imposters))
		for _, doc := range cmd.Imposters {
			imp := s.imposter(doc)
			if prev := old[doc.Port]; cmd.Keep && prev != nil && prev.Equal(imp) {
				imp = prev
			}
			s.setImposter(imp)
		}
		var dropped []int
		for _, port := range slices.Sorted(maps.Keys(old)) {
			if s.Imposters[port] != old[port] {
				dropped = append(dropped, port)
			}
		}
		return Result{Dropped: dropped}
	case OpRecordStub:
		if len(cmd.Stubs) != 1 {
			return refuse(mberr.BadData, "%s needs one stub", cmd.Op)
		}
		return s.record(map[int]*Imposter{}, Record{Port: cmd.Port, Anchor: cmd.Anchor, Once: cmd.Once, Stub: cmd.Stubs[0]})
	case OpRecordStubs:
		// Each recording is applied or refused on its own; the batch
		// itself never is.
		derived := map[int]*Imposter{}
		res := Result{Results: make([]Result, len(cmd.Records))}
		for i, r := range cmd.Records {
			res.Results[i] = s.record(derived, r)
		}
		return res
	case OpInsertStub, OpInsertStubs, OpReplaceStub, OpDeleteStub, OpReplaceStubs, OpDropRecorded:
		old := s.Imposters[cmd.Port]
		if old == nil {
			return refuse(mberr.NoSuchResource, MsgNoImposter)
		}
		stubs := slices.Clone(old.Stubs())
		res := s.editStubs(&stubs, cmd)
		if res.Err == nil {
			s.setImposter(NewImposter(old.Port, old.Header, stubs))
		}
		return res
	case OpPutPlugin:
		if cmd.Name == "" || cmd.Plugin == nil || cmd.Plugin.Hash == "" {
			return refuse(mberr.BadData, "a plugin needs a name and a module")
		}
		if s.Plugins == nil {
			s.Plugins = map[string]Plugin{}
		}
		s.Plugins[cmd.Name] = *cmd.Plugin
		return Result{}
	case OpDeletePlugin:
		if _, ok := s.Plugins[cmd.Name]; !ok {
			return Result{}
		}
		if users := s.usersOf(cmd.Name); len(users) > 0 {
			return refuse(mberr.ResourceConflict, "plugin %q is in use by the imposter on port %d", cmd.Name, users[0])
		}
		delete(s.Plugins, cmd.Name)
		return Result{}
	}
	return refuse(mberr.BadData, "unknown configuration command %s", cmd.Op)
}

func checkPort(port int) Result {
	if port <= 0 || port >= 65536 {
		return refuse(mberr.BadData, "invalid value for 'port'")
	}
	return Result{}
}

// imposter makes an imposter of doc, its stubs numbered from NextStubID.
func (s *State) imposter(doc ImposterDoc) *Imposter {
	stubs := make([]Stub, 0, len(doc.Stubs))
	for _, sd := range doc.Stubs {
		stubs = append(stubs, s.stub(sd))
	}
	return NewImposter(doc.Port, doc.Header, stubs)
}

func (s *State) stub(sd StubDoc) Stub {
	id := s.NextStubID
	s.NextStubID++
	return Stub{ID: id, JSON: sd.JSON, Refs: sd.Refs, Signature: sd.Signature, parsed: sd.Parsed}
}

func (s *State) setImposter(imp *Imposter) {
	if s.Imposters == nil {
		s.Imposters = map[int]*Imposter{}
	}
	s.Imposters[imp.Port] = imp
}

// editStubs applies a stub command to list, a copy the caller owns.
func (s *State) editStubs(list *[]Stub, cmd *Command) Result {
	stubs := *list
	defer func() { *list = stubs }()
	one := func() (StubDoc, Result) {
		if len(cmd.Stubs) != 1 {
			return StubDoc{}, refuse(mberr.BadData, "%s needs one stub", cmd.Op)
		}
		return cmd.Stubs[0], Result{}
	}
	at := func(n int) (int, Result) {
		if cmd.Index < 0 || cmd.Index >= n {
			r := refuse(mberr.BadData, MsgStubIndex)
			r.Err.Status = http.StatusNotFound
			return 0, r
		}
		return cmd.Index, Result{}
	}
	switch cmd.Op {
	case OpInsertStub:
		sd, r := one()
		if r.Err != nil {
			return r
		}
		i := cmd.Index
		if i == -1 {
			i = len(stubs)
		}
		if i < 0 || i > len(stubs) {
			return refuse(mberr.BadData, MsgIndex)
		}
		st := s.stub(sd)
		stubs = slices.Insert(stubs, i, st)
		return Result{StubID: st.ID}
	case OpInsertStubs:
		if len(cmd.Stubs) == 0 {
			return refuse(mberr.BadData, "%s needs stubs", cmd.Op)
		}
		i := cmd.Index
		if i == -1 {
			i = len(stubs)
		}
		if i < 0 || i > len(stubs) {
			return refuse(mberr.BadData, MsgIndex)
		}
		add := make([]Stub, 0, len(cmd.Stubs))
		for _, sd := range cmd.Stubs {
			add = append(add, s.stub(sd))
		}
		stubs = slices.Insert(stubs, i, add...)
		return Result{StubID: add[0].ID}
	case OpReplaceStub:
		sd, r := one()
		if r.Err != nil {
			return r
		}
		i, r := at(len(stubs))
		if r.Err != nil {
			return r
		}
		st := s.stub(sd)
		stubs[i] = st
		return Result{StubID: st.ID}
	case OpDeleteStub:
		i, r := at(len(stubs))
		if r.Err != nil {
			return r
		}
		stubs = slices.Delete(stubs, i, i+1)
		return Result{}
	case OpReplaceStubs:
		stubs = make([]Stub, 0, len(cmd.Stubs))
		for _, sd := range cmd.Stubs {
			stubs = append(stubs, s.stub(sd))
		}
		return Result{}
	case OpDropRecorded:
		kept := make([]Stub, 0, len(stubs))
		for _, st := range stubs {
			b, ok := dropRecorded(st.JSON) // Stubs() gave each its whole JSON
			if !ok {
				continue // every response was recorded: the stub goes
			}
			// mb rewrites the whole list, so every stub starts its
			// responses over: new ids say the same.
			kept = append(kept, s.stub(StubDoc{JSON: b, Refs: st.Refs, Signature: st.Signature}))
		}
		stubs = kept
		return Result{}
	}
	return refuse(mberr.BadData, "unknown stub command %s", cmd.Op)
}

// record applies one recording to the imposter on its port, deriving
// the imposter once per command (derived holds the versions this command
// made). It costs O(log n) in the imposter's stubs, and for proxyAlways
// nothing in the responses the stub already has.
func (s *State) record(derived map[int]*Imposter, r Record) Result {
	imp := derived[r.Port]
	if imp == nil {
		old := s.Imposters[r.Port]
		if old == nil {
			return refuse(mberr.NoSuchResource, MsgNoImposter)
		}
		imp = old.derive()
		derived[r.Port] = imp
		s.setImposter(imp)
	}
	sd := r.Stub
	if len(sd.Refs.Modules)+len(sd.Refs.Plugins) > 0 {
		return refuse(mberr.BadData, "a recording names no module")
	}
	anchor, ok := imp.ids.Get(r.Anchor)
	if !ok {
		return refuse(mberr.NoSuchResource, "the proxy stub that recorded this is gone")
	}
	if r.Once {
		if anchor.minor != 0 {
			// Only a recording has a minor key, and a recording proxies
			// nothing; renumbering keeps this true whatever made it.
			renumber(imp)
			anchor, _ = imp.ids.Get(r.Anchor)
		}
		st := s.stub(sd)
		st.Recorded = true
		imp.put(Key{anchor.major - 1, st.ID}, &st, true)
		imp.changed(st.ID)
		return Result{StubID: st.ID}
	}
	h := xxhash.Sum64String(sd.Signature)
	var into *Stub
	var at Key
	imp.sigs.Each(h, func(k Key) bool {
		if k.Compare(anchor) <= 0 || into != nil && k.Compare(at) > 0 {
			return true
		}
		if st, ok := imp.stubs.Get(k); ok && st.Signature == sd.Signature {
			into, at = st, k
		}
		return true
	})
	if into != nil {
		var rs []json.RawMessage
		var parsed []any
		if p, ok := sd.Parsed.(ResponseParts); ok {
			rs, parsed = p.ResponseParts()
		} else if rs, ok = responsesOf(sd.JSON); !ok {
			return refuse(mberr.BadData, "cannot add a recorded response to stub %d", into.ID)
		}
		imp.put(at, into.withMore(rs, parsed), false)
		imp.changed(into.ID)
		return Result{StubID: into.ID}
	}
	last, _, _ := imp.stubs.Last()
	st := s.stub(sd)
	st.Recorded = true
	imp.put(Key{major: last.major | 1 + 1}, &st, true)
	imp.changed(st.ID)
	return Result{StubID: st.ID}
}

// ResponseParts is what a StubDoc's Parsed offers when it knows its
// responses: each as a part of the StubDoc's JSON (what responsesOf would
// read from it), and what each parses into.
type ResponseParts interface {
	ResponseParts() ([]json.RawMessage, []any)
}

// renumber gives imp's stubs fresh keys, in their order (O(n)).
func renumber(imp *Imposter) {
	fresh := NewImposter(imp.Port, imp.Header, nil)
	i := 0
	imp.stubs.Each(func(_ Key, st *Stub) bool {
		i++
		fresh.put(Key{major: 2 * uint64(i)}, st, true)
		return true
	})
	imp.stubs, imp.ids, imp.sigs, imp.edit = fresh.stubs, fresh.ids, fresh.sigs, fresh.edit
	imp.journal, imp.jlen = &journal{}, 0
}

// responsesOf returns the responses of a stub's JSON.
func responsesOf(stub []byte) ([]json.RawMessage, bool) {
	fields, err := message.ObjectFields(stub)
	if err != nil {
		return nil, false
	}
	var rs []json.RawMessage
	if json.Unmarshal(get(fields, "responses"), &rs) != nil {
		return nil, false
	}
	return rs, true
}

// checkRefs refuses a state whose stubs or plugins name a module it lacks:
// a maker that skipped its checks must not diverge the replicas.
func (s *State) checkRefs() Result {
	for name, p := range s.Plugins {
		if _, ok := s.Modules[p.Hash]; !ok {
			return refuse(mberr.BadData, "plugin %q: module %s is missing", name, p.Hash)
		}
	}
	var r Result
	for _, port := range s.Ports() {
		s.Imposters[port].Each(func(st *Stub) bool {
			for _, m := range st.Refs.Modules {
				if _, ok := s.Modules[m.Hash]; !ok {
					r = refuse(mberr.BadData, "wasm module %q: its content is missing", m.Module)
					return false
				}
			}
			for _, name := range st.Refs.Plugins {
				if _, ok := s.Plugins[name]; !ok {
					r = refuse(mberr.BadData, "no plugin named %q: PUT it to /plugins/%s first", name, name)
					return false
				}
			}
			return true
		})
		if r.Err != nil {
			return r
		}
	}
	return r
}

// appendResponses adds the responses more to those of stub to.
func appendResponses(to []byte, more []json.RawMessage) ([]byte, bool) {
	fields, err := message.ObjectFields(to)
	if err != nil {
		return nil, false
	}
	var have []json.RawMessage
	if raw := get(fields, "responses"); raw != nil && json.Unmarshal(raw, &have) != nil {
		return nil, false
	}
	return withResponses(fields, append(have, more...)), true
}

// dropRecorded removes the recorded responses of a stub; ok is false when
// none is left.
func dropRecorded(stub []byte) ([]byte, bool) {
	fields, err := message.ObjectFields(stub)
	if err != nil {
		return stub, true
	}
	var rs []json.RawMessage
	if json.Unmarshal(get(fields, "responses"), &rs) != nil {
		return stub, true
	}
	kept := slices.DeleteFunc(slices.Clone(rs), recorded)
	if len(kept) == 0 {
		return nil, false
	}
	if len(kept) == len(rs) {
		return stub, true
	}
	return withResponses(fields, kept), true
}

// recorded is mb's test for a response a proxy recorded: an `is` with a
// numeric _proxyResponseTime.
func recorded(r json.RawMessage) bool {
	var v struct {
		Is *struct {
			T json.RawMessage `json:"_proxyResponseTime"`
		} `json:"is"`
	}
	if json.Unmarshal(r, &v) != nil || v.Is == nil {
		return false
	}
	t := bytes.TrimSpace(v.Is.T)
	return len(t) > 0 && (t[0] == '-' || t[0] >= '0' && t[0] <= '9')
}

func get(fields []message.Field, key string) json.RawMessage {
	for _, f := range fields {
		if f.Key == key {
			return f.Value
		}
	}
	return nil
}

// withResponses renders a stub's fields, in order, with its responses
// replaced by rs.
func withResponses(fields []message.Field, rs []json.RawMessage) []byte {
	list, _ := json.Marshal(rs) // raw messages always encode
	var b bytes.Buffer
	b.WriteByte('{')
	done := false
	for _, f := range fields {
		v := f.Value
		if f.Key == "responses" {
			v, done = list, true
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.Key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	if !done {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(`"responses":`)
		b.Write(list)
	}
	b.WriteByte('}')
	return b.Bytes()
}
