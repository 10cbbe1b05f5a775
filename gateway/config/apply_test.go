package config

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func header(port int) []byte {
	return []byte(`{"protocol":"http","port":` + strconv.Itoa(port) + `}`)
}

func stubDoc(body string) StubDoc {
	return StubDoc{JSON: []byte(`{"responses":[{"is":{"body":"` + body + `"}}]}`), Signature: "[]"}
}

func imposterDoc(port int, bodies ...string) ImposterDoc {
	d := ImposterDoc{Port: port, Header: header(port)}
	for _, b := range bodies {
		d.Stubs = append(d.Stubs, stubDoc(b))
	}
	return d
}

func mustApply(t *testing.T, s *State, cmd *Command) (*State, Result) {
	t.Helper()
	next, res := Apply(s, cmd)
	if res.Err != nil {
		t.Fatalf("%s refused: %v", cmd.Op, res.Err)
	}
	return next, res
}

// bodies lists the body of each stub's first `is`, or "-".
func bodies(imp *Imposter) []string {
	var out []string
	for _, st := range imp.Stubs() {
		s := string(st.JSON)
		i := strings.Index(s, `"body":"`)
		if i < 0 {
			out = append(out, "-")
			continue
		}
		s = s[i+len(`"body":"`):]
		out = append(out, s[:strings.IndexByte(s, '"')])
	}
	return out
}

func ids(imp *Imposter) []uint64 {
	var out []uint64
	for _, st := range imp.Stubs() {
		out = append(out, st.ID)
	}
	return out
}

func TestStubEditsKeepOtherStubsIDs(t *testing.T) {
	s, _ := mustApply(t, Empty(), &Command{Op: OpCreateImposter, Imposters: []ImposterDoc{imposterDoc(4545, "a", "b", "c")}})
	if got := ids(s.Imposter(4545)); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("ids %v", got)
	}
	s, res := mustApply(t, s, &Command{Op: OpInsertStub, Port: 4545, Index: 1, Stubs: []StubDoc{stubDoc("x")}})
	if res.StubID != 4 || !slices.Equal(ids(s.Imposter(4545)), []uint64{1, 4, 2, 3}) {
		t.Fatalf("insert: %v %v", res, ids(s.Imposter(4545)))
	}
	s, _ = mustApply(t, s, &Command{Op: OpInsertStub, Port: 4545, Index: -1, Stubs: []StubDoc{stubDoc("end")}})
	s, _ = mustApply(t, s, &Command{Op: OpReplaceStub, Port: 4545, Index: 2, Stubs: []StubDoc{stubDoc("B")}})
	s, _ = mustApply(t, s, &Command{Op: OpDeleteStub, Port: 4545, Index: 0})
	imp := s.Imposter(4545)
	if !slices.Equal(ids(imp), []uint64{4, 6, 3, 5}) || !slices.Equal(bodies(imp), []string{"x", "B", "c", "end"}) {
		t.Fatalf("after edits: %v %v", ids(imp), bodies(imp))
	}
}

// OpInsertStubs inserts many stubs in order, each with a new id, at an
// index or at the end.
func TestInsertStubs(t *testing.T) {
	s, _ := mustApply(t, Empty(), &Command{Op: OpCreateImposter, Imposters: []ImposterDoc{imposterDoc(4545, "a", "b")}})
	s, res := mustApply(t, s, &Command{Op: OpInsertStubs, Port: 4545, Index: -1, Stubs: []StubDoc{stubDoc("c"), stubDoc("d")}})
	if res.StubID != 3 {
		t.Errorf("first new id %d, want 3", res.StubID)
	}
	s, _ = mustApply(t, s, &Command{Op: OpInsertStubs, Port: 4545, Index: 1, Stubs: []StubDoc{stubDoc("x"), stubDoc("y")}})
	imp := s.Imposter(4545)
	if !slices.Equal(ids(imp), []uint64{1, 5, 6, 2, 3, 4}) || !slices.Equal(bodies(imp), []string{"a", "x", "y", "b", "c", "d"}) {
		t.Fatalf("after inserts: %v %v", ids(imp), bodies(imp))
	}
}

