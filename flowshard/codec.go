package flowshard

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// On-disk format. Everything lives in one bucket, dataBucket, whose keys are
//
//	uvarint(len(flowID)) ‖ flowID            the flow record (a counter floor)
//	uvarint(len(flowID)) ‖ flowID ‖ key      one entry or tombstone of the flow (key is never empty)
//
// The length prefix is a prefix-free code, so the keys of one flow are exactly
// the keys that start with its flow-record key: deleting a flow is one
// seek-and-delete loop, and bbolt's sorted order puts a flow record right
// before its entries.
//
// Every value starts with the format version byte and a kind byte. Format 2:
//
//	entry:     0x02 0x01 uvarint(m_idx) uvarint(v) uvarint(origin) uvarint(expires unix ms) value...
//	flow:      0x02 0x02 uvarint(counter) uvarint(expires unix ms)
//	tombstone: 0x02 0x03 uvarint(m_idx) uvarint(v) uvarint(origin) uvarint(expires unix ms)
//
// A tombstone is a deleted key with the version of its delete, kept for as
// long as an entry would live, so that a replica that learns of the delete
// keeps it and an older value arriving later loses to it (format 1 had no
// tombstones: a delete wrote the flow record, so that the counter outlived
// the key, and replicas could not tell a deleted key from one they had never
// seen). Format 2 writes no flow records; it reads them in files migrated
// from format 1, where they keep the counter floor they recorded.
//
// The meta bucket holds formatKey = {formatV2}. Migration: Open reads a
// format-1 file with decodeRecord's version-1 branch and rewrites every
// record as format 2, and formatKey with it, in the one transaction that
// loads the file, so a crash leaves either file whole. A build that reads
// only format 1 refuses a format-2 file (its formatKey) instead of
// misreading it; the next format keeps this one's decoder the same way.
const (
	formatV1 byte = 1
	formatV2 byte = 2

	kindEntry     byte = 1
	kindFlow      byte = 2
	kindTombstone byte = 3
)

var (
	dataBucket = []byte("flows")
	metaBucket = []byte("meta")
	formatKey  = []byte("format")
)

// ErrCorrupt is what Open fails with when flow.db holds a record, or a file
// format, that this build cannot decode. The file is then left untouched:
// the operator may move it aside (every key also lives on its replicas).
var ErrCorrupt = errors.New("flowshard: corrupt or unknown record")

// record is one decoded value of dataBucket: an entry (kind kindEntry), a
// tombstone (kindTombstone, without a value) or a flow record (kindFlow,
// where only counter and expMs are meaningful).
type record struct {
	format  byte
	kind    byte
	ver     Version
	counter uint64
	expMs   int64
	value   []byte
}

// flowKey is the flow-record key of flowID, also the prefix of its entries.
func flowKey(flowID string) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64+len(flowID))
	b = binary.AppendUvarint(b, uint64(len(flowID)))
	return append(b, flowID...)
}

// entryKey is the disk key of one entry.
func entryKey(flowID, key string) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64+len(flowID)+len(key))
	b = binary.AppendUvarint(b, uint64(len(flowID)))
	b = append(b, flowID...)
	return append(b, key...)
}

// splitKey is the inverse of flowKey/entryKey; key is "" for a flow record.
func splitKey(k []byte) (flowID, key string, err error) {
	n, w := binary.Uvarint(k)
	if w <= 0 || n > uint64(len(k)-w) {
		return "", "", fmt.Errorf("%w: key %x", ErrCorrupt, k)
	}
	end := w + int(n)
	return string(k[w:end]), string(k[end:]), nil
}

func encodeEntry(ver Version, expMs int64, value []byte) []byte {
	b := make([]byte, 0, 2+4*binary.MaxVarintLen64+len(value))
	b = appendVersioned(append(b, formatV2, kindEntry), ver, expMs)
	return append(b, value...)
}

func encodeTombstone(ver Version, expMs int64) []byte {
	b := make([]byte, 0, 2+4*binary.MaxVarintLen64)
	return appendVersioned(append(b, formatV2, kindTombstone), ver, expMs)
}

func appendVersioned(b []byte, ver Version, expMs int64) []byte {
	b = binary.AppendUvarint(b, ver.MIdx)
	b = binary.AppendUvarint(b, ver.V)
	b = binary.AppendUvarint(b, ver.Origin)
	return binary.AppendUvarint(b, uint64(expMs))
}

// encodeFlow writes a flow record; format 2 writes them only when it
// migrates a format-1 file.
func encodeFlow(counter uint64, expMs int64) []byte {
	b := make([]byte, 0, 2+2*binary.MaxVarintLen64)
	b = append(b, formatV2, kindFlow)
	b = binary.AppendUvarint(b, counter)
	return binary.AppendUvarint(b, uint64(expMs))
}

// encodeRecord writes r in the current format (migration).
func encodeRecord(r record) []byte {
	switch r.kind {
	case kindFlow:
		return encodeFlow(r.counter, r.expMs)
	case kindTombstone:
		return encodeTombstone(r.ver, r.expMs)
	default:
		return encodeEntry(r.ver, r.expMs, r.value)
	}
}

// decodeRecord decodes a value of dataBucket, of format 1 or 2 (format 1
// has no tombstones). The returned value aliases b: bbolt's memory is only
// valid inside the transaction, so callers copy it.
func decodeRecord(b []byte) (record, error) {
	var r record
	if len(b) < 2 {
		return r, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(b))
	}
	if b[0] != formatV1 && b[0] != formatV2 {
		return r, fmt.Errorf("%w: format version %d", ErrCorrupt, b[0])
	}
	r.format, r.kind = b[0], b[1]
	rest := b[2:]
	var nums [4]uint64
	count := 0
	switch {
	case r.kind == kindEntry, r.kind == kindTombstone && r.format == formatV2:
		count = 4
	case r.kind == kindFlow:
		count = 2
	default:
		return r, fmt.Errorf("%w: kind %d in format %d", ErrCorrupt, r.kind, r.format)
	}
	for i := range count {
		n, w := binary.Uvarint(rest)
		if w <= 0 {
			return r, fmt.Errorf("%w: truncated varint", ErrCorrupt)
		}
		nums[i] = n
		rest = rest[w:]
	}
	if r.kind != kindEntry && len(rest) != 0 {
		return r, fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(rest))
	}
	if r.kind == kindFlow {
		r.counter, r.expMs = nums[0], int64(nums[1])
		return r, nil
	}
	r.ver = Version{MIdx: nums[0], V: nums[1], Origin: nums[2]}
	r.expMs = int64(nums[3])
	if r.kind == kindEntry {
		r.value = rest
	}
	if r.ver.V == 0 {
		return r, fmt.Errorf("%w: version 0", ErrCorrupt)
	}
	return r, nil
}
