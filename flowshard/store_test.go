package flowshard

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	bolterrors "go.etcd.io/bbolt/errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

var bg = context.Background()

func mustPut(t *testing.T, s *Store, flow, key, val string, p Policy) Version {
	t.Helper()
	v, err := s.Put(bg, flow, key, []byte(val), p)
	if err != nil {
		t.Fatalf("Put(%s,%s): %v", flow, key, err)
	}
	return v
}

func mustGet(t *testing.T, s *Store, flow, key string) Entry {
	t.Helper()
	e, err := s.Get(bg, flow, key, nil)
	if err != nil {
		t.Fatalf("Get(%s,%s): %v", flow, key, err)
	}
	return e
}

func wantAbsent(t *testing.T, s *Store, flow, key string) {
	t.Helper()
	if e, err := s.Get(bg, flow, key, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(%s,%s) = %+v, %v; want ErrNotFound", flow, key, e, err)
	}
}

// Every path: in memory, and on disk with each durability.
var stores = []struct {
	name string
	disk bool
	d    Durability
}{{"mem", false, Sync}, {"memory", true, Memory}, {"async", true, Async}, {"sync", true, Sync}}

// pathFor is where a test of a store with disk keeps its file ("" none).
func pathFor(t testing.TB, disk bool) string {
	if !disk {
		return ""
	}
	return dbPath(t)
}

func TestVersionsPerFlow(t *testing.T) {
	for _, tc := range stores {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, pathFor(t, tc.disk), Options{})
			p := Policy{Durability: tc.d, MIdx: 4, Origin: 9}
			steps := []struct {
				flow, key string
				want      Version
			}{
				{"i1:a", "x", Version{4, 1, 9}},
				{"i1:a", "y", Version{4, 2, 9}}, // the counter is per flow, not per key
				{"i1:b", "x", Version{4, 1, 9}},
				{"i1:a", "x", Version{4, 3, 9}},
			}
			for _, st := range steps {
				if got := mustPut(t, s, st.flow, st.key, st.flow+st.key, p); got != st.want {
					t.Fatalf("Put(%s,%s) = %+v, want %+v", st.flow, st.key, got, st.want)
				}
				e := mustGet(t, s, st.flow, st.key)
				if e.Version != st.want || string(e.Value) != st.flow+st.key {
					t.Fatalf("Get = %+v", e)
				}
			}
			// Get hands out a copy.
			e := mustGet(t, s, "i1:a", "x")
			e.Value[0] = '!'
			if got := mustGet(t, s, "i1:a", "x"); string(got.Value) != "i1:ax" {
				t.Fatalf("stored value changed through Get's result: %q", got.Value)
			}
			wantAbsent(t, s, "i1:a", "nope")
			wantAbsent(t, s, "i1:nope", "x")
		})
	}
}

func TestCAS(t *testing.T) {
	s := open(t, dbPath(t), Options{})
	p := syncP()
	mustPut(t, s, "f", "k", "v1", p) // V 1
	cases := []struct {
		name      string
		key       string
		expect    uint64
		val       string
		wantErr   error
		wantValue string
		wantV     uint64
	}{
		{"stale", "k", 5, "x", ErrVersionMismatch, "v1", 1},
		{"absent-expected-present", "k", 0, "x", ErrVersionMismatch, "v1", 1},
		{"match", "k", 1, "v2", nil, "v2", 2},
		{"create", "new", 0, "n1", nil, "n1", 3},
		{"absent-key", "gone", 3, "x", ErrVersionMismatch, "", 0},
		{"again-stale", "k", 1, "x", ErrVersionMismatch, "v2", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := s.CAS(bg, "f", tc.key, tc.expect, []byte(tc.val), p)
			if !errors.Is(err, tc.wantErr) || string(e.Value) != tc.wantValue || e.Version.V != tc.wantV {
				t.Fatalf("CAS = %q v%d, %v; want %q v%d, %v", e.Value, e.Version.V, err, tc.wantValue, tc.wantV, tc.wantErr)
			}
		})
	}
	if _, err := s.CAS(bg, "absent-flow", "k", 1, []byte("x"), p); !errors.Is(err, ErrVersionMismatch) {
		t.Fatalf("CAS on an absent flow: %v", err)
	}
	if st := s.Stats(); st.Flows != 1 {
		t.Fatalf("a failed CAS created a flow: %d flows", st.Flows)
	}
}