func TestRefusalsChangeNothing(t *testing.T) {
	s, _ := mustApply(t, Empty(), &Command{Op: OpCreateImposter, Imposters: []ImposterDoc{imposterDoc(4545, "a")}})
	before, _ := EncodeState(s)
	cases := []struct {
		name   string
		cmd    Command
		code   string
		status int
	}{
		{"port taken", Command{Op: OpCreateImposter, Imposters: []ImposterDoc{imposterDoc(4545)}}, "resource conflict", 0},
		{"bad port", Command{Op: OpCreateImposter, Imposters: []ImposterDoc{imposterDoc(70000)}}, "bad data", 0},
		{"no imposter", Command{Op: OpInsertStub, Port: 1, Index: -1, Stubs: []StubDoc{stubDoc("x")}}, "no such resource", 0},
		{"insert past end", Command{Op: OpInsertStub, Port: 4545, Index: 2, Stubs: []StubDoc{stubDoc("x")}}, "bad data", 0},
		{"inserts past end", Command{Op: OpInsertStubs, Port: 4545, Index: 2, Stubs: []StubDoc{stubDoc("x")}}, "bad data", 0},
		{"inserts of nothing", Command{Op: OpInsertStubs, Port: 4545, Index: -1}, "bad data", 0},
		{"inserts, no imposter", Command{Op: OpInsertStubs, Port: 1, Index: -1, Stubs: []StubDoc{stubDoc("x")}}, "no such resource", 0},
		{"inserts, missing module", Command{Op: OpInsertStubs, Port: 4545, Index: -1, Stubs: []StubDoc{stubDoc("x"), {JSON: []byte(`{}`), Refs: Refs{Modules: []ModuleRef{{Module: "a.wasm", Hash: "ff"}}}}}}, "bad data", 0},
		{"replace past end", Command{Op: OpReplaceStub, Port: 4545, Index: 1, Stubs: []StubDoc{stubDoc("x")}}, "bad data", http.StatusNotFound},
		{"delete negative", Command{Op: OpDeleteStub, Port: 4545, Index: -1}, "bad data", http.StatusNotFound},
		{"duplicate ports", Command{Op: OpReplaceAll, Imposters: []ImposterDoc{imposterDoc(1), imposterDoc(1)}}, "resource conflict", 0},
		{"missing module", Command{Op: OpInsertStub, Port: 4545, Index: -1, Stubs: []StubDoc{{JSON: []byte(`{}`), Refs: Refs{Modules: []ModuleRef{{Module: "a.wasm", Hash: "ff"}}}}}}, "bad data", 0},
		{"unknown plugin", Command{Op: OpInsertStub, Port: 4545, Index: -1, Stubs: []StubDoc{{JSON: []byte(`{}`), Refs: Refs{Plugins: []string{"nope"}}}}}, "bad data", 0},
		{"plugin without module", Command{Op: OpPutPlugin, Name: "p", Plugin: &Plugin{Hash: "ab"}}, "bad data", 0},
		{"unknown op", Command{Op: 200}, "bad data", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next, res := Apply(s, &tc.cmd)
			if res.Err == nil || res.Err.Code != tc.code || res.Err.Status != tc.status {
				t.Fatalf("result %+v, want code %q status %d", res.Err, tc.code, tc.status)
			}
			if next != s {
				t.Fatalf("a refused command returned a new state")
			}
			after, _ := EncodeState(s)
			if string(after) != string(before) {
				t.Fatalf("a refused command changed the state")
			}
		})
	}
}

