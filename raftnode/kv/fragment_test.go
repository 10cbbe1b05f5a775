package kv

import (
	"errors"
	"maps"
	"math"
	"reflect"
	"slices"
	"testing"
)

func apply(t *testing.T, f *Fragment, c Command, idx uint64) Response {
	t.Helper()
	return f.Apply(c, idx)
}

func want(t *testing.T, got, exp Response) {
	t.Helper()
	if !respEqual(got, exp) {
		t.Fatalf("got %#v, want %#v", got, exp)
	}
}

// respEqual compares responses, treating nil and empty values as equal.
func respEqual(a, b Response) bool {
	switch a := a.(type) {
	case Taken:
		b, ok := b.(Taken)
		return ok && a.Record.Equal(b.Record)
	case Conflict:
		b, ok := b.(Conflict)
		return ok && a.Current.Equal(b.Current)
	}
	return reflect.DeepEqual(a, b)
}

func rec(val string, ver, exp uint64) *Record {
	return &Record{Value: []byte(val), Version: ver, ExpiresAtMs: exp}
}

func TestVersionIsTheLogIndexOfTheWrite(t *testing.T) {
	f := mustFragment(t, DefaultPolicy())
	want(t, apply(t, f, put("a", "1", Absent(), 100, 0), 7), Written{7})
	want(t, apply(t, f, put("b", "1", Absent(), 100, 0), 42), Written{42})
	r, _ := f.Get("a", 0)
	if r.Version != 7 {
		t.Fatalf("version %d, want 7", r.Version)
	}
}

func TestEveryPutGetsANewVersionRenewalsIncluded(t *testing.T) {
	f := mustFragment(t, DefaultPolicy())
	want(t, apply(t, f, put("lease", "h1", Absent(), 100, 0), 1), Written{1})
	// Renewal: same value, same holder, still a new version.
	want(t, apply(t, f, put("lease", "h1", Version(1), 100, 50), 2), Written{2})
	want(t, apply(t, f, put("lease", "h1", Any(), 100, 60), 3), Written{3})
	r, _ := f.Get("lease", 60)
	if r.Version != 3 || r.ExpiresAtMs != 160 {
		t.Fatalf("record %+v, want version 3 expiring at 160", r)
	}
}

func TestApplyRejectsIndexZero(t *testing.T) {
	f := mustFragment(t, DefaultPolicy())
	want(t, apply(t, f, put("a", "1", Absent(), 100, 0), 0), Rejected{ReasonZeroIndex})
}

func TestExpiredEntryIsAbsentToEveryObserver(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  Command
		resp Response
	}{
		{"Put Absent succeeds", put("k", "new", Absent(), 10, 100), Written{2}},
		{"Put Version fails", put("k", "new", Version(1), 10, 100), Conflict{nil}},
		{"Delete Absent succeeds", Delete{Key: "k", Expect: Absent(), NowMs: 100}, Deleted{false}},
		{"Delete Any removes nothing", Delete{Key: "k", Expect: Any(), NowMs: 100}, Deleted{false}},
		{"Delete Version fails", Delete{Key: "k", Expect: Version(1), NowMs: 100}, Conflict{nil}},
		{"TakeOnce Any takes nothing", TakeOnce{Key: "k", Expect: Any(), NowMs: 100}, Taken{nil}},
		{"TakeOnce Version fails", TakeOnce{Key: "k", Expect: Version(1), NowMs: 100}, Conflict{nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := mustFragment(t, DefaultPolicy())
			apply(t, f, put("k", "old", Absent(), 100, 0), 1) // expires at 100
			if _, ok := f.Get("k", 99); !ok {
				t.Fatal("live at 99")
			}
			if _, ok := f.Get("k", 100); ok {
				t.Fatal("read sees a record whose expires_at_ms == now")
			}
			want(t, apply(t, f, tc.cmd, 2), tc.resp)
		})
	}
}

func TestCASFailureReturnsCurrentRecord(t *testing.T) {
	f := mustFragment(t, DefaultPolicy())
	apply(t, f, put("k", "v1", Absent(), 1000, 0), 3)
	cur := rec("v1", 3, 1000)
	want(t, apply(t, f, put("k", "x", Absent(), 10, 1), 4), Conflict{cur})
	want(t, apply(t, f, put("k", "x", Version(2), 10, 1), 5), Conflict{cur})
	want(t, apply(t, f, Delete{Key: "k", Expect: Absent(), NowMs: 1}, 6), Conflict{cur})
	want(t, apply(t, f, Delete{Key: "k", Expect: Version(9), NowMs: 1}, 7), Conflict{cur})
	want(t, apply(t, f, TakeOnce{Key: "k", Expect: Version(9), NowMs: 1}, 8), Conflict{cur})
}