// Concurrent CAS increments of one key lose no update: the flow lock
// serializes them.
func TestCASCounterConcurrent(t *testing.T) {
	s := open(t, dbPath(t), Options{})
	const workers, each = 16, 50
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				for {
					cur, err := s.Get(bg, "f", "n", nil)
					var n int
					if err == nil {
						fmt.Sscan(string(cur.Value), &n)
					} else if !errors.Is(err, ErrNotFound) {
						t.Error(err)
						return
					}
					_, err = s.CAS(bg, "f", "n", cur.Version.V, []byte(fmt.Sprint(n+1)), pol(Async, 0))
					if err == nil {
						break
					}
					if !errors.Is(err, ErrVersionMismatch) {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if got := mustGet(t, s, "f", "n"); string(got.Value) != fmt.Sprint(workers*each) || got.Version.V != workers*each {
		t.Fatalf("counter = %q v%d, want %d", got.Value, got.Version.V, workers*each)
	}
}

func TestDeleteAdvancesCounter(t *testing.T) {
	path := dbPath(t)
	s := open(t, path, Options{})
	p := syncP()
	mustPut(t, s, "f", "a", "1", p) // v1
	mustPut(t, s, "f", "b", "1", p) // v2
	if _, err := s.Delete(bg, "f", "a", p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(bg, "f", "a", p); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Delete: %v", err)
	}
	if _, err := s.Delete(bg, "nope", "a", p); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Delete on absent flow: %v", err)
	}
	wantAbsent(t, s, "f", "a")
	if v := mustPut(t, s, "f", "a", "2", p); v.V != 4 {
		t.Fatalf("put after delete got v%d, want 4 (the delete was write 3)", v.V)
	}
	// The counter survives a restart even when the highest write was a delete.
	if _, err := s.Delete(bg, "f", "a", p); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, path, Options{})
	if v := mustPut(t, s, "f", "c", "3", p); v.V != 6 {
		t.Fatalf("after reopen got v%d, want 6", v.V)
	}
	if got := mustGet(t, s, "f", "b"); got.Version.V != 2 {
		t.Fatalf("b = %+v", got)
	}
}

func TestMerge(t *testing.T) {
	s := open(t, dbPath(t), Options{})
	base := Version{MIdx: 5, V: 10, Origin: 2}
	rec := func(name string, ver Version, deleted bool) RecordSet {
		r := Record{Key: "k", Version: ver, Deleted: deleted}
		if !deleted {
			r.Value = []byte(name)
		}
		return RecordSet{FlowID: "f", Records: []Record{r}, Durability: Sync}
	}
	cases := []struct {
		name    string
		ver     Version
		deleted bool
		stored  bool
	}{
		{"absent", base, false, true},
		{"equal", base, false, false},
		{"lower-midx-higher-v", Version{4, 99, 9}, false, false},
		{"lower-v", Version{5, 9, 9}, false, false},
		{"higher-origin", Version{5, 10, 3}, false, true},
		{"higher-v", Version{5, 11, 0}, false, true},
		{"tombstone", Version{5, 12, 0}, true, true},
		{"older-than-the-delete", Version{5, 11, 9}, false, false},
		{"higher-midx", Version{6, 1, 0}, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, err := s.Merge(bg, rec(tc.name, tc.ver, tc.deleted))
			if err != nil || (n == 1) != tc.stored {
				t.Fatalf("Merge = %v, %v; want stored %v", n, err, tc.stored)
			}
			if !tc.stored {
				return
			}
			if tc.deleted {
				wantAbsent(t, s, "f", "k")
				return
			}
			if got := mustGet(t, s, "f", "k"); got.Version != tc.ver || string(got.Value) != tc.name {
				t.Fatalf("Get = %+v", got)
			}
		})
	}
	// Local writes after an adoption stamp above the adopted V.
	if v := mustPut(t, s, "f", "other", "x", Policy{Durability: Sync, MIdx: 6, Origin: 1}); v.V != 13 {
		t.Fatalf("put after merge: v%d, want 13", v.V)
	}
	if _, err := s.Merge(bg, rec("", Version{}, false)); !errors.Is(err, ErrBadPolicy) {
		t.Fatalf("Merge with V 0: %v", err)
	}
}

// A fence keeps Merge off its prefix's flows, those already stored
// included, until it is lifted or runs out; local writes and other
// prefixes are not fenced.
func TestFencePrefix(t *testing.T) {
	c := newClock()
	s := open(t, dbPath(t), c.opts(Options{}))
	v := Version{MIdx: 1, Origin: 2}
	merge := func(id string) int {
		t.Helper()
		v.V++
		n, err := s.Merge(bg, RecordSet{FlowID: id, Records: []Record{{Key: "k", Value: []byte("v"), Version: v}}, Durability: Sync})
		if err != nil {
			t.Fatalf("Merge %s: %v", id, err)
		}
		return n
	}
	mustPut(t, s, "i1:held", "k", "local", syncP())
	s.FencePrefix(bg, "i1:", time.Second)
	for _, tc := range []struct {
		id   string
		want int
	}{{"i1:new", 0}, {"i1:held", 0}, {"i10:other", 1}, {"i2:x", 1}} {
		if n := merge(tc.id); n != tc.want {
			t.Errorf("fenced: Merge %s stored %d, want %d", tc.id, n, tc.want)
		}
	}
	if ids, _, _ := s.Flows(bg, "i1:", "", 10); !slices.Equal(ids, []string{"i1:held"}) {
		t.Fatalf("under the fence, i1: holds %v", ids)
	}
	if got := mustGet(t, s, "i1:held", "k"); string(got.Value) != "local" {
		t.Fatalf("a fenced merge replaced a value: %+v", got)
	}
	mustPut(t, s, "i1:local", "k", "v", syncP()) // local writes pass
	s.UnfencePrefix("i1:")
	if n := merge("i1:new"); n != 1 {
		t.Fatalf("after UnfencePrefix: Merge stored %d", n)
	}
	s.FencePrefix(bg, "i1:", time.Second)
	c.advance(time.Second)
	if n := merge("i1:late"); n != 1 {
		t.Fatalf("after the fence ran out: Merge stored %d", n)
	}
}