func TestReplaceImposter(t *testing.T) {
	s, _ := mustApply(t, Empty(), &Command{Op: OpCreateImposter, Imposters: []ImposterDoc{imposterDoc(4545, "a")}})
	// The same definition again (--configfile at every restart) changes
	// nothing: ids, and the flows of the running imposter, stay.
	same, res := mustApply(t, s, &Command{Op: OpReplaceImposter, Imposters: []ImposterDoc{imposterDoc(4545, "a")}})
	if len(res.Dropped) != 0 || !slices.Equal(ids(same.Imposter(4545)), []uint64{1}) {
		t.Fatalf("identical replace: %+v %v", res, ids(same.Imposter(4545)))
	}
	other, res := mustApply(t, s, &Command{Op: OpReplaceImposter, Imposters: []ImposterDoc{imposterDoc(4545, "b")}})
	if !slices.Equal(res.Dropped, []int{4545}) || !slices.Equal(bodies(other.Imposter(4545)), []string{"b"}) {
		t.Fatalf("replace: %+v", res)
	}
	all, res := mustApply(t, other, &Command{Op: OpReplaceAll, Imposters: []ImposterDoc{imposterDoc(1, "x"), imposterDoc(2)}})
	if !slices.Equal(res.Dropped, []int{4545}) || !slices.Equal(all.Ports(), []int{1, 2}) {
		t.Fatalf("replace all: %+v %v", res, all.Ports())
	}
	// With Keep (a --configfile over a --datadir), an identical imposter
	// stays as it runs; a changed one and a missing one go.
	kept, res := mustApply(t, all, &Command{Op: OpReplaceAll, Keep: true, Imposters: []ImposterDoc{imposterDoc(1, "x"), imposterDoc(3)}})
	if !slices.Equal(res.Dropped, []int{2}) || kept.Imposter(1) != all.Imposter(1) || !slices.Equal(kept.Ports(), []int{1, 3}) {
		t.Fatalf("replace all, keeping: %+v %v", res, kept.Ports())
	}
	gone, res := mustApply(t, all, &Command{Op: OpDeleteImposter, Port: 1})
	if !slices.Equal(res.Dropped, []int{1}) || !slices.Equal(gone.Ports(), []int{2}) {
		t.Fatalf("delete: %+v %v", res, gone.Ports())
	}
	if _, res := mustApply(t, gone, &Command{Op: OpDeleteImposter, Port: 1}); len(res.Dropped) != 0 {
		t.Fatalf("deleting an absent imposter dropped %v", res.Dropped)
	}
}

func recordedStub(sig, body string) StubDoc {
	return StubDoc{
		JSON:      []byte(`{"predicates":[` + sig + `],"responses":[{"is":{"body":"` + body + `","_proxyResponseTime":1}}]}`),
		Signature: "[" + sig + "]",
	}
}

