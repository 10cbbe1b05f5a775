package kv

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

// TestWireFormatIsPinned pins every Command, Expect and Response
// discriminant and field order. A change here breaks decode of every
// deployed log and snapshot: add a tag, never renumber.
func TestWireFormatIsPinned(t *testing.T) {
	cmds := []struct {
		name string
		cmd  Command
		hex  string
	}{
		{"Put Absent ttl", Put{Key: "k", Value: []byte("v"), Expect: Absent(), TTLMs: 500, NowMs: 1000}, "8600416b417681001901f41903e8"},
		{"Put Version", Put{Key: "k", Expect: Version(7), TTLMs: 1, NowMs: 2}, "8600416b4082010701" + "02"},
		{"Put Any no expiry", Put{Key: "k", Expect: Any(), NoExpiry: true, NowMs: 0}, "8600416b408102f600"},
		{"Delete", Delete{Key: "k", Expect: Any(), NowMs: 3}, "8401416b810203"},
		{"TakeOnce", TakeOnce{Key: "k", Expect: Version(24), NowMs: 3}, "8402416b8201181803"},
		{"Evict", Evict{CutoffMs: 100, Limit: 10}, "830318640a"},
	}
	for _, tc := range cmds {
		t.Run(tc.name, func(t *testing.T) {
			b, err := EncodeCommand(tc.cmd)
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(b); got != tc.hex {
				t.Fatalf("encoding %s, pinned %s", got, tc.hex)
			}
			back, err := DecodeCommand(b)
			if err != nil || !commandEqual(back, tc.cmd) {
				t.Fatalf("decode %#v %v", back, err)
			}
		})
	}
	resps := []struct {
		name string
		resp Response
		hex  string
	}{
		{"Written", Written{Version: 9}, "820009"},
		{"Deleted", Deleted{Removed: true}, "8201f5"},
		{"Taken record", Taken{Record: rec("v", 2, 30)}, "820283417602181e"},
		{"Taken nothing", Taken{}, "8202f6"},
		{"Evicted", Evicted{Count: 3, MoreExpired: true}, "830303f5"},
		{"Conflict record", Conflict{Current: rec("", 5, 0)}, "8204834005" + "00"},
		{"Conflict absent", Conflict{}, "8204f6"},
		{"Rejected", Rejected{Reason: ReasonTTLZero}, "820504"},
	}
	for _, tc := range resps {
		t.Run(tc.name, func(t *testing.T) {
			b, err := EncodeResponse(tc.resp)
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(b); got != tc.hex {
				t.Fatalf("encoding %s, pinned %s", got, tc.hex)
			}
			back, err := DecodeResponse(b)
			if err != nil || !respEqual(back, tc.resp) {
				t.Fatalf("decode %#v %v", back, err)
			}
		})
	}
	// Expect and Reason discriminants, pinned on their own.
	for kind, want := range map[ExpectKind]uint8{ExpectAbsent: 0, ExpectVersion: 1, ExpectAny: 2} {
		if uint8(kind) != want {
			t.Fatalf("expect kind %d moved to %d", want, kind)
		}
	}
	reasons := []Reason{ReasonKeyEmpty, ReasonKeyTooLarge, ReasonValueTooLarge, ReasonTTLZero,
		ReasonTTLTooLarge, ReasonTTLOverflow, ReasonNoExpiryNotAllowed, ReasonQuotaEntries,
		ReasonQuotaBytes, ReasonInvalidExpect, ReasonEvictLimitZero, ReasonMalformed, ReasonZeroIndex}
	for i, r := range reasons {
		if uint8(r) != uint8(i+1) {
			t.Fatalf("reason %v is %d, pinned %d", r, r, i+1)
		}
	}
}

func TestDecodeRejectsMalformedWire(t *testing.T) {
	for _, tc := range []struct{ name, hex string }{
		{"not an array", "a0"},
		{"empty array", "80"},
		{"unknown tag", "8109"},
		{"short Put", "8500416b41768100"},
		{"text key", "840161" + "6b810203"},
		{"negative now", "8401416b810220"},
		{"bad expect arity", "8401416b82020103"},
		{"unknown expect", "8401416b810503"},
		{"trailing bytes", "830318640a00"},
		{"indefinite array", "9f0318640aff"},
		{"limit above uint32", "8303186" + "41b0000000100000000"},
		{"ttl is a bool", "8600416b408102f400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := hex.DecodeString(tc.hex)
			if c, err := DecodeCommand(b); !errors.Is(err, ErrDecode) {
				t.Fatalf("decoded %#v, err %v", c, err)
			}
		})
	}
	for _, h := range []string{"8206f6", "8201f6", "8302f6f6", "820483400500" + "00", "82051901ff"} {
		b, _ := hex.DecodeString(h)
		if r, err := DecodeResponse(b); !errors.Is(err, ErrDecode) {
			t.Fatalf("%s decoded %#v, err %v", h, r, err)
		}
	}
}

func commandEqual(a, b Command) bool {
	switch a := a.(type) {
	case Put:
		b, ok := b.(Put)
		return ok && a.Key == b.Key && bytes.Equal(a.Value, b.Value) && a.Expect == b.Expect &&
			a.TTLMs == b.TTLMs && a.NoExpiry == b.NoExpiry && a.NowMs == b.NowMs
	}
	return a == b
}

func FuzzDecodeCommand(f *testing.F) {
	for _, c := range []Command{
		Put{Key: "k", Value: []byte("v"), Expect: Version(3), TTLMs: 5, NowMs: 9},
		Put{Key: "k", NoExpiry: true, Expect: Any()},
		Delete{Key: "k", Expect: Absent(), NowMs: 1},
		TakeOnce{Key: "kk", Expect: Any()},
		Evict{CutoffMs: 1 << 40, Limit: 3},
	} {
		b, _ := EncodeCommand(c)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			return
		}
		again, err := EncodeCommand(c)
		if err != nil {
			t.Fatalf("decoded %#v does not encode: %v", c, err)
		}
		c2, err := DecodeCommand(again)
		if err != nil || !commandEqual(c, c2) {
			t.Fatalf("round trip %#v -> %#v (%v)", c, c2, err)
		}
		// Whatever decodes must apply without panicking.
		mustFragment(t, DefaultPolicy()).Apply(c, 1)
	})
}

func FuzzDecodeResponse(f *testing.F) {
	for _, r := range []Response{Written{1}, Deleted{true}, Taken{rec("v", 1, 2)}, Taken{},
		Evicted{2, true}, Conflict{rec("", 1, 0)}, Conflict{}, Rejected{ReasonTTLZero}} {
		b, _ := EncodeResponse(r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeResponse(b)
		if err != nil {
			return
		}
		again, err := EncodeResponse(r)
		if err != nil {
			t.Fatalf("decoded %#v does not encode: %v", r, err)
		}
		r2, err := DecodeResponse(again)
		if err != nil || !respEqual(r, r2) {
			t.Fatalf("round trip %#v -> %#v (%v)", r, r2, err)
		}
	})
}
