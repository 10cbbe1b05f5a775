package cli

import "os"

// gcFloor is the heap the garbage collector lets a server grow to before
// it runs, when the user has not tuned the collector.
//
// Go's default collects each time the heap doubles. riftgate's live heap
// is small (tens of megabytes) while a computed answer allocates a few
// kilobytes a request (a JavaScript injection: 46 objects, 2.4 KB), so at
// 40k requests a second the collector ran dozens of times a second, and
// its write barriers and assists were a fifth of an injection's cost.
// A floor of pointer-free memory that is never touched, so never resident,
// makes the collector wait for 64 MiB of garbage instead; on a large heap
// (millions of flow entries in memory) it changes nothing.
const gcFloor = 64 << 20

// gcFloorFor returns the floor, for the caller to keep alive as long as it
// serves, unless GOGC or GOMEMLIMIT says how the user wants the collector
// run: the floor would count against a memory limit.
func gcFloorFor() []byte {
	for _, v := range []string{"GOGC", "GOMEMLIMIT"} {
		if _, set := os.LookupEnv(v); set {
			return nil
		}
	}
	return make([]byte, gcFloor)
}
