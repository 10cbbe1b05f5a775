//go:build race

package imposter

// raceOn reports a -race build, in which sync.Pool drops what it is given
// at random.
const raceOn = true
