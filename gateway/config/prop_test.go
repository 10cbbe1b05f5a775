package config

import (
	"bytes"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// genStub draws a stub: a few bodies, sometimes a recording, sometimes a
// module reference.
func genStub(t *rapid.T, label string) StubDoc {
	body := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, label+"body")
	sig := rapid.SampledFrom([]string{"[]", `[{"equals":{"path":"/x"}}]`}).Draw(t, label+"sig")
	sd := StubDoc{JSON: fmt.Appendf(nil, `{"predicates":%s,"responses":[{"is":{"body":%q}}]}`, sig, body), Signature: sig}
	if rapid.Bool().Draw(t, label+"recorded") {
		sd.JSON = fmt.Appendf(nil, `{"predicates":%s,"responses":[{"is":{"body":%q,"_proxyResponseTime":3}}]}`, sig, body)
	}
	switch rapid.IntRange(0, 4).Draw(t, label+"ref") {
	case 0:
		sd.Refs.Modules = []ModuleRef{{Module: "m.wasm", Hash: "h-" + body}}
	case 1:
		sd.Refs.Plugins = []string{"p"}
	}
	return sd
}

func genStubs(t *rapid.T, label string) []StubDoc {
	n := rapid.IntRange(0, 3).Draw(t, label+"n")
	out := make([]StubDoc, n)
	for i := range out {
		out[i] = genStub(t, fmt.Sprintf("%s%d", label, i))
	}
	return out
}

func genCommand(t *rapid.T) *Command {
	port := rapid.IntRange(1, 3).Draw(t, "port")
	doc := func(label string) ImposterDoc {
		return ImposterDoc{Port: rapid.IntRange(1, 3).Draw(t, label+"port"), Header: header(port), Stubs: genStubs(t, label)}
	}
	mods := map[string][]byte{"h-a": []byte("A"), "h-b": []byte("B"), "h-c": []byte("C"), "h-p": []byte("P")}
	if rapid.Bool().Draw(t, "nomods") {
		mods = nil // the state may already hold them, or the command is refused
	}
	c := &Command{
		Op:      Op(rapid.IntRange(1, 14).Draw(t, "op")),
		Port:    port,
		Index:   rapid.IntRange(-1, 4).Draw(t, "index"),
		Anchor:  rapid.Uint64Range(0, 12).Draw(t, "anchor"),
		Once:    rapid.Bool().Draw(t, "once"),
		Keep:    rapid.Bool().Draw(t, "keep"),
		Name:    "p",
		Plugin:  &Plugin{Hash: "h-p", Limits: Limits{DeadlineMs: rapid.Int64Range(-1, 2).Draw(t, "deadline")}},
		Modules: mods,
	}
	switch c.Op {
	case OpCreateImposter, OpReplaceImposter:
		c.Imposters = []ImposterDoc{doc("imp")}
	case OpReplaceAll:
		for i := range rapid.IntRange(0, 3).Draw(t, "nimps") {
			c.Imposters = append(c.Imposters, doc(fmt.Sprint("imp", i)))
		}
	case OpInsertStub, OpReplaceStub, OpRecordStub:
		c.Stubs = []StubDoc{genStub(t, "one")}
	case OpReplaceStubs, OpInsertStubs:
		c.Stubs = genStubs(t, "all")
	case OpRecordStubs:
		for i := range rapid.IntRange(0, 4).Draw(t, "nrecs") {
			sd := genStub(t, fmt.Sprint("rec", i))
			if i%2 == 0 {
				sd.Refs = Refs{} // mostly valid: a recording names no module
			}
			c.Records = append(c.Records, Record{
				Port:   rapid.IntRange(1, 3).Draw(t, fmt.Sprint("recport", i)),
				Anchor: rapid.Uint64Range(0, 12).Draw(t, fmt.Sprint("recanchor", i)),
				Once:   rapid.Bool().Draw(t, fmt.Sprint("reconce", i)),
				Stub:   sd,
			})
		}
	}
	return c
}

