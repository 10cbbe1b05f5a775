package cluster

import (
	"crypto/sha256"
	"fmt"

	"github.com/riftgate/riftgate/gateway/config"
)

// The configuration group's Raft entries and their answers. Both are wire
// formats (raftnode carries them as CBOR), pinned by golden tests; a later
// layout gets a new entryVersion and this one keeps decoding.

// entryVersion is the V of every entry this build proposes.
const entryVersion uint8 = 1

// entry is one command of the configuration group: a whole configuration
// command (config.EncodeCommand's bytes), or one part of a command too
// large for one Raft entry.
type entry struct {
	V       uint8  `cbor:"1,keyasint"`
	Command []byte `cbor:"2,keyasint,omitempty"`
	Part    *part  `cbor:"3,keyasint,omitempty"`
}

// part is one chunk of a large command. The parts of one upload are
// proposed in order by one node; the last one assembles the command,
// checks it against Size and Sum, and applies it.
type part struct {
	// Upload names the upload: random, chosen by the proposer.
	Upload uint64 `cbor:"1,keyasint"`
	Index  uint32 `cbor:"2,keyasint"` // from 0
	Count  uint32 `cbor:"3,keyasint"` // parts in the upload, at least 2
	// Size and Sum (SHA-256) describe the whole command; the first part
	// declares them, the others repeat them.
	Size uint64   `cbor:"4,keyasint"`
	Sum  [32]byte `cbor:"5,keyasint"`
	Data []byte   `cbor:"6,keyasint"`
}

// response is what applying an entry answers the node that proposed it.
type response struct {
	// Index is the entry's log index: the proposer waits until it has
	// made that index run before it answers its client.
	Index uint64 `cbor:"1,keyasint,omitempty"`
	// Result is the configuration command's, once it applied (the last
	// part of an upload, or a whole command).
	Result *config.Result `cbor:"2,keyasint,omitempty"`
	// Err says why an entry did nothing: a broken upload, bytes that are
	// not a command. Every replica fails it the same way.
	Err string `cbor:"3,keyasint,omitempty"`
}

// Sizing (seed 002, catch-up batch sizing). A Raft entry carries at most
// maxEntryBytes of command, far below raftnode's message body cap (16 MiB),
// so a lagging follower's catch-up always fits; a command up to
// configlog.MaxCommandBytes (24 MiB: a 16 MiB admin body and what a command
// adds) travels as parts of partBytes each.
const (
	maxEntryBytes = 1 << 20
	partBytes     = 768 << 10
	// Uploads that stall are forgotten: one whose last part is more than
	// uploadTimeout entries old, and none may start while the unfinished
	// ones hold maxPendingBytes. Both are counted in log entries, so every
	// replica forgets the same uploads at the same index.
	uploadTimeout   = 10000
	maxPendingBytes = 64 << 20
)

// split cuts an encoded command into the parts of one upload.
func split(upload uint64, enc []byte) []part {
	sum := sha256.Sum256(enc)
	n := (len(enc) + partBytes - 1) / partBytes
	parts := make([]part, 0, n)
	for i := 0; i < n; i++ {
		end := min((i+1)*partBytes, len(enc))
		parts = append(parts, part{Upload: upload, Index: uint32(i), Count: uint32(n), Size: uint64(len(enc)), Sum: sum, Data: enc[i*partBytes : end]})
	}
	return parts
}

// upload is a command arriving in parts, as the state machine holds it.
type upload struct {
	Count uint32   `cbor:"1,keyasint"`
	Next  uint32   `cbor:"2,keyasint"` // the part expected next
	Size  uint64   `cbor:"3,keyasint"`
	Sum   [32]byte `cbor:"4,keyasint"`
	Data  []byte   `cbor:"5,keyasint"`
	Last  uint64   `cbor:"6,keyasint"` // log index of the last part taken
}

// take adds p to the upload, or says why it cannot.
func (u *upload) take(p *part, index uint64) error {
	switch {
	case p.Index != u.Next:
		return fmt.Errorf("part %d of upload %016x arrived, part %d was expected", p.Index, p.Upload, u.Next)
	case p.Count != u.Count || p.Size != u.Size || p.Sum != u.Sum:
		return fmt.Errorf("part %d of upload %016x describes another command", p.Index, p.Upload)
	case uint64(len(u.Data)+len(p.Data)) > u.Size:
		return fmt.Errorf("upload %016x is longer than the %d bytes it declared", p.Upload, u.Size)
	}
	u.Data = append(u.Data, p.Data...)
	u.Next++
	u.Last = index
	return nil
}

// done reports whether the upload has every part, and checks it.
func (u *upload) done() (bool, error) {
	if u.Next < u.Count {
		return false, nil
	}
	if uint64(len(u.Data)) != u.Size || sha256.Sum256(u.Data) != u.Sum {
		return true, fmt.Errorf("upload does not match its size and checksum")
	}
	return true, nil
}
