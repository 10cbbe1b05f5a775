//go:build !race

package heaptest

// Race reports a -race build, which allocates differently: sync.Pool drops
// at random what it is given.
const Race = false
