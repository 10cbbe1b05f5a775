package raftnode

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/http"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzDecodeFrame: peers' message batches never panic the decoder, and
// whatever decodes re-encodes to a frame that decodes to the same messages.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(mustHex("010a08081002180120034004170803100218012003280330053a09080010031806220178"))
	f.Add([]byte{frameVersion})
	f.Add([]byte{frameVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{2, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := decodeFrame(b)
		if err != nil {
			return
		}
		again, err := encodeFrame(msgs)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := decodeFrame(again)
		if err != nil || len(back) != len(msgs) {
			t.Fatalf("round trip: %d -> %d, %v", len(msgs), len(back), err)
		}
		for i := range msgs {
			if !proto.Equal(msgs[i], back[i]) {
				t.Fatalf("message %d changed in a round trip", i)
			}
		}
	})
}

// FuzzSnapshotCodec: the offered codec rejects or decodes, never panics,
// and what it decodes re-encodes to the same bytes when the input was
// canonical.
func FuzzSnapshotCodec(f *testing.F) {
	c := SnapshotCodec[goldenBody]{Magic: [4]byte{'T', 'E', 'S', 'T'}, Version: 1}
	f.Add(mustHex("544553540001a20107026178"))
	f.Add(mustHex("544553540002a20107026178"))
	f.Add([]byte("TEST"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := c.Decode(b)
		if err != nil {
			return
		}
		enc, err := c.Encode(&v)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		v2, err := c.Decode(enc)
		if err != nil || v2 != v {
			t.Fatalf("round trip %+v -> %+v (%v)", v, v2, err)
		}
	})
}

// FuzzAdapterSnapshot: a snapshot from a peer or the disk that does not
// decode is refused without touching anything.
func FuzzAdapterSnapshot(f *testing.F) {
	f.Add(mustHex("5247534e0001a201a301090282a40102026162036d687474703a2f2f622f726166740401a40103026163036d687474703a2f2f632f7261667404020381010242dead"))
	f.Add([]byte("RGSN\x00\x01"))
	f.Add([]byte("RGSN\x00\x02\xa0"))
	m := &StateMachine[counterState, counterCmd, counterResp]{app: counterApp{}}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = m.decodeSnapshot(&pb.Snapshot{Data: b})
	})
}

// FuzzDecodeProposal: command entries from the log decode or are refused;
// a decoded frame re-encodes to the same bytes.
func FuzzDecodeProposal(f *testing.F) {
	f.Add(mustHex("0101020304050607081112131415161718a2010102616b"))
	f.Add([]byte{proposalVersion})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		origin, seq, cmd, err := decodeProposal(b)
		if err != nil {
			return
		}
		if !bytes.Equal(encodeProposal(origin, seq, cmd), b) {
			t.Fatal("proposal frame does not round-trip")
		}
		var c counterCmd
		_ = UnmarshalCBOR(cmd, &c)
	})
}

// FuzzDecodeConfChange: conf change entries (and their contexts) decode or
// are refused, never panic.
func FuzzDecodeConfChange(f *testing.F) {
	f.Add(mustHex("1204080310421a15a201626e32026e687474703a2f2f6e322f72616674"), true)
	f.Add([]byte{0x0a}, false)
	f.Fuzz(func(t *testing.T, b []byte, v2 bool) {
		typ := pb.EntryConfChange
		if v2 {
			typ = pb.EntryConfChangeV2
		}
		d, err := decodeConfChange(&pb.Entry{Type: typ.Enum(), Index: new(uint64(1)), Data: b})
		if err != nil {
			return
		}
		var m Membership
		for _, ch := range d.changes {
			m.apply(ch.GetType(), ch.GetNodeId(), d.ctx, 1)
		}
	})
}

// FuzzPeerBodies: the CBOR bodies of forwarded proposals, their answers and
// admin calls decode or are refused, never panic; decoded requests
// re-encode and decode to the same value.
func FuzzPeerBodies(f *testing.F) {
	f.Add(mustHex("a2010102f5"))
	f.Add(mustHex("a4010702020361650402"))
	f.Add(mustHex("a40101020503616e046175"))
	f.Add([]byte{0xa1, 0x01, 0x5a, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr forwardRequest
		if UnmarshalCBOR(b, &fr) == nil {
			enc, err := MarshalCBOR(fr)
			if err != nil {
				t.Fatal(err)
			}
			var again forwardRequest
			if err := UnmarshalCBOR(enc, &again); err != nil || again.Wait != fr.Wait || !bytes.Equal(again.Cmd, fr.Cmd) {
				t.Fatalf("forward request round trip: %v", err)
			}
		}
		var resp forwardResponse
		_ = UnmarshalCBOR(b, &resp)
		var ar adminRequest
		if UnmarshalCBOR(b, &ar) == nil {
			enc, err := MarshalCBOR(ar)
			if err != nil {
				t.Fatal(err)
			}
			var again adminRequest
			if err := UnmarshalCBOR(enc, &again); err != nil || again != ar {
				t.Fatalf("admin request round trip: %+v %+v %v", ar, again, err)
			}
		}
		var aresp adminResponse
		_ = UnmarshalCBOR(b, &aresp)
		var cc confContext
		_ = UnmarshalCBOR(b, &cc)
	})
}

// FuzzReadStamp: any X-Rift-Time and X-Rift-Nonce either fail with
// errStamp or give a stamp that writes back the same headers.
func FuzzReadStamp(f *testing.F) {
	f.Add("1767225600000", "000102030405060708090a0b0c0d0e0f")
	f.Add("-1", "zz")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, ms, nonce string) {
		h := http.Header{}
		h.Set(hdrTime, ms)
		h.Set(hdrNonce, nonce)
		st, err := readStamp(h)
		if err != nil {
			if !errors.Is(err, errStamp) {
				t.Fatalf("error %v", err)
			}
			return
		}
		back := http.Header{}
		st.set(back)
		again, err := readStamp(back)
		if err != nil || again != st {
			t.Fatalf("%+v wrote %v, read back %+v, %v", st, back, again, err)
		}
	})
}
