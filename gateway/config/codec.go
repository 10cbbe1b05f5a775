package config

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// Versions of the two encodings. A later format gets a new number, and the
// decoder keeps reading this one.
const (
	CommandVersion  byte   = 1
	SnapshotVersion uint16 = 1
)

// snapshotMagic starts every encoded State.
var snapshotMagic = [4]byte{'R', 'G', 'C', 'S'}

// ErrFormat reports bytes that are not a command or snapshot this build
// reads.
var ErrFormat = errors.New("config: unknown encoding")

var (
	// encMode is RFC 8949's core deterministic encoding (map keys sorted),
	// so equal values encode to equal bytes on every node.
	encMode cbor.EncMode
	decMode cbor.DecMode
)

func init() {
	var err error
	if encMode, err = cbor.CoreDetEncOptions().EncMode(); err != nil {
		panic(err)
	}
	if decMode, err = (cbor.DecOptions{
		MaxArrayElements: 1 << 24,
		MaxMapPairs:      1 << 24,
		MaxNestedLevels:  16,
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
	}).DecMode(); err != nil {
		panic(err)
	}
}

// EncodeCommand is cmd's wire form: CommandVersion, then CBOR.
func EncodeCommand(cmd *Command) ([]byte, error) {
	b, err := encMode.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("config: encode command: %w", err)
	}
	return append([]byte{CommandVersion}, b...), nil
}

// DecodeCommand reads a command EncodeCommand wrote.
func DecodeCommand(data []byte) (*Command, error) {
	if len(data) == 0 || data[0] != CommandVersion {
		return nil, fmt.Errorf("%w: command of %d bytes", ErrFormat, len(data))
	}
	cmd := &Command{}
	if err := decMode.Unmarshal(data[1:], cmd); err != nil {
		return nil, fmt.Errorf("config: decode command: %w", err)
	}
	return cmd, nil
}

// EncodeState is s's snapshot form: "RGCS", SnapshotVersion (big-endian
// u16), then CBOR.
func EncodeState(s *State) ([]byte, error) {
	b, err := encMode.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("config: encode state: %w", err)
	}
	out := make([]byte, 6, 6+len(b))
	copy(out, snapshotMagic[:])
	binary.BigEndian.PutUint16(out[4:], SnapshotVersion)
	return append(out, b...), nil
}

// DecodeState reads a snapshot EncodeState wrote.
func DecodeState(data []byte) (*State, error) {
	if len(data) < 6 || [4]byte(data[:4]) != snapshotMagic {
		return nil, fmt.Errorf("%w: not a configuration snapshot", ErrFormat)
	}
	if v := binary.BigEndian.Uint16(data[4:]); v != SnapshotVersion {
		return nil, fmt.Errorf("%w: snapshot version %d, this build reads %d", ErrFormat, v, SnapshotVersion)
	}
	s := &State{}
	if err := decMode.Unmarshal(data[6:], s); err != nil {
		return nil, fmt.Errorf("config: decode state: %w", err)
	}
	return s, nil
}

// imposterWire is an Imposter's encoding: its stubs as a list, in order,
// each with its whole JSON. The trees and order keys are rebuilt on decode.
type imposterWire struct {
	Port   int    `cbor:"1,keyasint"`
	Header []byte `cbor:"2,keyasint"`
	Stubs  []Stub `cbor:"3,keyasint,omitempty"`
}

// MarshalCBOR implements cbor.Marshaler.
func (imp *Imposter) MarshalCBOR() ([]byte, error) {
	return encMode.Marshal(imposterWire{Port: imp.Port, Header: imp.Header, Stubs: imp.Stubs()})
}

// UnmarshalCBOR implements cbor.Unmarshaler.
func (imp *Imposter) UnmarshalCBOR(data []byte) error {
	var w imposterWire
	if err := decMode.Unmarshal(data, &w); err != nil {
		return err
	}
	*imp = *NewImposter(w.Port, w.Header, w.Stubs)
	return nil
}
