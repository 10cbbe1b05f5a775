package config

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// goldenCommands pins the command encoding: one of every op. A change here
// breaks every log and Raft group already written: give it a new
// CommandVersion and keep decoding this one.
var goldenCommands = []struct {
	name string
	cmd  Command
	hex  string
}{
	{"create", Command{Op: OpCreateImposter, Imposters: []ImposterDoc{{Port: 4545, Header: []byte(`{"protocol":"http"}`),
		Stubs: []StubDoc{{JSON: []byte(`{}`), Signature: "[]", Refs: Refs{Modules: []ModuleRef{{Module: "a.wasm", Hash: "ab", Limits: Limits{DeadlineMs: 5}}}, Plugins: []string{"p"}}}}}},
		Modules: map[string][]byte{"ab": {0, 'a', 's', 'm'}}}, "01a301010481a3011911c102537b2270726f746f636f6c223a2268747470227d0381a301427b7d02a20181a30166612e7761736d0262616203a102050281617003625b5d0aa1626162440061736d"},
	{"replace", Command{Op: OpReplaceImposter, Imposters: []ImposterDoc{{Port: 1, Header: []byte(`{}`)}}}, "01a201020481a2010102427b7d"},
	{"delete", Command{Op: OpDeleteImposter, Port: 4545}, "01a20103021911c1"},
	{"replace all", Command{Op: OpReplaceAll, Imposters: []ImposterDoc{{Port: 1, Header: []byte(`{}`)}, {Port: 2, Header: []byte(`{}`)}}}, "01a201040482a2010102427b7da2010202427b7d"},
	{"replace all, keeping", Command{Op: OpReplaceAll, Keep: true, Imposters: []ImposterDoc{{Port: 1, Header: []byte(`{}`)}}}, "01a301040481a2010102427b7d0bf5"},
	{"insert", Command{Op: OpInsertStub, Port: 4545, Index: -1, Stubs: []StubDoc{{JSON: []byte(`{}`)}}}, "01a40105021911c103200581a101427b7d"},
	{"replace stub", Command{Op: OpReplaceStub, Port: 4545, Index: 2, Stubs: []StubDoc{{JSON: []byte(`{}`)}}}, "01a40106021911c103020581a101427b7d"},
	{"delete stub", Command{Op: OpDeleteStub, Port: 4545, Index: 0}, "01a20107021911c1"},
	{"replace stubs", Command{Op: OpReplaceStubs, Port: 4545}, "01a20108021911c1"},
	{"record", Command{Op: OpRecordStub, Port: 4545, Anchor: 7, Once: true, Stubs: []StubDoc{{JSON: []byte(`{}`), Signature: "[]"}}}, "01a50109021911c10581a201427b7d03625b5d060707f5"},
	{"drop recorded", Command{Op: OpDropRecorded, Port: 4545}, "01a2010a021911c1"},
	{"put plugin", Command{Op: OpPutPlugin, Name: "m", Plugin: &Plugin{Hash: "ab", Limits: Limits{MemoryPages: 64, DeadlineMs: -1, MaxResponseBytes: 1, PoolSize: 2, RecycleAfter: 3}}}, "01a3010b08616d09a20162616202a50118400220030104020503"},
	{"delete plugin", Command{Op: OpDeletePlugin, Name: "m"}, "01a2010c08616d"},
	{"insert stubs", Command{Op: OpInsertStubs, Port: 4545, Index: -1, Stubs: []StubDoc{{JSON: []byte(`{}`)}}}, "01a4010e021911c103200581a101427b7d"},
	{"record batch", Command{Op: OpRecordStubs, Records: []Record{
		{Port: 4545, Anchor: 7, Once: true, Stub: StubDoc{JSON: []byte(`{}`), Signature: "[]"}},
		{Port: 4546, Anchor: 2, Stub: StubDoc{JSON: []byte(`{}`)}}}}, "01a2010d0c82a4011911c1020703f504a201427b7d03625b5da3011911c2020204a101427b7d"},
}

