// Package ptree is a persistent ordered map: a B+tree whose Set copies
// only the nodes on the path to the key, so a version is never changed by
// the ones made from it, and making one costs O(log n) however large the
// map is. Entries are never deleted one by one: the users rebuild on the
// rare edits that remove entries.
package ptree

import "slices"

// Map is one version of a map. The zero Map is not usable: make one with
// New.
type Map[K, V any] struct {
	root *node[K, V]
	n    int
	cmp  func(a, b K) int
}

// Node widths: a leaf holds up to leafWidth entries, an inner node up to
// innerWidth children. A Set copies one node per level.
const (
	leafWidth  = 32
	innerWidth = 32
)

type node[K, V any] struct {
	keys []K // a leaf's entries' keys; an inner node's children's smallest keys
	vals []V // a leaf's values
	kids []*node[K, V]
	// edit made the node, which SetIn with it may change in place; its
	// slices are then its own, shared with no other node.
	edit *Edit
}

// Edit is one run of SetIn calls whose in-between versions nobody keeps
// (a batch of recordings applied as one command): a node the run made is
// changed in place by the run's later Sets instead of copied again, so a
// batch of k adjacent keys copies each node once, not k times. A version
// made before the run began is never changed.
type Edit struct{ _ byte } // not zero-sized: each new Edit is distinct

func (n *node[K, V]) leaf() bool { return n.kids == nil }

// New returns an empty map ordered by cmp.
func New[K, V any](cmp func(a, b K) int) Map[K, V] { return Map[K, V]{cmp: cmp} }

// Len is the number of entries.
func (t Map[K, V]) Len() int { return t.n }

// Get returns the value at k.
func (t Map[K, V]) Get(k K) (V, bool) {
	if v := t.View(k); v != nil {
		return v[0], true
	}
	var zero V
	return zero, false
}

// View returns the value at k as a slice of one that shares the tree's
// memory, or nil: a caller that wants a list of one value gets it without
// allocating. The version's nodes never change, nor does the view; its
// capacity is one, so appending to it copies.
func (t Map[K, V]) View(k K) []V {
	n := t.root
	for n != nil && !n.leaf() {
		n = n.kids[t.child(n, k)]
	}
	if n != nil {
		if i, ok := slices.BinarySearchFunc(n.keys, k, t.cmp); ok {
			return n.vals[i : i+1 : i+1]
		}
	}
	return nil
}

// child is the index of the child of inner node n that holds k, or would.
func (t Map[K, V]) child(n *node[K, V], k K) int {
	i, ok := slices.BinarySearchFunc(n.keys, k, t.cmp)
	if !ok && i > 0 {
		i--
	}
	return i
}

// Set returns the map with v at k; t is unchanged.
func (t Map[K, V]) Set(k K, v V) Map[K, V] { return t.SetIn(nil, k, v) }

// SetIn is Set as part of the run e (nil: none): nodes e made are changed
// in place, which changes every version made since e began. The caller
// keeps only the last version of a run.
func (t Map[K, V]) SetIn(e *Edit, k K, v V) Map[K, V] {
	if t.root == nil {
		return Map[K, V]{root: &node[K, V]{keys: []K{k}, vals: []V{v}, edit: e}, n: 1, cmp: t.cmp}
	}
	n, split, added := t.set(e, t.root, k, v)
	if split != nil {
		n = &node[K, V]{keys: []K{n.keys[0], split.keys[0]}, kids: []*node[K, V]{n, split}, edit: e}
	}
	out := Map[K, V]{root: n, n: t.n, cmp: t.cmp}
	if added {
		out.n++
	}
	return out
}

// own returns n itself when e made it, else a copy e makes, whose slices
// are its own, with room for the entry a Set may add.
func own[K, V any](e *Edit, n *node[K, V]) *node[K, V] {
	if e != nil && n.edit == e {
		return n
	}
	c := &node[K, V]{keys: append(make([]K, 0, len(n.keys)+1), n.keys...), edit: e}
	if n.leaf() {
		c.vals = append(make([]V, 0, len(n.vals)+1), n.vals...)
	} else {
		c.kids = append(make([]*node[K, V], 0, len(n.kids)+1), n.kids...)
	}
	return c
}

func (t Map[K, V]) set(e *Edit, n *node[K, V], k K, v V) (*node[K, V], *node[K, V], bool) {
	if n.leaf() {
		i, ok := slices.BinarySearchFunc(n.keys, k, t.cmp)
		c := own(e, n)
		if ok {
			c.vals[i] = v
			return c, nil, false
		}
		c.keys = slices.Insert(c.keys, i, k)
		c.vals = slices.Insert(c.vals, i, v)
		if len(c.keys) <= leafWidth {
			return c, nil, true
		}
		h := len(c.keys) / 2
		if i == len(c.keys)-1 {
			h = len(c.keys) - 1 // appending: leave the left leaf full
		}
		right := &node[K, V]{keys: slices.Clone(c.keys[h:]), vals: slices.Clone(c.vals[h:]), edit: e}
		c.keys, c.vals = c.keys[:h:h], c.vals[:h:h]
		return c, right, true
	}
	i := t.child(n, k)
	kid, split, added := t.set(e, n.kids[i], k, v)
	c := own(e, n)
	c.kids[i], c.keys[i] = kid, kid.keys[0]
	if split == nil {
		return c, nil, added
	}
	c.keys = slices.Insert(c.keys, i+1, split.keys[0])
	c.kids = slices.Insert(c.kids, i+1, split)
	if len(c.kids) <= innerWidth {
		return c, nil, added
	}
	h := len(c.kids) / 2
	if i+1 == len(c.kids)-1 {
		h = len(c.kids) - 1
	}
	right := &node[K, V]{keys: slices.Clone(c.keys[h:]), kids: slices.Clone(c.kids[h:]), edit: e}
	c.keys, c.kids = c.keys[:h:h], c.kids[:h:h]
	return c, right, added
}

// Ascend calls fn on each entry from the first whose key is at least from,
// in order, until fn returns false.
func (t Map[K, V]) Ascend(from K, fn func(K, V) bool) {
	if t.root != nil {
		t.ascend(t.root, &from, fn)
	}
}

// Each calls fn on every entry in order until fn returns false.
func (t Map[K, V]) Each(fn func(K, V) bool) {
	if t.root != nil {
		t.ascend(t.root, nil, fn)
	}
}

func (t Map[K, V]) ascend(n *node[K, V], from *K, fn func(K, V) bool) bool {
	if n.leaf() {
		i := 0
		if from != nil {
			i, _ = slices.BinarySearchFunc(n.keys, *from, t.cmp)
		}
		for ; i < len(n.keys); i++ {
			if !fn(n.keys[i], n.vals[i]) {
				return false
			}
		}
		return true
	}
	i := 0
	if from != nil {
		i = t.child(n, *from)
	}
	for ; i < len(n.kids); i++ {
		if !t.ascend(n.kids[i], from, fn) {
			return false
		}
		from = nil
	}
	return true
}

// Last returns the greatest entry.
func (t Map[K, V]) Last() (K, V, bool) {
	n := t.root
	if n == nil {
		var k K
		var v V
		return k, v, false
	}
	for !n.leaf() {
		n = n.kids[len(n.kids)-1]
	}
	return n.keys[len(n.keys)-1], n.vals[len(n.vals)-1], true
}
