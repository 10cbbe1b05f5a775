package plugins

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// The import module and the ABI marker export, ABI v1 sections 1 and 3.
const (
	hostModule = "rift_v1"
	abiMarker  = "rift_abi_v1"
)

// Status codes, ABI v1 section 3.
const (
	statusOK          = 0
	statusNotFound    = 1
	statusMismatch    = 2
	statusUnavailable = 3
	statusTooLarge    = 4
	statusBadMemory   = 5
)

// hostFunc is one rift_v1 import. fn gets the calling instance's call
// state beside wazero's arguments.
type hostFunc struct {
	name            string
	params, results []api.ValueType
	fn              func(c *callState, ctx context.Context, mod api.Module, stack []uint64)
}

func (f hostFunc) sig() string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(s, " ") + ")"
	}
	return names(f.params) + " -> " + names(f.results)
}

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// hostFuncs is the rift_v1 module. ABI v1 is frozen: entries may be added,
// never changed or removed.
var hostFuncs = []hostFunc{
	{"request_read", []api.ValueType{i32, i32}, []api.ValueType{i32}, requestRead},
	{"config_read", []api.ValueType{i32, i32}, []api.ValueType{i32}, configRead},
	{"flow_get", []api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}, flowGet},
	{"flow_put", []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}, flowPut},
	{"flow_cas", []api.ValueType{i32, i32, i64, i32, i32}, []api.ValueType{i32}, flowCAS},
	{"flow_delete", []api.ValueType{i32, i32}, []api.ValueType{i32}, flowDelete},
	{"response_write", []api.ValueType{i32, i32}, []api.ValueType{i32}, responseWrite},
	{"log", []api.ValueType{i32, i32, i32}, nil, guestLog},
	{"now_ms", nil, []api.ValueType{i64}, nowMS},
}

func lookupHostFunc(name string) (hostFunc, bool) {
	i := slices.IndexFunc(hostFuncs, func(f hostFunc) bool { return f.name == name })
	if i < 0 {
		return hostFunc{}, false
	}
	return hostFuncs[i], true
}

// errOutsideCall is the trap for an import called while no call runs: from
// a WebAssembly start function, during instantiation.
var errOutsideCall = errors.New("rift_v1 import called outside a call (from a start function?)")

// bind makes f a wazero host function. It finds the calling instance's
// state in the context wazero passes it, which is the instance's callCtx
// during a call (see instance.arm): a type assertion, where a lookup by
// module cost a hash per import.
func bind(f hostFunc) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		cc, ok := ctx.(*callCtx)
		if !ok || cc.cs.in == nil {
			// wazero turns a host function's panic into a trap of the guest.
			panic(errOutsideCall)
		}
		f.fn(cc.cs, ctx, mod, stack)
	}
}

func ret(stack []uint64, v int32) { stack[0] = api.EncodeI32(v) }

// span returns guest memory [ptr, ptr+n), or false if any of it is outside
// memory. The view is valid until the guest next grows its memory, which
// cannot happen while a host function runs.
func span(mod api.Module, ptr, n uint64) ([]byte, bool) {
	return mod.Memory().Read(api.DecodeU32(ptr), api.DecodeU32(n))
}

// copyOut implements "copy if it fits, return the needed length": the
// (buf, cap) range must be inside memory whether or not data fits.
func copyOut(mod api.Module, buf, capacity uint64, data []byte) int32 {
	dst, ok := span(mod, buf, capacity)
	if !ok {
		return -statusBadMemory
	}
	if len(data) <= len(dst) {
		copy(dst, data)
	}
	return int32(len(data))
}

func requestRead(c *callState, _ context.Context, mod api.Module, stack []uint64) {
	ret(stack, copyOut(mod, stack[0], stack[1], c.request()))
}

var jsonNull = []byte("null")

func configRead(c *callState, _ context.Context, mod api.Module, stack []uint64) {
	cfg := c.in.Config
	if cfg == nil {
		cfg = jsonNull
	}
	ret(stack, copyOut(mod, stack[0], stack[1], cfg))
}

// flowStatus maps a Flow error to an ABI status and remembers an
// UNAVAILABLE, which turns a failed call's 500 into a 503.
func (c *callState) flowStatus(err error) int32 {
	switch {
	case err == nil:
		return statusOK
	case errors.Is(err, ErrFlowNotFound):
		return statusNotFound
	case errors.Is(err, ErrFlowMismatch):
		return statusMismatch
	case errors.Is(err, ErrFlowTooLarge):
		return statusTooLarge
	}
	// ErrFlowUnavailable, and anything unexpected: the flow cannot be trusted
	// to have done what was asked.
	c.setUnavailable(err)
	return statusUnavailable
}

// setUnavailable notes that a flow import failed, keeping the first cause.
func (c *callState) setUnavailable(err error) {
	c.unavailable = true
	if c.unavailableErr == nil {
		c.unavailableErr = err
	}
}