// A renewal that commits but loses its reply: the holder retries with the
// old version, conflicts, and recognises its own write in the record.
func TestLostRenewalReplyIsRecognisedFromTheConflict(t *testing.T) {
	f := mustFragment(t, DefaultPolicy())
	apply(t, f, put("lease", "holder-7", Absent(), 100, 0), 1)
	apply(t, f, put("lease", "holder-7", Version(1), 100, 50), 2) // reply lost
	resp := apply(t, f, put("lease", "holder-7", Version(1), 100, 51), 3)
	c, ok := resp.(Conflict)
	if !ok || string(c.Current.Value) != "holder-7" || c.Current.Version != 2 {
		t.Fatalf("got %#v, want a conflict carrying holder-7 at version 2", resp)
	}
}

func TestTimeFloorNeverRunsBackwards(t *testing.T) {
	f := mustFragment(t, DefaultPolicy())
	apply(t, f, put("a", "x", Absent(), 100, 0), 1)      // expires at 100
	apply(t, f, put("lease", "h1", Absent(), 150, 0), 2) // expires at 150
	want(t, apply(t, f, Evict{CutoffMs: 200, Limit: 1}, 3), Evicted{1, true})
	if f.Floor() != 200 {
		t.Fatalf("floor %d, want 200", f.Floor())
	}
	// A slow clock (now 120 < 150) cannot see the lapsed lease as live,
	// nor renew it back into existence.
	if _, ok := f.Get("lease", 120); ok {
		t.Fatal("read at a rolled-back clock sees a record expired at the floor")
	}
	want(t, apply(t, f, put("lease", "h1", Version(2), 100, 120), 4), Conflict{nil})
	// Takeover is allowed, and its expiry counts from the floor.
	want(t, apply(t, f, put("lease", "h2", Absent(), 100, 120), 5), Written{5})
	r, _ := f.Get("lease", 0)
	if r.ExpiresAtMs != 300 {
		t.Fatalf("expires at %d, want floor+ttl = 300", r.ExpiresAtMs)
	}
	// A later evict with an earlier cutoff acts at the floor, never below.
	apply(t, f, put("c", "x", Absent(), 50, 100), 6) // expires at 250
	want(t, apply(t, f, Evict{CutoffMs: 10, Limit: 10}, 7), Evicted{0, false})
	want(t, apply(t, f, Evict{CutoffMs: 260, Limit: 10}, 8), Evicted{1, false})
	want(t, apply(t, f, Evict{CutoffMs: 10, Limit: 10}, 9), Evicted{0, false})
	if f.Floor() != 260 {
		t.Fatalf("floor %d, want 260", f.Floor())
	}
}

func TestFloorMovesOnlyOnReclamation(t *testing.T) {
	f := mustFragment(t, DefaultPolicy())
	apply(t, f, put("a", "x", Absent(), 1000, 0), 1)
	// A far-future clock on a write, a read, or an evict that reclaims
	// nothing must not mass-expire the fragment.
	apply(t, f, put("b", "x", Absent(), 10, math.MaxUint64-10), 2)
	f.Get("a", math.MaxUint64)
	want(t, apply(t, f, Evict{CutoffMs: 500, Limit: 10}, 3), Evicted{0, false})
	if f.Floor() != 0 {
		t.Fatalf("floor %d, want 0", f.Floor())
	}
	if _, ok := f.Get("a", 0); !ok {
		t.Fatal("a vanished without reclamation")
	}
}

