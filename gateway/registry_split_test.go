package gateway

import (
	"fmt"
	"slices"
	"testing"

	"github.com/riftgate/riftgate/gateway/config"
)

// splitCommand keeps a small --configfile one command, and cuts a large one
// into parts of at most part bytes of JSON (a larger stub alone) which,
// applied in order, give every imposter all its stubs in order.
func TestSplitCommand(t *testing.T) {
	stubs := func(port, n, size int) []config.StubDoc {
		var out []config.StubDoc
		for i := range n {
			b := fmt.Appendf(nil, `{"p":%d,"i":%d}`, port, i)
			for len(b) < size {
				b = append(b, ' ')
			}
			out = append(out, config.StubDoc{JSON: b})
		}
		return out
	}
	small := &config.Command{Op: config.OpReplaceAll, Keep: true, Imposters: []config.ImposterDoc{{Port: 1, Header: []byte(`{}`), Stubs: stubs(1, 3, 10)}}}
	if first, rest := splitCommand(small, 100); first != small || rest != nil {
		t.Fatalf("a small command was split: %v parts", len(rest))
	}
	cmd := &config.Command{Op: config.OpReplaceAll, Keep: true, Imposters: []config.ImposterDoc{
		{Port: 1, Header: []byte(`{"port":1}`), Stubs: stubs(1, 10, 30)},
		{Port: 2, Header: []byte(`{"port":2}`), Stubs: append(stubs(2, 3, 30), config.StubDoc{JSON: make([]byte, 250)})},
		{Port: 3, Header: []byte(`{"port":3}`)},
	}}
	const part = 100
	first, rest := splitCommand(cmd, part)
	if first.Op != config.OpReplaceAll || !first.Keep || len(first.Imposters) != 3 {
		t.Fatalf("first part: %+v", first)
	}
	got := map[int][]config.StubDoc{}
	size, headers := 0, 0
	for _, doc := range first.Imposters {
		size += len(doc.Header)
		headers += len(doc.Header)
		got[doc.Port] = slices.Clone(doc.Stubs)
		for _, st := range doc.Stubs {
			size += len(st.JSON)
		}
	}
	// Every header goes in the first part; stubs only while they fit.
	if size > part+headers || len(first.Imposters[0].Stubs) != 3 || len(first.Imposters[1].Stubs) != 0 {
		t.Errorf("the first part holds %d bytes (stubs %d, %d), over %d and its headers", size,
			len(first.Imposters[0].Stubs), len(first.Imposters[1].Stubs), part)
	}
	for _, c := range rest {
		if c.Op != config.OpInsertStubs || c.Index != -1 || len(c.Stubs) == 0 {
			t.Fatalf("a later part: %+v", c)
		}
		n := 0
		for _, st := range c.Stubs {
			n += len(st.JSON)
		}
		if n > part && len(c.Stubs) > 1 {
			t.Errorf("a part of %d stubs holds %d bytes, over %d", len(c.Stubs), n, part)
		}
		got[c.Port] = append(got[c.Port], c.Stubs...)
	}
	for _, doc := range cmd.Imposters {
		if !slices.EqualFunc(got[doc.Port], doc.Stubs, func(a, b config.StubDoc) bool { return string(a.JSON) == string(b.JSON) }) {
			t.Errorf("port %d: %d stubs after the parts, want its %d in order", doc.Port, len(got[doc.Port]), len(doc.Stubs))
		}
	}
}