func TestRecordStub(t *testing.T) {
	proxy := StubDoc{JSON: []byte(`{"responses":[{"proxy":{"to":"http://x"}}]}`), Signature: "[]"}
	s, _ := mustApply(t, Empty(), &Command{Op: OpCreateImposter, Imposters: []ImposterDoc{{Port: 1, Header: header(1), Stubs: []StubDoc{stubDoc("first"), proxy, stubDoc("last")}}}})
	const anchor = 2
	// proxyOnce: just before the proxy stub.
	s, res := mustApply(t, s, &Command{Op: OpRecordStub, Port: 1, Anchor: anchor, Once: true, Stubs: []StubDoc{recordedStub(`{"a":1}`, "once")}})
	if imp := s.Imposter(1); imp.Index(res.StubID) != 1 || imp.Index(anchor) != 2 {
		t.Fatalf("proxyOnce placed at %d", imp.Index(res.StubID))
	}
	// proxyAlways: a new stub goes at the end; the next recording with the
	// same predicates joins it as another response.
	s, res = mustApply(t, s, &Command{Op: OpRecordStub, Port: 1, Anchor: anchor, Stubs: []StubDoc{recordedStub(`{"b":1}`, "r1")}})
	imp := s.Imposter(1)
	if imp.Index(res.StubID) != len(imp.Stubs())-1 {
		t.Fatalf("proxyAlways placed at %d of %d", imp.Index(res.StubID), len(imp.Stubs()))
	}
	again, res2 := mustApply(t, s, &Command{Op: OpRecordStub, Port: 1, Anchor: anchor, Stubs: []StubDoc{recordedStub(`{"b":1}`, "r2")}})
	if res2.StubID != res.StubID || len(again.Imposter(1).Stubs()) != len(imp.Stubs()) {
		t.Fatalf("second recording: %+v", res2)
	}
	last := again.Imposter(1).Stubs()[len(imp.Stubs())-1]
	if want := `{"predicates":[{"b":1}],"responses":[{"is":{"body":"r1","_proxyResponseTime":1}},{"is":{"body":"r2","_proxyResponseTime":1}}]}`; string(last.JSON) != want {
		t.Fatalf("joined stub:\n%s\nwant\n%s", last.JSON, want)
	}
	// The earlier state is untouched: states are immutable.
	if string(s.Imposter(1).Stubs()[len(imp.Stubs())-1].JSON) == string(last.JSON) {
		t.Fatalf("Apply changed an earlier state")
	}
	// A recording whose proxy stub is gone is refused.
	if _, r := Apply(again, &Command{Op: OpRecordStub, Port: 1, Anchor: 99, Stubs: []StubDoc{recordedStub(`{}`, "x")}}); r.Err == nil || r.Err.Code != "no such resource" {
		t.Fatalf("anchor gone: %+v", r)
	}
	// savedProxyResponses: recorded responses go, and stubs left empty.
	dropped, _ := mustApply(t, again, &Command{Op: OpDropRecorded, Port: 1})
	if got := bodies(dropped.Imposter(1)); !slices.Equal(got, []string{"first", "-", "last"}) {
		t.Fatalf("after dropping recordings: %v", got)
	}
}

func TestPluginsAndModules(t *testing.T) {
	mod := map[string][]byte{"h1": []byte("\x00asm")}
	s, _ := mustApply(t, Empty(), &Command{Op: OpPutPlugin, Name: "m", Plugin: &Plugin{Hash: "h1", Limits: Limits{DeadlineMs: 5}}, Modules: mod})
	withStub := StubDoc{JSON: []byte(`{"responses":[{"wasm":{"module":"m"}}]}`), Refs: Refs{Plugins: []string{"m"}}}
	s, _ = mustApply(t, s, &Command{Op: OpCreateImposter, Imposters: []ImposterDoc{{Port: 1, Header: header(1), Stubs: []StubDoc{withStub}}}})
	if _, r := Apply(s, &Command{Op: OpDeletePlugin, Name: "m"}); r.Err == nil || r.Err.Code != "resource conflict" {
		t.Fatalf("deleting a plugin in use: %+v", r)
	}
	// A module comes once, by hash: a second plugin on it needs no bytes.
	s, _ = mustApply(t, s, &Command{Op: OpPutPlugin, Name: "n", Plugin: &Plugin{Hash: "h1"}})
	s, _ = mustApply(t, s, &Command{Op: OpDeleteImposter, Port: 1})
	s, _ = mustApply(t, s, &Command{Op: OpDeletePlugin, Name: "m"})
	if len(s.Modules) != 1 {
		t.Fatalf("a module still used was dropped: %v", s.Modules)
	}
	s, _ = mustApply(t, s, &Command{Op: OpDeletePlugin, Name: "n"})
	if len(s.Modules) != 0 {
		t.Fatalf("a module nothing uses was kept: %v", s.Modules)
	}
	// A stub's file module is kept by its hash.
	file := StubDoc{JSON: []byte(`{}`), Refs: Refs{Modules: []ModuleRef{{Module: "x.wasm", Hash: "h2"}}}}
	s, _ = mustApply(t, s, &Command{Op: OpCreateImposter, Imposters: []ImposterDoc{{Port: 2, Header: header(2), Stubs: []StubDoc{file}}}, Modules: map[string][]byte{"h2": []byte("m2"), "unused": []byte("u")}})
	if len(s.Modules) != 1 || string(s.Modules["h2"]) != "m2" {
		t.Fatalf("modules %v", s.Modules)
	}
}
