package cluster

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/config"
	"pgregory.net/rapid"
)

func create(port int, stubJSON string) *config.Command {
	return &config.Command{Op: config.OpCreateImposter, Imposters: []config.ImposterDoc{{
		Port: port, Header: fmt.Appendf(nil, `{"protocol":"http","port":%d}`, port),
		Stubs: []config.StubDoc{{JSON: []byte(stubJSON)}},
	}}}
}

// fataler is what testing.TB and *rapid.T share.
type fataler interface{ Fatal(...any) }

func encodeCmd(t fataler, cmd *config.Command) []byte {
	b, err := config.EncodeCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fingerprint(t fataler, s *state) []byte {
	b, err := machine{}.EncodeSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A command too large for one entry, sent in parts, applies exactly as the
// whole command does; the parts before the last change nothing visible.
func TestPartsApplyAsTheWholeCommand(t *testing.T) {
	big := create(4545, `{"responses":[{"is":{"body":"`+strings.Repeat("x", 3*partBytes)+`"}}]}`)
	enc := encodeCmd(t, big)
	m := machine{}
	whole, parts := m.InitialState(), m.InitialState()
	r := m.Apply(&whole, entry{V: entryVersion, Command: enc}, 1)
	if r.Err != "" || r.Result == nil || r.Result.Err != nil {
		t.Fatalf("whole: %+v", r)
	}
	ps := split(7, enc)
	if len(ps) != 4 {
		t.Fatalf("%d parts of %d bytes", len(ps), len(enc))
	}
	for i, p := range ps {
		r := m.Apply(&parts, entry{V: entryVersion, Part: &p}, uint64(i+1))
		last := i == len(ps)-1
		if r.Err != "" || (r.Result != nil) != last {
			t.Fatalf("part %d: %+v", i, r)
		}
		if !last && parts.Config.Imposter(4545) != nil {
			t.Fatalf("part %d made the imposter visible", i)
		}
	}
	if !bytes.Equal(fingerprint(t, &whole), fingerprint(t, &parts)) {
		t.Fatal("the parts reached another state than the whole command")
	}
	if len(parts.Uploads) != 0 || parts.pending != 0 {
		t.Fatalf("a finished upload is kept: %d, %d bytes", len(parts.Uploads), parts.pending)
	}
}

// A broken upload is refused the same way on every replica and forgotten;
// it changes nothing.
func TestBrokenUploadsAreRefused(t *testing.T) {
	enc := encodeCmd(t, create(4545, `{"responses":[{"is":{"body":"`+strings.Repeat("y", 2*partBytes)+`"}}]}`))
	ps := split(9, enc)
	for _, tc := range []struct {
		name  string
		parts func() []part
		want  string
	}{
		{"a part skipped", func() []part { return []part{ps[0], ps[2]} }, "part 1 was expected"},
		{"a part twice", func() []part { return []part{ps[0], ps[1], ps[1]} }, "part 2 was expected"},
		{"no first part", func() []part { return ps[1:] }, "unknown or was forgotten"},
		{"started twice", func() []part { return []part{ps[0], ps[0]} }, "started twice"},
		{"another command's part", func() []part {
			q := ps[1]
			q.Sum[0] ^= 1
			return []part{ps[0], q}
		}, "describes another command"},
		{"corrupt data", func() []part {
			q := ps[2]
			q.Data = bytes.Clone(q.Data)
			q.Data[0] ^= 1
			return []part{ps[0], ps[1], q}
		}, "checksum"},
		{"one part", func() []part {
			q := ps[0]
			q.Count = 1
			return []part{q}
		}, "1 parts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := machine{}
			s := m.InitialState()
			var last response
			for i, p := range tc.parts() {
				last = m.Apply(&s, entry{V: entryVersion, Part: &p}, uint64(i+1))
			}
			if !strings.Contains(last.Err, tc.want) || last.Result != nil {
				t.Fatalf("last answer %+v, want an error with %q", last, tc.want)
			}
			if s.Config.Imposter(4545) != nil {
				t.Fatal("a broken upload applied")
			}
		})
	}
}

// A stalled upload is forgotten after uploadTimeout entries, and the
// unfinished ones together may not hold more than maxPendingBytes.
func TestStalledUploadsAreForgottenAndBounded(t *testing.T) {
	m := machine{}
	s := m.InitialState()
	enc := encodeCmd(t, create(4545, `{"responses":[{"is":{"body":"`+strings.Repeat("z", partBytes)+`"}}]}`))
	ps := split(3, enc)
	m.Apply(&s, entry{V: entryVersion, Part: &ps[0]}, 10)
	m.Apply(&s, entry{V: entryVersion, Command: encodeCmd(t, &config.Command{Op: config.OpDeleteImposter, Port: 1})}, 10+uploadTimeout)
	if len(s.Uploads) != 1 {
		t.Fatal("an upload was forgotten too soon")
	}
	if r := m.Apply(&s, entry{V: entryVersion, Part: &ps[1]}, 11+uploadTimeout+1); !strings.Contains(r.Err, "forgotten") {
		t.Fatalf("the part of a stalled upload: %+v", r)
	}
	for up := uint64(5); ; up++ {
		huge := part{Upload: up, Count: 100, Size: 20 << 20}
		r := m.Apply(&s, entry{V: entryVersion, Part: &huge}, 20000+up)
		if up < 8 && r.Err != "" {
			t.Fatal(r.Err)
		}
		if up == 8 {
			if !strings.Contains(r.Err, "unfinished uploads") {
				t.Fatalf("past the pending cap: %+v", r)
			}
			break
		}
	}
	if r := m.Apply(&s, entry{V: 2, Command: enc}, 20003); !strings.Contains(r.Err, "entry version 2") {
		t.Fatalf("an entry of a later build: %+v", r)
	}
}

// Replicas applying the same entries reach byte-identical states, with a
// snapshot taken and restored anywhere along the way.
func TestApplyIsDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := machine{}
		a, b := m.InitialState(), m.InitialState()
		cut := rapid.IntRange(0, 20).Draw(t, "snapshot at")
		for i := range rapid.IntRange(1, 20).Draw(t, "entries") {
			port := rapid.IntRange(1, 4).Draw(t, "port")
			var cmd *config.Command
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				cmd = create(port, `{"responses":[{"is":{"body":"`+strings.Repeat("b", rapid.IntRange(0, 2*partBytes).Draw(t, "size"))+`"}}]}`)
			case 1:
				cmd = &config.Command{Op: config.OpDeleteImposter, Port: port}
			default:
				cmd = &config.Command{Op: config.OpInsertStub, Port: port, Index: -1, Stubs: []config.StubDoc{{JSON: []byte(`{}`)}}}
			}
			enc := encodeCmd(t, cmd)
			var es []entry
			if len(enc) <= maxEntryBytes-partOverhead {
				es = []entry{{V: entryVersion, Command: enc}}
			} else {
				for _, p := range split(uint64(i+1), enc) {
					es = append(es, entry{V: entryVersion, Part: &p})
				}
			}
			for _, e := range es {
				m.Apply(&a, e, uint64(i+1))
				m.Apply(&b, e, uint64(i+1))
			}
			if i == cut {
				snap := fingerprint(t, &b)
				var err error
				if b, err = m.DecodeSnapshot(snap); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !bytes.Equal(fingerprint(t, &a), fingerprint(t, &b)) {
			t.Fatal("two replicas of the same entries differ")
		}
	})
}
