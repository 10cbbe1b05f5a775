package flowshard

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"
)

// 2026-01-01T00:00:00Z, the test clock's start.
const goldenMs = 1767225600000

// The on-disk encoding is frozen: changing any of these bytes needs a new
// format version and a migration (see codec.go).
func TestGoldenEncoding(t *testing.T) {
	long := strings.Repeat("x", 200)
	cases := []struct {
		name string
		got  []byte
		want string
	}{
		{"entry", encodeEntry(Version{MIdx: 1, V: 300, Origin: 7}, goldenMs, []byte("hi")),
			"02" + "01" + "01" + "ac02" + "07" + "80d0eab6b733" + "6869"},
		{"entry-empty-value", encodeEntry(Version{V: 1}, 0, nil), "0201" + "00" + "01" + "00" + "00"},
		{"tombstone", encodeTombstone(Version{MIdx: 1, V: 300, Origin: 7}, goldenMs),
			"02" + "03" + "01" + "ac02" + "07" + "80d0eab6b733"},
		{"flow", encodeFlow(300, goldenMs), "02" + "02" + "ac02" + "80d0eab6b733"},
		{"flow-key", flowKey("i8080:ab"), "08" + hex.EncodeToString([]byte("i8080:ab"))},
		{"entry-key", entryKey("i8080:ab", "k"), "08" + hex.EncodeToString([]byte("i8080:ab")) + "6b"},
		{"long-flow-id", entryKey(long, "k")[:3], "c801" + "78"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := hex.EncodeToString(tc.got); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// What a Put leaves in the file, read back with bbolt directly.
func TestGoldenFile(t *testing.T) {
	c := newClock()
	path := dbPath(t)
	s := open(t, path, c.opts(Options{}))
	p := Policy{Durability: Sync, TTL: time.Second, MIdx: 1, Origin: 7}
	mustPut(t, s, "i8080:ab", "gone", "x", p)
	if _, err := s.Delete(bg, "i8080:ab", "gone", p); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "i8080:ab", "k", "hi", p)
	if err := s.Close(bg); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got []string
	err = db.View(func(tx *bolt.Tx) error {
		if f := tx.Bucket(metaBucket).Get(formatKey); !bytes.Equal(f, []byte{2}) {
			t.Errorf("format = %x", f)
		}
		return tx.Bucket(dataBucket).ForEach(func(k, v []byte) error {
			got = append(got, hex.EncodeToString(k)+"="+hex.EncodeToString(v))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	exp := "e8d7eab6b733" // goldenMs + 1000
	want := []string{
		"0869383038303a6162676f6e65=0203" + "010207" + exp,    // gone: the tombstone of (1, 2, 7)
		"0869383038303a61626b=0201" + "010307" + exp + "6869", // k: (1, 3, 7)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("file holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDecodeRejects(t *testing.T) {
	cases := map[string]string{
		"empty":          "",
		"one-byte":       "01",
		"version-3":      "0301010101",
		"kind-4":         "0204",
		"v1-tombstone":   "010301010101",
		"tombstone-tail": "02030101010100",
		"tombstone-v0":   "020300000000",
		"truncated":      "010101",
		"varint-open":    "0101808080",
		"flow-trailing":  "0102010100",
		"entry-v0":       "010100000000",
		"flow-truncated": "010201",
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			b, _ := hex.DecodeString(h)
			if _, err := decodeRecord(b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeRecord(%s) = %v", h, err)
			}
		})
	}
	for _, k := range []string{"", "05ab", "80"} {
		b, _ := hex.DecodeString(k)
		if _, _, err := splitKey(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("splitKey(%s) = %v", k, err)
		}
	}
}

func TestCodecRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ver := Version{
			MIdx:   rapid.Uint64().Draw(t, "midx"),
			V:      rapid.Uint64Min(1).Draw(t, "v"),
			Origin: rapid.Uint64().Draw(t, "origin"),
		}
		exp := rapid.Int64Min(0).Draw(t, "exp")
		val := rapid.SliceOf(rapid.Byte()).Draw(t, "value")
		r, err := decodeRecord(encodeEntry(ver, exp, val))
		if err != nil || r.kind != kindEntry || r.ver != ver || r.expMs != exp || !bytes.Equal(r.value, val) {
			t.Fatalf("entry round trip: %+v, %v", r, err)
		}
		r, err = decodeRecord(encodeTombstone(ver, exp))
		if err != nil || r.kind != kindTombstone || r.ver != ver || r.expMs != exp || r.value != nil {
			t.Fatalf("tombstone round trip: %+v, %v", r, err)
		}
		counter := rapid.Uint64().Draw(t, "counter")
		r, err = decodeRecord(encodeFlow(counter, exp))
		if err != nil || r.kind != kindFlow || r.counter != counter || r.expMs != exp {
			t.Fatalf("flow round trip: %+v, %v", r, err)
		}
		id := rapid.StringN(1, 300, -1).Draw(t, "flow")
		key := rapid.String().Draw(t, "key")
		gotID, gotKey, err := splitKey(entryKey(id, key))
		if err != nil || gotID != id || gotKey != key {
			t.Fatalf("key round trip: %q %q %v", gotID, gotKey, err)
		}
		// Prefix-free: another flow's keys never start with this flow's key.
		other := rapid.StringN(1, 300, -1).Draw(t, "other")
		if other != id && bytes.HasPrefix(entryKey(other, key), flowKey(id)) {
			t.Fatalf("flow %q's keys fall under flow %q", other, id)
		}
	})
}

// FuzzDecodeRecord: the decoder never panics, and whatever it accepts
// re-encodes to something that decodes to the same record.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeEntry(Version{MIdx: 1, V: 300, Origin: 7}, goldenMs, []byte("hi")))
	f.Add(encodeEntry(Version{V: 1}, 0, nil))
	f.Add(encodeFlow(300, goldenMs))
	f.Add(encodeTombstone(Version{MIdx: 1, V: 300, Origin: 7}, goldenMs))
	f.Add([]byte{1, 1, 1, 0xac, 2, 7, 0, 'h'}) // format 1
	f.Add([]byte{})
	f.Add([]byte{1, 1, 0x80})
	f.Add([]byte{2, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// A format-1 record re-encodes as format 2: what migration writes.
		again := encodeRecord(r)
		r2, err := decodeRecord(again)
		if err != nil || r2.kind != r.kind || r2.ver != r.ver || r2.counter != r.counter || r2.expMs != r.expMs || !bytes.Equal(r2.value, r.value) {
			t.Fatalf("re-encoding %x gave %x: %+v, %v", b, again, r2, err)
		}
	})
}

// A format-1 file (bytes as format 1 wrote them) is read and rewritten as
// format 2 in the transaction that loads it: values and versions kept, the
// counter floor of a flow record kept, nothing expired carried over.
func TestMigratesFormat1(t *testing.T) {
	c := newClock()
	path := dbPath(t)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	exp := "e8d7eab6b733"  // goldenMs + 1000
	gone := "80d0eab6b733" // goldenMs: expired at open
	v1 := map[string]string{
		"0869383038303a6162":         "0102" + "05" + exp,                 // flow record: counter 5
		"0869383038303a61626b":       "0101" + "010307" + exp + "6869",    // k = "hi" at (1, 3, 7)
		"0869383038303a616278":       "0101" + "010407" + gone + "6f6c64", // x expired
		"05663a7a7a7a":               "0102" + "09" + exp,                 // f:zzz: counter 9
		"03663a796b":                 "0101" + "000100" + exp,             // f:y k: an empty value
		"05663a7a7a7a6a":             "0101" + "020807" + exp + "79",
		"0869383038303a61626b6b6b6b": "0101" + "010207" + exp + "",
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, _ := tx.CreateBucket(metaBucket)
		data, _ := tx.CreateBucket(dataBucket)
		if err := meta.Put(formatKey, []byte{1}); err != nil {
			return err
		}
		for k, v := range v1 {
			kb, _ := hex.DecodeString(k)
			vb, _ := hex.DecodeString(v)
			if err := data.Put(kb, vb); err != nil {
				return err
			}
		}
		return nil
	})
	if err2 := db.Close(); err == nil {
		err = err2
	}
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, path, c.opts(Options{}))
	if got := mustGet(t, s, "i8080:ab", "k"); string(got.Value) != "hi" || got.Version != (Version{1, 3, 7}) {
		t.Fatalf("k = %+v", got)
	}
	wantAbsent(t, s, "i8080:ab", "x")
	if v := mustPut(t, s, "i8080:ab", "n", "1", syncP()); v.V != 6 {
		t.Fatalf("a put after migration got v%d, want 6: the flow record's counter was 5", v.V)
	}
	if v := mustPut(t, s, "f:zzz", "n", "1", syncP()); v.V != 10 {
		t.Fatalf("f:zzz got v%d, want 10", v.V)
	}
	if err := s.Close(bg); err != nil {
		t.Fatal(err)
	}
	db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		if f := tx.Bucket(metaBucket).Get(formatKey); !bytes.Equal(f, []byte{2}) {
			t.Errorf("format after migration = %x", f)
		}
		return tx.Bucket(dataBucket).ForEach(func(k, v []byte) error {
			if v[0] != formatV2 {
				t.Errorf("record %x = %x is not format 2", k, v)
			}
			if hex.EncodeToString(k) == "0869383038303a61626b" && hex.EncodeToString(v) != "0201"+"010307"+exp+"6869" {
				t.Errorf("k migrated to %x", v)
			}
			if hex.EncodeToString(k) == "0869383038303a616278" {
				t.Errorf("the expired entry was carried over")
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// FuzzSplitKey: the key decoder never panics and inverts entryKey.
func FuzzSplitKey(f *testing.F) {
	f.Add(entryKey("i8080:ab", "k"))
	f.Add(flowKey("f:x"))
	f.Add([]byte{0xc8, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, key, err := splitKey(b)
		if err != nil {
			return
		}
		id2, key2, err := splitKey(entryKey(id, key))
		if err != nil || id2 != id || key2 != key || !bytes.HasSuffix(b, []byte(id+key)) {
			t.Fatalf("%x split into %q %q, which does not round-trip: %q %q %v", b, id, key, id2, key2, err)
		}
	})
}
