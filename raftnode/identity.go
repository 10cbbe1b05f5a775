package raftnode

import (
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// nodeIDSeed is the fixed xxh64 seed for node ids ("riftnode" in ASCII).
// Changing it renames every node of every deployed cluster: it is a wire
// format, pinned by golden tests.
const nodeIDSeed = 0x726966746e6f6465

// NodeIDFromName derives the Raft node id from a stable node name. Raft
// reserves 0 for "no node", so the one name that would hash to 0 maps to 1.
func NodeIDFromName(name string) uint64 {
	d := xxhash.NewWithSeed(nodeIDSeed)
	_, _ = d.WriteString(name)
	if id := d.Sum64(); id != 0 {
		return id
	}
	return 1
}

// FormatNodeID renders a node id the way logs and the admin API show it.
func FormatNodeID(id uint64) string { return fmt.Sprintf("%016x", id) }