func TestTTLIsRejectedNeverClamped(t *testing.T) {
	p := DefaultPolicy()
	for _, tc := range []struct {
		name string
		put  Put
		p    Policy
		want Reason
	}{
		{"zero TTL (use Delete)", Put{Key: "k", TTLMs: 0, NowMs: 5}, p, ReasonTTLZero},
		{"above policy maximum", Put{Key: "k", TTLMs: p.MaxTTLMs + 1}, p, ReasonTTLTooLarge},
		{"now plus TTL overflows", Put{Key: "k", TTLMs: 10, NowMs: math.MaxUint64 - 9}, p, ReasonTTLOverflow},
		{"no expiry under a policy that forbids it", Put{Key: "k", NoExpiry: true}, p, ReasonNoExpiryNotAllowed},
		{"no expiry with a TTL is malformed", Put{Key: "k", NoExpiry: true, TTLMs: 5}, withNoExpiry(p), ReasonMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.p.CheckPut(tc.put); !errors.Is(err, tc.want) {
				t.Fatalf("CheckPut: %v, want %v", err, tc.want)
			}
			f := mustFragment(t, tc.p)
			want(t, apply(t, f, tc.put, 1), Rejected{tc.want})
			if f.Len() != 0 {
				t.Fatal("a rejected put stored something")
			}
		})
	}
	t.Run("at the maximum and no expiry when allowed", func(t *testing.T) {
		f := mustFragment(t, withNoExpiry(p))
		want(t, apply(t, f, Put{Key: "a", TTLMs: p.MaxTTLMs, NowMs: 1}, 1), Written{1})
		want(t, apply(t, f, Put{Key: "b", NoExpiry: true, NowMs: 1}, 2), Written{2})
		if r, ok := f.Get("b", math.MaxUint64); !ok || r.ExpiresAtMs != 0 {
			t.Fatalf("no-expiry record %+v %v", r, ok)
		}
	})
}

// The overflow check in Apply uses the floor-raised instant, which is what
// the expiry is computed from.
func TestTTLOverflowIsCheckedAtTheFloor(t *testing.T) {
	f := mustFragment(t, DefaultPolicy())
	apply(t, f, put("a", "", Absent(), 1, math.MaxUint64-100), 1)
	apply(t, f, Evict{CutoffMs: math.MaxUint64 - 5, Limit: 1}, 2)
	want(t, apply(t, f, put("b", "", Absent(), 10, 0), 3), Rejected{ReasonTTLOverflow})
}

func withNoExpiry(p Policy) Policy { p.AllowNoExpiry = true; return p }

func TestDeleteAlgebra(t *testing.T) {
	live := func(f *Fragment) { apply(t, f, put("k", "v", Absent(), 100, 0), 1) }
	none := func(*Fragment) {}
	for _, tc := range []struct {
		name     string
		setup    func(*Fragment)
		expect   Expect
		resp     Response
		survives bool
	}{
		{"Any on live removes and says so", live, Any(), Deleted{true}, false},
		{"Any on absent is idempotent", none, Any(), Deleted{false}, false},
		{"Absent on absent succeeds", none, Absent(), Deleted{false}, false},
		{"Absent on live conflicts", live, Absent(), Conflict{rec("v", 1, 100)}, true},
		{"Version matching removes", live, Version(1), Deleted{true}, false},
		{"Version not matching conflicts", live, Version(2), Conflict{rec("v", 1, 100)}, true},
		{"Version on absent conflicts", none, Version(1), Conflict{nil}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := mustFragment(t, DefaultPolicy())
			tc.setup(f)
			want(t, apply(t, f, Delete{Key: "k", Expect: tc.expect, NowMs: 10}, 2), tc.resp)
			if _, ok := f.Get("k", 10); ok != tc.survives {
				t.Fatalf("record survives: %v, want %v", ok, tc.survives)
			}
			// Idempotence of Any: a second delete finds nothing.
			if tc.expect.Kind() == ExpectAny {
				want(t, apply(t, f, Delete{Key: "k", Expect: Any(), NowMs: 10}, 3), Deleted{false})
			}
		})
	}
}

func TestDeleteCreatesNoVersion(t *testing.T) {
	f := mustFragment(t, DefaultPolicy())
	apply(t, f, put("k", "v", Absent(), 100, 0), 1)
	apply(t, f, put("other", "v", Absent(), 100, 0), 2)
	apply(t, f, Delete{Key: "k", Expect: Any(), NowMs: 1}, 3)
	apply(t, f, Delete{Key: "nothing", Expect: Absent(), NowMs: 1}, 4)
	if f.Len() != 1 {
		t.Fatalf("len %d after delete, want 1 (no tombstone)", f.Len())
	}
	// Expect Version(3) (the delete's index) names nothing.
	want(t, apply(t, f, put("k", "v", Version(3), 100, 1), 5), Conflict{nil})
}

