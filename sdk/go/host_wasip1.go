//go:build wasip1

package rift

import (
	"encoding/binary"
	"unsafe"
)

//go:wasmimport rift_v1 request_read
func hostRequestRead(buf unsafe.Pointer, bufCap int32) int32

//go:wasmimport rift_v1 config_read
func hostConfigRead(buf unsafe.Pointer, bufCap int32) int32

//go:wasmimport rift_v1 flow_get
func hostFlowGet(key unsafe.Pointer, klen int32, buf unsafe.Pointer, bufCap int32, verOut unsafe.Pointer) int32

//go:wasmimport rift_v1 flow_put
func hostFlowPut(key unsafe.Pointer, klen int32, val unsafe.Pointer, vlen int32) int32

//go:wasmimport rift_v1 flow_cas
func hostFlowCAS(key unsafe.Pointer, klen int32, expect int64, val unsafe.Pointer, vlen int32) int32

//go:wasmimport rift_v1 flow_delete
func hostFlowDelete(key unsafe.Pointer, klen int32) int32

//go:wasmimport rift_v1 response_write
func hostResponseWrite(buf unsafe.Pointer, n int32) int32

//go:wasmimport rift_v1 log
func hostLog(level int32, buf unsafe.Pointer, n int32)

//go:wasmimport rift_v1 now_ms
func hostNowMs() int64

// statusErr maps an import's status to nil or a StatusError.
func statusErr(st int32) error {
	if st == 0 {
		return nil
	}
	return StatusError(st)
}

// scratch is reused across calls for envelopes and flow reads; everything
// handed to a handler is copied out of it first. An instance runs one call
// at a time, so one buffer is enough.
var scratch = make([]byte, 4096)

func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

func sptr(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }

// readGrowing calls read with scratch until the data fits, growing scratch
// to the length the host reports. It returns the filled prefix, or the
// host's negative result.
func readGrowing(read func(buf []byte) int32) ([]byte, int32) {
	for {
		n := read(scratch)
		if n < 0 {
			return nil, n
		}
		if int(n) <= len(scratch) {
			return scratch[:n], n
		}
		scratch = make([]byte, n)
	}
}

func readRequest(reqLen int32) (*Request, error) {
	// The host passes the length, so one read is enough.
	if int(reqLen) > len(scratch) {
		scratch = make([]byte, reqLen)
	}
	b, n := readGrowing(func(buf []byte) int32 { return hostRequestRead(ptr(buf), int32(len(buf))) })
	if n < 0 {
		return nil, StatusError(-n)
	}
	return DecodeRequest(b)
}

// Config returns the stub's config value as JSON text ("null" when the stub
// has none). It is read from the host on every call because one module may
// serve several stubs, each with its own config.
func Config() []byte {
	b, n := readGrowing(func(buf []byte) int32 { return hostConfigRead(ptr(buf), int32(len(buf))) })
	if n < 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// FlowGet reads key from the request's flow. It returns the value and its
// version, ErrNotFound when the key is absent, or another *StatusError.
func FlowGet(key string) (value []byte, version int64, err error) {
	var ver [8]byte
	b, n := readGrowing(func(buf []byte) int32 {
		return hostFlowGet(sptr(key), int32(len(key)), ptr(buf), int32(len(buf)), unsafe.Pointer(&ver[0]))
	})
	if n == -1 {
		return nil, 0, ErrNotFound
	}
	if n < 0 {
		return nil, 0, StatusError(-n)
	}
	return append([]byte(nil), b...), int64(binary.LittleEndian.Uint64(ver[:])), nil
}

// FlowPut writes key = value unconditionally.
func FlowPut(key string, value []byte) error {
	return statusErr(hostFlowPut(sptr(key), int32(len(key)), ptr(value), int32(len(value))))
}

// FlowCAS writes key = value only if the key's version is still expect
// (0: only if absent). It returns ErrCASMismatch when another write got
// there first; read again and retry.
func FlowCAS(key string, expect int64, value []byte) error {
	return statusErr(hostFlowCAS(sptr(key), int32(len(key)), expect, ptr(value), int32(len(value))))
}

// FlowDelete deletes key. It returns ErrNotFound if the key was absent.
func FlowDelete(key string) error {
	return statusErr(hostFlowDelete(sptr(key), int32(len(key))))
}

// Log writes msg to riftgate's log at level.
func Log(level Level, msg string) {
	hostLog(int32(level), sptr(msg), int32(len(msg)))
}

// NowMs returns the host's wall clock in milliseconds since the Unix epoch.
func NowMs() int64 { return hostNowMs() }

func writeResponse(r *Response) int32 {
	scratch = r.AppendCBOR(scratch[:0])
	if st := hostResponseWrite(ptr(scratch), int32(len(scratch))); st != 0 {
		Log(LevelError, "rift: response_write: "+StatusError(st).Error())
		return 1
	}
	return 0
}

var (
	handler   func(*Request) *Response
	matcher   func(*Request) bool
	decorator func(*Request, *Response) *Response
)

// Handle registers h as the handle entry point: it computes a stub's
// response. Returning nil writes no response, which fails the call (503 if
// a flow call returned ErrUnavailable, else 500). Call Handle from init.
func Handle(h func(req *Request) *Response) { handler = h }

// Match registers m as the matches entry point, a predicate.
func Match(m func(req *Request) bool) { matcher = m }

// Decorate registers d as the decorate entry point. It receives the request
// and the response being decorated and returns the new response, or nil to
// keep the response unchanged.
func Decorate(d func(req *Request, resp *Response) *Response) { decorator = d }

// Entry-point results the host treats as failures (any non-zero value is
// one; distinct values only help reading a trace).
const (
	resultNoHandler  = 2
	resultBadRequest = 3
	resultPanic      = 4
)

// call runs fn, turning a panic into a failed call: the instance stays
// usable, so the host need not replace it.
func call(fn func() int32) (res int32) {
	defer func() {
		if p := recover(); p != nil {
			Log(LevelError, "rift: handler panicked")
			res = resultPanic
		}
	}()
	return fn()
}

//go:wasmexport rift_abi_v1
//lint:ignore U1000 called by the host through go:wasmexport
func abiMarker() {}

//go:wasmexport handle
//lint:ignore U1000 called by the host through go:wasmexport
func handleExport(reqLen int32) int32 {
	if handler == nil {
		return resultNoHandler
	}
	return call(func() int32 {
		req, err := readRequest(reqLen)
		if err != nil {
			Log(LevelError, "rift: "+err.Error())
			return resultBadRequest
		}
		resp := handler(req)
		if resp == nil {
			return 1
		}
		return writeResponse(resp)
	})
}

//go:wasmexport matches
//lint:ignore U1000 called by the host through go:wasmexport
func matchesExport(reqLen int32) int32 {
	if matcher == nil {
		return resultNoHandler
	}
	return call(func() int32 {
		req, err := readRequest(reqLen)
		if err != nil {
			Log(LevelError, "rift: "+err.Error())
			return resultBadRequest
		}
		if matcher(req) {
			return 1
		}
		return 0
	})
}

//go:wasmexport decorate
//lint:ignore U1000 called by the host through go:wasmexport
func decorateExport(reqLen int32) int32 {
	if decorator == nil {
		return resultNoHandler
	}
	return call(func() int32 {
		req, err := readRequest(reqLen)
		if err != nil {
			Log(LevelError, "rift: "+err.Error())
			return resultBadRequest
		}
		resp := req.Response
		if resp == nil {
			resp = &Response{}
		}
		out := decorator(req, resp)
		if out == nil {
			return 0
		}
		return writeResponse(out)
	})
}
