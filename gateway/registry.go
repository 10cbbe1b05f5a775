package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/mberr"
)

// gateway is the process's state: its imposters and what they share.
type gateway struct {
	opts    Options
	log     *slog.Logger
	logs    *logRing
	access  *access
	store   *store // nil without --datadir
	engine  *engine
	started time.Time

	// mu serializes admin writes (create, delete, replace), so that two
	// requests never interleave a port check with a bind.
	mu        sync.Mutex
	impMu     sync.RWMutex // guards imposters for readers
	persistMu sync.Mutex   // orders renders and writes of saved imposters
	imposters map[int]*imposter.Imposter
}

func newGateway(ctx context.Context, opts Options, logs *logRing) (*gateway, error) {
	acc, err := newAccess(opts.LocalOnly, opts.IPWhitelist, opts.Logger)
	if err != nil {
		return nil, err
	}
	g := &gateway{
		opts:      opts,
		log:       opts.Logger,
		logs:      logs,
		access:    acc,
		started:   time.Now(),
		imposters: make(map[int]*imposter.Imposter),
	}
	if opts.DataDir != "" {
		if g.store, err = openStore(opts.DataDir); err != nil {
			return nil, err
		}
	}
	if g.engine, err = newEngine(ctx, opts, g); err != nil {
		return nil, err
	}
	return g, nil
}

// close stops every imposter and releases what the engine holds.
func (g *gateway) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, imp := range g.snapshot() {
		_ = imp.Stop(ctx)
	}
	g.engine.close(ctx)
}

// loadInitial starts the imposters saved in --datadir, then those of
// --configfile (which win on a shared port, as the newer intent).
func (g *gateway) loadInitial(ctx context.Context) error {
	var saved [][]byte
	if g.store != nil {
		var err error
		if saved, err = g.store.load(); err != nil {
			return err
		}
	}
	var fromConfig []json.RawMessage
	if len(bytes.TrimSpace(g.opts.Imposters)) > 0 {
		var err error
		if fromConfig, err = impostersField(g.opts.Imposters); err != nil {
			return fmt.Errorf("configfile: %w", err)
		}
	}
	for _, data := range saved {
		if _, err := g.create(ctx, data); err != nil {
			g.log.Error("cannot restore a saved imposter", "err", err)
		}
	}
	for _, data := range fromConfig {
		spec, err := imposter.ParseSpec(data)
		if err != nil {
			return fmt.Errorf("configfile: %w", err)
		}
		if spec.Port != 0 {
			_, _ = g.remove(ctx, spec.Port)
		}
		if _, err := g.create(ctx, data); err != nil {
			return fmt.Errorf("configfile: %w", err)
		}
	}
	return nil
}

// impostersField reads `{"imposters": [...]}`.
func impostersField(data []byte) ([]json.RawMessage, error) {
	var body struct {
		Imposters *[]json.RawMessage `json:"imposters"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, mberr.New(mberr.InvalidJSON, "Unable to parse body as JSON")
	}
	if body.Imposters == nil {
		return nil, mberr.New(mberr.BadData, "'imposters' is a required field")
	}
	return *body.Imposters, nil
}

// get returns the imposter on port.
func (g *gateway) get(port int) (*imposter.Imposter, bool) {
	g.impMu.RLock()
	defer g.impMu.RUnlock()
	imp, ok := g.imposters[port]
	return imp, ok
}

// snapshot returns the imposters ordered by port.
func (g *gateway) snapshot() []*imposter.Imposter {
	g.impMu.RLock()
	defer g.impMu.RUnlock()
	out := make([]*imposter.Imposter, 0, len(g.imposters))
	for _, imp := range g.imposters {
		out = append(out, imp)
	}
	slices.SortFunc(out, func(a, b *imposter.Imposter) int { return a.Port() - b.Port() })
	return out
}

// create validates, compiles, binds and persists one imposter. Nothing is
// left behind when any step fails.
func (g *gateway) create(ctx context.Context, data []byte) (*imposter.Imposter, error) {
	spec, err := imposter.ParseSpec(data)
	if err != nil {
		return nil, err
	}
	return g.start(ctx, spec)
}

func (g *gateway) start(ctx context.Context, spec *imposter.Spec) (*imposter.Imposter, error) {
	if spec.Port != 0 {
		if _, taken := g.get(spec.Port); taken {
			return nil, mberr.New(mberr.ResourceConflict, fmt.Sprintf("Port %d is already in use", spec.Port))
		}
	}
	imp, err := imposter.New(spec, g.engine.imposterOptions())
	if err != nil {
		return nil, err
	}
	if err := imp.Start(); err != nil {
		return nil, err
	}
	if err := g.persist(imp); err != nil {
		_ = imp.Stop(ctx)
		return nil, err
	}
	g.impMu.Lock()
	g.imposters[imp.Port()] = imp
	g.impMu.Unlock()
	return imp, nil
}

// remove stops and forgets the imposter on port, with its saved file and
// its flows. It returns the imposter, or false when there was none.
func (g *gateway) remove(ctx context.Context, port int) (*imposter.Imposter, bool) {
	imp, ok := g.get(port)
	if !ok {
		return nil, false
	}
	g.persistMu.Lock()
	g.impMu.Lock()
	delete(g.imposters, port)
	g.impMu.Unlock()
	g.persistMu.Unlock()
	if err := imp.Stop(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		g.log.Warn("stopping imposter", "port", port, "err", err)
	}
	if g.store != nil {
		if err := g.store.remove(port); err != nil {
			g.log.Error("removing saved imposter", "port", port, "err", err)
		}
	}
	g.engine.forget(ctx, imp)
	return imp, true
}

// persist writes the imposter's replayable form to --datadir, if any, before
// the change is acknowledged.
func (g *gateway) persist(imp *imposter.Imposter) error {
	if g.store == nil {
		return nil
	}
	g.persistMu.Lock()
	defer g.persistMu.Unlock()
	return g.save(imp)
}

// save renders and writes imp; the caller holds persistMu, so that of two
// concurrent saves of one imposter the older rendering never lands last.
func (g *gateway) save(imp *imposter.Imposter) error {
	if g.store == nil {
		return nil
	}
	if err := g.store.save(imp.Port(), imp.JSON(imposter.View{Replayable: true})); err != nil {
		return mberr.New("corrupted database", "cannot save imposter: "+err.Error())
	}
	return nil
}

// commit persists an imposter the engine changed (a proxy recording), unless
// it was deleted meanwhile: a late save must not resurrect it.
func (g *gateway) commit(imp *imposter.Imposter) error {
	g.persistMu.Lock()
	defer g.persistMu.Unlock()
	if cur, ok := g.get(imp.Port()); !ok || cur != imp {
		return nil
	}
	return g.save(imp)
}
