package config

import (
	"fmt"

	"github.com/riftgate/riftgate/gateway/mberr"
)

// Op is what a command does. The values are a wire format: append only.
type Op uint8

// Ops.
const (
	// OpCreateImposter adds Imposters[0]; refused when its port is taken.
	OpCreateImposter Op = 1
	// OpReplaceImposter puts Imposters[0] in place of whatever is on its
	// port (--configfile, which wins over a saved imposter). An identical
	// definition changes nothing.
	OpReplaceImposter Op = 2
	// OpDeleteImposter removes the imposter on Port, if any.
	OpDeleteImposter Op = 3
	// OpReplaceAll makes Imposters the whole set (PUT /imposters). With
	// Keep (a --configfile loaded over a --datadir at start), an imposter
	// identical to the one already on its port is kept as it is, stub
	// ids and flows included.
	OpReplaceAll Op = 4
	// OpInsertStub inserts Stubs[0] at Index of the imposter on Port;
	// Index -1 appends.
	OpInsertStub Op = 5
	// OpReplaceStub puts Stubs[0] at Index; the stub gets a new id.
	OpReplaceStub Op = 6
	// OpDeleteStub removes the stub at Index.
	OpDeleteStub Op = 7
	// OpReplaceStubs makes Stubs the imposter's whole stub list.
	OpReplaceStubs Op = 8
	// OpRecordStub records what a proxy stub (the stub with id Anchor)
	// got from its upstream: Stubs[0] holds the predicates and the one
	// response recorded. With Once (proxyOnce) it goes just before the
	// anchor. Otherwise (proxyAlways) the response joins the first stub
	// after the anchor whose predicates have the same Signature, or a new
	// stub at the end of the list, as mb 2.9.1 records.
	OpRecordStub Op = 9
	// OpDropRecorded removes every recorded response (an `is` with a
	// numeric _proxyResponseTime) and the stubs it leaves empty, as mb's
	// DELETE /imposters/:id/savedProxyResponses does.
	OpDropRecorded Op = 10
	// OpPutPlugin registers Plugin under Name, replacing what was there.
	OpPutPlugin Op = 11
	// OpDeletePlugin unregisters Name; refused while a stub uses it.
	OpDeletePlugin Op = 12
	// OpRecordStubs applies Records, in order, each as OpRecordStub would
	// (Result.Results holds each one's result): the proxies' recordings
	// batched, one durable write and one Raft entry for many.
	OpRecordStubs Op = 13
	// OpInsertStubs inserts Stubs, in order, at Index of the imposter on
	// Port (-1 appends): a large imposter loaded in parts (a --configfile
	// or a replay past the body and command caps) or POST
	// /imposters/:id/stubs with riftgate's {"stubs": [...]}.
	OpInsertStubs Op = 14
)

var opNames = map[Op]string{
	OpCreateImposter: "create imposter", OpReplaceImposter: "replace imposter",
	OpDeleteImposter: "delete imposter", OpReplaceAll: "replace all imposters",
	OpInsertStub: "insert stub", OpReplaceStub: "replace stub", OpDeleteStub: "delete stub",
	OpReplaceStubs: "replace stubs", OpRecordStub: "record stub", OpDropRecorded: "drop recorded stubs",
	OpPutPlugin: "put plugin", OpDeletePlugin: "delete plugin", OpRecordStubs: "record stubs",
	OpInsertStubs: "insert stubs",
}

func (o Op) String() string {
	if n, ok := opNames[o]; ok {
		return n
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Command is one change to the configuration. Which fields count depends
// on Op; the others are zero.
type Command struct {
	Op        Op            `cbor:"1,keyasint"`
	Port      int           `cbor:"2,keyasint,omitempty"`
	Index     int           `cbor:"3,keyasint,omitempty"`
	Imposters []ImposterDoc `cbor:"4,keyasint,omitempty"`
	Stubs     []StubDoc     `cbor:"5,keyasint,omitempty"`
	Anchor    uint64        `cbor:"6,keyasint,omitempty"`
	Once      bool          `cbor:"7,keyasint,omitempty"`
	Name      string        `cbor:"8,keyasint,omitempty"`
	Plugin    *Plugin       `cbor:"9,keyasint,omitempty"`
	// Modules are the bytes, by content hash, of the modules the
	// command's stubs or plugin refer to and the state may lack.
	Modules map[string][]byte `cbor:"10,keyasint,omitempty"`
	Keep    bool              `cbor:"11,keyasint,omitempty"`
	// Records are OpRecordStubs' recordings.
	Records []Record `cbor:"12,keyasint,omitempty"`
}

// Record is one proxy recording, as OpRecordStub's fields give it.
type Record struct {
	Port   int     `cbor:"1,keyasint"`
	Anchor uint64  `cbor:"2,keyasint"`
	Once   bool    `cbor:"3,keyasint,omitempty"`
	Stub   StubDoc `cbor:"4,keyasint"`
}

// ImposterDoc is an imposter as a command carries it.
type ImposterDoc struct {
	Port   int       `cbor:"1,keyasint"`
	Header []byte    `cbor:"2,keyasint"`
	Stubs  []StubDoc `cbor:"3,keyasint,omitempty"`
}

// StubDoc is a stub as a command carries it: a Stub without its id, which
// Apply assigns.
type StubDoc struct {
	JSON []byte `cbor:"1,keyasint"`
	Refs Refs   `cbor:"2,keyasint,omitempty"`
	// Signature is the canonical form of the stub's predicates (recorded
	// stubs match proxyAlways recordings by it).
	Signature string `cbor:"3,keyasint,omitempty"`
	// Parsed is what the node that made the command already parsed JSON
	// into (the engine's compiled form of it), which spares the reconciler
	// parsing it again; opaque to this package. It travels on no wire and
	// is nil in a decoded command.
	Parsed any `cbor:"-"`
}

// Result is what applying a command answers.
type Result struct {
	// Err is set when the command was refused; then nothing changed.
	Err *Error `cbor:"1,keyasint,omitempty"`
	// Dropped lists the ports whose imposter the command removed or
	// replaced: their flows are to go as well.
	Dropped []int `cbor:"2,keyasint,omitempty"`
	// StubID is the id of the stub the command inserted or recorded into.
	StubID uint64 `cbor:"3,keyasint,omitempty"`
	// Results are OpRecordStubs', one per recording.
	Results []Result `cbor:"4,keyasint,omitempty"`
}

// Error is a refusal in Mountebank's terms: its code, message and, when it
// is not the code's usual one, the HTTP status.
type Error struct {
	Code    string `cbor:"1,keyasint"`
	Message string `cbor:"2,keyasint"`
	Status  int    `cbor:"3,keyasint,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// MB returns the refusal as the admin API answers it.
func (e *Error) MB() *mberr.Error {
	m := mberr.New(e.Code, e.Message)
	if e.Status != 0 {
		m.Status = e.Status
	}
	return m
}

func refuse(code, format string, args ...any) Result {
	return Result{Err: &Error{Code: code, Message: fmt.Sprintf(format, args...)}}
}
