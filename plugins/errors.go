package plugins

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Errors a Flow returns, matched with errors.Is. Any other error answers
// the guest UNAVAILABLE, which turns a failed call's 500 into a 503.
var (
	ErrFlowNotFound    = errors.New("plugins: flow key not found")
	ErrFlowMismatch    = errors.New("plugins: flow version mismatch")
	ErrFlowTooLarge    = errors.New("plugins: flow key or value too large")
	ErrFlowUnavailable = errors.New("plugins: flow unavailable")
)

// Caps on the flow keys and values a guest passes; past them an import
// answers TOO_LARGE without reaching the Flow. The engine's flow store has
// the same caps.
const (
	MaxFlowKeyBytes   = 1 << 10
	MaxFlowValueBytes = 64 << 10
)

// Kind says why a call failed, so that the engine can tell a guest's fault
// from a deadline or a caller that went away.
type Kind uint8

// Kinds of call failure.
const (
	KindNoModule    Kind = iota // no module is registered under the name
	KindNoExport                // the export is not an entry point (i32) -> i32
	KindInstantiate             // a new instance failed to start (_initialize trapped)
	KindTrap                    // the guest trapped (unreachable, bad access, proc_exit, ...)
	KindTimeout                 // the module's call deadline passed
	KindMemory                  // the guest grew its memory to the module's page limit and failed
	KindResponse                // the response envelope was malformed or over the size limit
	KindCanceled                // the caller's context ended first
	KindClosed                  // the host is closed
	kindCount
)

var kindNames = [kindCount]string{
	KindNoModule:    "no_module",
	KindNoExport:    "no_export",
	KindInstantiate: "instantiate",
	KindTrap:        "trap",
	KindTimeout:     "timeout",
	KindMemory:      "memory",
	KindResponse:    "response",
	KindCanceled:    "canceled",
	KindClosed:      "closed",
}

// String returns a short snake_case name, usable as a metric label.
func (k Kind) String() string {
	if k < kindCount {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Error is the error Call returns. Use errors.As to read its Kind.
type Error struct {
	Kind   Kind
	Module string
	Export string
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("plugin %q export %q: %s: %v", e.Module, e.Export, e.Kind, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Errors Register, Unregister and Call wrap.
var (
	ErrInvalidModule = errors.New("invalid plugin module")
	ErrUnknownModule = errors.New("no such plugin module")
	ErrClosed        = errors.New("plugin host closed")
)

// stats are one module name's counters. They outlive a swap of the module,
// so a version replaced under load keeps adding to the same counters.
type stats struct {
	calls        atomic.Uint64
	unavailable  atomic.Uint64
	errors       [kindCount]atomic.Uint64
	live         atomic.Int64
	instantiated atomic.Uint64
	recycled     atomic.Uint64
	discarded    atomic.Uint64
}

// ModuleStats is a snapshot of one module's counters, for the engine to
// export as metrics.
type ModuleStats struct {
	Name string
	Hash string // hex SHA-256 of the module now registered
	// Calls counts every Call that reached the module, failed or not.
	Calls uint64
	// Errors counts failed calls by Kind.String().
	Errors map[string]uint64
	// Unavailable counts calls in which a flow import returned UNAVAILABLE.
	Unavailable uint64
	// InstancesLive is the number of instances open now, over all versions.
	InstancesLive int64
	// Instantiated, Recycled and Discarded count instances made, closed
	// after RecycleAfter calls, and thrown away after a failure.
	Instantiated, Recycled, Discarded uint64
}

func (s *stats) snapshot(name, hash string) ModuleStats {
	ms := ModuleStats{
		Name:          name,
		Hash:          hash,
		Calls:         s.calls.Load(),
		Errors:        make(map[string]uint64),
		Unavailable:   s.unavailable.Load(),
		InstancesLive: s.live.Load(),
		Instantiated:  s.instantiated.Load(),
		Recycled:      s.recycled.Load(),
		Discarded:     s.discarded.Load(),
	}
	for k := range kindCount {
		if n := s.errors[k].Load(); n > 0 {
			ms.Errors[k.String()] = n
		}
	}
	return ms
}
