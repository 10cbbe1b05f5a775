package plugins

import (
	"fmt"
	"runtime"
	"time"
)

// Limits bound one module. A zero field takes the host's default, and a zero
// default takes the ABI's (sdk/ABI.md section 7).
type Limits struct {
	// MemoryPages caps the guest's linear memory, in 64 KiB pages.
	MemoryPages uint32
	// Deadline bounds one call. A negative Deadline turns the deadline off:
	// calls then skip the ~2 us and one goroutine that enforcing it costs,
	// but nothing stops a guest that never returns.
	Deadline time.Duration
	// MaxResponseBytes caps the response envelope a guest may write.
	MaxResponseBytes int
	// PoolSize caps the instances, and so the concurrent calls, per module.
	PoolSize int
	// RecycleAfter is the number of calls after which an instance is closed
	// and replaced, so that a slow leak in a guest cannot grow for ever.
	RecycleAfter int
}

// ABI v1 defaults, section 7.
const (
	DefaultMemoryPages      = 256 // 16 MiB
	DefaultDeadline         = time.Second
	DefaultMaxResponseBytes = 1 << 20
	DefaultRecycleAfter     = 100_000
)

// DefaultPoolSize is the ABI's pool default: two instances per core.
func DefaultPoolSize() int { return 2 * runtime.NumCPU() }

// abiDefaults are the section 7 defaults as Limits.
func abiDefaults() Limits {
	return Limits{
		MemoryPages:      DefaultMemoryPages,
		Deadline:         DefaultDeadline,
		MaxResponseBytes: DefaultMaxResponseBytes,
		PoolSize:         DefaultPoolSize(),
		RecycleAfter:     DefaultRecycleAfter,
	}
}

// orDefaults fills l's zero fields from d.
func (l Limits) orDefaults(d Limits) Limits {
	if l.MemoryPages == 0 {
		l.MemoryPages = d.MemoryPages
	}
	if l.Deadline == 0 {
		l.Deadline = d.Deadline
	}
	if l.MaxResponseBytes == 0 {
		l.MaxResponseBytes = d.MaxResponseBytes
	}
	if l.PoolSize == 0 {
		l.PoolSize = d.PoolSize
	}
	if l.RecycleAfter == 0 {
		l.RecycleAfter = d.RecycleAfter
	}
	return l
}

// maxMemoryPages is WebAssembly's 4 GiB ceiling for wasm32.
const maxMemoryPages = 65536

func (l Limits) validate() error {
	switch {
	case l.MemoryPages > maxMemoryPages:
		return fmt.Errorf("memory limit %d pages is over the wasm32 maximum of %d", l.MemoryPages, maxMemoryPages)
	case l.MaxResponseBytes < 0:
		return fmt.Errorf("response limit %d is negative", l.MaxResponseBytes)
	case l.PoolSize < 0:
		return fmt.Errorf("pool size %d is negative", l.PoolSize)
	case l.RecycleAfter < 0:
		return fmt.Errorf("recycle count %d is negative", l.RecycleAfter)
	}
	return nil
}
