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
	recs := make([]any, len(keys))
	for i, k := range keys {
		e := f.records[k]
		recs[i] = []any{[]byte(e.key), e.value, e.version, e.expiresAt}
	}
	body, err := encMode.Marshal([]any{f.floor, recs})
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
	top, err := array(b[len(snapshotMagic)+2:])
	if err != nil {
		return err
	}
	if len(top) != 2 {
		return fmt.Errorf("body has %d elements, want 2", len(top))
	}
	var d fields
	f.floor = d.uint(top[0])
	recs, err := array(top[1])
	if err != nil {
		return fmt.Errorf("records: %w", err)
	}
	prev := ""
	for i, raw := range recs {
		r, err := array(raw)
		if err != nil || len(r) != 4 {
			return fmt.Errorf("record %d malformed", i)
		}
		e := &entry{key: d.key(r[0]), value: d.bytes(r[1]), version: d.uint(r[2]), expiresAt: d.uint(r[3]), slot: -1}
		switch {
		case d.err != nil:
			return fmt.Errorf("record %d: %w", i, d.err)
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
	return d.err
}
