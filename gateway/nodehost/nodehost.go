// Package nodehost runs Mountebank's Node extension points (formatters,
// custom protocols' commands, imposters repositories) on the machine's
// `node`, where published modules find every package they require. Each
// run is a child process in its own process group, bounded in time and
// memory, killed with its group when its context ends: a hostile module
// costs the command it serves, never riftgate.
package nodehost

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// ErrNoNode means no `node` executable was found.
var ErrNoNode = errors.New("node is not installed: Mountebank's Node modules (formatters, custom protocols, imposters repositories) run on the machine's node; install it (Debian: apt-get install nodejs) or put it on PATH, or set RIFTGATE_NODE to its path")

// HeapLimitMB bounds a module's V8 heap: past it node ends with an error
// rather than taking the machine's memory.
const HeapLimitMB = 1024

// Path finds node: $RIFTGATE_NODE when set, else `node` on PATH.
func Path() (string, error) {
	if p := os.Getenv("RIFTGATE_NODE"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("RIFTGATE_NODE=%s: %w", p, ErrNoNode)
		}
		return p, nil
	}
	p, err := exec.LookPath("node")
	if err != nil {
		return "", ErrNoNode
	}
	return p, nil
}
