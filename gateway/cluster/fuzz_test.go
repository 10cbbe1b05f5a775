package cluster

import (
	"testing"

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
