//go:build !linux

package selector

import "time"

var clockStart = time.Now()

// threadCPU falls back to the wall clock where a thread's CPU time is not
// at hand.
func threadCPU() time.Duration { return time.Since(clockStart) }
