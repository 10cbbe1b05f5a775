package flowshard

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The model is the specification written as plainly as possible: maps, a
// slice for the access order and a clock in milliseconds. The store must
// answer every operation exactly as the model does, TTL and LRU included.
type mEntry struct {
	val  []byte
	ver  Version
	exp  int64
	dead bool // a tombstone
}

type mFlow struct {
	counter uint64
	exp     int64
	entries map[string]mEntry
}

type model struct {
	flows map[string]*mFlow
	order []string // least recently accessed first
	max   int
	ttl   int64 // default TTL, ms
	now   int64
}

func (m *model) remove(id string) {
	delete(m.flows, id)
	m.order = slices.DeleteFunc(m.order, func(s string) bool { return s == id })
}

func (m *model) acquire(id string, create bool, ttl int64) *mFlow {
	f := m.flows[id]
	if f != nil && f.exp <= m.now {
		m.remove(id)
		f = nil
	}
	if f == nil {
		if !create {
			return nil
		}
		for len(m.flows) >= m.max {
			m.remove(m.order[0])
		}
		f = &mFlow{exp: m.now + ttl, entries: map[string]mEntry{}}
		m.flows[id] = f
	} else {
		m.remove(id)
		m.flows[id] = f
	}
	m.order = append(m.order, id)
	return f
}

func (m *model) live(f *mFlow, key string) (mEntry, bool) {
	e, ok := m.current(f, key)
	if !ok || e.dead {
		return mEntry{}, false
	}
	return e, true
}

// current is key's entry or tombstone.
func (m *model) current(f *mFlow, key string) (mEntry, bool) {
	e, ok := f.entries[key]
	if ok && e.exp <= m.now {
		delete(f.entries, key)
		return mEntry{}, false
	}
	return e, ok
}

func (m *model) store(f *mFlow, key string, val []byte, ver Version, ttl int64) mEntry {
	return m.set(f, key, mEntry{val: val, ver: ver, exp: m.now + ttl})
}

func (m *model) set(f *mFlow, key string, e mEntry) mEntry {
	f.entries[key] = e
	f.counter = max(f.counter, e.ver.V)
	f.exp = max(f.exp, e.exp)
	return e
}

func (m *model) ttlOf(p Policy) int64 {
	if p.TTL == 0 {
		return m.ttl
	}
	return p.TTL.Milliseconds()
}

func TestModel(t *testing.T) {
	t.Run("memory", func(t *testing.T) { checkModel(t, false) })
	t.Run("disk", func(t *testing.T) { checkModel(t, true) })
}

