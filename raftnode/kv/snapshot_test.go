package kv

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

func TestSnapshotEncodingIsPinned(t *testing.T) {
	f := mustFragment(t, withNoExpiry(DefaultPolicy()))
	apply(t, f, put("b", "2", Absent(), 10, 0), 1)
	apply(t, f, Put{Key: "a", Value: []byte("1"), NoExpiry: true}, 2)
	apply(t, f, put("z", "", Absent(), 5, 0), 3)
	apply(t, f, Evict{CutoffMs: 6, Limit: 5}, 4)
	b, err := f.EncodeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	// "RGKV" 0001 [6, [[h'61', h'31', 2, 0], [h'62', h'32', 1, 10]]]
	const pinned = "52474b56" + "0001" + "8206" + "82" + "84416141310200" + "844162413201" + "0a"
	if got := hex.EncodeToString(b); got != pinned {
		t.Fatalf("snapshot %s, pinned %s", got, pinned)
	}
}

func TestSnapshotCarriesRecordsAndFloorAndRebuildsTheRest(t *testing.T) {
	p := DefaultPolicy()
	f := mustFragment(t, p)
	for i := range 50 {
		apply(t, f, put(string(rune('A'+i)), "value", Absent(), uint64(10+i%7), 0), uint64(i+1))
	}
	apply(t, f, Evict{CutoffMs: 11, Limit: 3}, 100)
	b, err := f.EncodeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	g, err := DecodeSnapshot(b, p)
	if err != nil {
		t.Fatal(err)
	}
	if g.Floor() != f.Floor() || g.Len() != f.Len() || g.Bytes() != f.Bytes() {
		t.Fatalf("decoded floor/len/bytes %d/%d/%d, want %d/%d/%d", g.Floor(), g.Len(), g.Bytes(), f.Floor(), f.Len(), f.Bytes())
	}
	// The rebuilt expiry index evicts exactly what the original would.
	for i := uint64(0); i < 30; i++ {
		c := Evict{CutoffMs: 12 + i/3, Limit: 4}
		if r1, r2 := f.Apply(c, 200+i), g.Apply(c, 200+i); !respEqual(r1, r2) {
			t.Fatalf("evict %d: original %#v, decoded %#v", i, r1, r2)
		}
	}
	b1, _ := f.EncodeSnapshot()
	b2, _ := g.EncodeSnapshot()
	if !bytes.Equal(b1, b2) {
		t.Fatal("snapshots diverged after identical evictions")
	}
}

func TestDecodeSnapshotRejectsCorruption(t *testing.T) {
	for _, tc := range []struct{ name, hex string }{
		{"bad magic", "52474b580001" + "820080"},
		{"future version", "52474b560002" + "820080"},
		{"short", "52474b"},
		{"duplicate keys", "52474b560001" + "8200" + "82" + "844161413101" + "00" + "844161413102" + "00"},
		{"unsorted keys", "52474b560001" + "8200" + "82" + "844162413101" + "00" + "844161413102" + "00"},
		{"version zero", "52474b560001" + "8200" + "81" + "844161413100" + "00"},
		{"empty key", "52474b560001" + "8200" + "81" + "844041310100"},
		{"record arity", "52474b560001" + "8200" + "81" + "8341614131"},
		{"body arity", "52474b560001" + "830080" + "00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := hex.DecodeString(tc.hex)
			if _, err := DecodeSnapshot(b, DefaultPolicy()); !errors.Is(err, ErrDecode) {
				t.Fatal("corrupt snapshot decoded")
			}
		})
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	frag := mustFragment(f, withNoExpiry(DefaultPolicy()))
	frag.Apply(put("a", "1", Absent(), 5, 0), 1)
	frag.Apply(Put{Key: "b", NoExpiry: true}, 2)
	frag.Apply(put("c", "3", Absent(), 9, 0), 3)
	frag.Apply(Evict{CutoffMs: 6, Limit: 1}, 4)
	b, _ := frag.EncodeSnapshot()
	f.Add(b)
	empty, _ := mustFragment(f, DefaultPolicy()).EncodeSnapshot()
	f.Add(empty)
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := DecodeSnapshot(b, withNoExpiry(DefaultPolicy()))
		if err != nil {
			return
		}
		// A decoded snapshot re-encodes to a fixed point and its derived
		// state is consistent: draining it evicts every expiring record
		// and leaves the byte total at that of the survivors.
		b1, err := g.EncodeSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		h, err := DecodeSnapshot(b1, withNoExpiry(DefaultPolicy()))
		if err != nil {
			t.Fatalf("re-encoded snapshot does not decode: %v", err)
		}
		if b2, _ := h.EncodeSnapshot(); !bytes.Equal(b1, b2) {
			t.Fatal("snapshot encoding is not a fixed point")
		}
		for g.AnyExpired(^uint64(0)) {
			g.Apply(Evict{CutoffMs: ^uint64(0), Limit: HardMaxEvict}, 1)
		}
		var sum int64
		for k, e := range g.records {
			if e.expiresAt != 0 {
				t.Fatalf("%q survives a total eviction", k)
			}
			sum += e.size()
		}
		if sum != g.Bytes() || len(g.expiry) != 0 {
			t.Fatalf("byte total %d, recomputed %d; index %d", g.Bytes(), sum, len(g.expiry))
		}
	})
}
