package config

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// proxyImposter is an imposter with a stub before the proxy and one after.
func proxyImposter(t interface{ Fatal(...any) }) *State {
	proxy := StubDoc{JSON: []byte(`{"responses":[{"proxy":{"to":"http://x"}}]}`), Signature: "[]"}
	s, res := Apply(Empty(), &Command{Op: OpCreateImposter, Imposters: []ImposterDoc{{Port: 1, Header: header(1),
		Stubs: []StubDoc{stubDoc("first"), proxy, stubDoc("last")}}}})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	return s
}

// A batch applies as its recordings one by one would, each answered on
// its own, and the journal names what changed.
func TestRecordBatchIsItsRecordingsInOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := proxyImposter(t)
		n := rapid.IntRange(1, 30).Draw(t, "n")
		var recs []Record
		for i := range n {
			sig := rapid.SampledFrom([]string{`{"a":1}`, `{"b":1}`, `{"c":1}`}).Draw(t, "sig")
			anchor := rapid.SampledFrom([]uint64{2, 2, 2, 99}).Draw(t, "anchor")
			recs = append(recs, Record{Port: 1, Anchor: anchor, Once: rapid.Bool().Draw(t, "once"), Stub: recordedStub(sig, fmt.Sprint("r", i))})
		}
		// The batch first: the one-by-one applies below fork the base.
		batch, res := Apply(base, &Command{Op: OpRecordStubs, Records: recs})
		one := base
		var want []Result
		for _, r := range recs {
			var res Result
			one, res = Apply(one, &Command{Op: OpRecordStub, Port: r.Port, Anchor: r.Anchor, Once: r.Once, Stubs: []StubDoc{r.Stub}})
			want = append(want, Result{Err: res.Err, StubID: res.StubID})
		}
		if res.Err != nil || len(res.Results) != n {
			t.Fatalf("batch: %+v", res)
		}
		for i := range want {
			if (want[i].Err == nil) != (res.Results[i].Err == nil) || want[i].StubID != res.Results[i].StubID {
				t.Fatalf("recording %d: %+v, one by one %+v", i, res.Results[i], want[i])
			}
		}
		if !bytes.Equal(encodeState(t, one), encodeState(t, batch)) {
			t.Fatalf("the batch and its recordings one by one differ")
		}
		ids, ok := batch.Imposter(1).Changes(base.Imposter(1))
		if !ok {
			t.Fatalf("no journal from the base to the batch")
		}
		var changed []uint64
		for _, r := range res.Results {
			if r.Err == nil && !slices.Contains(changed, r.StubID) {
				changed = append(changed, r.StubID)
			}
		}
		if !slices.Equal(ids, changed) {
			t.Fatalf("changes %v, want %v", ids, changed)
		}
		// A fork of the base has a history of its own (a batch that
		// changed nothing is the base, and shares its history).
		fork, _ := Apply(base, &Command{Op: OpRecordStubs, Records: recs[:1]})
		if _, ok := fork.Imposter(1).Changes(batch.Imposter(1)); ok && len(changed) > 0 {
			t.Fatalf("a fork reads the other branch's journal")
		}
		if again, _ := Apply(base, &Command{Op: OpRecordStubs, Records: recs}); !bytes.Equal(encodeState(t, again), encodeState(t, batch)) {
			t.Fatalf("applying to a forked state differs")
		}
	})
}