func checkModel(t *testing.T, disk bool) {
	rapid.Check(t, func(rt *rapid.T) {
		c := newClock()
		path := ""
		if disk {
			path = dbPath(t)
		}
		s, err := Open(path, c.opts(Options{MaxFlows: 3, DefaultTTL: 5 * time.Second, SweepInterval: -1}))
		if err != nil {
			rt.Fatal(err)
		}
		defer s.Close(bg)
		m := &model{flows: map[string]*mFlow{}, max: 3, ttl: 5000, now: c.ms.Load()}

		flowGen := rapid.SampledFrom([]string{"i1:a", "i1:b", "i2:a", "i2:b", "f:x"})
		keyGen := rapid.SampledFrom([]string{"a", "b", "c"})
		valGen := rapid.SliceOfN(rapid.Byte(), 0, 4)
		policyGen := rapid.Custom(func(t *rapid.T) Policy {
			return Policy{
				TTL:        rapid.SampledFrom([]time.Duration{0, time.Second, 2 * time.Second, 10 * time.Second}).Draw(t, "ttl"),
				Durability: rapid.SampledFrom([]Durability{Memory, Async, Sync}).Draw(t, "durability"),
				MIdx:       rapid.Uint64Range(0, 2).Draw(t, "midx"),
				Origin:     rapid.Uint64Range(0, 2).Draw(t, "origin"),
			}
		})
		checkEntry := func(t *rapid.T, got Entry, err error, want mEntry, ok bool, wantErr error) {
			t.Helper()
			if !ok {
				if !errors.Is(err, wantErr) || got.Version != (Version{}) {
					t.Fatalf("got %+v, %v; want %v", got, err, wantErr)
				}
				return
			}
			if !errors.Is(err, wantErr) || !bytes.Equal(got.Value, want.val) || got.Version != want.ver || got.Expires.UnixMilli() != want.exp {
				t.Fatalf("got %+v, %v; want %+v, %v", got, err, want, wantErr)
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"": func(t *rapid.T) {
				if got := s.Stats().Flows; got != int64(len(m.flows)) {
					t.Fatalf("store holds %d flows, model %d", got, len(m.flows))
				}
			},
			"advance": func(t *rapid.T) {
				d := rapid.SampledFrom([]time.Duration{500 * time.Millisecond, time.Second, 3 * time.Second}).Draw(t, "d")
				c.advance(d)
				m.now += d.Milliseconds()
			},
			"put": func(t *rapid.T) {
				id, key, val, p := flowGen.Draw(t, "flow"), keyGen.Draw(t, "key"), valGen.Draw(t, "val"), policyGen.Draw(t, "p")
				got, err := s.Put(bg, id, key, val, p)
				f := m.acquire(id, true, m.ttlOf(p))
				want := Version{p.MIdx, f.counter + 1, p.Origin}
				m.store(f, key, val, want, m.ttlOf(p))
				if err != nil || got != want {
					t.Fatalf("Put = %+v, %v; want %+v", got, err, want)
				}
			},
			"cas": func(t *rapid.T) {
				id, key, val, p := flowGen.Draw(t, "flow"), keyGen.Draw(t, "key"), valGen.Draw(t, "val"), policyGen.Draw(t, "p")
				var cur uint64
				if f := m.flows[id]; f != nil {
					cur = f.entries[key].ver.V
				}
				expect := rapid.SampledFrom([]uint64{0, cur, cur + 1, max(cur, 1) - 1}).Draw(t, "expect")
				got, err := s.CAS(bg, id, key, expect, val, p)
				f := m.acquire(id, expect == 0, m.ttlOf(p))
				if f == nil {
					checkEntry(t, got, err, mEntry{}, false, ErrVersionMismatch)
					return
				}
				e, ok := m.live(f, key)
				if e.ver.V != expect {
					checkEntry(t, got, err, e, ok, ErrVersionMismatch)
					return
				}
				e = m.store(f, key, val, Version{p.MIdx, f.counter + 1, p.Origin}, m.ttlOf(p))
				checkEntry(t, got, err, e, true, nil)
			},
			"merge": func(t *rapid.T) {
				id, p := flowGen.Draw(t, "flow"), policyGen.Draw(t, "p")
				recs := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Record {
					r := Record{
						Key:     keyGen.Draw(t, "key"),
						Version: Version{rapid.Uint64Range(0, 2).Draw(t, "midx"), rapid.Uint64Range(1, 8).Draw(t, "v"), rapid.Uint64Range(0, 2).Draw(t, "origin")},
						Deleted: rapid.Bool().Draw(t, "deleted"),
						TTL:     rapid.SampledFrom([]time.Duration{0, time.Second, 4 * time.Second}).Draw(t, "ttl"),
					}
					if !r.Deleted {
						r.Value = valGen.Draw(t, "val")
					}
					return r
				}), 1, 3).Draw(t, "records")
				stored, err := s.Merge(bg, RecordSet{FlowID: id, Records: recs, Durability: p.Durability})
				ttl := func(r Record) int64 {
					if r.TTL == 0 {
						return m.ttl
					}
					return r.TTL.Milliseconds()
				}
				f := m.acquire(id, true, ttl(recs[0]))
				want := 0
				for _, r := range recs {
					if e, ok := m.current(f, r.Key); ok && r.Version.Compare(e.ver) <= 0 {
						continue
					}
					m.set(f, r.Key, mEntry{val: r.Value, ver: r.Version, exp: m.now + ttl(r), dead: r.Deleted})
					want++
				}
				if err != nil || stored != want {
					t.Fatalf("Merge(%+v) = %v, %v; want %v", recs, stored, err, want)
				}
			},
			"records": func(t *rapid.T) {
				id := flowGen.Draw(t, "flow")
				got, err := s.Records(bg, id)
				var want []Record
				if f := m.acquire(id, false, 0); f != nil {
					for _, k := range slices.Sorted(maps.Keys(f.entries)) {
						if e, ok := m.current(f, k); ok {
							want = append(want, Record{Key: k, Value: e.val, Version: e.ver, Deleted: e.dead, TTL: time.Duration(e.exp-m.now) * time.Millisecond})
						}
					}
				}
				if err != nil || len(got.Records) != len(want) {
					t.Fatalf("Records = %+v, %v; want %+v", got.Records, err, want)
				}
				for i, w := range want {
					g := got.Records[i]
					if g.Key != w.Key || g.Version != w.Version || g.Deleted != w.Deleted || g.TTL != w.TTL || !bytes.Equal(g.Value, w.Value) || g.Deleted != (g.Value == nil) {
						t.Fatalf("Records[%d] = %+v, want %+v", i, g, w)
					}
				}
			},
			"delete": func(t *rapid.T) {
				id, key, p := flowGen.Draw(t, "flow"), keyGen.Draw(t, "key"), policyGen.Draw(t, "p")
				got, err := s.Delete(bg, id, key, p)
				var want error = ErrNotFound
				var wantVer Version
				if f := m.acquire(id, false, 0); f != nil {
					if _, ok := m.live(f, key); ok {
						wantVer = Version{p.MIdx, f.counter + 1, p.Origin}
						m.set(f, key, mEntry{ver: wantVer, exp: m.now + m.ttlOf(p), dead: true})
						want = nil
					}
				}
				if !errors.Is(err, want) || (want == nil) != (err == nil) || got != wantVer {
					t.Fatalf("Delete = %+v, %v, want %+v, %v", got, err, wantVer, want)
				}
			},
			"get": func(t *rapid.T) {
				id, key := flowGen.Draw(t, "flow"), keyGen.Draw(t, "key")
				got, err := s.Get(bg, id, key, nil)
				var e mEntry
				ok := false
				if f := m.acquire(id, false, 0); f != nil {
					e, ok = m.live(f, key)
				}
				checkEntry(t, got, err, e, ok, map[bool]error{true: nil, false: ErrNotFound}[ok])
			},
			"keys": func(t *rapid.T) {
				id := flowGen.Draw(t, "flow")
				got, err := s.Keys(bg, id)
				var want []string
				if f := m.acquire(id, false, 0); f != nil {
					for _, k := range slices.Sorted(maps.Keys(f.entries)) {
						if _, ok := m.live(f, k); ok {
							want = append(want, k)
						}
					}
				}
				if err != nil || !slices.Equal(got, want) {
					t.Fatalf("Keys = %v, %v; want %v", got, err, want)
				}
			},
			"entries": func(t *rapid.T) {
				id := flowGen.Draw(t, "flow")
				got, err := s.Entries(bg, id)
				want := map[string]mEntry{}
				if f := m.acquire(id, false, 0); f != nil {
					for k := range f.entries {
						if e, ok := m.live(f, k); ok {
							want[k] = e
						}
					}
				}
				if err != nil || len(got) != len(want) {
					t.Fatalf("Entries = %v, %v; want %v", got, err, want)
				}
				for k, w := range want {
					e, _ := entryOf(got, k)
					checkEntry(t, e, nil, w, true, nil)
				}
			},
			"clear": func(t *rapid.T) {
				id := flowGen.Draw(t, "flow")
				if err := s.Clear(bg, id); err != nil {
					t.Fatal(err)
				}
				m.remove(id)
			},
			"deletePrefix": func(t *rapid.T) {
				prefix := rapid.SampledFrom([]string{"i1:", "i2:", "f:", "i"}).Draw(t, "prefix")
				n, err := s.DeletePrefix(bg, prefix)
				want := 0
				for id := range m.flows {
					if strings.HasPrefix(id, prefix) {
						m.remove(id)
						want++
					}
				}
				if err != nil || n != want {
					t.Fatalf("DeletePrefix = %d, %v; want %d", n, err, want)
				}
			},
			"flows": func(t *rapid.T) {
				prefix := rapid.SampledFrom([]string{"", "i1:", "i2:", "f:"}).Draw(t, "prefix")
				limit := rapid.IntRange(1, 4).Draw(t, "limit")
				var want []string
				for id, f := range m.flows {
					if !strings.HasPrefix(id, prefix) {
						continue
					}
					for _, e := range f.entries {
						if e.exp > m.now && !e.dead {
							want = append(want, id)
							break
						}
					}
				}
				slices.Sort(want)
				var got []string
				after := ""
				for {
					ids, more, err := s.Flows(bg, prefix, after, limit)
					if err != nil || len(ids) > limit || more && len(ids) != limit {
						t.Fatalf("Flows page = %v, %v, %v", ids, more, err)
					}
					got = append(got, ids...)
					if !more {
						break
					}
					after = ids[len(ids)-1]
				}
				if !slices.Equal(got, want) {
					t.Fatalf("Flows(%q) = %v, want %v", prefix, got, want)
				}
			},
		})
	})
}
