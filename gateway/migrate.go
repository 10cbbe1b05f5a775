package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/riftgate/riftgate/gateway/config"
)

// migrate takes in <datadir>/imposters, where builds before the
// configuration log kept one JSON file per imposter: each becomes a
// command, and the folder is renamed imposters.migrated so that it is read
// once. An imposter the log already holds is left as the log has it.
func (g *gateway) migrate(ctx context.Context) error {
	dir := filepath.Join(g.opts.DataDir, "imposters")
	saved, err := readSaved(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("datadir: %w", err)
	}
	for _, raw := range saved {
		m := g.maker()
		doc, err := m.imposter(raw)
		if err == nil && g.config.State().Imposter(doc.Port) == nil {
			_, err = g.submit(ctx, m.command(&config.Command{Op: config.OpCreateImposter, Imposters: []config.ImposterDoc{doc}}))
		}
		m.done()
		if err != nil {
			g.log.Error("cannot take in a saved imposter", "err", err)
		}
	}
	if err := os.Rename(dir, dir+".migrated"); err != nil {
		return fmt.Errorf("datadir: %w", err)
	}
	g.log.Info("took in the imposters of an older datadir", "from", dir, "count", len(saved))
	return nil
}

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