// proxyAlways adds to its stub without copying the responses it has, and
// a decoded state goes on as the live one does.
func TestProxyAlwaysAppendsAndRoundTrips(t *testing.T) {
	s := proxyImposter(t)
	var first uint64
	for i := range 5 {
		var res Result
		s, res = mustApply(t, s, &Command{Op: OpRecordStubs, Records: []Record{{Port: 1, Anchor: 2, Stub: recordedStub(`{"b":1}`, fmt.Sprint("r", i))}}})
		if i == 0 {
			first = res.Results[0].StubID
		}
		if res.Results[0].StubID != first {
			t.Fatalf("recording %d went to stub %d, not %d", i, res.Results[0].StubID, first)
		}
	}
	st, _ := s.Imposter(1).Stub(first)
	if st.NumMore() != 4 {
		t.Fatalf("added responses: %d", st.NumMore())
	}
	want := `{"predicates":[{"b":1}],"responses":[{"is":{"body":"r0","_proxyResponseTime":1}},{"is":{"body":"r1","_proxyResponseTime":1}},{"is":{"body":"r2","_proxyResponseTime":1}},{"is":{"body":"r3","_proxyResponseTime":1}},{"is":{"body":"r4","_proxyResponseTime":1}}]}`
	if got := s.Imposter(1).Stubs()[3].JSON; string(got) != want {
		t.Fatalf("stub:\n%s\nwant\n%s", got, want)
	}
	back, err := DecodeState(encodeState(t, s))
	if err != nil {
		t.Fatal(err)
	}
	cmd := &Command{Op: OpRecordStubs, Records: []Record{
		{Port: 1, Anchor: 2, Stub: recordedStub(`{"b":1}`, "r5")},
		{Port: 1, Anchor: 2, Once: true, Stub: recordedStub(`{"o":1}`, "o")},
	}}
	live, _ := mustApply(t, s, cmd)
	decoded, _ := mustApply(t, back, cmd)
	if !bytes.Equal(encodeState(t, live), encodeState(t, decoded)) {
		t.Fatalf("a decoded state records differently")
	}
}

// The cost of one recording does not grow with the stubs already
// recorded: what it allocates at 50,000 stubs stays within a small factor
// of what it allocates at 1,000 (a copy of the stub list would be 50
// times as much). Allocation, unlike time, does not depend on the machine.
func TestRecordingCostIsFlat(t *testing.T) {
	perRecord := func(n int, once bool) uint64 {
		s := withRecordings(t, n, once)
		cmd := &Command{Op: OpRecordStubs, Records: []Record{{Port: 1, Anchor: 2, Once: once, Stub: recordedStub(`{"path":"/new"}`, "x")}}}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		const rounds = 50
		for range rounds {
			s, _ = Apply(s, cmd)
			cmd.Records[0].Stub.Signature += "x" // a new signature each time: a new stub
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / rounds
	}
	for _, once := range []bool{true, false} {
		small, large := perRecord(1000, once), perRecord(50000, once)
		t.Logf("once=%v: %d bytes per recording at 1,000 stubs, %d at 50,000", once, small, large)
		if large > 3*small {
			t.Errorf("once=%v: a recording allocates %d bytes at 50,000 stubs against %d at 1,000", once, large, small)
		}
	}
}

// withRecordings returns the proxy imposter with n recordings, each a stub.
func withRecordings(t interface {
	Fatal(...any)
	Fatalf(string, ...any)
}, n int, once bool) *State {
	s := proxyImposter(t)
	const batch = 500
	for i := 0; i < n; i += batch {
		cmd := &Command{Op: OpRecordStubs}
		for j := i; j < min(i+batch, n); j++ {
			cmd.Records = append(cmd.Records, Record{Port: 1, Anchor: 2, Once: once, Stub: recordedStub(fmt.Sprintf(`{"path":"/%d"}`, j), "r")})
		}
		s, _ = Apply(s, cmd)
	}
	if got := s.Imposter(1).Len(); got != n+3 {
		t.Fatalf("%d stubs, want %d", got, n+3)
	}
	return s
}

// BenchmarkRecord is one recording's Apply with 1,000 or 50,000 recorded
// already: the two should cost about the same.
func BenchmarkRecord(b *testing.B) {
	for _, once := range []bool{true, false} {
		for _, n := range []int{1000, 50000} {
			b.Run(fmt.Sprintf("once=%v/recorded=%d", once, n), func(b *testing.B) {
				s := withRecordings(b, n, once)
				cmd := &Command{Op: OpRecordStubs, Records: []Record{{Port: 1, Anchor: 2, Once: once, Stub: recordedStub(`{"path":"/new"}`, "x")}}}
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					cmd.Records[0].Stub.Signature = fmt.Sprint(i)
					s, _ = Apply(s, cmd)
				}
			})
		}
	}
}
