package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/riftgate/riftgate/flowshard"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/intern"
)

// The owner RPC's bodies: one request or answer per frame (session.go
// frames them). Both are a leading op or status byte and fields in a fixed
// order for that byte: uvarints for numbers, uvarint length ‖ bytes for
// strings and values, one byte for flags. No field names, no per-field
// tags: the frame's version and the session's Upgrade token say what
// follows, and a change to any of it is a new version that the old
// decoder refuses. wireVersion is the frames' version before
// riftgate-flows/3, whose frames (frameClock) carry a clock besides and
// the same bodies. wire_test.go pins the bytes.
const wireVersion byte = 1

// Ops. Those up to opClaimForget, and opSwap, are owner operations on one
// key and go through the owner's checks; the rest are node to node. opSwap
// and opFencePrefix came after the others: a node of an older build
// answers them statusBadRequest; the caller then does a Get and a CAS
// instead of a swap, and a prefix delete's second round, opDeletePrefix,
// still deletes there.
const (
	opGet byte = 1 + iota
	opPut
	opCAS
	opDelete
	opLoad
	opCommit
	opClearFlow
	opCycle
	opClaimAcquire
	opClaimRecorded
	opClaimRelease
	opClaimForget
	opList
	opDeletePrefix
	opPush
	opAdopt
	opOffer
	opSwap        // a CAS on the value: write if the key holds old (or is absent)
	opFencePrefix // opDeletePrefix's first round: fence the prefix, then delete
	opPing        // a heartbeat, answered at once (an older build refuses it: an answer too)
	opLast        = opPing
)

// ownerOp reports whether op is answered only by the owner of its key.
func ownerOp(op byte) bool { return op >= opGet && op <= opClaimForget || op == opSwap }

// claimOp reports whether op is a proxyOnce claim's.
func claimOp(op byte) bool { return op >= opClaimAcquire && op <= opClaimForget }

// Answer statuses. Everything from statusFenced on reaches the engine as
// flow.ErrUnavailable.
const (
	statusOK byte = iota
	statusNotFound
	statusMismatch
	statusTooLarge
	statusBadKey
	statusFenced      // the caller's membership index is not the owner's
	statusNotOwner    // the answerer does not own the key at that index
	statusIsolated    // the owner cannot see a leader acknowledged by a quorum
	statusAdopting    // the owner has not adopted its flows at this index yet
	statusUnavailable // anything else: shed, a full disk, a deadline
	statusBadRequest
	statusExpired // read after its deadline (frames with a clock only)
	statusLast    = statusExpired
)

// Claim states in an opClaimAcquire answer.
const (
	claimWon      byte = 1 // the caller holds the token and calls the upstream
	claimRecorded byte = 2 // recorded at index: replay once it is applied
	claimPending  byte = 3 // another caller holds it still: ask again
)

// request is every op's fields; each op encodes the ones it uses.
type request struct {
	op     byte
	mIdx   uint64 // the caller's membership index
	budget uint64 // ms the caller still waits: the answerer's deadline
	flow   string // flow id, claim id or prefix
	key    string // key; the cursor of a list, an adoption or a summary
	policy wirePolicy
	expect uint64
	old    []byte // opSwap: the value expected, when hasOld
	hasOld bool   // opSwap: false expects the key absent
	value  []byte
	limit  uint64 // page size; bytes for opAdopt
	token  uint64
	index  uint64
	node   uint64              // opAdopt: for whom
	voters []uint64            // opAdopt: the caller's voters, at mIdx
	sums   []flowshard.Summary // opOffer: the owner's summaries
	base   []flow.KeyVersion
	writes []flow.Write
	sets   []flowshard.RecordSet

	// Where an answering node got it from, and its frame's deadline on
	// this node's clock (unix ns; 0: none); not in the body.
	s        *session
	id       uint32
	deadline int64
	// Whether the calling node sent it to another owner; not on the wire.
	remote bool
	// ownerAt is the view under which the calling node, serving its own
	// operation, found itself the owner; not on the wire.
	ownerAt *view
	// The rooms decodeRequest keeps between uses of a pooled request:
	// values, and the records of sets.
	room []byte
	recs []flowshard.Record
}

