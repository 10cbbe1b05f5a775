package ring

import (
	"sort"

	"github.com/cespare/xxhash/v2"
)

// A frozen copy of the v1 algorithm, written the long way (one byte slice,
// one-shot hash, a full sort) so it shares no code path with the live one.
// It must never change: if a test finds the live functions disagreeing with
// it, the live code broke the wire format.

func frozenNodeID(name string) uint64 {
	id := xxhash.NewWithSeed(0x726966746e6f6465)
	id.Write([]byte(name))
	if v := id.Sum64(); v != 0 {
		return v
	}
	return 1
}

func frozenEncode(node uint64, class, key string) []byte {
	b := []byte{0x01}
	for shift := 56; shift >= 0; shift -= 8 {
		b = append(b, byte(node>>shift))
	}
	for _, field := range []string{class, key} {
		n := uint64(len(field))
		for n >= 0x80 {
			b = append(b, byte(n)|0x80)
			n >>= 7
		}
		b = append(b, byte(n))
		b = append(b, field...)
	}
	return b
}

func frozenScore(node uint64, class, key string) uint64 {
	d := xxhash.NewWithSeed(0x7269667472696e67)
	d.Write(frozenEncode(node, class, key))
	return d.Sum64()
}

// frozenRank is every voter, best first.
func frozenRank(voters []uint64, class, key string) []uint64 {
	type scored struct{ s, id uint64 }
	all := make([]scored, len(voters))
	for i, id := range voters {
		all[i] = scored{frozenScore(id, class, key), id}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].s != all[j].s {
			return all[i].s > all[j].s
		}
		return all[i].id > all[j].id
	})
	out := make([]uint64, len(all))
	for i, x := range all {
		out[i] = x.id
	}
	return out
}