// A delete leaves a tombstone that replicas copy, so an older value that
// reaches a replica after the delete loses to it, and the tombstone survives
// a restart and expires with its TTL.
func TestTombstones(t *testing.T) {
	c := newClock()
	path := dbPath(t)
	s := open(t, path, c.opts(Options{}))
	p := Policy{Durability: Sync, TTL: 10 * time.Second, MIdx: 3, Origin: 1}
	mustPut(t, s, "f", "k", "1", p) // v1
	ver, err := s.Delete(bg, "f", "k", p)
	if err != nil || ver != (Version{3, 2, 1}) {
		t.Fatalf("Delete = %+v, %v", ver, err)
	}
	set, err := s.Records(bg, "f")
	if err != nil || len(set.Records) != 1 || !set.Records[0].Deleted || set.Records[0].Version != ver || set.Records[0].TTL != 10*time.Second || set.Durability != Sync {
		t.Fatalf("Records = %+v, %v", set, err)
	}
	if st := s.Stats(); st.Entries != 0 || st.Tombstones != 1 || st.Bytes != 0 {
		t.Fatalf("Stats = %+v", st)
	}
	if ids, _, _ := s.Flows(bg, "", "", 10); len(ids) != 0 {
		t.Fatalf("a flow of tombstones is listed: %v", ids)
	}
	if snap, _ := s.Entries(bg, "f"); len(snap) != 0 {
		t.Fatalf("Entries = %v", snap)
	}
	// A replica that has the tombstone refuses the value it buried.
	r := open(t, "", c.opts(Options{}))
	if n, err := r.Merge(bg, set); n != 1 || err != nil {
		t.Fatalf("Merge tombstone = %d, %v", n, err)
	}
	if n, _ := r.Merge(bg, RecordSet{FlowID: "f", Records: []Record{{Key: "k", Value: []byte("1"), Version: Version{3, 1, 1}}}}); n != 0 {
		t.Fatal("an older value replaced the tombstone")
	}
	wantAbsent(t, r, "f", "k")
	// The tombstone keeps the counter across a restart, and expires.
	s = reopen(t, s, path, c.opts(Options{}))
	if v := mustPut(t, s, "f", "j", "x", p); v.V != 3 {
		t.Fatalf("after reopen v%d, want 3", v.V)
	}
	c.advance(11 * time.Second)
	if st := s.Stats(); st.Tombstones != 1 {
		t.Fatalf("tombstone gone before its sweep: %+v", st)
	}
	if set, _ := s.Records(bg, "f"); len(set.Records) != 0 {
		t.Fatalf("expired records returned: %+v", set)
	}
}

func TestSummaries(t *testing.T) {
	a := open(t, "", Options{})
	b := open(t, "", Options{})
	p := Policy{Durability: Memory, MIdx: 1, Origin: 1}
	for _, id := range []string{"i1:x", "i1:y", "i2:z"} {
		mustPut(t, a, id, "k", "v", p)
		mustPut(t, a, id, "j", "w", p)
	}
	if _, err := a.Delete(bg, "i1:y", "j", p); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"i1:x", "i1:y"} {
		set, _ := a.Records(bg, id)
		if _, err := b.Merge(bg, set); err != nil {
			t.Fatal(err)
		}
	}
	keep := func(id string) bool { return strings.HasPrefix(id, "i1:") }
	sa, _ := a.Summaries(keep)
	sb, _ := b.Summaries(keep)
	if len(sa) != 2 || sa[0].ID != "i1:x" || sa[1].ID != "i1:y" || sa[1].Top != (Version{1, 3, 1}) {
		t.Fatalf("Summaries = %+v", sa)
	}
	if !slices.Equal(sa, sb) {
		t.Fatalf("copies differ: %+v vs %+v", sa, sb)
	}
	mustPut(t, a, "i1:x", "k", "v2", p)
	if sa, _ = a.Summaries(keep); sa[0].Sum == sb[0].Sum || sa[1] != sb[1] {
		t.Fatalf("a write did not change the sum: %+v vs %+v", sa, sb)
	}
}

func TestLimits(t *testing.T) {
	s := open(t, dbPath(t), Options{MaxKeyBytes: 8, MaxValueBytes: 16})
	p := syncP()
	cases := []struct {
		name      string
		flow, key string
		val       []byte
		want      error
	}{
		{"ok", "f", "12345678", make([]byte, 16), nil},
		{"empty-value", "f", "k", nil, nil},
		{"key-too-large", "f", "123456789", nil, ErrTooLarge},
		{"flow-too-large", "123456789", "k", nil, ErrTooLarge},
		{"value-too-large", "f", "k", make([]byte, 17), ErrTooLarge},
		{"empty-key", "f", "", nil, ErrBadKey},
		{"empty-flow", "", "k", nil, ErrBadKey},
		{"invalid-utf8", "f", "\xff", nil, ErrBadKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Put(bg, tc.flow, tc.key, tc.val, p)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Put: %v, want %v", err, tc.want)
			}
			if _, err := s.CAS(bg, tc.flow, tc.key, 0, tc.val, p); tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("CAS: %v, want %v", err, tc.want)
			}
			if _, err := s.Merge(bg, RecordSet{FlowID: tc.flow, Records: []Record{{Key: tc.key, Value: tc.val, Version: Version{V: 1}}}}); tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Merge: %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := s.Put(bg, "f", "k", nil, Policy{Durability: 3}); !errors.Is(err, ErrBadPolicy) {
		t.Fatalf("bad durability: %v", err)
	}
	if _, err := s.Put(bg, "f", "k", nil, Policy{TTL: -time.Second}); !errors.Is(err, ErrBadPolicy) {
		t.Fatalf("negative TTL: %v", err)
	}
	if got := mustGet(t, s, "f", "k"); got.Value == nil || len(got.Value) != 0 {
		t.Fatalf("empty value read back as %#v", got.Value)
	}
}

