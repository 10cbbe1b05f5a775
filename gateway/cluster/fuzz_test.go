package cluster

import (
	"bytes"
	"testing"

	"github.com/riftgate/riftgate/gateway/reqlog"
	"github.com/riftgate/riftgate/raftnode"
)

// Entries come from the log, snapshots from peers and disk, recordings
// requests from peers: none of their decoders may panic, and an entry that
// decodes applies without panicking, whatever it holds.

func FuzzApplyEntry(f *testing.F) {
	f.Add([]byte{0xa2, 0x01, 0x01, 0x02, 0x44, 0x01, 0xa1, 0x01, 0x03})
	f.Add([]byte{0xa2, 0x01, 0x01, 0x03, 0xa6, 0x01, 0x01, 0x02, 0x00, 0x03, 0x02, 0x04, 0x03, 0x05, 0x40, 0x06, 0x41, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var e entry
		if raftnode.UnmarshalCBOR(data, &e) != nil {
			return
		}
		s := machine{}.InitialState()
		machine{}.Apply(&s, e, 1)
		machine{}.Apply(&s, e, 2)
	})
}

func FuzzDecodeSnapshot(f *testing.F) {
	s := machine{}.InitialState()
	good, _ := machine{}.EncodeSnapshot(&s)
	f.Add(good)
	f.Add([]byte("RGCG\x00\x01\xa0"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := machine{}.DecodeSnapshot(data)
		if err != nil {
			return
		}
		if _, err := (machine{}).EncodeSnapshot(&s); err != nil {
			t.Fatalf("a decoded snapshot does not encode: %v", err)
		}
	})
}

func FuzzRecordingsMessages(f *testing.F) {
	f.Add([]byte{0xa2, 0x01, 0x01, 0x02, 0x19, 0x11, 0xc1})
	f.Add([]byte{0xa3, 0x01, 0xf5, 0x02, 0x02, 0x03, 0x81, 0x42, 0x7b, 0x7d})
	f.Fuzz(func(t *testing.T, data []byte) {
		var req recordingsRequest
		_ = raftnode.UnmarshalCBOR(data, &req)
		var resp recordingsResponse
		_ = raftnode.UnmarshalCBOR(data, &resp)
	})
}

// A version 1 answer comes from a member of an older build: whatever its
// requests hold, making them records does not panic, and each record
// decodes to exactly the JSON it was made from.
func FuzzV1Records(f *testing.F) {
	f.Add([]byte(`{"path":"/a","timestamp":"2026-12-05T06:00:00.123Z"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"timestamp":7}`))
	f.Fuzz(func(t *testing.T, js []byte) {
		s, err := v1Records([][]byte{js})
		if err != nil {
			return
		}
		b, ok := s.Next(t.Context())
		if !ok {
			t.Fatal("no record")
		}
		var rec reqlog.Record
		if err := rec.Decode(b); err != nil {
			t.Fatalf("a v1 record does not decode: %v", err)
		}
		var out bytes.Buffer
		rec.AppendJSON(&out)
		if !bytes.Equal(out.Bytes(), js) {
			t.Fatalf("renders %q, was %q", out.Bytes(), js)
		}
	})
}
