package cluster

import (
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/riftgate/riftgate/flowshard"
	"github.com/riftgate/riftgate/gateway/flow"
	"pgregory.net/rapid"
)

// The owner RPC's bodies are a wire format: these bytes are frozen, and a
// change needs a new wireVersion.
func TestWireGolden(t *testing.T) {
	sets := []flowshard.RecordSet{{FlowID: "i1:a", Durability: flowshard.Sync, Records: []flowshard.Record{
		{Key: "k", Value: []byte("v"), Version: flowshard.Version{MIdx: 3, V: 4, Origin: 5}, TTL: 2 * time.Second},
		{Key: "d", Deleted: true, Version: flowshard.Version{MIdx: 3, V: 5, Origin: 5}, TTL: time.Second},
	}}}
	reqs := []struct {
		name string
		r    request
		want string
	}{
		{"get", request{op: opGet, mIdx: 7, budget: 2000, flow: "i1:a", key: "k"}, "01" + "07" + "d00f" + "0469313a61" + "016b"},
		{"put", request{op: opPut, mIdx: 7, budget: 1, flow: "f:x", key: "k", policy: wirePolicy{2, 300000}, value: []byte("hi")},
			"02" + "07" + "01" + "03663a78" + "016b" + "02" + "e0a712" + "026869"},
		{"cas", request{op: opCAS, mIdx: 1, budget: 1, flow: "f", key: "k", expect: 9, policy: wirePolicy{1, 0}},
			"03" + "0101" + "0166" + "016b" + "0100" + "09" + "00"},
		{"commit", request{op: opCommit, mIdx: 1, budget: 1, flow: "f", policy: wirePolicy{0, 5},
			base: []flow.KeyVersion{{Key: "a", V: 2}}, writes: []flow.Write{{Key: "a", Delete: true}, {Key: "b", Value: []byte("x")}}},
			"06" + "0101" + "0166" + "0005" + "01" + "016102" + "02" + "016101" + "01620001" + "78"},
		{"claim-recorded", request{op: opClaimRecorded, mIdx: 1, budget: 1, flow: "1|ab", token: 300, index: 12},
			"0a" + "0101" + "04317c6162" + "ac02" + "0c"},
		{"push", request{op: opPush, mIdx: 2, budget: 1, sets: sets},
			"0f" + "0201" + "01" + "0469313a61" + "02" + "02" + "016b" + "00" + "030405" + "d00f" + "0176" + "0164" + "01" + "030505" + "e807"},
		{"adopt", request{op: opAdopt, mIdx: 2, budget: 1, node: 9, key: "i1:a", limit: 100, voters: []uint64{1, 9}},
			"10" + "0201" + "09" + "0469313a61" + "64" + "02" + "0109"},
		{"offer", request{op: opOffer, mIdx: 2, budget: 1, sums: []flowshard.Summary{{ID: "f", Top: flowshard.Version{MIdx: 1, V: 2, Origin: 3}, Sum: 0x0102030405060708}}},
			"11" + "0201" + "01" + "0166" + "010203" + "0102030405060708"},
		{"swap", request{op: opSwap, mIdx: 1, budget: 1, flow: "f", key: "k", policy: wirePolicy{0, 0}, hasOld: true, old: []byte("in"), value: []byte("out")},
			"12" + "0101" + "0166" + "016b" + "0000" + "01" + "02696e" + "036f7574"},
		{"swap-absent", request{op: opSwap, mIdx: 1, budget: 1, flow: "f", key: "k", policy: wirePolicy{0, 0}, value: []byte("in")},
			"12" + "0101" + "0166" + "016b" + "0000" + "00" + "02696e"},
		{"fence-prefix", request{op: opFencePrefix, mIdx: 2, budget: 1, flow: "i1:"}, "13" + "0201" + "0369313a"},
		{"ping", request{op: opPing, mIdx: 2, budget: 1}, "14" + "0201"},
	}
	for _, tc := range reqs {
		t.Run("request-"+tc.name, func(t *testing.T) {
			if got := hex.EncodeToString(appendRequest(nil, &tc.r)); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	ans := []struct {
		name string
		op   byte
		a    answer
		want string
	}{
		{"get", opGet, answer{status: statusOK, mIdx: 7, present: true, ver: flow.Version{MIdx: 7, V: 2, Origin: 1}, value: []byte("v")},
			"00" + "07" + "01" + "070201" + "0176"},
		{"not-found", opGet, answer{status: statusNotFound, mIdx: 7}, "0107"},
		{"cas-mismatch-absent", opCAS, answer{status: statusMismatch, mIdx: 7}, "02" + "07" + "00"},
		{"fenced", opPut, answer{status: statusFenced, mIdx: 9, msg: "no"}, "05" + "09" + "026e6f"},
		{"load", opLoad, answer{status: statusOK, mIdx: 1, snap: flow.Snapshot{{Key: "a", Entry: flow.Entry{Value: []byte("1"), Version: flow.Version{MIdx: 1, V: 1, Origin: 2}}}}},
			"00" + "01" + "01" + "0161" + "010102" + "0131"},
		{"claim", opClaimAcquire, answer{status: statusOK, mIdx: 1, state: claimRecorded, n: 0, index: 40}, "0001" + "02" + "00" + "28"},
		{"offer", opOffer, answer{status: statusOK, mIdx: 1, ids: []string{"f"}}, "0001" + "01" + "0166" + "00"},
		{"fence-prefix", opFencePrefix, answer{status: statusOK, mIdx: 2, n: 3}, "0002" + "03"},
		{"ping", opPing, answer{status: statusOK, mIdx: 2}, "0002"},
		{"expired", opPut, answer{status: statusExpired, mIdx: 2, msg: "late"}, "0b" + "02" + "046c617465"},
		{"swap-mismatch", opSwap, answer{status: statusMismatch, mIdx: 7, present: true, ver: flow.Version{MIdx: 7, V: 3, Origin: 1}, value: []byte("in")},
			"02" + "07" + "01" + "070301" + "02696e" + "00"},
		{"swap-carrying", opSwap, answer{status: statusOK, mIdx: 3, present: true, ver: flow.Version{MIdx: 3, V: 4, Origin: 5}, value: []byte("v"), sets: sets[:1]},
			"00" + "03" + "01" + "030405" + "0176" +
				"01" + "0469313a61" + "02" + "02" + "016b" + "00" + "030405" + "d00f" + "0176" + "0164" + "01" + "030505" + "e807"},
	}
	for _, tc := range ans {
		t.Run("answer-"+tc.name, func(t *testing.T) {
			if got := hex.EncodeToString(appendAnswer(nil, tc.op, &tc.a)); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func genRequest(t *rapid.T) request {
	str := rapid.StringN(0, 8, -1)
	r := request{
		op:   rapid.Byte().Draw(t, "op")%opLast + 1,
		mIdx: rapid.Uint64().Draw(t, "midx"), budget: rapid.Uint64().Draw(t, "budget"),
	}
	val := func(name string) []byte { return rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, name) }
	pol := func() wirePolicy {
		return wirePolicy{durability: rapid.ByteMax(2).Draw(t, "durability"), ttlMs: rapid.Uint64().Draw(t, "ttl")}
	}
	switch r.op {
	case opGet:
		r.flow, r.key = str.Draw(t, "flow"), str.Draw(t, "key")
	case opPut:
		r.flow, r.key, r.policy, r.value = str.Draw(t, "flow"), str.Draw(t, "key"), pol(), val("value")
	case opCAS:
		r.flow, r.key, r.policy, r.expect, r.value = str.Draw(t, "flow"), str.Draw(t, "key"), pol(), rapid.Uint64().Draw(t, "expect"), val("value")
	case opDelete:
		r.flow, r.key, r.policy = str.Draw(t, "flow"), str.Draw(t, "key"), pol()
	case opSwap:
		r.flow, r.key, r.policy, r.hasOld, r.value = str.Draw(t, "flow"), str.Draw(t, "key"), pol(), rapid.Bool().Draw(t, "hasOld"), val("value")
		if r.hasOld {
			r.old = val("old")
		}
	case opLoad, opClaimForget, opDeletePrefix, opFencePrefix, opClaimAcquire:
		r.flow = str.Draw(t, "flow")
	case opCommit:
		r.flow, r.policy = str.Draw(t, "flow"), pol()
		r.base = rapid.SliceOf(rapid.Custom(func(t *rapid.T) flow.KeyVersion {
			return flow.KeyVersion{Key: str.Draw(t, "k"), V: rapid.Uint64().Draw(t, "v")}
		})).Draw(t, "base")
		r.writes = rapid.SliceOf(rapid.Custom(func(t *rapid.T) flow.Write {
			w := flow.Write{Key: str.Draw(t, "k"), Delete: rapid.Bool().Draw(t, "del")}
			if !w.Delete {
				w.Value = val("v")
			}
			return w
		})).Draw(t, "writes")
	case opClearFlow, opCycle:
		r.flow, r.policy = str.Draw(t, "flow"), pol()
	case opClaimRecorded:
		r.flow, r.token, r.index = str.Draw(t, "flow"), rapid.Uint64().Draw(t, "token"), rapid.Uint64().Draw(t, "index")
	case opClaimRelease:
		r.flow, r.token = str.Draw(t, "flow"), rapid.Uint64().Draw(t, "token")
	case opList:
		r.flow, r.key, r.limit = str.Draw(t, "flow"), str.Draw(t, "after"), rapid.Uint64().Draw(t, "limit")
	case opPush:
		r.sets = genSets(t)
	case opOffer:
		r.sums = rapid.SliceOf(rapid.Custom(func(t *rapid.T) flowshard.Summary {
			return flowshard.Summary{ID: str.Draw(t, "id"), Top: flowshard.Version{MIdx: rapid.Uint64().Draw(t, "m"), V: rapid.Uint64().Draw(t, "v")}, Sum: rapid.Uint64().Draw(t, "sum")}
		})).Draw(t, "sums")
	case opAdopt:
		r.node, r.key, r.limit = rapid.Uint64().Draw(t, "node"), str.Draw(t, "cursor"), rapid.Uint64().Draw(t, "limit")
		r.voters = rapid.SliceOf(rapid.Uint64()).Draw(t, "voters")
	}
	return r
}

func genSets(t *rapid.T) []flowshard.RecordSet {
	return rapid.SliceOf(rapid.Custom(func(t *rapid.T) flowshard.RecordSet {
		return flowshard.RecordSet{
			FlowID: rapid.String().Draw(t, "id"), Durability: flowshard.Durability(rapid.ByteMax(2).Draw(t, "d")),
			Records: rapid.SliceOf(rapid.Custom(func(t *rapid.T) flowshard.Record {
				r := flowshard.Record{
					Key: rapid.String().Draw(t, "k"), Deleted: rapid.Bool().Draw(t, "del"),
					Version: flowshard.Version{MIdx: rapid.Uint64().Draw(t, "m"), V: rapid.Uint64().Draw(t, "v"), Origin: rapid.Uint64().Draw(t, "o")},
					TTL:     time.Duration(rapid.Int64Range(0, 1<<40).Draw(t, "ttl")) * time.Millisecond,
				}
				if !r.Deleted {
					r.Value = rapid.SliceOf(rapid.Byte()).Draw(t, "v")
				}
				return r
			})).Draw(t, "records"),
		}
	})).Draw(t, "sets")
}

// normalize makes empty and nil slices compare equal.
func normalize(v any) any {
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		f := rv.Field(i)
		if f.Kind() == reflect.Slice && f.Len() == 0 {
			f = reflect.NewAt(f.Type(), f.Addr().UnsafePointer()).Elem()
			f.Set(reflect.Zero(f.Type()))
		}
	}
	return v
}

func TestWireRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// Decoded into a request that decoded another before, as a pooled
		// one does: nothing of the first may show in the second.
		var got request
		first := genRequest(t)
		if err := decodeRequest(appendRequest(nil, &first), &got); err != nil {
			t.Fatalf("decode %+v: %v", first, err)
		}
		r := genRequest(t)
		for range 2 { // and then into one that decoded the same shape
			if err := decodeRequest(appendRequest(nil, &r), &got); err != nil {
				t.Fatalf("decode %+v: %v", r, err)
			}
		}
		got.room, got.recs = nil, nil // the rooms, not on the wire
		for i := range got.sets {
			if len(got.sets[i].Records) == 0 {
				got.sets[i].Records = nil
			}
			for j := range got.sets[i].Records {
				if rec := &got.sets[i].Records[j]; !rec.Deleted && len(rec.Value) == 0 {
					rec.Value = nil
				}
			}
		}
		for i := range r.sets {
			if len(r.sets[i].Records) == 0 {
				r.sets[i].Records = nil
			}
			for j := range r.sets[i].Records {
				if rec := &r.sets[i].Records[j]; !rec.Deleted && len(rec.Value) == 0 {
					rec.Value = nil
				}
			}
		}
		for i := range got.writes {
			if len(got.writes[i].Value) == 0 {
				got.writes[i].Value = nil
			}
		}
		for i := range r.writes {
			if len(r.writes[i].Value) == 0 {
				r.writes[i].Value = nil
			}
		}
		if !reflect.DeepEqual(normalize(&got), normalize(&r)) {
			t.Fatalf("round trip\n got %+v\nwant %+v", got, r)
		}
		// Every op answers with its own fields.
		a := answer{status: rapid.ByteMax(statusLast).Draw(t, "status"), mIdx: rapid.Uint64().Draw(t, "m")}
		switch a.status {
		case statusOK, statusMismatch:
			a.present = rapid.Bool().Draw(t, "present")
			if a.present || r.op != opGet && r.op != opCAS {
				a.ver = flow.Version{MIdx: 1, V: rapid.Uint64().Draw(t, "v"), Origin: 2}
				a.value = []byte(rapid.String().Draw(t, "value"))
			}
		case statusNotFound:
		default:
			a.msg = rapid.String().Draw(t, "msg")
		}
		var ga answer
		if err := decodeAnswer(appendAnswer(nil, r.op, &a), r.op, &ga); err != nil {
			t.Fatalf("answer %+v to op %d: %v", a, r.op, err)
		}
		if ga.status != a.status || ga.mIdx != a.mIdx || ga.msg != a.msg {
			t.Fatalf("answer round trip %+v -> %+v", a, ga)
		}
	})
}

// FuzzDecodeRequest: the decoder never panics, accepts only what re-encodes
// to the same bytes, and never allocates far past its input.
func FuzzDecodeRequest(f *testing.F) {
	f.Add(appendRequest(nil, &request{op: opGet, mIdx: 7, budget: 2000, flow: "i1:a", key: "k"}))
	f.Add(appendRequest(nil, &request{op: opCommit, flow: "f", base: []flow.KeyVersion{{Key: "a", V: 2}}, writes: []flow.Write{{Key: "a", Delete: true}}}))
	f.Add(appendRequest(nil, &request{op: opPush, sets: []flowshard.RecordSet{{FlowID: "x", Records: []flowshard.Record{{Key: "k", Version: flowshard.Version{V: 1}}}}}}))
	f.Add(appendRequest(nil, &request{op: opAdopt, voters: []uint64{1, 2, 3}}))
	f.Add(appendRequest(nil, &request{op: opOffer, sums: []flowshard.Summary{{ID: "f", Sum: 1}}}))
	f.Add(appendRequest(nil, &request{op: opSwap, flow: "f", key: "k", hasOld: true, old: []byte("in"), value: []byte("out")}))
	f.Add([]byte{0x0f, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{0x0f, 0x30, 0x80, 0x00, 0x00}) // an overlong varint: refused, or it would not re-encode
	f.Fuzz(func(t *testing.T, b []byte) {
		var r request
		if err := decodeRequest(b, &r); err != nil {
			if !errors.Is(err, errWire) {
				t.Fatalf("error %v does not wrap errWire", err)
			}
			return
		}
		if again := appendRequest(nil, &r); string(again) != string(b) {
			t.Fatalf("%x decoded to %+v, which encodes as %x", b, r, again)
		}
	})
}

// FuzzDecodeAnswer: the same for answers, to every op.
func FuzzDecodeAnswer(f *testing.F) {
	f.Add(byte(opGet), appendAnswer(nil, opGet, &answer{present: true, value: []byte("v")}))
	f.Add(byte(opOffer), appendAnswer(nil, opOffer, &answer{ids: []string{"f"}}))
	f.Add(byte(opAdopt), appendAnswer(nil, opAdopt, &answer{sets: []flowshard.RecordSet{{FlowID: "f"}}, more: true, next: "f"}))
	f.Add(byte(opPut), []byte{statusFenced, 1, 2, 'n', 'o'})
	f.Add(byte(opSwap), appendAnswer(nil, opSwap, &answer{status: statusMismatch, present: true, value: []byte("in")}))
	f.Fuzz(func(t *testing.T, op byte, b []byte) {
		op = op%opLast + 1
		var a answer
		if err := decodeAnswer(b, op, &a); err != nil {
			if !errors.Is(err, errWire) {
				t.Fatalf("error %v does not wrap errWire", err)
			}
			return
		}
		if again := appendAnswer(nil, op, &a); string(again) != string(b) {
			t.Fatalf("%x decoded to %+v, which encodes as %x", b, a, again)
		}
	})
}

// TestDecodeRequestReusesRooms: a pooled request decodes into the rooms
// its last decoding left, and shows nothing of that decoding.
func TestDecodeRequestReusesRooms(t *testing.T) {
	rec := func(key, value string, v uint64) flowshard.Record {
		return flowshard.Record{Key: key, Value: []byte(value), Version: flowshard.Version{MIdx: 1, V: v, Origin: 2}}
	}
	push := func(sets ...flowshard.RecordSet) request { return request{op: opPush, sets: sets} }
	seq := []request{
		push(flowshard.RecordSet{FlowID: "i1:a", Records: []flowshard.Record{rec("n", "41", 3), rec("m", "x", 4)}},
			flowshard.RecordSet{FlowID: "i1:b", Records: []flowshard.Record{rec("n", "7", 1)}}),
		push(flowshard.RecordSet{FlowID: "i1:c", Records: []flowshard.Record{rec("k", "long value", 9)}}),
		{op: opSwap, flow: "i1:a", key: "s", hasOld: true, old: []byte("in"), value: []byte("out")},
		push(flowshard.RecordSet{FlowID: "i1:a", Records: []flowshard.Record{rec("n", "42", 5), {Key: "m", Deleted: true, Version: flowshard.Version{V: 6}}}}),
		{op: opPut, flow: "i1:d", key: "k", value: []byte("v")},
	}
	var r request
	for i, want := range seq {
		if err := decodeRequest(appendRequest(nil, &want), &r); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		got := r
		got.room, got.recs = nil, nil
		if !reflect.DeepEqual(normalize(&got), normalize(&want)) {
			t.Fatalf("%d: decoded after another\n got %+v\nwant %+v", i, got, want)
		}
	}
}

// A riftgate-flows/3 frame, whole: its length, version 2, id, clock, body
// and tag are pinned; the tag was computed apart from this code, with
// Node's aes-256-gcm over no plaintext (key 0..31, nonce 01000000 ‖ 1).
func TestClockFrameGolden(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	s := &session{ver: frameClock, out: newFrameTag(sessionProtocol, key, dirCall)}
	if err := s.queue(7, 0x0102030405060708, []byte("body")); err != nil {
		t.Fatal(err)
	}
	want := "00000021" + "02" + "00000007" + "0102030405060708" + "626f6479" + "337682e7094e63f53dd07f7955a4654e"
	if got := hex.EncodeToString(s.wbuf); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