func TestTTL(t *testing.T) {
	c := newClock()
	path := dbPath(t)
	o := c.opts(Options{SweepInterval: -1, DefaultTTL: time.Minute})
	s := open(t, path, o)
	mustPut(t, s, "f", "short", "1", pol(Sync, time.Second))
	mustPut(t, s, "f", "default", "1", pol(Sync, 0))
	if e := mustGet(t, s, "f", "short"); !e.Expires.Equal(c.now().Add(time.Second)) {
		t.Fatalf("Expires = %v, want now+1s", e.Expires)
	}
	c.advance(999 * time.Millisecond)
	mustGet(t, s, "f", "short")
	c.advance(time.Millisecond)
	wantAbsent(t, s, "f", "short")
	if keys, _ := s.Keys(bg, "f"); !slices.Equal(keys, []string{"default"}) {
		t.Fatalf("Keys = %v", keys)
	}
	// A write refreshes the TTL.
	c.advance(50 * time.Second)
	mustPut(t, s, "f", "default", "2", pol(Sync, 0))
	c.advance(50 * time.Second)
	mustGet(t, s, "f", "default")
	// An expired key is absent to CAS and Delete too, and its V restarts
	// above the flow counter.
	mustPut(t, s, "f", "k", "1", pol(Sync, time.Second))
	c.advance(2 * time.Second)
	if _, err := s.CAS(bg, "f", "k", 4, []byte("x"), syncP()); !errors.Is(err, ErrVersionMismatch) {
		t.Fatalf("CAS on expired key: %v", err)
	}
	if _, err := s.Delete(bg, "f", "k", syncP()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Delete of expired key: %v", err)
	}
	// At reopen, expired entries are dropped, on disk too.
	mustPut(t, s, "g", "k", "1", pol(Sync, time.Second))
	s = reopen(t, s, path, o)
	c.advance(2 * time.Second)
	s = reopen(t, s, path, o)
	if st := s.Stats(); st.Flows != 1 || st.Entries != 1 {
		t.Fatalf("after reopen: %+v", st)
	}
	n, s := countDisk(t, s, path, o)
	if n != 1 { // f's live entry; the expired ones were deleted lazily or at open
		t.Fatalf("%d records on disk, want 1", n)
	}
	// Past the last write's TTL the whole flow is gone, counter included.
	c.advance(time.Hour)
	if v := mustPut(t, s, "f", "k", "1", syncP()); v.V != 1 {
		t.Fatalf("new flow after expiry: v%d", v.V)
	}
}

// countDisk closes s, counts the records in the file and opens it again.
func countDisk(t *testing.T, s *Store, path string, o Options) (int, *Store) {
	t.Helper()
	if err := s.Close(bg); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(dataBucket).ForEach(func(k, v []byte) error { n++; return nil })
	})
	if err2 := db.Close(); err == nil {
		err = err2
	}
	if err != nil {
		t.Fatal(err)
	}
	return n, open(t, path, o)
}