// wirePolicy is a flow.Policy on the wire: durability and TTL in ms.
type wirePolicy struct {
	durability byte
	ttlMs      uint64
}

func toWire(p flow.Policy) wirePolicy {
	return wirePolicy{durability: byte(p.Durability), ttlMs: uint64(max(p.TTL.Milliseconds(), 0))}
}

func (p wirePolicy) policy() flow.Policy {
	return flow.Policy{Durability: flow.Durability(p.durability), TTL: time.Duration(p.ttlMs) * time.Millisecond}
}

// answer is every op's result.
type answer struct {
	status  byte
	mIdx    uint64 // the answerer's membership index
	msg     string // why, for an error status
	present bool   // an entry follows (a CAS mismatch on an absent key has none)
	ver     flow.Version
	value   []byte
	snap    flow.Snapshot
	n       uint64 // cycle position, claim token, count
	state   byte   // claim state
	index   uint64 // claim: the configuration index of the recording
	ids     []string
	more    bool
	next    string // cursor of the next page
	sets    []flowshard.RecordSet
	// room is where the owner's reads copy a value (flowshard.Get's dst),
	// and where decodeAnswer copies an answer's values; recs is where it
	// decodes the records of sets. A pooled answer is done with before it
	// is reused, so it keeps its rooms (putAnswer bounds them).
	room []byte
	recs []flowshard.Record
}

func (a *answer) reset() {
	*a = answer{snap: a.snap[:0], ids: a.ids[:0], sets: a.sets[:0], room: a.room[:0], recs: a.recs[:0]}
}

// putAnswer returns a to ansPool, unless a large answer grew its rooms.
func putAnswer(a *answer) {
	if cap(a.room) <= maxKeptRoom && cap(a.recs) <= maxKeptRoom/64 {
		ansPool.Put(a)
	}
}

// read reads key of flowID into a's room.
func (a *answer) read(ctx context.Context, shard *flowshard.Store, flowID, key string) (flowshard.Entry, error) {
	e, err := shard.Get(ctx, flowID, key, a.room)
	if err == nil {
		a.room = e.Value
	}
	return e, err
}

// valueCopy is a's value appended to dst[:0], never nil: the answer's room
// is reused once it goes back to the pool.
func (a *answer) valueCopy(dst []byte) []byte {
	if v := append(dst[:0], a.value...); v != nil {
		return v
	}
	return []byte{} // present, if empty
}

// maxKeptRoom bounds the rooms a pooled answer keeps (putAnswer).
const maxKeptRoom = 4 << 10

// maxTTLms bounds a record's TTL on the wire (about 35 years), so that it
// converts to a time.Duration.
const maxTTLms = 1 << 40

// errWire is a body that does not decode.
var errWire = errors.New("cluster: malformed owner RPC body")

type enc struct{ b []byte }

func (e *enc) u(v uint64)   { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) byte(v byte)  { e.b = append(e.b, v) }
func (e *enc) str(s string) { e.u(uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) bytes(v []byte) {
	e.u(uint64(len(v)))
	e.b = append(e.b, v...)
}
func (e *enc) flag(v bool) {
	if v {
		e.byte(1)
	} else {
		e.byte(0)
	}
}
func (e *enc) version(v flow.Version) { e.u(v.MIdx); e.u(v.V); e.u(v.Origin) }
func (e *enc) policy(p wirePolicy)    { e.byte(p.durability); e.u(p.ttlMs) }

type dec struct {
	b   []byte
	err error
	// When set, str interns names (a replica's flow ids and keys recur on
	// every push) and bytes copies into room instead of allocating.
	names *intern.Cache
	room  *[]byte
}

func (d *dec) fail() {
	if d.err == nil {
		d.err = errWire
	}
	d.b = nil
}

func (d *dec) u() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 || n > 1 && d.b[n-1] == 0 { // truncated, or not the shortest form
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) flag() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail()
	return false
}