func encodeState(t interface{ Fatalf(string, ...any) }, s *State) []byte {
	b, err := EncodeState(s)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return b
}

// Random command sequences: two fresh states reach byte-identical
// encodings; replaying the encoded log from empty reproduces the live
// state; a refused command returns the state it was given; no state is
// changed by the commands that follow it; snapshots round-trip.
func TestApplyIsDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cmds := rapid.SliceOfN(rapid.Custom(genCommand), 1, 40).Draw(t, "cmds")
		a, b := Empty(), Empty()
		var log [][]byte
		var states []*State
		var encodings [][]byte
		for _, c := range cmds {
			enc, err := EncodeCommand(c)
			if err != nil {
				t.Fatalf("encode command: %v", err)
			}
			log = append(log, enc)
			prev := a
			var ra, rb Result
			a, ra = Apply(a, c)
			b, rb = Apply(b, c)
			if (ra.Err == nil) != (rb.Err == nil) {
				t.Fatalf("%s: results differ: %+v / %+v", c.Op, ra, rb)
			}
			if ra.Err != nil && a != prev {
				t.Fatalf("%s refused (%v) but returned a new state", c.Op, ra.Err)
			}
			if !bytes.Equal(encodeState(t, a), encodeState(t, b)) {
				t.Fatalf("%s: states differ", c.Op)
			}
			states = append(states, a)
			encodings = append(encodings, encodeState(t, a))
		}
		for i, s := range states {
			if !bytes.Equal(encodeState(t, s), encodings[i]) {
				t.Fatalf("state %d changed after it was made", i)
			}
		}
		replayed := Empty()
		for _, enc := range log {
			c, err := DecodeCommand(enc)
			if err != nil {
				t.Fatalf("decode command: %v", err)
			}
			replayed, _ = Apply(replayed, c)
		}
		live := encodeState(t, a)
		if !bytes.Equal(encodeState(t, replayed), live) {
			t.Fatalf("replaying the log gives another state")
		}
		back, err := DecodeState(live)
		if err != nil || !bytes.Equal(encodeState(t, back), live) {
			t.Fatalf("snapshot round trip: %v", err)
		}
		// Every module kept is referenced, and every reference resolves.
		used := a.referenced()
		for h := range a.Modules {
			if !used[h] {
				t.Fatalf("module %s kept but unused", h)
			}
		}
		if r := a.checkRefs(); r.Err != nil {
			t.Fatalf("live state has a dangling reference: %v", r.Err)
		}
	})
}

func TestCommandRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCommand(t)
		enc, err := EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeCommand(enc)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := EncodeCommand(back)
		if !bytes.Equal(enc, again) {
			t.Fatalf("round trip changed the encoding")
		}
	})
}

func FuzzDecodeCommand(f *testing.F) {
	for _, c := range goldenCommands {
		b, _ := EncodeCommand(&c.cmd)
		f.Add(b)
	}
	f.Add([]byte{1, 0xa0})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCommand(data)
		if err != nil {
			return
		}
		enc, err := EncodeCommand(c)
		if err != nil {
			t.Fatalf("a decoded command does not encode: %v", err)
		}
		back, err := DecodeCommand(enc)
		if err != nil {
			t.Fatalf("re-encoded command does not decode: %v", err)
		}
		again, _ := EncodeCommand(back)
		if !bytes.Equal(enc, again) {
			t.Fatalf("not stable")
		}
		Apply(Empty(), c) // never panics
	})
}

func FuzzDecodeState(f *testing.F) {
	f.Add(goldenState(f))
	f.Add([]byte("RGCS\x00\x01\xa0"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeState(data)
		if err != nil {
			return
		}
		enc, err := EncodeState(s)
		if err != nil {
			t.Fatalf("a decoded state does not encode: %v", err)
		}
		if _, err := DecodeState(enc); err != nil {
			t.Fatalf("re-encoded state does not decode: %v", err)
		}
		Apply(s, &Command{Op: OpDeleteImposter, Port: 1}) // never panics
	})
}
