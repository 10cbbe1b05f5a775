package kv

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Snapshot encoding: the magic "RGKV", a big-endian u16 format version, then
// a CBOR body [floor uint, [[key bstr, value bstr, version uint,
// expires_at_ms uint], ...]] with records in strictly increasing key order.
// It carries the records and the floor only: the expiry index and the byte
// total are rebuilt on decode, so a corrupt or mis-migrated snapshot cannot
// underflow the byte total or arm a stale index entry.
const (
	snapshotMagic   = "RGKV"
	SnapshotVersion = 1 // the format EncodeSnapshot writes
)

// EncodeSnapshot returns the fragment's state. Replicas that reduced the
// same log return identical bytes.
func (f *Fragment) EncodeSnapshot() ([]byte, error) {
	keys := make([]string, 0, len(f.records))
	for k := range f.records {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	sb := snapBody{Floor: f.floor, Records: make([]snapRecord, len(keys))}
	for i, k := range keys {
		e := f.records[k]
		sb.Records[i] = snapRecord{Key: []byte(e.key), Value: e.value, Version: e.version, ExpiresAt: e.expiresAt}
	}
	body, err := encMode.Marshal(sb)
	if err != nil {
		return nil, fmt.Errorf("kv: encode snapshot: %w", err)
	}
	out := make([]byte, 0, len(snapshotMagic)+2+len(body))
	out = append(out, snapshotMagic...)
	out = binary.BigEndian.AppendUint16(out, SnapshotVersion)
	return append(out, body...), nil
}

// DecodeSnapshot rebuilds a fragment bound by p from EncodeSnapshot's
// bytes. Records over p's size limits or quotas are kept: a policy tightened
// after they were written must not make a snapshot uninstallable.
func DecodeSnapshot(b []byte, p Policy) (*Fragment, error) {
	f, err := NewFragment(p)
	if err != nil {
		return nil, err
	}
	if err := f.decodeSnapshot(b); err != nil {
		return nil, fmt.Errorf("%w snapshot: %w", ErrDecode, err)
	}
	return f, nil
}

func (f *Fragment) decodeSnapshot(b []byte) error {
	if len(b) < len(snapshotMagic)+2 || !bytes.HasPrefix(b, []byte(snapshotMagic)) {
		return errors.New("bad magic")
	}
	if v := binary.BigEndian.Uint16(b[len(snapshotMagic):]); v != SnapshotVersion {
		return fmt.Errorf("unsupported version %d", v)
	}
	var sb snapBody
	if err := decMode.Unmarshal(b[len(snapshotMagic)+2:], &sb); err != nil {
		return err
	}
	f.floor = sb.Floor
	prev := ""
	for i, r := range sb.Records {
		e := &entry{key: string(r.Key), value: r.Value, version: r.Version, expiresAt: r.ExpiresAt, slot: -1}
		if len(e.value) == 0 {
			e.value = nil
		}
		switch {
		case e.key == "":
			return fmt.Errorf("record %d: empty key", i)
		case i > 0 && strings.Compare(prev, e.key) >= 0:
			return fmt.Errorf("record %d: keys not strictly increasing", i)
		case e.version == 0:
			return fmt.Errorf("record %d: version 0", i)
		}
		prev = e.key
		f.records[e.key] = e
		f.bytes += e.size()
		if e.expiresAt != 0 {
			f.expiry = append(f.expiry, e)
			e.slot = len(f.expiry) - 1
		}
	}
	heap.Init(&f.expiry)
	return nil
}

// snapBody and snapRecord are the snapshot body's CBOR arrays. Typed
// structs decode strictly (exact arity, major types) and several times
// faster than generic values.
type snapBody struct {
	_       struct{} `cbor:",toarray"`
	Floor   uint64
	Records []snapRecord
}

type snapRecord struct {
	_         struct{} `cbor:",toarray"`
	Key       []byte
	Value     []byte
	Version   uint64
	ExpiresAt uint64
}