// flowKey reads and checks a key. A status other than OK is the answer.
func flowKey(mod api.Module, ptr, n uint64) ([]byte, int32) {
	k, ok := span(mod, ptr, n)
	switch {
	case !ok:
		return nil, statusBadMemory
	case len(k) == 0 || len(k) > MaxFlowKeyBytes:
		return nil, statusTooLarge
	}
	return k, statusOK
}

// flowValue reads and checks a value, a view of guest memory (see Flow).
func flowValue(mod api.Module, ptr, n uint64) ([]byte, int32) {
	v, ok := span(mod, ptr, n)
	switch {
	case !ok:
		return nil, statusBadMemory
	case len(v) > MaxFlowValueBytes:
		return nil, statusTooLarge
	}
	return v, statusOK
}

// noFlow answers a flow import when the call has no Flow.
func (c *callState) noFlow() int32 {
	c.setUnavailable(errNoFlow)
	return statusUnavailable
}

var errNoFlow = errors.New("plugins: the call has no flow")

func flowGet(c *callState, ctx context.Context, mod api.Module, stack []uint64) {
	buf, capacity, verOut := stack[2], stack[3], stack[4]
	_, okBuf := span(mod, buf, capacity)
	_, okVer := span(mod, verOut, 8)
	k, st := flowKey(mod, stack[0], stack[1])
	switch {
	case !okBuf || !okVer || st == statusBadMemory:
		ret(stack, -statusBadMemory)
		return
	case st != statusOK:
		ret(stack, -st)
		return
	case c.in.Flow == nil:
		ret(stack, -c.noFlow())
		return
	}
	val, ver, err := c.in.Flow.Get(ctx, k)
	if err != nil {
		ret(stack, -c.flowStatus(err))
		return
	}
	mod.Memory().WriteUint64Le(api.DecodeU32(verOut), ver)
	ret(stack, copyOut(mod, buf, capacity, val))
}

func flowPut(c *callState, ctx context.Context, mod api.Module, stack []uint64) {
	k, st := flowKey(mod, stack[0], stack[1])
	v, vst := flowValue(mod, stack[2], stack[3])
	switch {
	case st == statusBadMemory || vst == statusBadMemory:
		ret(stack, statusBadMemory)
	case st != statusOK || vst != statusOK:
		ret(stack, statusTooLarge)
	case c.in.Flow == nil:
		ret(stack, c.noFlow())
	default:
		ret(stack, c.flowStatus(c.in.Flow.Put(ctx, k, v)))
	}
}

func flowCAS(c *callState, ctx context.Context, mod api.Module, stack []uint64) {
	k, st := flowKey(mod, stack[0], stack[1])
	v, vst := flowValue(mod, stack[3], stack[4])
	switch {
	case st == statusBadMemory || vst == statusBadMemory:
		ret(stack, statusBadMemory)
	case st != statusOK || vst != statusOK:
		ret(stack, statusTooLarge)
	case c.in.Flow == nil:
		ret(stack, c.noFlow())
	default:
		ret(stack, c.flowStatus(c.in.Flow.CAS(ctx, k, stack[2], v)))
	}
}

func flowDelete(c *callState, ctx context.Context, mod api.Module, stack []uint64) {
	k, st := flowKey(mod, stack[0], stack[1])
	switch {
	case st != statusOK:
		ret(stack, st)
	case c.in.Flow == nil:
		ret(stack, c.noFlow())
	default:
		ret(stack, c.flowStatus(c.in.Flow.Delete(ctx, k)))
	}
}

func responseWrite(c *callState, _ context.Context, mod api.Module, stack []uint64) {
	b, ok := span(mod, stack[0], stack[1])
	switch {
	case !ok:
		ret(stack, statusBadMemory)
	case len(b) > c.v.lim.MaxResponseBytes:
		c.tooLarge = true
		ret(stack, statusTooLarge)
	default:
		c.resp = append(c.resp[:0], b...)
		c.wrote, c.tooLarge = true, false
		ret(stack, statusOK)
	}
}

var guestLevels = [...]slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError}

func guestLog(c *callState, ctx context.Context, mod api.Module, stack []uint64) {
	text, ok := span(mod, stack[1], stack[2])
	if !ok {
		return
	}
	lvl := api.DecodeI32(stack[0])
	lvl = min(max(lvl, 0), int32(len(guestLevels)-1))
	c.v.h.log.Log(ctx, guestLevels[lvl], string(text), "module", c.v.info.Name)
}

func nowMS(_ *callState, _ context.Context, _ api.Module, stack []uint64) {
	stack[0] = api.EncodeI64(time.Now().UnixMilli())
}

// atomicRefs counts a version's references. Once it reaches zero it stays
// there: tryAcquire refuses, so a retired version is never revived.
type atomicRefs struct{ n atomic.Int64 }

func (r *atomicRefs) init() { r.n.Store(1) }

func (r *atomicRefs) tryAcquire() bool {
	for {
		n := r.n.Load()
		if n == 0 {
			return false
		}
		if r.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference and reports whether it was the last.
func (r *atomicRefs) release() bool { return r.n.Add(-1) == 0 }