func TestSweep(t *testing.T) {
	c := newClock()
	path := dbPath(t)
	o := c.opts(Options{SweepInterval: 5 * time.Millisecond, SweepBatch: 2})
	s := open(t, path, o)
	for i := range 5 {
		mustPut(t, s, fmt.Sprint("f", i), "a", "1", pol(Sync, time.Second))
		mustPut(t, s, fmt.Sprint("f", i), "b", "1", pol(Sync, time.Hour))
	}
	mustPut(t, s, "gone", "a", "1", pol(Sync, time.Second))
	c.advance(2 * time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := s.Stats()
		if st.Flows == 5 && st.Entries == 5 && st.ExpiredFlows == 1 && st.ExpiredEntries == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sweep did not finish: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n, _ := countDisk(t, s, path, o); n != 5 {
		t.Fatalf("%d records on disk after the sweep, want 5", n)
	}
}

func TestLRU(t *testing.T) {
	path := dbPath(t)
	o := Options{MaxFlows: 3}
	s := open(t, path, o)
	p := syncP()
	for _, f := range []string{"a", "b", "c"} {
		mustPut(t, s, f, "k1", "1", p)
		mustPut(t, s, f, "k2", "1", p)
	}
	mustGet(t, s, "a", "k1") // a is now the most recent: b is the least
	mustPut(t, s, "d", "k", "1", p)
	wantAbsent(t, s, "b", "k1")
	wantAbsent(t, s, "b", "k2") // the whole flow, never single keys
	if keys, _ := s.Keys(bg, "c"); len(keys) != 2 {
		t.Fatalf("c lost keys: %v", keys)
	}
	mustPut(t, s, "e", "k", "1", p) // sheds a (c was touched by Keys)
	wantAbsent(t, s, "a", "k1")
	st := s.Stats()
	if st.Flows != 3 || st.EvictedLRU != 2 || st.Entries != 4 {
		t.Fatalf("stats: %+v", st)
	}
	s = reopen(t, s, path, o)
	wantAbsent(t, s, "a", "k2")
	wantAbsent(t, s, "b", "k2")
	n, s := countDisk(t, s, path, o)
	if n != 4 {
		t.Fatalf("%d records on disk, want 4", n)
	}
	// Reopening with a smaller cap sheds the flows written longest ago.
	s = reopen(t, s, path, Options{MaxFlows: 1})
	ids, _, err := s.Flows(bg, "", "", 10)
	if err != nil || len(ids) != 1 {
		t.Fatalf("Flows after reopen with MaxFlows 1: %v %v", ids, err)
	}
}

func TestFlowsAndDeletePrefix(t *testing.T) {
	c := newClock()
	path := dbPath(t)
	o := c.opts(Options{SweepInterval: -1})
	s := open(t, path, o)
	p := syncP()
	var want8080 []string
	for i := range 25 {
		id := fmt.Sprintf("i8080:%02d", i)
		want8080 = append(want8080, id)
		mustPut(t, s, id, "k", "v", p)
		mustPut(t, s, fmt.Sprintf("i80800:%02d", i), "k", "v", p)
	}
	mustPut(t, s, "f:x", "k", "v", p)
	mustPut(t, s, "i8080:expired", "k", "v", pol(Sync, time.Second))
	mustPut(t, s, "i8080:deleted", "k", "v", p)
	if _, err := s.Delete(bg, "i8080:deleted", "k", p); err != nil {
		t.Fatal(err)
	}
	c.advance(2 * time.Second)
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		ids, more, err := s.Flows(bg, "i8080:", after, 10)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ids...)
		if !more {
			if pages != 2 {
				t.Fatalf("%d pages, want 3", pages+1)
			}
			break
		}
		after = ids[len(ids)-1]
	}
	if !slices.Equal(got, want8080) {
		t.Fatalf("Flows = %v", got)
	}
	n, err := s.DeletePrefix(bg, "i8080:")
	if err != nil || n != 27 {
		t.Fatalf("DeletePrefix = %d, %v", n, err)
	}
	if err := s.Clear(bg, "f:x"); err != nil {
		t.Fatal(err)
	}
	if err := s.Clear(bg, "f:absent"); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, path, o)
	ids, _, _ := s.Flows(bg, "", "", 100)
	if len(ids) != 25 || !strings.HasPrefix(ids[0], "i80800:") {
		t.Fatalf("after DeletePrefix and reopen: %v", ids)
	}
	if v := mustPut(t, s, "i8080:00", "k", "v", p); v.V != 1 {
		t.Fatalf("a cleared flow restarts its counter: v%d", v.V)
	}
}

// Recreating a just-cleared flow must not lose its new writes to the delete
// still queued for the old one.
func TestClearThenRecreateOnDisk(t *testing.T) {
	path := dbPath(t)
	s := open(t, path, Options{})
	for i := range 200 {
		mustPut(t, s, "f", "k", fmt.Sprint(i), pol(Async, 0))
		if err := s.Clear(bg, "f"); err != nil {
			t.Fatal(err)
		}
		mustPut(t, s, "f", "k", fmt.Sprint(i), pol(Async, 0))
	}
	s = reopen(t, s, path, Options{})
	if got := mustGet(t, s, "f", "k"); string(got.Value) != "199" {
		t.Fatalf("got %q", got.Value)
	}
}

func TestDurabilityOnReopen(t *testing.T) {
	path := dbPath(t)
	s := open(t, path, Options{})
	mustPut(t, s, "sync", "k", "s", pol(Sync, 0))
	mustPut(t, s, "async", "k", "a", pol(Async, 0))
	mustPut(t, s, "memory", "k", "m", pol(Memory, 0))
	// A Memory write over a durable key removes the disk copy, so a restart
	// cannot bring back the older value.
	mustPut(t, s, "sync", "gone", "s", pol(Sync, 0))
	mustPut(t, s, "sync", "gone", "m", pol(Memory, 0))
	s = reopen(t, s, path, Options{})
	if got := mustGet(t, s, "sync", "k"); string(got.Value) != "s" || got.Version != (Version{3, 1, 7}) {
		t.Fatalf("sync: %+v", got)
	}
	if got := mustGet(t, s, "async", "k"); string(got.Value) != "a" { // Close drains Async writes
		t.Fatalf("async: %+v", got)
	}
	wantAbsent(t, s, "memory", "k")
	wantAbsent(t, s, "sync", "gone")
}

