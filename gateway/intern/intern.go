// Package intern turns texts the hot path sees again and again (a flow id
// from a header, a key a plugin names in its memory) into strings without
// allocating each time: a small lock-free cache keeps the strings it made
// last, picked by hash and replaced on a miss.
package intern

import (
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// Cache keeps recently made strings. Its methods are safe for concurrent
// use; a nil Cache keeps nothing.
type Cache struct {
	slots  []atomic.Pointer[string]
	mask   uint64
	maxLen int
}

// New returns a cache of about slots strings (rounded up to a power of
// two) of at most maxLen bytes each, so that it never pins more than
// slots*maxLen bytes.
func New(slots, maxLen int) *Cache {
	n := 1 << bits.Len(uint(max(slots, 1)-1))
	return &Cache{slots: make([]atomic.Pointer[string], n), mask: uint64(n - 1), maxLen: maxLen}
}

// String returns prefix+s.
func (c *Cache) String(prefix, s string) string { return c.get(prefix, s) }

// Bytes returns prefix+string(b); the string never aliases b.
func (c *Cache) Bytes(prefix string, b []byte) string {
	return c.get(prefix, unsafe.String(unsafe.SliceData(b), len(b)))
}

// get returns prefix+text, the one kept if it was made before. text may be
// a view of memory that changes: it is only compared and copied.
func (c *Cache) get(prefix, text string) string {
	n := len(prefix) + len(text)
	if c == nil || len(text) == 0 || n > c.maxLen {
		return join(prefix, text)
	}
	slot := &c.slots[xxhash.Sum64String(text)&c.mask]
	if p := slot.Load(); p != nil && len(*p) == n && (*p)[len(prefix):] == text && (*p)[:len(prefix)] == prefix {
		return *p
	}
	s := join(prefix, text)
	slot.Store(&s)
	return s
}

// join copies prefix and text into a new string (prefix+text would return
// text itself when prefix is empty, a view of the caller's memory).
func join(prefix, text string) string {
	if len(prefix)+len(text) == 0 {
		return ""
	}
	b := make([]byte, len(prefix)+len(text))
	copy(b[copy(b, prefix):], text)
	return unsafe.String(unsafe.SliceData(b), len(b))
}
