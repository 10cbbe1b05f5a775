package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// readSaved reads the imposters a build before the configuration log kept
// in dir, one <port>.json each, ordered by port.
func readSaved(dir string) ([][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ports []int
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		if p, err := strconv.Atoi(name); err == nil {
			ports = append(ports, p)
		}
	}
	sort.Ints(ports)
	out := make([][]byte, 0, len(ports))
	for _, p := range ports {
		b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(p)+".json"))
		if err != nil {
			return nil, fmt.Errorf("saved imposter %d: %w", p, err)
		}
		out = append(out, b)
	}
	return out, nil
}
