//go:build !race

package loadtest

// raceOn reports a -race build, in which sync.Pool drops a quarter of
// what it is given.
const raceOn = false
