package kvapp

import (
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"github.com/riftgate/riftgate/raftnode"
	"github.com/riftgate/riftgate/raftnode/kv"
)

// Wire format (pinned by TestAppWireFormatIsPinned):
//
//	Command   [0, tenant uint, kv command]     (tag 0: a kv command; an
//	                                            application appends its own)
//	Response  [0] noop | [1, kv response] | [2] unknown tenant
//	Snapshot  "RGKA" u16 version, CBOR [[tenant uint, fragment snapshot bstr], ...]
//	          in increasing tenant order
//
// The kv parts are kv's own pinned encodings, embedded verbatim.

const cmdTagKv = 0

// ErrDecode wraps every decoding failure.
var ErrDecode = errors.New("kvapp: decode")

var (
	encMode = mustEnc()
	decMode = mustDec()
)

func mustEnc() cbor.EncMode {
	m, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err) // static options
	}
	return m
}

func mustDec() cbor.DecMode {
	m, err := cbor.DecOptions{IndefLength: cbor.IndefLengthForbidden}.DecMode()
	if err != nil {
		panic(err) // static options
	}
	return m
}

// MarshalCBOR implements cbor.Marshaler, so raftnode can carry Commands.
func (c Command) MarshalCBOR() ([]byte, error) {
	inner, err := kv.EncodeCommand(c.Kv)
	if err != nil {
		return nil, err
	}
	return encMode.Marshal([]any{cmdTagKv, uint8(c.Tenant), cbor.RawMessage(inner)})
}

// UnmarshalCBOR implements cbor.Unmarshaler.
func (c *Command) UnmarshalCBOR(b []byte) error {
	f, err := elems(b)
	if err != nil {
		return fmt.Errorf("%w command: %w", ErrDecode, err)
	}
	if len(f) != 3 {
		return fmt.Errorf("%w command: %d elements", ErrDecode, len(f))
	}
	tag, err := small(f[0])
	if err != nil || tag != cmdTagKv {
		return fmt.Errorf("%w command: tag % x", ErrDecode, []byte(f[0]))
	}
	t, err := small(f[1])
	if err != nil {
		return fmt.Errorf("%w command tenant: %w", ErrDecode, err)
	}
	inner, err := kv.DecodeCommand(f[2])
	if err != nil {
		return fmt.Errorf("%w command: %w", ErrDecode, err)
	}
	*c = Command{Tenant: Tenant(t), Kv: inner}
	return nil
}

// MarshalCBOR implements cbor.Marshaler.
func (r Response) MarshalCBOR() ([]byte, error) {
	if r.Kind != RespKv {
		return encMode.Marshal([]any{uint8(r.Kind)})
	}
	inner, err := kv.EncodeResponse(r.Kv)
	if err != nil {
		return nil, err
	}
	return encMode.Marshal([]any{uint8(RespKv), cbor.RawMessage(inner)})
}

// UnmarshalCBOR implements cbor.Unmarshaler.
func (r *Response) UnmarshalCBOR(b []byte) error {
	f, err := elems(b)
	if err != nil || len(f) == 0 {
		return fmt.Errorf("%w response: %v", ErrDecode, err)
	}
	k, err := small(f[0])
	switch {
	case err != nil:
		return fmt.Errorf("%w response kind: %w", ErrDecode, err)
	case (RespKind(k) == RespNoop || RespKind(k) == RespUnknownTenant) && len(f) == 1:
		*r = Response{Kind: RespKind(k)}
		return nil
	case RespKind(k) == RespKv && len(f) == 2:
		inner, err := kv.DecodeResponse(f[1])
		if err != nil {
			return fmt.Errorf("%w response: %w", ErrDecode, err)
		}
		*r = Response{Kind: RespKv, Kv: inner}
		return nil
	}
	return fmt.Errorf("%w response: kind %d with %d elements", ErrDecode, k, len(f))
}

// The snapshot uses raftnode's envelope (magic, big-endian u16 version,
// CBOR body).
var snapshotMagic = [4]byte{'R', 'G', 'K', 'A'}

const snapshotVersion = 1

// EncodeSnapshot serialises every tenant's fragment.
func EncodeSnapshot(s *State) ([]byte, error) {
	body := []any{}
	for _, t := range s.sortedTenants() {
		fb, err := s.frags[t].EncodeSnapshot()
		if err != nil {
			return nil, fmt.Errorf("kvapp: snapshot tenant %d: %w", t, err)
		}
		body = append(body, []any{uint8(t), fb})
	}
	b, err := raftnode.EncodeEnvelope(snapshotMagic, snapshotVersion, body)
	if err != nil {
		return nil, fmt.Errorf("kvapp: encode snapshot: %w", err)
	}
	return b, nil
}

// DecodeSnapshot rebuilds a State. A tenant missing from the snapshot (one
// added after it was written) starts empty; a tenant this build does not
// know is an error, never silently dropped.
func DecodeSnapshot(b []byte) (State, error) {
	s, err := decodeSnapshot(b)
	if err != nil {
		return State{}, fmt.Errorf("%w snapshot: %w", ErrDecode, err)
	}
	return s, nil
}

func decodeSnapshot(b []byte) (State, error) {
	v, body, err := raftnode.DecodeEnvelope(b, snapshotMagic)
	if err != nil {
		return State{}, err
	}
	if v != snapshotVersion {
		return State{}, fmt.Errorf("unsupported version %d", v)
	}
	entries, err := elems(body)
	if err != nil {
		return State{}, err
	}
	s := NewState()
	seen := -1
	for _, raw := range entries {
		e, err := elems(raw)
		if err != nil || len(e) != 2 {
			return State{}, errors.New("malformed tenant entry")
		}
		t, err := small(e[0])
		if err != nil {
			return State{}, err
		}
		if int(t) <= seen {
			return State{}, fmt.Errorf("tenant %d out of order", t)
		}
		seen = int(t)
		p, err := PolicyFor(Tenant(t))
		if err != nil {
			return State{}, err
		}
		var fb []byte
		if len(e[1]) == 0 || e[1][0]>>5 != 2 || decMode.Unmarshal(e[1], &fb) != nil {
			return State{}, fmt.Errorf("tenant %d: fragment is not a byte string", t)
		}
		f, err := kv.DecodeSnapshot(fb, p)
		if err != nil {
			return State{}, fmt.Errorf("tenant %d: %w", t, err)
		}
		s.frags[Tenant(t)] = f
	}
	return s, nil
}

func elems(b []byte) ([]cbor.RawMessage, error) {
	if len(b) == 0 || b[0]>>5 != 4 {
		return nil, errors.New("not an array")
	}
	var f []cbor.RawMessage
	if err := decMode.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	return f, nil
}

// small decodes an unsigned integer that must fit a byte.
func small(raw cbor.RawMessage) (uint8, error) {
	var v uint8
	if len(raw) == 0 || raw[0]>>5 != 0 {
		return 0, fmt.Errorf("want unsigned integer, got % x", []byte(raw))
	}
	if err := decMode.Unmarshal(raw, &v); err != nil {
		return 0, err
	}
	return v, nil
}
