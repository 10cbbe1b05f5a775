package flowshard

import (
	"errors"
	"maps"
	"sync"
	"testing"
)

func versionsOf(es []KeyEntry) []KeyVersion {
	var out []KeyVersion
	for _, e := range es {
		out = append(out, KeyVersion{Key: e.Key, V: e.Version.V})
	}
	return out
}

func values(es []KeyEntry) map[string]string {
	out := map[string]string{}
	for i, e := range es {
		if i > 0 && es[i-1].Key >= e.Key {
			panic("entries out of order")
		}
		out[e.Key] = string(e.Value)
	}
	return out
}

func entryOf(es []KeyEntry, key string) (Entry, bool) {
	for _, e := range es {
		if e.Key == key {
			return e.Entry, true
		}
	}
	return Entry{}, false
}

func TestCommit(t *testing.T) {
	for _, tc := range stores {
		t.Run(tc.name, func(t *testing.T) {
			path := pathFor(t, tc.disk)
			s := open(t, path, Options{})
			p := pol(tc.d, 0)

			// An absent flow is the empty base; deletes alone create nothing.
			if got, err := s.Commit(bg, "f", nil, []Write{{Key: "x", Delete: true}}, p); err != nil || len(got) != 0 {
				t.Fatalf("delete on an absent flow = %v, %v", got, err)
			}
			if st := s.Stats(); st.Flows != 0 {
				t.Fatalf("a delete-only commit created a flow")
			}
			got := commitOK(t, s, nil, []Write{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}}, p)
			if !maps.Equal(values(got), map[string]string{"a": "1", "b": "2"}) {
				t.Fatalf("after the first commit: %v", values(got))
			}
			if a, _ := entryOf(got, "a"); a.Version.V != 1 {
				t.Fatalf("each write advances the counter: %+v", got)
			}
			if b, _ := entryOf(got, "b"); b.Version.V != 2 {
				t.Fatalf("each write advances the counter: %+v", got)
			}
			base := versionsOf(got)

			// A write in between makes the base stale: nothing is written,
			// and the current entries come back.
			mustPut(t, s, "f", "c", "3", p)
			cur, err := s.Commit(bg, "f", base, []Write{{Key: "a", Value: []byte("lost")}}, p)
			if !errors.Is(err, ErrVersionMismatch) || !maps.Equal(values(cur), map[string]string{"a": "1", "b": "2", "c": "3"}) {
				t.Fatalf("stale commit = %v, %v", values(cur), err)
			}
			// A base that misses a key, or names one too many, is stale too.
			for _, b := range [][]KeyVersion{base, append(versionsOf(cur), KeyVersion{"z", 9})} {
				if _, err := s.Commit(bg, "f", b, nil, p); !errors.Is(err, ErrVersionMismatch) {
					t.Fatalf("base %v: %v", b, err)
				}
			}
			got = commitOK(t, s, versionsOf(cur), []Write{{Key: "a", Delete: true}, {Key: "b", Value: []byte("22")}}, p)
			if !maps.Equal(values(got), map[string]string{"b": "22", "c": "3"}) {
				t.Fatalf("after a delete and a put: %v", values(got))
			}
			// A bad key refuses the whole commit.
			if _, err := s.Commit(bg, "f", versionsOf(got), []Write{{Key: "ok", Value: []byte("v")}, {Key: ""}}, p); !errors.Is(err, ErrBadKey) {
				t.Fatalf("bad key: %v", err)
			}
			if _, err := s.Get(bg, "f", "ok", nil); !errors.Is(err, ErrNotFound) {
				t.Fatalf("a refused commit wrote: %v", err)
			}
			if tc.disk && tc.d != Memory {
				s = reopen(t, s, path, Options{})
				all, err := s.Entries(bg, "f")
				if err != nil || !maps.Equal(values(all), map[string]string{"b": "22", "c": "3"}) {
					t.Fatalf("after reopen: %v, %v", values(all), err)
				}
				// The counter survived the delete (a 1, b 2, c 3, delete 4, b 5).
				if v := mustPut(t, s, "f", "d", "4", p); v.V != 6 {
					t.Fatalf("counter after reopen: %d", v.V)
				}
			}
		})
	}
}

// commitOK commits to flow "f", which must succeed and return nothing,
// and returns the flow as it is then.
func commitOK(t *testing.T, s *Store, base []KeyVersion, ws []Write, p Policy) []KeyEntry {
	t.Helper()
	if got, err := s.Commit(bg, "f", base, ws, p); err != nil || got != nil {
		t.Fatalf("commit = %v, %v; want nothing, nil", got, err)
	}
	es, err := s.Entries(bg, "f")
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// Concurrent read-modify-write increments through Commit lose no update.
func TestCommitCounterConcurrent(t *testing.T) {
	s := open(t, dbPath(t), Options{})
	const workers, each = 8, 40
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				cur, _ := s.Entries(bg, "f")
				for {
					n := 0
					if e, ok := entryOf(cur, "n"); ok {
						n = int(e.Value[0])<<8 | int(e.Value[1])
					}
					n++
					next, err := s.Commit(bg, "f", versionsOf(cur), []Write{{Key: "n", Value: []byte{byte(n >> 8), byte(n)}}}, syncP())
					if err == nil {
						break
					}
					if !errors.Is(err, ErrVersionMismatch) {
						t.Error(err)
						return
					}
					cur = next
				}
			}
		})
	}
	wg.Wait()
	e := mustGet(t, s, "f", "n")
	if n := int(e.Value[0])<<8 | int(e.Value[1]); n != workers*each {
		t.Fatalf("counter = %d, want %d", n, workers*each)
	}
}