// raw returns the next length-prefixed field, aliasing the body.
func (d *dec) raw() []byte {
	n := d.u()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) str() string {
	if d.names != nil {
		return d.names.Bytes("", d.raw())
	}
	return string(d.raw())
}

func (d *dec) bytes() []byte {
	v := d.raw()
	if d.room == nil {
		return append([]byte{}, v...)
	}
	// Capped, so that appending to one value cannot overwrite the next.
	at := len(*d.room)
	*d.room = append(*d.room, v...)
	return (*d.room)[at:len(*d.room):len(*d.room)]
}
func (d *dec) version() flow.Version {
	return flow.Version{MIdx: d.u(), V: d.u(), Origin: d.u()}
}
func (d *dec) policy() wirePolicy {
	p := wirePolicy{durability: d.byte(), ttlMs: d.u()}
	if p.durability > byte(flow.Sync) {
		d.fail()
	}
	return p
}

// count reads a list length, which can never exceed the bytes left (every
// element takes at least one), so a hostile length cannot make a decoder
// allocate more than the body it sent.
func (d *dec) count() int {
	n := d.u()
	if n > uint64(len(d.b)) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *dec) done() error {
	if d.err == nil && len(d.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", errWire, len(d.b))
	}
	return d.err
}

// appendRequest encodes r after b.
func appendRequest(b []byte, r *request) []byte {
	e := enc{b}
	e.byte(r.op)
	e.u(r.mIdx)
	e.u(r.budget)
	switch r.op {
	case opGet:
		e.str(r.flow)
		e.str(r.key)
	case opPut:
		e.str(r.flow)
		e.str(r.key)
		e.policy(r.policy)
		e.bytes(r.value)
	case opCAS:
		e.str(r.flow)
		e.str(r.key)
		e.policy(r.policy)
		e.u(r.expect)
		e.bytes(r.value)
	case opDelete:
		e.str(r.flow)
		e.str(r.key)
		e.policy(r.policy)
	case opSwap:
		e.str(r.flow)
		e.str(r.key)
		e.policy(r.policy)
		e.flag(r.hasOld)
		if r.hasOld {
			e.bytes(r.old)
		}
		e.bytes(r.value)
	case opLoad, opClaimForget, opDeletePrefix, opFencePrefix:
		e.str(r.flow)
	case opCommit:
		e.str(r.flow)
		e.policy(r.policy)
		e.u(uint64(len(r.base)))
		for _, kv := range r.base {
			e.str(kv.Key)
			e.u(kv.V)
		}
		e.u(uint64(len(r.writes)))
		for _, w := range r.writes {
			e.str(w.Key)
			e.flag(w.Delete)
			if !w.Delete {
				e.bytes(w.Value)
			}
		}
	case opClearFlow, opCycle:
		e.str(r.flow)
		e.policy(r.policy)
	case opClaimAcquire:
		e.str(r.flow)
	case opClaimRecorded:
		e.str(r.flow)
		e.u(r.token)
		e.u(r.index)
	case opClaimRelease:
		e.str(r.flow)
		e.u(r.token)
	case opList:
		e.str(r.flow)
		e.str(r.key)
		e.u(r.limit)
	case opPush:
		e.sets(r.sets)
	case opOffer:
		e.u(uint64(len(r.sums)))
		for _, s := range r.sums {
			e.str(s.ID)
			e.version(flow.Version(s.Top))
			e.b = binary.BigEndian.AppendUint64(e.b, s.Sum)
		}
	case opAdopt:
		e.u(r.node)
		e.str(r.key)
		e.u(r.limit)
		e.u(uint64(len(r.voters)))
		for _, id := range r.voters {
			e.u(id)
		}
	}
	return e.b
}

