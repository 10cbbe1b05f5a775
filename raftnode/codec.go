package raftnode

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// envelopeHeaderLen is the magic (4 bytes) plus the big-endian u16 version.
const envelopeHeaderLen = 6

// ErrBadEnvelope reports bytes that are not a snapshot envelope of the
// expected kind.
var ErrBadEnvelope = errors.New("raftnode: bad snapshot envelope")

var (
	// encMode encodes canonically (RFC 8949 core deterministic), so every
	// replica serialising equal values produces equal bytes.
	encMode cbor.EncMode
	// decMode is used for bodies received from peers or read from disk; the
	// limits are raised because a snapshot legitimately holds large maps.
	decMode cbor.DecMode
)

func init() {
	var err error
	if encMode, err = cbor.CoreDetEncOptions().EncMode(); err != nil {
		panic(err)
	}
	if decMode, err = (cbor.DecOptions{
		MaxArrayElements: 1 << 30,
		MaxMapPairs:      1 << 30,
		MaxNestedLevels:  64,
	}).DecMode(); err != nil {
		panic(err)
	}
}

// MarshalCBOR encodes v with the deterministic CBOR options the substrate
// uses for commands, responses and snapshots.
func MarshalCBOR(v any) ([]byte, error) { return encMode.Marshal(v) }

// UnmarshalCBOR decodes data into v with the substrate's decode limits.
func UnmarshalCBOR(data []byte, v any) error { return decMode.Unmarshal(data, v) }

// EncodeEnvelope frames body as magic | u16 version (big-endian) | CBOR(body).
func EncodeEnvelope(magic [4]byte, version uint16, body any) ([]byte, error) {
	b, err := encMode.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("raftnode: encode envelope body: %w", err)
	}
	out := make([]byte, envelopeHeaderLen, envelopeHeaderLen+len(b))
	copy(out, magic[:])
	binary.BigEndian.PutUint16(out[4:], version)
	return append(out, b...), nil
}

// DecodeEnvelope checks the magic and returns the version and the raw CBOR
// body, which the caller decodes according to that version.
func DecodeEnvelope(data []byte, magic [4]byte) (uint16, []byte, error) {
	if len(data) < envelopeHeaderLen {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrBadEnvelope, len(data))
	}
	if [4]byte(data[:4]) != magic {
		return 0, nil, fmt.Errorf("%w: magic %q", ErrBadEnvelope, data[:4])
	}
	return binary.BigEndian.Uint16(data[4:6]), data[envelopeHeaderLen:], nil
}

// SnapshotCodec is the offered (not imposed) snapshot encoding for an
// application state T: magic bytes, a u16 version and a CBOR body. Old
// versions are read through Upgrade, so a format change is a migration
// rather than a decode failure.
type SnapshotCodec[T any] struct {
	Magic   [4]byte
	Version uint16
	// Upgrade decodes a body written with an older version. Nil means only
	// the current version is accepted.
	Upgrade func(version uint16, body []byte) (T, error)
}

// Encode writes v at the codec's current version.
func (c SnapshotCodec[T]) Encode(v *T) ([]byte, error) {
	return EncodeEnvelope(c.Magic, c.Version, v)
}

// Decode reads data written by this codec at the current or, through
// Upgrade, an older version.
func (c SnapshotCodec[T]) Decode(data []byte) (T, error) {
	var v T
	ver, body, err := DecodeEnvelope(data, c.Magic)
	if err != nil {
		return v, err
	}
	switch {
	case ver == c.Version:
		if err := decMode.Unmarshal(body, &v); err != nil {
			return v, fmt.Errorf("raftnode: decode snapshot v%d: %w", ver, err)
		}
		return v, nil
	case ver < c.Version && c.Upgrade != nil:
		return c.Upgrade(ver, body)
	default:
		return v, fmt.Errorf("%w: unsupported version %d (current %d)", ErrBadEnvelope, ver, c.Version)
	}
}
