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

// scratch is reused across calls for config and flow reads and for the
// response envelope; what a caller gets from it is copied first. reqBuf
// holds the request, which a handler reads while it calls the flow. An
// instance runs one call at a time, so one of each is enough.
var (
	scratch = make([]byte, 4096)
	reqBuf  = make([]byte, 4096)
	request Request
	verOut  [8]byte
)

func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

func sptr(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }

// grow makes scratch at least n bytes long, for a read the host said did
// not fit.
func grow(n int32) bool {
	if int(n) <= len(scratch) {
		return false
	}
	scratch = make([]byte, n)
	return true
}

// reqLen is the current call's envelope length, which the host passes to
// the entry point; readRequest reads it. A package variable, not a
// closure, so that a call allocates nothing.
var reqLen int32

// readRequest reads the current call's envelope from the host.
func readRequest() ([]byte, error) {
	if int(reqLen) > len(reqBuf) {
		reqBuf = make([]byte, reqLen)
	}
	n := hostRequestRead(ptr(reqBuf), int32(len(reqBuf)))
	if n < 0 {
		return nil, StatusError(-n)
	}
	if int(n) > len(reqBuf) {
		return nil, ErrTooLarge // the host broke its promise about reqLen
	}
	return reqBuf[:n], nil
}

// Config returns the stub's config value as JSON text ("null" when the stub
// has none). It is read from the host on every call because one module may
// serve several stubs, each with its own config.
func Config() []byte {
	for {
		n := hostConfigRead(ptr(scratch), int32(len(scratch)))
		if n < 0 {
			return nil
		}
		if !grow(n) {
			return append([]byte(nil), scratch[:n]...)
		}
	}
}

// FlowGet reads key from the request's flow. It returns the value and its
// version, ErrNotFound when the key is absent, or another *StatusError.
func FlowGet(key string) (value []byte, version int64, err error) {
	return AppendFlowGet(nil, key)
}

// AppendFlowGet is FlowGet appending the value to dst, so that a handler
// that reuses dst reads without allocating.
func AppendFlowGet(dst []byte, key string) ([]byte, int64, error) {
	for {
		n := hostFlowGet(sptr(key), int32(len(key)), ptr(scratch), int32(len(scratch)), unsafe.Pointer(&verOut[0]))
		switch {
		case n == -1:
			return dst, 0, ErrNotFound
		case n < 0:
			return dst, 0, StatusError(-n)
		case !grow(n):
			return append(dst, scratch[:n]...), int64(binary.LittleEndian.Uint64(verOut[:])), nil
		}
	}
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

// serve runs fn on the request, which is read from the host only if fn
// looks at it. A panic, or an envelope the handler could not read, fails
// the call without a trap, so the instance stays usable and the host need
// not replace it.
func serve(n int32, fn func(*Request) int32) (res int32) {
	reqLen = n
	request.reset(readRequest)
	req := &request
	defer func() {
		if p := recover(); p != nil {
			Log(LevelError, "rift: handler panicked")
			res = resultPanic
		}
	}()
	res = fn(req)
	if err := req.Err(); err != nil {
		Log(LevelError, "rift: "+err.Error())
		return resultBadRequest
	}
	return res
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
	return serve(reqLen, func(req *Request) int32 {
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
	return serve(reqLen, func(req *Request) int32 {
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
	return serve(reqLen, func(req *Request) int32 {
		resp := req.Response()
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