func (e *enc) sets(sets []flowshard.RecordSet) {
	e.u(uint64(len(sets)))
	for _, s := range sets {
		e.str(s.FlowID)
		e.byte(byte(s.Durability))
		e.u(uint64(len(s.Records)))
		for _, r := range s.Records {
			e.str(r.Key)
			e.flag(r.Deleted)
			e.version(flow.Version(r.Version))
			e.u(uint64(max(r.TTL.Milliseconds(), 0)))
			if !r.Deleted {
				e.bytes(r.Value)
			}
		}
	}
}

// setsInto decodes record sets into the room of out, and their records
// into the room of *recs.
func (d *dec) setsInto(out []flowshard.RecordSet, recs *[]flowshard.Record) []flowshard.RecordSet {
	n := d.count()
	out = slices.Grow(out[:0], n)
	for range n {
		out = append(out, flowshard.RecordSet{})
		s := &out[len(out)-1]
		s.FlowID = d.str()
		s.Durability = flowshard.Durability(d.byte())
		if s.Durability > flowshard.Sync {
			d.fail()
		}
		m := d.count()
		// A new array when the room grows: the sets decoded before keep
		// the old one.
		at := len(*recs)
		*recs = slices.Grow(*recs, m)[:at+m]
		s.Records = (*recs)[at : at+m : at+m]
		clear(s.Records)
		for j := range s.Records {
			r := &s.Records[j]
			r.Key = d.str()
			r.Deleted = d.flag()
			r.Version = flowshard.Version(d.version())
			ttl := d.u()
			if ttl > maxTTLms {
				d.fail()
			}
			r.TTL = time.Duration(ttl) * time.Millisecond
			if !r.Deleted {
				r.Value = d.bytes()
			}
		}
	}
	return out
}

// wireNames interns the flow ids and keys of the requests a node answers.
var wireNames = intern.New(4096, 128)

// maxRequestRoom bounds the rooms a pooled request keeps.
const maxRequestRoom = 64 << 10

// decodeRequest decodes a request body into r. Values are copied, into
// r's room, which r keeps for its next decoding: r outlives the frame
// buffer, and nothing keeps a value past the answer (the shard copies what
// it stores).
func decodeRequest(b []byte, r *request) error {
	room, sets, recs := r.room[:0], r.sets[:0], r.recs[:0]
	if cap(room) > maxRequestRoom || cap(recs) > maxRequestRoom/64 {
		room, sets, recs = nil, nil, nil
	}
	d := dec{b: b, names: wireNames, room: &room}
	defer func() { r.room, r.recs = room, recs }()
	*r = request{op: d.byte(), mIdx: d.u(), budget: d.u()}
	switch r.op {
	case opGet:
		r.flow, r.key = d.str(), d.str()
	case opPut:
		r.flow, r.key, r.policy, r.value = d.str(), d.str(), d.policy(), d.bytes()
	case opCAS:
		r.flow, r.key, r.policy, r.expect, r.value = d.str(), d.str(), d.policy(), d.u(), d.bytes()
	case opDelete:
		r.flow, r.key, r.policy = d.str(), d.str(), d.policy()
	case opSwap:
		r.flow, r.key, r.policy, r.hasOld = d.str(), d.str(), d.policy(), d.flag()
		if r.hasOld {
			r.old = d.bytes()
		}
		r.value = d.bytes()
	case opLoad, opClaimForget, opDeletePrefix, opFencePrefix:
		r.flow = d.str()
	case opCommit:
		r.flow, r.policy = d.str(), d.policy()
		r.base = make([]flow.KeyVersion, d.count())
		for i := range r.base {
			r.base[i] = flow.KeyVersion{Key: d.str(), V: d.u()}
		}
		r.writes = make([]flow.Write, d.count())
		for i := range r.writes {
			w := &r.writes[i]
			w.Key, w.Delete = d.str(), d.flag()
			if !w.Delete {
				w.Value = d.bytes()
			}
		}
	case opClearFlow, opCycle:
		r.flow, r.policy = d.str(), d.policy()
	case opClaimAcquire:
		r.flow = d.str()
	case opClaimRecorded:
		r.flow, r.token, r.index = d.str(), d.u(), d.u()
	case opClaimRelease:
		r.flow, r.token = d.str(), d.u()
	case opList:
		r.flow, r.key, r.limit = d.str(), d.str(), d.u()
	case opPush:
		r.sets = d.setsInto(sets, &recs)
	case opOffer:
		r.sums = make([]flowshard.Summary, d.count())
		for i := range r.sums {
			s := &r.sums[i]
			s.ID, s.Top = d.str(), flowshard.Version(d.version())
			if len(d.b) < 8 {
				d.fail()
				break
			}
			s.Sum = binary.BigEndian.Uint64(d.b)
			d.b = d.b[8:]
		}
	case opAdopt:
		r.node, r.key, r.limit = d.u(), d.str(), d.u()
		r.voters = make([]uint64, d.count())
		for i := range r.voters {
			r.voters[i] = d.u()
		}
	case opPing:
	default:
		d.fail()
	}
	return d.done()
}