func TestTakeOnceReadsAndDeletesALiveRecordAtomically(t *testing.T) {
	f := mustFragment(t, DefaultPolicy())
	apply(t, f, put("job", "payload", Absent(), 100, 0), 1)
	want(t, apply(t, f, TakeOnce{Key: "job", Expect: Any(), NowMs: 5}, 2), Taken{rec("payload", 1, 100)})
	want(t, apply(t, f, TakeOnce{Key: "job", Expect: Any(), NowMs: 5}, 3), Taken{nil})
	apply(t, f, put("job", "p2", Absent(), 100, 0), 4)
	want(t, apply(t, f, TakeOnce{Key: "job", Expect: Version(1), NowMs: 5}, 5), Conflict{rec("p2", 4, 100)})
	want(t, apply(t, f, TakeOnce{Key: "job", Expect: Version(4), NowMs: 5}, 6), Taken{rec("p2", 4, 100)})
	if f.Len() != 0 || f.Bytes() != 0 {
		t.Fatalf("len %d bytes %d after takes", f.Len(), f.Bytes())
	}
}

func TestTakeOnceWithExpectAbsentIsRejected(t *testing.T) {
	f := mustFragment(t, DefaultPolicy())
	want(t, apply(t, f, TakeOnce{Key: "k", Expect: Absent()}, 1), Rejected{ReasonInvalidExpect})
}

func TestEvictRangesTheExpiryIndexInExpiryOrder(t *testing.T) {
	f := mustFragment(t, withNoExpiry(DefaultPolicy()))
	apply(t, f, Put{Key: "forever", NoExpiry: true}, 1)
	for i, k := range []string{"e30", "e10", "e20", "f10", "e50"} {
		ttl := map[string]uint64{"e30": 30, "e10": 10, "e20": 20, "f10": 10, "e50": 50}[k]
		apply(t, f, put(k, "", Absent(), ttl, 0), uint64(i+2))
	}
	want(t, apply(t, f, Evict{CutoffMs: 40, Limit: 2}, 10), Evicted{2, true})
	// Ties on expiry break by key: e10 and f10 go first.
	for _, k := range []string{"e10", "f10"} {
		if _, ok := f.records[k]; ok {
			t.Fatalf("%s not reclaimed first", k)
		}
	}
	want(t, apply(t, f, Evict{CutoffMs: 40, Limit: 2}, 11), Evicted{2, false})
	if f.Len() != 2 {
		t.Fatalf("len %d, want forever and e50", f.Len())
	}
}

// Which record of a tie goes first must not depend on insertion order or on
// whether the index was rebuilt from a snapshot.
func TestEvictBreaksExpiryTiesByKey(t *testing.T) {
	f := mustFragment(t, DefaultPolicy())
	for i, k := range []string{"m", "z", "c", "q", "a", "k"} {
		apply(t, f, put(k, "", Absent(), 10, 0), uint64(i+1))
	}
	snap, _ := f.EncodeSnapshot()
	g, err := DecodeSnapshot(snap, DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	for _, frag := range []*Fragment{f, g} {
		var order []string
		for frag.Len() > 0 {
			before := maps.Clone(frag.records)
			frag.Apply(Evict{CutoffMs: 10, Limit: 1}, 100)
			for k := range before {
				if _, ok := frag.records[k]; !ok {
					order = append(order, k)
				}
			}
		}
		if !slices.Equal(order, []string{"a", "c", "k", "m", "q", "z"}) {
			t.Fatalf("eviction order %v", order)
		}
	}
}

func TestEvictExaminesAtMostLimitCappedByPolicyAndHardMax(t *testing.T) {
	p := DefaultPolicy()
	p.MaxEntries = 3 * HardMaxEvict
	p.MaxEvictPerCommand = 3
	f := mustFragment(t, p)
	for i := range 10 {
		apply(t, f, put(string(rune('a'+i)), "", Absent(), 1, 0), uint64(i+1))
	}
	want(t, apply(t, f, Evict{CutoffMs: 5, Limit: 100}, 20), Evicted{3, true})
	want(t, apply(t, f, Evict{CutoffMs: 5, Limit: 2}, 21), Evicted{2, true})
	want(t, apply(t, f, Evict{CutoffMs: 5, Limit: 0}, 22), Rejected{ReasonEvictLimitZero})

	p.MaxEvictPerCommand = HardMaxEvict
	f = mustFragment(t, p)
	for i := range HardMaxEvict + 5 {
		apply(t, f, put(string(rune(i+1)), "", Absent(), 1, 0), uint64(i+1))
	}
	want(t, apply(t, f, Evict{CutoffMs: 5, Limit: math.MaxUint32}, 1<<20), Evicted{HardMaxEvict, true})
	want(t, apply(t, f, Evict{CutoffMs: 5, Limit: math.MaxUint32}, 1<<20+1), Evicted{5, false})
	if err := (Policy{MaxKeyBytes: 1, MaxTTLMs: 1, MaxEntries: 1, MaxBytes: 1, MaxEvictPerCommand: HardMaxEvict + 1}).Validate(); err == nil {
		t.Fatal("a policy above the hard maximum validates")
	}
}

func TestSizeChecksAtProposerAndApplyAgree(t *testing.T) {
	p := DefaultPolicy()
	big := make([]byte, p.MaxValueBytes+1)
	for _, tc := range []struct {
		name string
		cmd  Command
		want Reason
	}{
		{"empty key", put("", "v", Absent(), 1, 0), ReasonKeyEmpty},
		{"key over 1 KiB", put(string(make([]byte, 1025)), "v", Absent(), 1, 0), ReasonKeyTooLarge},
		{"value over 1 MiB", Put{Key: "k", Value: big, TTLMs: 1}, ReasonValueTooLarge},
		{"delete with oversized key", Delete{Key: string(make([]byte, 1025)), Expect: Any()}, ReasonKeyTooLarge},
		{"take with empty key", TakeOnce{Key: "", Expect: Any()}, ReasonKeyEmpty},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			switch c := tc.cmd.(type) {
			case Put:
				err = p.CheckPut(c)
			case Delete:
				err = p.CheckKey(c.Key)
			case TakeOnce:
				err = p.CheckKey(c.Key)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("proposer check: %v, want %v", err, tc.want)
			}
			want(t, apply(t, mustFragment(t, p), tc.cmd, 1), Rejected{tc.want})
		})
	}
	if err := p.CheckPut(Put{Key: string(make([]byte, 1024)), Value: make([]byte, 1<<20), TTLMs: 1}); err != nil {
		t.Fatalf("exactly at the limits: %v", err)
	}
}

