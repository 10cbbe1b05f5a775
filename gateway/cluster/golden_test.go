package cluster

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/raftnode"
)

// Golden bytes pin every encoding the cluster adds: changing one of these
// is a format migration (a new version), never an edit here.

func checkHex(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	if h := hex.EncodeToString(got); h != want {
		t.Errorf("%s:\n got  %s\n want %s", what, h, want)
	}
}

func encode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := raftnode.MarshalCBOR(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEntryGolden(t *testing.T) {
	whole := entry{V: entryVersion, Command: []byte{0x01, 0xa1, 0x01, 0x03}}
	checkHex(t, "whole command", encode(t, whole), "a20101024401a10103")
	p := entry{V: entryVersion, Part: &part{Upload: 0x0102030405060708, Index: 1, Count: 2, Size: 3, Sum: [32]byte{31: 9}, Data: []byte{0xff}}}
	checkHex(t, "part", encode(t, p),
		"a2010103a6011b0102030405060708020103020403055820"+
			"0000000000000000000000000000000000000000000000000000000000000009"+"0641ff")
	res := config.Result{Dropped: []int{4545}, StubID: 7}
	checkHex(t, "response", encode(t, response{Index: 42, Result: &res}), "a201182a02a202811911c10307")
	checkHex(t, "refused entry", encode(t, response{Index: 43, Err: "x"}), "a201182b036178")
	// A batch of recordings (config.OpRecordStubs) answers one result per
	// recording: the first kept as stub 8, the second refused.
	batch := config.Result{Results: []config.Result{{StubID: 8}, {Err: &config.Error{Code: "no such resource", Message: "gone"}}}}
	checkHex(t, "batch response", encode(t, response{Index: 44, Result: &batch}), "a201182c02a10482a10308a101a201706e6f2073756368207265736f757263650264676f6e65")

	// The pinned bytes decode to what they were made from.
	var back entry
	if err := raftnode.UnmarshalCBOR(encode(t, p), &back); err != nil || back.Part == nil || back.Part.Upload != p.Part.Upload || !bytes.Equal(back.Part.Data, p.Part.Data) {
		t.Fatalf("part round trip: %+v %v", back, err)
	}
}

func TestRecordingsGolden(t *testing.T) {
	checkHex(t, "request", encode(t, recordingsRequest{Op: opGather, Port: 4545}), "a20101021911c1")
	checkHex(t, "response", encode(t, recordingsResponse{Found: true, Count: 2, Requests: [][]byte{[]byte(`{}`)}}), "a301f502020381427b7d")
	// Version 2's pages.
	checkHex(t, "page request", encode(t, recordingsRequest{Op: opPage, Port: 4545, From: 300}), "a30104021911c10319012c")
	checkHex(t, "page", encode(t, recordingsResponse{Found: true, Requests: [][]byte{{1, 0}}, Next: 301, More: true}), "a401f503814201000419012d05f5")
	checkHex(t, "count", encode(t, recordingsRequest{Op: opCount, Port: 4545}), "a20103021911c1")
	// A clear is the same on both versions' routes.
	checkHex(t, "clear", encode(t, recordingsRequest{Op: opClear, Port: 4545}), "a20102021911c1")
}

// A version 1 answer, as a member of an older build sends it, becomes
// records of the log's JSON kind at each request's timestamp, so that the
// merge by time places them; the record's bytes are reqlog's (pinned
// there too).
func TestRecordingsV1AnswerGolden(t *testing.T) {
	js := `{"path":"/a","timestamp":"2026-12-05T06:00:00.123Z"}`
	answer := encode(t, recordingsResponse{Found: true, Count: 1, Requests: [][]byte{[]byte(js)}})
	checkHex(t, "v1 answer", answer, "a301f5020103815834"+hex.EncodeToString([]byte(js)))
	var back recordingsResponse
	if err := raftnode.UnmarshalCBOR(answer, &back); err != nil {
		t.Fatal(err)
	}
	s, err := v1Records(back.Requests)
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := s.Next(t.Context())
	if !ok {
		t.Fatal("no record")
	}
	checkHex(t, "v1 record", rec, "03"+"c094f0f31e46ee18"+"34"+hex.EncodeToString([]byte(js)))
	if _, more := s.Next(t.Context()); more {
		t.Fatal("one request, more records")
	}
	if _, err := v1Records([][]byte{[]byte(`{"timestamp":"yesterday"}`)}); err == nil {
		t.Fatal("a timestamp that is none was taken")
	}
}

func TestSnapshotGolden(t *testing.T) {
	cfg, _ := config.Apply(config.Empty(), &config.Command{Op: config.OpCreateImposter, Imposters: []config.ImposterDoc{{
		Port: 4545, Header: []byte(`{"protocol":"http","port":4545}`),
	}}})
	s := state{Config: cfg, Members: raftnode.Membership{Index: 3, Members: []raftnode.Member{{ID: 1, Name: "n1", URL: "http://a/raft", Role: raftnode.RoleVoter}}},
		Uploads: map[uint64]*upload{9: {Count: 2, Next: 1, Size: 4, Data: []byte{1, 2}, Last: 5}}}
	b, err := machine{}.EncodeSnapshot(&s)
	if err != nil {
		t.Fatal(err)
	}
	// "RGCG" v1 {1: config.EncodeState bytes ("RGCS" v1 ...), 2: the
	// membership, 3: the unfinished uploads}.
	want := "524743470001a3015835524743530001a201a11911c1a2011911c102581f7b2270726f746f636f6c223a2268747470222c22706f7274223a343534357d040102" +
		"a301030281a4010102626e31036d687474703a2f2f612f72616674040103f6" +
		"03a109a60102020103040458200000000000000000000000000000000000000000000000000000000000000000054201020605"
	checkHex(t, "snapshot", b, want)
	back, err := machine{}.DecodeSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := machine{}.EncodeSnapshot(&back)
	if !bytes.Equal(again, b) || back.pending != 4 {
		t.Fatalf("snapshot round trip differs (pending %d)", back.pending)
	}
}
