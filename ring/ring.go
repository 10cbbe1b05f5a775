// Package ring computes who owns a flow in a riftgate cluster: rendezvous
// (highest-random-weight) hashing over the voters of one committed
// membership.
//
// Every voter n gets a score for a key, Score(n, class, key), a seeded xxh64
// over a fixed byte encoding. The voter with the highest score owns the key;
// the next ones, in score order, are its replica successors (the replica set
// is the owner plus ReplicaSuccessors). Ties are broken on (score, node id),
// so the answer never depends on the order of the voter list. Because each
// voter's score is independent of the others, removing a voter moves only
// the keys it owned, and adding one moves only the keys it now wins.
//
// This package is a wire format. Nodes never negotiate ownership: each
// computes it locally from the same membership (m_idx), and they agree only
// because they run bit-identical functions. Changing the seeds, the hash,
// the byte encoding, the node-id derivation or the tie-break makes nodes of
// two builds disagree on owners, so it needs a full cluster stop (and the
// flow state it moves must be re-adopted); golden tests pin all of them.
//
// The package imports only xxhash and the standard library.
package ring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// scoreVersion leads every score input, so a future encoding can be told
// apart from this one instead of silently colliding with it.
const scoreVersion = 0x01

// scoreSeed is the fixed xxh64 seed of Score ("riftring" in ASCII).
const scoreSeed = 0x7269667472696e67

// ReplicaSuccessors is how many successors, after the owner, hold a replica
// of each key.
const ReplicaSuccessors = 2

// Classes of keys. A class separates key spaces that are owned
// independently: a flow and a proxyOnce claim with the same key text get
// independent owners.
const (
	ClassFlow  = "flow"
	ClassClaim = "claim"
)

// Score is the rendezvous weight of node for (class, key): xxh64 with the
// fixed seed over the encoding
//
//	0x01 ‖ node (8 bytes, big-endian) ‖ uvarint(len(class)) ‖ class ‖ uvarint(len(key)) ‖ key
//
// The length prefixes make the encoding injective, so ("a","bc") and
// ("ab","c") hash different inputs. Score does not allocate.
func Score(node uint64, class, key string) uint64 {
	var d xxhash.Digest
	d.ResetWithSeed(scoreSeed)
	var hdr [1 + 8 + binary.MaxVarintLen64]byte
	hdr[0] = scoreVersion
	binary.BigEndian.PutUint64(hdr[1:9], node)
	n := 9 + binary.PutUvarint(hdr[9:], uint64(len(class)))
	_, _ = d.Write(hdr[:n])
	_, _ = d.WriteString(class)
	n = binary.PutUvarint(hdr[:], uint64(len(key)))
	_, _ = d.Write(hdr[:n])
	_, _ = d.WriteString(key)
	return d.Sum64()
}

// outranks reports whether (score a, node a) beats (score b, node b): the
// higher score wins, and on equal scores the higher node id. Over distinct
// ids this is a strict total order, which is what makes the result
// independent of voter order.
func outranks(sa, a, sb, b uint64) bool {
	if sa != sb {
		return sa > sb
	}
	return a > b
}

// Errors New reports.
var (
	ErrZeroNode      = errors.New("ring: node id 0 is reserved")
	ErrDuplicateNode = errors.New("ring: duplicate node id")
)

// Ring is the ownership map of one committed membership. It is immutable
// and safe for concurrent use.
type Ring struct {
	mIdx   uint64
	voters []uint64 // ascending, distinct, non-zero
}

// New builds the ring of voters, taken from the membership committed at
// index mIdx. The order of voters does not matter. A node id 0 or a
// duplicate id is an error (membership never holds either). An empty voter
// list is allowed: every key then has no owner.
func New(mIdx uint64, voters []uint64) (*Ring, error) {
	v := slices.Clone(voters)
	slices.Sort(v)
	for i, id := range v {
		if id == 0 {
			return nil, ErrZeroNode
		}
		if i > 0 && v[i-1] == id {
			return nil, fmt.Errorf("%w: %016x", ErrDuplicateNode, id)
		}
	}
	return &Ring{mIdx: mIdx, voters: v}, nil
}

// MIdx is the membership index the ring was built from.
func (r *Ring) MIdx() uint64 { return r.mIdx }

// Voters returns the voter ids in ascending order (a copy).
func (r *Ring) Voters() []uint64 { return slices.Clone(r.voters) }

// Len is the number of voters.
func (r *Ring) Len() int { return len(r.voters) }

// Owner is the voter with the highest (Score, node id) for (class, key), or
// 0 when the ring has no voters. It does not allocate.
func (r *Ring) Owner(class, key string) uint64 {
	// (0, 0) loses to every voter, since voter ids are non-zero.
	var best, bestScore uint64
	for _, id := range r.voters {
		s := Score(id, class, key)
		if outranks(s, id, bestScore, best) {
			best, bestScore = id, s
		}
	}
	return best
}

// Successors returns up to n voters that follow the owner of (class, key),
// best first: Successors(class, key, ReplicaSuccessors) is the replica set
// besides the owner. It returns fewer when the ring has no more voters, and
// nil when n <= 0 or the ring has at most one voter.
func (r *Ring) Successors(class, key string, n int) []uint64 {
	return r.AppendSuccessors(nil, class, key, n)
}

// AppendSuccessors appends Successors(class, key, n) to dst: with room in
// dst, and up to 7 successors, it does not allocate.
func (r *Ring) AppendSuccessors(dst []uint64, class, key string, n int) []uint64 {
	n = min(n, len(r.voters)-1)
	if n <= 0 {
		return dst
	}
	// Keep the best n+1 (owner included) by insertion: n is small.
	var idRoom, scoreRoom [8]uint64
	ids, sc := idRoom[:0], scoreRoom[:0]
	if n+1 > len(idRoom) {
		ids, sc = make([]uint64, 0, n+1), make([]uint64, 0, n+1)
	}
	for _, id := range r.voters {
		s := Score(id, class, key)
		if len(ids) == n+1 && !outranks(s, id, sc[n], ids[n]) {
			continue
		}
		i := len(ids)
		if i < n+1 {
			ids, sc = append(ids, 0), append(sc, 0)
		} else {
			i = n
		}
		for ; i > 0 && outranks(s, id, sc[i-1], ids[i-1]); i-- {
			ids[i], sc[i] = ids[i-1], sc[i-1]
		}
		ids[i], sc[i] = id, s
	}
	return append(dst, ids[1:]...)
}