// appendAnswer encodes a, the answer to op, after b.
func appendAnswer(b []byte, op byte, a *answer) []byte {
	e := enc{b}
	e.byte(a.status)
	e.u(a.mIdx)
	switch a.status {
	case statusOK, statusMismatch:
	case statusNotFound:
		return e.b
	default:
		e.str(a.msg)
		return e.b
	}
	switch op {
	case opGet, opCAS, opSwap:
		e.flag(a.present)
		if a.present {
			e.version(a.ver)
			e.bytes(a.value)
		}
		if op == opSwap {
			e.sets(a.sets) // the caller's push, when it is a successor
		}
	case opPut:
		e.version(a.ver)
	case opLoad, opCommit:
		e.u(uint64(len(a.snap)))
		for _, en := range a.snap {
			e.str(en.Key)
			e.version(en.Version)
			e.bytes(en.Value)
		}
	case opCycle, opDeletePrefix, opFencePrefix, opPush:
		e.u(a.n)
	case opClaimAcquire:
		e.byte(a.state)
		e.u(a.n)
		e.u(a.index)
	case opList, opOffer:
		e.u(uint64(len(a.ids)))
		for _, id := range a.ids {
			e.str(id)
		}
		e.flag(a.more)
	case opAdopt:
		e.sets(a.sets)
		e.flag(a.more)
		e.str(a.next)
	}
	return e.b
}

// decodeAnswer decodes the answer to op into a; values are copied into
// a's rooms, names interned.
func decodeAnswer(b []byte, op byte, a *answer) error {
	a.reset()
	d := dec{b: b, names: wireNames, room: &a.room}
	a.status, a.mIdx = d.byte(), d.u()
	switch {
	case a.status > statusLast:
		d.fail()
	case a.status == statusNotFound:
		return d.done()
	case a.status != statusOK && a.status != statusMismatch:
		a.msg = d.str()
		return d.done()
	}
	switch op {
	case opGet, opCAS, opSwap:
		if a.present = d.flag(); a.present {
			a.ver, a.value = d.version(), d.bytes()
		}
		if op == opSwap {
			a.sets = d.setsInto(a.sets, &a.recs)
		}
	case opPut:
		a.ver = d.version()
	case opLoad, opCommit:
		n := d.count()
		for range n {
			a.snap = append(a.snap, flow.KeyEntry{Key: d.str(), Entry: flow.Entry{Version: d.version(), Value: d.bytes()}})
		}
	case opCycle, opDeletePrefix, opFencePrefix, opPush:
		a.n = d.u()
	case opClaimAcquire:
		a.state, a.n, a.index = d.byte(), d.u(), d.u()
	case opList, opOffer:
		n := d.count()
		for range n {
			a.ids = append(a.ids, d.str())
		}
		a.more = d.flag()
	case opAdopt:
		a.sets, a.more, a.next = d.setsInto(a.sets, &a.recs), d.flag(), d.str()
	case opDelete, opClearFlow, opClaimRecorded, opClaimRelease, opClaimForget, opPing:
	default:
		d.fail()
	}
	return d.done()
}