func TestCommandEncodingIsPinned(t *testing.T) {
	for _, g := range goldenCommands {
		b, err := EncodeCommand(&g.cmd)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != g.hex {
			t.Errorf("%s: encoding\n got %s\nwant %s", g.name, got, g.hex)
		}
	}
}

func goldenState(t testing.TB) []byte {
	s := Empty()
	for _, c := range goldenCommands[:1] {
		var res Result
		if s, res = Apply(s, &c.cmd); res.Err != nil {
			// The golden state needs the plugin the stub names.
			s, _ = Apply(Empty(), &Command{Op: OpPutPlugin, Name: "p", Plugin: &Plugin{Hash: "ab"}, Modules: c.cmd.Modules})
			s, _ = Apply(s, &c.cmd)
		}
	}
	b, err := EncodeState(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const goldenStateHex = "524743530001a401a11911c1a3011911c102537b2270726f746f636f6c223a2268747470227d0381a4010102427b7d03a20181a30166612e7761736d0262616203a102050281617005625b5d02a16170a10162616203a1626162440061736d0402"

func TestSnapshotEncodingIsPinned(t *testing.T) {
	if got := hex.EncodeToString(goldenState(t)); got != goldenStateHex {
		t.Errorf("snapshot encoding\n got %s\nwant %s", got, goldenStateHex)
	}
	if _, err := DecodeState([]byte("RGCS\x00\x02\xa0")); !errors.Is(err, ErrFormat) {
		t.Errorf("a later snapshot version: %v", err)
	}
	if _, err := DecodeCommand([]byte{2, 0xa0}); !errors.Is(err, ErrFormat) {
		t.Errorf("a later command version: %v", err)
	}
}

// A StubDoc's Parsed is the proposing node's own: the command's bytes and
// the state's are as without it, and a decoded command has none.
func TestParsedTravelsNoWire(t *testing.T) {
	parsed := &struct{ x int }{1}
	cmd := Command{Op: OpRecordStubs, Records: []Record{{Port: 4545, Anchor: 7, Once: true, Stub: StubDoc{JSON: []byte(`{}`), Signature: "[]", Parsed: parsed}}}}
	plain := cmd
	plain.Records = []Record{cmd.Records[0]}
	plain.Records[0].Stub.Parsed = nil
	b, err := EncodeCommand(&cmd)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := EncodeCommand(&plain)
	if hex.EncodeToString(b) != hex.EncodeToString(want) {
		t.Fatalf("Parsed changed the command's bytes:\n got %x\nwant %x", b, want)
	}
	back, err := DecodeCommand(b)
	if err != nil || back.Records[0].Stub.Parsed != nil {
		t.Fatalf("decoded: %v, %v", back, err)
	}
	s, _ := Apply(Empty(), &Command{Op: OpCreateImposter, Imposters: []ImposterDoc{{Port: 4545, Header: []byte(`{"protocol":"http"}`), Stubs: []StubDoc{{JSON: []byte(`{"responses":[{"proxy":{}}]}`)}}}}})
	anchor := s.Imposters[4545].Stubs()[0].ID
	cmd.Records[0].Anchor = anchor
	next, res := Apply(s, &cmd)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	st, _ := next.Imposters[4545].Stub(res.Results[0].StubID)
	if got := next.Imposters[4545].Parsed(st.ID); got != parsed {
		t.Errorf("the recorded stub's Parsed is %v, want the command's", got)
	}
	// The parse lives as long as the version that made the stub: the
	// next one does not hold it.
	later, _ := Apply(next, &Command{Op: OpRecordStubs, Records: []Record{{Port: 4545, Anchor: anchor, Once: true, Stub: StubDoc{JSON: []byte(`{"predicates":[1]}`), Signature: "[1]"}}}})
	if got := later.Imposters[4545].Parsed(st.ID); got != nil {
		t.Errorf("a later version holds the parse of a stub it did not make: %v", got)
	}
	// A recording is marked as one, in the snapshot too: the engine
	// compiles its responses where they are first answered.
	if !st.Recorded {
		t.Error("a recorded stub is not marked Recorded")
	}
	if b, err := EncodeState(next); err != nil {
		t.Fatal(err)
	} else if back, err := DecodeState(b); err != nil {
		t.Fatal(err)
	} else if bst, _ := back.Imposters[4545].Stub(res.Results[0].StubID); bst == nil || !bst.Recorded {
		t.Errorf("after a snapshot, the recorded stub is %+v", bst)
	}
	snap, _ := EncodeState(next)
	plainNext, _ := Apply(s, &Command{Op: OpRecordStubs, Records: []Record{{Port: 4545, Anchor: anchor, Once: true, Stub: StubDoc{JSON: []byte(`{}`), Signature: "[]"}}}})
	wantSnap, _ := EncodeState(plainNext)
	if hex.EncodeToString(snap) != hex.EncodeToString(wantSnap) {
		t.Error("Parsed changed the snapshot's bytes")
	}
}

// parts is a Parsed that knows its responses, as the engine's does.
type parts struct {
	raws []json.RawMessage
	tag  string
}

func (p parts) ResponseParts() ([]json.RawMessage, []any) { return p.raws, []any{p.tag} }

// A proxyAlways recording whose Parsed knows its responses is added from
// them: the state, its snapshot and Doc are as without it, and MoreParsed
// hands the parsed form on (nil where a command had none).
func TestAlwaysRecordingTakesItsParsedResponses(t *testing.T) {
	s, _ := Apply(Empty(), &Command{Op: OpCreateImposter, Imposters: []ImposterDoc{{Port: 4545, Header: []byte(`{"protocol":"http"}`), Stubs: []StubDoc{{JSON: []byte(`{"responses":[{"proxy":{}}]}`)}}}}})
	anchor := s.Imposters[4545].Stubs()[0].ID
	rec := func(body string, parsed any) *Command {
		stub := `{"predicates":[{"deepEquals":{"path":"/a"}}],"responses":[{"is":{"body":"` + body + `"}}]}`
		return &Command{Op: OpRecordStubs, Records: []Record{{Port: 4545, Anchor: anchor, Stub: StubDoc{JSON: []byte(stub), Signature: `[{"deepEquals":{"path":"/a"}}]`, Parsed: parsed}}}}
	}
	withParsed, plain := s, s
	for i, body := range []string{"1", "2", "3"} {
		var p any
		if i > 0 {
			p = parts{raws: []json.RawMessage{[]byte(`{"is":{"body":"` + body + `"}}`)}, tag: body}
		}
		var res Result
		if withParsed, res = Apply(withParsed, rec(body, p)); res.Err != nil {
			t.Fatal(res.Err)
		}
		if plain, res = Apply(plain, rec(body, nil)); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	a, _ := EncodeState(withParsed)
	b, _ := EncodeState(plain)
	if hex.EncodeToString(a) != hex.EncodeToString(b) {
		t.Fatal("Parsed changed the snapshot's bytes")
	}
	id := withParsed.Imposters[4545].Stubs()[1].ID
	st, _ := withParsed.Imposters[4545].Stub(id)
	ps, _ := plain.Imposters[4545].Stub(id)
	if string(st.Doc()) != string(ps.Doc()) || !strings.Contains(string(st.Doc()), `{"is":{"body":"3"}}]`) {
		t.Fatalf("Doc:\n%s\nwant\n%s", st.Doc(), ps.Doc())
	}
	if got := st.MoreParsed(0); len(got) != 2 || got[0] != "2" || got[1] != "3" {
		t.Fatalf("MoreParsed: %v", got)
	}
	if got := ps.MoreParsed(0); len(got) != 2 || got[0] != nil || got[1] != nil {
		t.Fatalf("MoreParsed without Parsed: %v", got)
	}
}
