package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// store keeps one file per imposter under <datadir>/imposters, written by
// rename after fsync, so that a crash leaves either the old or the new
// version and never a torn one.
type store struct{ dir string }

func openStore(datadir string) (*store, error) {
	dir := filepath.Join(datadir, "imposters")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("datadir: %w", err)
	}
	return &store{dir: dir}, nil
}

func (s *store) path(port int) string {
	return filepath.Join(s.dir, strconv.Itoa(port)+".json")
}

func (s *store) save(port int, data []byte) error {
	tmp, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.path(port)); err != nil {
		return err
	}
	return s.syncDir()
}

func (s *store) remove(port int) error {
	if err := os.Remove(s.path(port)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return s.syncDir()
}

func (s *store) syncDir() error {
	d, err := os.Open(s.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// load returns every saved imposter, ordered by port.
func (s *store) load() ([][]byte, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("datadir: %w", err)
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
		b, err := os.ReadFile(s.path(p))
		if err != nil {
			return nil, fmt.Errorf("datadir: %w", err)
		}
		out = append(out, b)
	}
	return out, nil
}
