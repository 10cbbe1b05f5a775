package flowshard

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// On-disk format. Everything lives in one bucket, dataBucket, whose keys are
//
//	uvarint(len(flowID)) ‖ flowID            the flow record (its write counter)
//	uvarint(len(flowID)) ‖ flowID ‖ key      one entry of the flow (key is never empty)
//
// The length prefix is a prefix-free code, so the keys of one flow are exactly
// the keys that start with its flow-record key: deleting a flow is one
// seek-and-delete loop, and bbolt's sorted order puts a flow record right
// before its entries.
//
// Every value starts with the format version byte (formatV1) and a kind byte:
//
//	entry: 0x01 0x01 uvarint(m_idx) uvarint(v) uvarint(origin) uvarint(expires unix ms) value...
//	flow:  0x01 0x02 uvarint(counter) uvarint(expires unix ms)
//
// The meta bucket holds formatKey = {formatV1}. Migration path: a format 2
// reader keeps decodeRecord's version-1 branch, Open rewrites every record
// in one transaction (or lazily on write) and then bumps formatKey; a
// version-1 binary refuses a file whose formatKey it does not know, instead
// of misreading it.
const (
	formatV1 byte = 1

	kindEntry byte = 1
	kindFlow  byte = 2
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

// record is one decoded value of dataBucket: an entry (kind kindEntry) or a
// flow record (kindFlow, where only counter and expMs are meaningful).
type record struct {
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
	b = append(b, formatV1, kindEntry)
	b = binary.AppendUvarint(b, ver.MIdx)
	b = binary.AppendUvarint(b, ver.V)
	b = binary.AppendUvarint(b, ver.Origin)
	b = binary.AppendUvarint(b, uint64(expMs))
	return append(b, value...)
}

func encodeFlow(counter uint64, expMs int64) []byte {
	b := make([]byte, 0, 2+2*binary.MaxVarintLen64)
	b = append(b, formatV1, kindFlow)
	b = binary.AppendUvarint(b, counter)
	return binary.AppendUvarint(b, uint64(expMs))
}

// decodeRecord decodes a value of dataBucket. The returned value aliases b:
// bbolt's memory is only valid inside the transaction, so callers copy it.
func decodeRecord(b []byte) (record, error) {
	var r record
	if len(b) < 2 {
		return r, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(b))
	}
	if b[0] != formatV1 {
		return r, fmt.Errorf("%w: format version %d", ErrCorrupt, b[0])
	}
	r.kind = b[1]
	rest := b[2:]
	var nums [4]uint64
	count := 0
	switch r.kind {
	case kindEntry:
		count = 4
	case kindFlow:
		count = 2
	default:
		return r, fmt.Errorf("%w: kind %d", ErrCorrupt, r.kind)
	}
	for i := range count {
		n, w := binary.Uvarint(rest)
		if w <= 0 {
			return r, fmt.Errorf("%w: truncated varint", ErrCorrupt)
		}
		nums[i] = n
		rest = rest[w:]
	}
	if r.kind == kindFlow {
		if len(rest) != 0 {
			return r, fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(rest))
		}
		r.counter, r.expMs = nums[0], int64(nums[1])
		return r, nil
	}
	r.ver = Version{MIdx: nums[0], V: nums[1], Origin: nums[2]}
	r.expMs = int64(nums[3])
	r.value = rest
	if r.ver.V == 0 {
		return r, fmt.Errorf("%w: entry with version 0", ErrCorrupt)
	}
	return r, nil
}
