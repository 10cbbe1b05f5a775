package kvapp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"go.uber.org/goleak"

	"github.com/riftgate/riftgate/raftnode/kv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTenantDiscriminantsArePinned: reordering or removing a tenant would
// silently decode one tenant's data as another's.
func TestTenantDiscriminantsArePinned(t *testing.T) {
	pinned := map[Tenant]uint8{TenantLease: 0, TenantConfig: 1, TenantOAuth: 2}
	if len(pinned) != len(Tenants()) {
		t.Fatalf("%d tenants, %d pinned: pin the new one", len(Tenants()), len(pinned))
	}
	for tn, want := range pinned {
		if uint8(tn) != want {
			t.Fatalf("tenant %d moved to %d", want, tn)
		}
		b, err := cbor.Marshal(Command{Tenant: tn, Kv: kv.Evict{CutoffMs: 1, Limit: 2}})
		if err != nil {
			t.Fatal(err)
		}
		if got, exp := hex.EncodeToString(b), "8300"+hex.EncodeToString([]byte{want})+"83030102"; got != exp {
			t.Fatalf("tenant %d encodes as %s, pinned %s", want, got, exp)
		}
	}
}

func TestAppWireFormatIsPinned(t *testing.T) {
	for _, tc := range []struct {
		v   any
		hex string
	}{
		{Command{Tenant: TenantConfig, Kv: kv.Delete{Key: "k", Expect: kv.Any(), NowMs: 3}}, "8300018401416b810203"},
		{Response{Kind: RespNoop}, "8100"},
		{Response{Kind: RespKv, Kv: kv.Written{Version: 9}}, "8201820009"},
		{Response{Kind: RespUnknownTenant}, "8102"},
	} {
		b, err := cbor.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != tc.hex {
			t.Fatalf("%#v encodes as %s, pinned %s", tc.v, got, tc.hex)
		}
	}
}

func TestEveryTenantHasAPolicy(t *testing.T) {
	ts := Tenants()
	for i, tn := range ts {
		if int(tn) != i {
			t.Fatalf("tenants are not 0..n-1 in order: %v", ts)
		}
	}
	for v := range 256 {
		p, err := PolicyFor(Tenant(v))
		if known := slices.Contains(ts, Tenant(v)); known != (err == nil) {
			t.Fatalf("tenant %d: known %v, policy error %v", v, known, err)
		}
		if err == nil {
			if err := p.Validate(); err != nil {
				t.Fatalf("tenant %d: %v", v, err)
			}
		} else if !errors.Is(err, ErrUnknownTenant) {
			t.Fatalf("tenant %d: %v", v, err)
		}
	}
}

func TestTenantsAreIsolated(t *testing.T) {
	s := NewState()
	put := func(tn Tenant, val string, idx uint64) Response {
		return Apply(&s, Command{Tenant: tn, Kv: kv.Put{Key: "k", Value: []byte(val), Expect: kv.Absent(), TTLMs: 1000}}, idx)
	}
	if r := put(TenantLease, "lease", 1); r.Kv != (kv.Written{Version: 1}) {
		t.Fatalf("%#v", r)
	}
	if r := put(TenantOAuth, "token", 2); r.Kv != (kv.Written{Version: 2}) {
		t.Fatalf("same key in another tenant: %#v", r)
	}
	// The lease tenant's policy (1 KiB values) is its own.
	big := Command{Tenant: TenantLease, Kv: kv.Put{Key: "b", Value: make([]byte, 2<<10), TTLMs: 1}}
	if r := Apply(&s, big, 3); r.Kv != (kv.Rejected{Reason: kv.ReasonValueTooLarge}) {
		t.Fatalf("%#v", r)
	}
	big.Tenant = TenantOAuth
	if r := Apply(&s, big, 4); r.Kv != (kv.Written{Version: 4}) {
		t.Fatalf("%#v", r)
	}
	if r := Apply(&s, Command{Tenant: 200, Kv: kv.Evict{CutoffMs: 1, Limit: 1}}, 5); r.Kind != RespUnknownTenant {
		t.Fatalf("unknown tenant answered %#v", r)
	}
	if rec, _ := s.Get(TenantLease, "k", 0); string(rec.Value) != "lease" {
		t.Fatalf("lease tenant holds %q", rec.Value)
	}
}

func TestMaxCommandBytesCoversEveryTenant(t *testing.T) {
	for _, tn := range Tenants() {
		p, _ := PolicyFor(tn)
		worst := Command{Tenant: tn, Kv: kv.Put{Key: string(make([]byte, p.MaxKeyBytes)), Value: make([]byte, p.MaxValueBytes),
			Expect: kv.Version(math.MaxUint64), TTLMs: math.MaxUint64, NowMs: math.MaxUint64}}
		b, err := cbor.Marshal(worst)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > MaxCommandBytes() {
			t.Fatalf("tenant %d worst case %d bytes > MaxCommandBytes %d", tn, len(b), MaxCommandBytes())
		}
	}
}