func TestMaxCommandBytesCoversWorstCasePut(t *testing.T) {
	p := DefaultPolicy()
	worst := Put{
		Key:    string(make([]byte, p.MaxKeyBytes)),
		Value:  make([]byte, p.MaxValueBytes),
		Expect: Version(math.MaxUint64),
		TTLMs:  math.MaxUint64,
		NowMs:  math.MaxUint64,
	}
	b, err := EncodeCommand(worst)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > p.MaxCommandBytes() {
		t.Fatalf("worst-case put is %d bytes, MaxCommandBytes %d", len(b), p.MaxCommandBytes())
	}
}

func TestQuotasAreEnforcedPerFragment(t *testing.T) {
	p := DefaultPolicy()
	p.MaxEntries, p.MaxBytes = 2, 10
	f := mustFragment(t, p)
	want(t, apply(t, f, put("a", "1234", Absent(), 100, 0), 1), Written{1}) // 5 bytes
	want(t, apply(t, f, put("b", "123", Absent(), 100, 0), 2), Written{2})  // 9 bytes
	want(t, apply(t, f, put("c", "", Absent(), 100, 0), 3), Rejected{ReasonQuotaEntries})
	want(t, apply(t, f, put("b", "12345", Any(), 100, 0), 4), Rejected{ReasonQuotaBytes})
	// Replacing a key's record counts its old bytes out.
	want(t, apply(t, f, put("b", "1234", Any(), 100, 0), 5), Written{5})
	if f.Bytes() != 10 || f.Len() != 2 {
		t.Fatalf("bytes %d len %d", f.Bytes(), f.Len())
	}
	// Another fragment has its own quota.
	want(t, apply(t, mustFragment(t, p), put("c", "", Absent(), 100, 0), 6), Written{6})
}

// Neither the command a caller proposed nor a read or response it gets back
// may alias replicated state: a local caller mutating one would diverge
// this replica.
func TestStateIsNotAliasedByCommandsReadsOrResponses(t *testing.T) {
	f := mustFragment(t, DefaultPolicy())
	v := []byte("abc")
	apply(t, f, Put{Key: "k", Value: v, TTLMs: 10}, 1)
	v[0] = 'X'
	r, _ := f.Get("k", 0)
	r.Value[1] = 'Y'
	c := apply(t, f, Put{Key: "k", Expect: Absent(), TTLMs: 10}, 2).(Conflict)
	c.Current.Value[2] = 'Z'
	if r2, _ := f.Get("k", 0); string(r2.Value) != "abc" {
		t.Fatalf("stored value %q was aliased", r2.Value)
	}
}
