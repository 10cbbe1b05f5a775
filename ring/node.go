package ring

import "github.com/cespare/xxhash/v2"

// nodeIDSeed is the fixed xxh64 seed of node ids ("riftnode" in ASCII). It
// is also the domain separator: Score uses a different seed and a tagged
// encoding, so a node id and a score are hashes of different functions.
const nodeIDSeed = 0x726966746e6f6465

// NodeID derives a node's id from its stable name (--cluster-node-name):
// xxh64 with the fixed seed over the name's bytes. 0 means "no node" (to
// raft, and to Owner), so the single 64-bit value 0 maps to 1; a name that
// hashes to 0 therefore shares its id with a name that hashes to 1, a 2^-64
// chance accepted like any other id collision.
//
// It is bit-for-bit raftnode.NodeIDFromName: the ring's voters are the raft
// voters of the committed membership, so a node must have one id in both.
// The two copies exist because raftnode may not import ring; golden tests in
// both packages pin the same values.
func NodeID(name string) uint64 {
	var d xxhash.Digest
	d.ResetWithSeed(nodeIDSeed)
	_, _ = d.WriteString(name)
	if id := d.Sum64(); id != 0 {
		return id
	}
	return 1
}
