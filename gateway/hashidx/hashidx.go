// Package hashidx is an append-only multimap from 64-bit hashes to small
// values without pointers, whose versions share one store: a version sees
// the entries added before it was made, and adding to the newest version
// makes the next one in O(1) amortized, copying nothing. A persistent tree
// (gateway/ptree) copies a path of nodes for each entry a hash scatters
// across it; a recording's two hash indexes (a stub's signature, a
// stub's path) took a fifth of a recording's allocations that way, and
// their cost grew with the recording. Here the entries sit in fixed
// chunks and the slots in one table, none holding a pointer, so the
// collector never scans them however many there are.
//
// Entries are never removed: the users rebuild on the rare edits that
// remove entries, as they do with ptree.
package hashidx

import (
	"sync"
	"sync/atomic"
)

// Index is one version of a multimap. Its zero value is an empty index.
// Versions are values: a version may be read from any goroutine while
// another adds to it.
type Index[V any] struct {
	s *store[V]
	n uint32 // how many of s's entries this version sees
}

const (
	chunkBits = 10
	chunkSize = 1 << chunkBits
)

// entry is one value under its hash.
type entry[V any] struct {
	hash uint64
	val  V
}

// table chains the entries by slot (hash & mask): slots holds a slot's
// newest entry plus one (0: none), next the entry before each in its
// slot, plus one. A table is replaced, never rewritten, when it fills:
// what a reader loaded stays true for every entry it can see.
type table struct {
	slots []atomic.Uint32
	next  []uint32
}

// store holds the entries of every version made one from another. Only
// Add writes it, under mu. Readers load the slot table, a slot, then the
// chunk directory, atomically: an entry, its chunk and its chain link are
// written before the slot that publishes it.
type store[V any] struct {
	mu sync.Mutex
	// n is how many entries were added: the newest version's n.
	n      uint32
	chunks atomic.Pointer[[]*[chunkSize]entry[V]]
	table  atomic.Pointer[table]
}

// Len is how many entries the version holds.
func (x Index[V]) Len() int { return int(x.n) }

// Add returns a version with v added under h; x is unchanged. Adding to
// the newest version costs O(1) amortized; adding to an older one (a fork,
// rare) first copies the entries it sees, O(n).
func (x Index[V]) Add(h uint64, v V) Index[V] {
	s := x.s
	if s == nil {
		s = &store[V]{}
	} else {
		s.mu.Lock()
		if s.n != x.n {
			s.mu.Unlock()
			s = x.fork()
		} else {
			defer s.mu.Unlock()
		}
	}
	i := s.n
	chunks := s.chunks.Load()
	if chunks == nil || int(i>>chunkBits) == len(*chunks) {
		var grown []*[chunkSize]entry[V]
		if chunks != nil {
			grown = append(grown, *chunks...)
		}
		grown = append(grown, new([chunkSize]entry[V]))
		s.chunks.Store(&grown)
		chunks = &grown
	}
	t := s.table.Load()
	if t == nil || int(i) == len(t.next) {
		t = s.rehash(i + 1)
	}
	e := &(*chunks)[i>>chunkBits][i&(chunkSize-1)]
	e.hash, e.val = h, v
	slot := &t.slots[h&uint64(len(t.slots)-1)]
	t.next[i] = slot.Load()
	s.n = i + 1
	slot.Store(i + 1)
	return Index[V]{s: s, n: i + 1}
}

// rehash makes a table for at least n entries, at most half as many as
// slots, chains the entries already added into it and publishes it.
func (s *store[V]) rehash(n uint32) *table {
	size := 16
	for size < 2*int(n) {
		size *= 2
	}
	t := &table{slots: make([]atomic.Uint32, size), next: make([]uint32, size/2)}
	mask := uint64(size - 1)
	if chunks := s.chunks.Load(); chunks != nil {
		for i := uint32(0); i < s.n; i++ {
			slot := &t.slots[(*chunks)[i>>chunkBits][i&(chunkSize-1)].hash&mask]
			t.next[i] = slot.Load()
			slot.Store(i + 1)
		}
	}
	s.table.Store(t)
	return t
}

// fork copies the entries x sees into a store of its own.
func (x Index[V]) fork() *store[V] {
	s := &store[V]{}
	chunks := x.s.chunks.Load()
	var own []*[chunkSize]entry[V]
	for c := uint32(0); c<<chunkBits < x.n; c++ {
		// Only the entries x sees: the newest version may be adding
		// past them meanwhile.
		cp := new([chunkSize]entry[V])
		copy(cp[:], (*chunks)[c][:min(chunkSize, x.n-c<<chunkBits)])
		own = append(own, cp)
	}
	s.chunks.Store(&own)
	s.n = x.n
	s.rehash(x.n)
	return s
}

// Each calls fn on the values under h this version holds, newest first,
// until fn returns false. A value added under another hash never comes.
func (x Index[V]) Each(h uint64, fn func(V) bool) {
	if x.s == nil {
		return
	}
	t := x.s.table.Load()
	at := t.slots[h&uint64(len(t.slots)-1)].Load()
	chunks := *x.s.chunks.Load()
	for at != 0 {
		i := at - 1
		if e := &chunks[i>>chunkBits][i&(chunkSize-1)]; i < x.n && e.hash == h && !fn(e.val) {
			return
		}
		at = t.next[i]
	}
}