func TestSnapshotRoundTripsByteIdentically(t *testing.T) {
	s := NewState()
	Apply(&s, Command{Tenant: TenantConfig, Kv: kv.Put{Key: "c", Value: []byte("v"), NoExpiry: true}}, 1)
	Apply(&s, Command{Tenant: TenantLease, Kv: kv.Put{Key: "l", Value: []byte("h"), TTLMs: 5}}, 2)
	Apply(&s, Command{Tenant: TenantLease, Kv: kv.Evict{CutoffMs: 10, Limit: 1}}, 3)
	b, err := EncodeSnapshot(&s)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := DecodeSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := EncodeSnapshot(&s2)
	if !bytes.Equal(b, b2) {
		t.Fatalf("%x\n%x", b, b2)
	}
	if _, ok := s2.Get(TenantConfig, "c", math.MaxUint64); !ok {
		t.Fatal("config record lost")
	}
}

// A snapshot written before a tenant existed lacks its key: it decodes, and
// the new tenant starts empty. A tenant this build does not know is refused.
func TestSnapshotsAcrossTenantAppends(t *testing.T) {
	f, _ := kv.NewFragment(mustPolicy(t, TenantLease))
	f.Apply(kv.Put{Key: "l", Value: []byte("h"), TTLMs: 5}, 1)
	fb, _ := f.EncodeSnapshot()
	enc := func(body any) []byte {
		b, _ := cbor.Marshal(body)
		return append([]byte("RGKA\x00\x01"), b...)
	}
	s, err := DecodeSnapshot(enc([]any{[]any{0, fb}}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Len(TenantLease) != 1 || s.Len(TenantOAuth) != 0 {
		t.Fatalf("lease %d oauth %d", s.Len(TenantLease), s.Len(TenantOAuth))
	}
	for name, b := range map[string][]byte{
		"unknown tenant": enc([]any{[]any{0, fb}, []any{9, fb}}),
		"duplicate":      enc([]any{[]any{0, fb}, []any{0, fb}}),
		"bad fragment":   enc([]any{[]any{1, []byte("nope")}}),
		"bad magic":      append([]byte("RGKX\x00\x01"), 0x80),
	} {
		if _, err := DecodeSnapshot(b); !errors.Is(err, ErrDecode) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func mustPolicy(t *testing.T, tn Tenant) kv.Policy {
	t.Helper()
	p, err := PolicyFor(tn)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func FuzzDecodeAppCommand(f *testing.F) {
	for _, c := range []Command{
		{Tenant: TenantLease, Kv: kv.Put{Key: "k", Value: []byte("v"), Expect: kv.Version(2), TTLMs: 5}},
		{Tenant: TenantOAuth, Kv: kv.TakeOnce{Key: "t", Expect: kv.Any()}},
	} {
		b, _ := cbor.Marshal(c)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Command
		if cbor.Unmarshal(b, &c) != nil {
			return
		}
		again, err := cbor.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var c2 Command
		if err := cbor.Unmarshal(again, &c2); err != nil || c2.Tenant != c.Tenant {
			t.Fatalf("round trip: %v", err)
		}
		s := NewState()
		Apply(&s, c, 1)
	})
}

func FuzzDecodeAppResponse(f *testing.F) {
	for _, r := range []Response{{Kind: RespNoop}, {Kind: RespKv, Kv: kv.Deleted{Removed: true}}, {Kind: RespUnknownTenant}} {
		b, _ := cbor.Marshal(r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Response
		if cbor.Unmarshal(b, &r) != nil {
			return
		}
		again, err := cbor.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var r2 Response
		if err := cbor.Unmarshal(again, &r2); err != nil || r2.Kind != r.Kind {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzDecodeAppSnapshot(f *testing.F) {
	s := NewState()
	Apply(&s, Command{Tenant: TenantLease, Kv: kv.Put{Key: "l", Value: []byte("h"), TTLMs: 5}}, 1)
	b, _ := EncodeSnapshot(&s)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSnapshot(b)
		if err != nil {
			return
		}
		b1, err := EncodeSnapshot(&s)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := DecodeSnapshot(b1)
		if err != nil {
			t.Fatal(err)
		}
		if b2, _ := EncodeSnapshot(&s2); !bytes.Equal(b1, b2) {
			t.Fatal("not a fixed point")
		}
	})
}