func TestInMemoryStoreWritesNothing(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	s := open(t, "", Options{})
	mustPut(t, s, "f", "k", "v", pol(Sync, 0))
	if err := s.Close(bg); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("files written: %v", ents)
	}
	if st := s.Stats(); st.Batches != 0 || st.Puts[Sync] != 1 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestClosed(t *testing.T) {
	s := open(t, dbPath(t), Options{})
	mustPut(t, s, "f", "k", "v", pol(Async, 0))
	if err := s.Close(bg); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(bg); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Get(bg, "f", "k", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if _, err := s.Put(bg, "f", "k", nil, syncP()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
	if _, _, err := s.Flows(bg, "", "", 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Flows after Close: %v", err)
	}
	if err := s.Clear(bg, "f"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Clear after Close: %v", err)
	}
}

func TestCanceledContext(t *testing.T) {
	s := open(t, dbPath(t), Options{})
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := s.Put(ctx, "f", "k", nil, syncP()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put: %v", err)
	}
	if _, err := s.Get(ctx, "f", "k", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get: %v", err)
	}
}

func TestRefusesUnreadableFile(t *testing.T) {
	cases := []struct {
		name   string
		bucket []byte
		k, v   []byte
	}{
		{"format-3", metaBucket, formatKey, []byte{3}},
		{"record-version-3", dataBucket, entryKey("f", "k"), []byte{3, 1, 0, 1, 0, 0}},
		{"format-1-record-in-a-format-2-file", dataBucket, entryKey("f", "k"), []byte{1, 1, 0, 1, 0, 0}},
		{"entry-under-flow-key", dataBucket, flowKey("f"), encodeEntry(Version{V: 1}, 0, nil)},
		{"bad-key", dataBucket, []byte{0x05, 'a'}, encodeFlow(1, 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			s := open(t, path, Options{})
			mustPut(t, s, "f", "k", "v", syncP())
			if err := s.Close(bg); err != nil {
				t.Fatal(err)
			}
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(tc.bucket).Put(tc.k, tc.v) })
			if err2 := db.Close(); err == nil {
				err = err2
			}
			if err != nil {
				t.Fatal(err)
			}
			if s, err := Open(path, Options{}); !errors.Is(err, ErrCorrupt) {
				if s != nil {
					s.Close(bg)
				}
				t.Fatalf("Open: %v", err)
			}
		})
	}
}

func TestStats(t *testing.T) {
	s := open(t, dbPath(t), Options{})
	mustPut(t, s, "f", "ab", "123", pol(Sync, 0))
	mustPut(t, s, "f", "c", "1", pol(Async, 0))
	mustPut(t, s, "g", "c", "1", pol(Memory, 0))
	mustGet(t, s, "f", "ab")
	st := s.Stats()
	if st.Flows != 2 || st.Entries != 3 || st.Bytes != 5+2+2 {
		t.Fatalf("gauges: %+v", st)
	}
	if st.Puts != [3]uint64{1, 1, 1} || st.Gets != [3]uint64{0, 1, 0} { // f's latest write was Async
		t.Fatalf("counters: %+v", st)
	}
	if st.Batches == 0 || st.BatchedOps < 1 || st.CommitNanos == 0 {
		t.Fatalf("writer counters: %+v", st)
	}
	var n uint64
	for _, c := range st.CommitLatency {
		n += c
	}
	if n != st.Batches {
		t.Fatalf("latency histogram counts %d commits, want %d", n, st.Batches)
	}
	if bucket(0, batchBuckets) != 0 || bucket(1, batchBuckets) != 1 || bucket(255, batchBuckets) != 8 || bucket(1<<40, batchBuckets) != batchBuckets-1 {
		t.Fatal("bucket boundaries")
	}
}

