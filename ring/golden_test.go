package ring

import (
	"encoding/hex"
	"slices"
	"strings"
	"testing"
)

// Golden values pin the wire format: every node of a cluster must compute
// these exact numbers. A failure here means owners would move between
// builds; the fix is a new scoreVersion and a full cluster stop, never an
// edit of these literals.

func TestNodeIDGolden(t *testing.T) {
	// The first four are raftnode's TestNodeIDGolden values: one id per
	// node in both packages.
	for _, tc := range []struct {
		name string
		want uint64
	}{
		{"n1", 0xbbfd2cf5eae9fcaa},
		{"node-a", 0xa86dfbab74bf2990},
		{"riftgate-0.example.internal", 0xce9ccd7aa1801ec8},
		{"", 0xf740ae5ada4a0387},
		{"n2", 0x9453f5fd9872e0db},
		{"n3", 0xd9f3a1e2285e78e6},
		{"n4", 0xee08d14a74593770},
		{"n5", 0x598df7de5e2c6036},
	} {
		if got := NodeID(tc.name); got != tc.want {
			t.Errorf("NodeID(%q) = %#016x, want %#016x", tc.name, got, tc.want)
		}
		if got := frozenNodeID(tc.name); got != tc.want {
			t.Errorf("frozenNodeID(%q) = %#016x, want %#016x", tc.name, got, tc.want)
		}
	}
}

var long = strings.Repeat("k", 200) // a two-byte uvarint length

func TestScoreGolden(t *testing.T) {
	for _, tc := range []struct {
		node       uint64
		class, key string
		want       uint64
		encoding   string // hex of the hashed bytes
	}{
		{0xbbfd2cf5eae9fcaa, "flow", "i8080:", 0x98330da31eaa9037, "01bbfd2cf5eae9fcaa04666c6f770669383038303a"},
		{0x9453f5fd9872e0db, "flow", "f:cart-42", 0xcff0d140a746c01f, "019453f5fd9872e0db04666c6f7709663a636172742d3432"},
		{0xd9f3a1e2285e78e6, "claim", "i4545:GET /users", 0xbc2864c6e36ab4e4, "01d9f3a1e2285e78e605636c61696d1069343534353a474554202f7573657273"},
		{1, "", "", 0xed0e373af16b27a2, "0100000000000000010000"},
		{1, "a", "bc", 0x34cd415a36ccb555, "0100000000000000010161026263"},
		{1, "ab", "c", 0xdaa51ad74d30da94, "0100000000000000010261620163"},
		{0xbbfd2cf5eae9fcaa, "flow", long, 0xacccd2bd02c95007, "01bbfd2cf5eae9fcaa04666c6f77c801" + hex.EncodeToString([]byte(long))},
	} {
		if got := Score(tc.node, tc.class, tc.key); got != tc.want {
			t.Errorf("Score(%#x, %q, %.20q) = %#016x, want %#016x", tc.node, tc.class, tc.key, got, tc.want)
		}
		if got := hex.EncodeToString(frozenEncode(tc.node, tc.class, tc.key)); got != tc.encoding {
			t.Errorf("encoding of (%#x, %q, %.20q):\n got  %s\n want %s", tc.node, tc.class, tc.key, got, tc.encoding)
		}
		if got := frozenScore(tc.node, tc.class, tc.key); got != tc.want {
			t.Errorf("frozenScore(%#x, %q, %.20q) = %#016x, want %#016x", tc.node, tc.class, tc.key, got, tc.want)
		}
	}
}

func TestRingGolden(t *testing.T) {
	names := []string{"n1", "n2", "n3", "n4", "n5"}
	byID := map[uint64]string{}
	var ids []uint64
	for _, n := range names {
		byID[NodeID(n)] = n
		ids = append(ids, NodeID(n))
	}
	r, err := New(7, ids)
	if err != nil {
		t.Fatal(err)
	}
	if r.MIdx() != 7 || r.Len() != 5 {
		t.Fatalf("MIdx, Len = %d, %d; want 7, 5", r.MIdx(), r.Len())
	}
	for _, tc := range []struct {
		class, key string
		owner      string
		successors []string
	}{
		{ClassFlow, "i8080:", "n3", []string{"n2", "n4"}},
		{ClassFlow, "i8081:", "n3", []string{"n4", "n5"}},
		{ClassFlow, "f:cart-42", "n2", []string{"n3", "n5"}},
		{ClassFlow, "i8080:user-7", "n3", []string{"n2", "n5"}},
		{ClassClaim, "i8080:", "n5", []string{"n2", "n4"}},
		{ClassClaim, "i4545:GET /users", "n5", []string{"n4", "n3"}},
	} {
		if got := byID[r.Owner(tc.class, tc.key)]; got != tc.owner {
			t.Errorf("Owner(%q, %q) = %s, want %s", tc.class, tc.key, got, tc.owner)
		}
		var got []string
		for _, id := range r.Successors(tc.class, tc.key, ReplicaSuccessors) {
			got = append(got, byID[id])
		}
		if !slices.Equal(got, tc.successors) {
			t.Errorf("Successors(%q, %q, 2) = %v, want %v", tc.class, tc.key, got, tc.successors)
		}
	}
}