// A commit that fails (here: the file cap is reached) fails its Sync
// writers with ErrWriteFailed, is counted and logged, and leaves the store
// serving from memory.
func TestCommitFailure(t *testing.T) {
	var logs bytes.Buffer
	s := open(t, dbPath(t), Options{MaxFileBytes: 1 << 20, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	val := make([]byte, 60<<10)
	var err error
	n := 0
	for ; n < 100 && err == nil; n++ {
		_, err = s.Put(bg, "f", fmt.Sprint(n), val, syncP())
	}
	if !errors.Is(err, ErrWriteFailed) || !errors.Is(err, bolterrors.ErrMaxSizeReached) {
		t.Fatalf("after %d puts: %v", n, err)
	}
	if st := s.Stats(); st.CommitErrors == 0 {
		t.Fatalf("stats: %+v", st)
	}
	if !strings.Contains(logs.String(), "commit failed") {
		t.Fatalf("nothing logged: %q", logs.String())
	}
	// The failed write stays in memory, which is authoritative: its outcome
	// was unknown to the writer, and readers see it.
	if e, err := s.Get(bg, "f", fmt.Sprint(n-1), nil); err != nil || len(e.Value) != len(val) {
		t.Fatalf("Get of the failed write: %v", err)
	}
	if _, err := s.Put(bg, "g", "k", []byte("v"), pol(Memory, 0)); err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, "g", "k")
}

// The default cap: 100k flows, the 100 001st sheds exactly one.
func TestDefaultMaxFlows(t *testing.T) {
	s := open(t, "", Options{})
	for i := range DefaultMaxFlows + 1 {
		if _, err := s.Put(bg, strconv.Itoa(i), "k", nil, Policy{}); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Flows != DefaultMaxFlows || st.EvictedLRU != 1 || st.Entries != DefaultMaxFlows {
		t.Fatalf("stats: %+v", st)
	}
	wantAbsent(t, s, "0", "k")
	mustGet(t, s, "1", "k")
}

// Back-pressure: with MaxPending 8 and 4 writers, no batch ever holds more
// than 8+4 ops, whatever the scheduling (what bounds Async's loss).
func TestMaxPendingBoundsBatches(t *testing.T) {
	s := open(t, dbPath(t), Options{MaxPending: 8})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 300 {
				if _, err := s.Put(bg, strconv.Itoa(g), strconv.Itoa(i%8), []byte("v"), pol(Async, 0)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := s.Close(bg); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.BatchedOps != 1200 {
		t.Fatalf("%d ops committed, want 1200", st.BatchedOps)
	}
	// Bucket 4 holds sizes 8..15, bucket 5 and up 16 and more.
	for i, n := range st.BatchSizes[5:] {
		if n != 0 {
			t.Fatalf("%d batches in bucket %d: %v", n, i+5, st.BatchSizes)
		}
	}
	t.Logf("%d batches, sizes %v", st.Batches, st.BatchSizes[:5])
}

// A write overwrites its key's entry in place: what a reader got before
// stays as it was, the gauges follow the value's size, a warm key's write
// allocates nothing in memory, and a far smaller value does not keep a
// large one's room.
func TestOverwriteInPlace(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			s := open(t, pathFor(t, st.disk), Options{})
			mustPut(t, s, "f", "k", "aaaa", pol(st.d, 0))
			got := mustGet(t, s, "f", "k")
			casGot, err := s.CAS(bg, "f", "k", 99, []byte("x"), pol(st.d, 0))
			if !errors.Is(err, ErrVersionMismatch) {
				t.Fatal(err)
			}
			for _, v := range []string{"bbbb", "cc", strings.Repeat("d", 1000), "e"} {
				mustPut(t, s, "f", "k", v, pol(st.d, 0))
				if e := mustGet(t, s, "f", "k"); string(e.Value) != v {
					t.Fatalf("stored %q, want %q", e.Value, v)
				}
				if b := s.Stats().Bytes; b != int64(len("k")+len(v)) {
					t.Fatalf("bytes gauge %d after %q", b, v)
				}
			}
			if string(got.Value) != "aaaa" || string(casGot.Value) != "aaaa" {
				t.Fatalf("an earlier read changed: %q, %q", got.Value, casGot.Value)
			}
			s.mu.Lock()
			f := s.flows["f"]
			s.mu.Unlock()
			if c := cap(f.entries["k"].value); c > 64 {
				t.Fatalf("a 1-byte value keeps %d bytes of room", c)
			}
		})
	}
	s := open(t, "", Options{})
	val := []byte("01234567")
	mustPut(t, s, "f", "k", "76543210", pol(Memory, 0))
	if n := testing.AllocsPerRun(100, func() { _, _ = s.Put(bg, "f", "k", val, pol(Memory, 0)) }); n != 0 {
		t.Errorf("a warm key's write: %v allocations", n)
	}
}

// A NoWait Sync write returns before its commit; Durable waits for it, and
// what it waited for survives a reopen.
func TestNoWaitThenDurable(t *testing.T) {
	path := dbPath(t)
	s := open(t, path, Options{})
	p := Policy{Durability: Sync, NoWait: true}
	if _, err := s.Put(bg, "f", "k", []byte("v"), p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(bg, "f", "k", p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(bg, "f", "j", []byte("w"), p); err != nil {
		t.Fatal(err)
	}
	if err := s.Durable(bg, "f"); err != nil {
		t.Fatal(err)
	}
	if err := s.Durable(bg, "absent"); err != nil {
		t.Fatalf("Durable of an absent flow: %v", err)
	}
	s = reopen(t, s, path, Options{})
	wantAbsent(t, s, "f", "k")
	if got := mustGet(t, s, "f", "j"); string(got.Value) != "w" {
		t.Fatalf("after reopen: %+v", got)
	}
}

// opTimeCtx is a context that knows when its operation began.
type opTimeCtx struct {
	context.Context
	at time.Time
}

func (c opTimeCtx) OpTime() (time.Time, bool) { return c.at, true }

// TestOpTimeIsTheOperationsTime: an operation whose context is an OpTimer
// runs at the time it tells, not the clock's: a value written two hours
// ago with a one-hour TTL is live at that time and gone now.
func TestOpTimeIsTheOperationsTime(t *testing.T) {
	s := open(t, "", Options{})
	then := opTimeCtx{context.Background(), time.Now().Add(-2 * time.Hour)}
	if _, err := s.Put(then, "f", "k", []byte("v"), Policy{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Get(then, "f", "k", nil); err != nil || string(e.Value) != "v" {
		t.Fatalf("at its own time: %q %v", e.Value, err)
	}
	if _, err := s.Get(bg, "f", "k", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("now: %v, want ErrNotFound (expired an hour ago)", err)
	}
}

// TestCloseWaitsForOpsInProgress races writers against Close: every write
// acknowledged before Close is on disk afterwards, and none lands after
// it (Close takes each flow's lock once instead of counting ops). Large
// values keep each write's flow lock held long enough for Close to come
// in between.
func TestCloseWaitsForOpsInProgress(t *testing.T) {
	o := Options{MaxValueBytes: 4 << 20}
	big := bytes.Repeat([]byte{'x'}, 1<<20)
	for round := range 20 {
		path := dbPath(t)
		s, err := Open(path, o)
		if err != nil {
			t.Fatal(err)
		}
		const writers = 8
		acked := make([]int, writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Two writers share each flow, so ops also wait on flow locks.
				flowID, key := fmt.Sprintf("f%d", w/2), fmt.Sprintf("k%d", w)
				value := slices.Clone(big)
				for n := 1; ; n++ {
					binary.BigEndian.PutUint64(value, uint64(n))
					if _, err := s.Put(bg, flowID, key, value, pol(Async, 0)); err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("Put: %v", err)
						}
						return
					}
					acked[w] = n
				}
			}()
		}
		time.Sleep(time.Duration(1+round%5) * time.Millisecond)
		if err := s.Close(bg); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		s = open(t, path, o)
		for w := range writers {
			e, err := s.Get(bg, fmt.Sprintf("f%d", w/2), fmt.Sprintf("k%d", w), nil)
			if acked[w] == 0 {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("round %d writer %d: nothing acknowledged, found %q (%v)", round, w, e.Value, err)
				}
				continue
			}
			if err != nil || len(e.Value) < 8 || binary.BigEndian.Uint64(e.Value) != uint64(acked[w]) {
				t.Fatalf("round %d writer %d: last acknowledged %d, stored %d bytes (%v)", round, w, acked[w], len(e.Value), err)
			}
		}
	}
}

// Async writes that nothing waits for still reach the disk, within about
// AsyncInterval, however they arrive: one alone, a stream, a stream that
// stops: a write that joined a batch is committed with it, whatever woke
// the writer.
func TestAsyncWritesCommitUnwaited(t *testing.T) {
	s := open(t, dbPath(t), Options{})
	committed := func(n uint64) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for s.Stats().BatchedOps < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d Async ops committed after 2 s", s.Stats().BatchedOps, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	mustPut(t, s, "f", "k", "alone", pol(Async, 0))
	committed(1)
	n := uint64(1)
	stop := time.Now().Add(30 * AsyncInterval)
	for i := 0; time.Now().Before(stop); i++ {
		mustPut(t, s, "f", strconv.Itoa(i%16), "stream", pol(Async, 0))
		n++
		if i%64 == 0 {
			time.Sleep(time.Millisecond / 4)
		}
	}
	committed(n)
	st := s.Stats()
	if st.Batches >= n/4 {
		t.Errorf("%d ops in %d batches: Async writes are not batched", n, st.Batches)
	}
}

// superseded keeps, of the ops a batch has for one key, only the last one
// since the batch's last prefix delete: a prefix delete orders the writes
// around it.
func TestSuperseded(t *testing.T) {
	put := func(k string) op { return op{key: []byte(k), val: []byte("v")} }
	del := func(k string) op { return op{key: []byte(k), del: true} }
	prefix := func(k string) op { return op{key: []byte(k), prefix: true} }
	tests := []struct {
		name string
		ops  []op
		skip []int
	}{
		{"one", []op{put("a")}, nil},
		{"distinct keys", []op{put("a"), put("b"), del("c")}, nil},
		{"a key written three times", []op{put("a"), put("b"), put("a"), put("a")}, []int{0, 2}},
		{"a write then a delete", []op{put("a"), del("a")}, []int{0}},
		{"a delete then a write", []op{del("a"), put("a")}, []int{0}},
		{"a prefix delete between", []op{put("fa"), prefix("f"), put("fa")}, nil},
		{"after a prefix delete", []op{put("fa"), prefix("f"), put("fa"), put("fa"), put("fa")}, []int{2, 3}},
		{"a key equal to a prefix", []op{put("f"), prefix("f"), put("f")}, nil},
	}
	var w writer
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := w.superseded(tc.ops)
			var got []int
			for i, s := range w.skip {
				if s {
					got = append(got, i)
				}
			}
			if !slices.Equal(got, tc.skip) || n != len(tc.skip) {
				t.Fatalf("skipped %v (%d), want %v", got, n, tc.skip)
			}
		})
	}
}

// A key written many times in one Async batch reaches the disk once, with
// its last value, and a whole flow deleted between writes stays deleted
// but for what was written after.
func TestSupersededWritesOnDisk(t *testing.T) {
	path := dbPath(t)
	s := open(t, path, Options{})
	for i := range 200 {
		mustPut(t, s, "f", "k", strconv.Itoa(i), pol(Async, 0))
		mustPut(t, s, "g", strconv.Itoa(i%3), strconv.Itoa(i), pol(Async, 0))
	}
	if err := s.Clear(bg, "g"); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "g", "after", "x", pol(Async, 0))
	if err := s.Close(bg); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Superseded == 0 || st.Superseded >= st.BatchedOps {
		t.Fatalf("%d of %d batched ops superseded", st.Superseded, st.BatchedOps)
	}
	s = open(t, path, Options{})
	if e := mustGet(t, s, "f", "k"); string(e.Value) != "199" {
		t.Fatalf("f/k = %q after reopening, want the last write", e.Value)
	}
	for k := range 3 {
		wantAbsent(t, s, "g", strconv.Itoa(k))
	}
	if e := mustGet(t, s, "g", "after"); string(e.Value) != "x" {
		t.Fatalf("g/after = %q", e.Value)
	}
}
