package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/configlog"
	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/mberr"
)

// gateway is the process's state: the configuration log every change goes
// through, the imposters the reconciler runs from it, and what they share.
type gateway struct {
	opts    Options
	log     *slog.Logger
	logs    *logRing
	access  *access
	engine  *engine
	started time.Time

	config config.Log
	local  *configlog.Log // the single node's log, closed at the end
	rec    *reconciler
	repo   *writeThrough // with --impostersRepository
	// mirror keeps mb's layout of the single node's --datadir; nil
	// without one, and in a cluster.
	mirror *mirror
}

func newGateway(ctx context.Context, opts Options, logs *logRing) (*gateway, error) {
	acc, err := newAccess(opts.LocalOnly, opts.IPWhitelist, opts.Logger)
	if err != nil {
		return nil, err
	}
	g := &gateway{
		opts:    opts,
		log:     opts.Logger,
		logs:    logs,
		access:  acc,
		started: time.Now(),
	}
	if g.engine, err = newEngine(ctx, opts, g); err != nil {
		return nil, err
	}
	g.rec = newReconciler(g.engine, g.log)
	var rec config.Reconciler = g.rec
	if opts.Repository != nil {
		g.repo = newWriteThrough(g.rec, opts.Repository, g.log)
		rec = g.repo
	}
	if c := opts.Cluster; c != nil {
		if g.config, err = c.Log(rec); err != nil {
			g.engine.close(ctx)
			return nil, fmt.Errorf("cluster: %w", err)
		}
		return g, nil
	}
	path := ""
	if opts.DataDir != "" {
		path = filepath.Join(opts.DataDir, "config.db")
	}
	if opts.DataDir != "" && opts.Repository == nil {
		// mb keeps its imposters in --datadir unless a repository of
		// the user's does. Response cycles are kept in the folder's
		// meta.json files, as mb keeps them, so they go on after a
		// restart.
		cycles := &localCycles{}
		g.engine.cycles = cycles
		var matches *localMatches
		if opts.Debug {
			// and what stubs matched, in their matches/ folders.
			matches = newLocalMatches()
			g.engine.matches = matches
		}
		g.mirror = newMirror(opts.DataDir, g.log, cycles, matches)
		rec = mirrorReconciler{g.rec, g.mirror}
	}
	if g.local, err = configlog.Open(configlog.Options{Path: path, Reconciler: rec, Logger: g.log}); err != nil {
		g.engine.close(ctx)
		return nil, fmt.Errorf("datadir: %w", err)
	}
	g.config = g.local
	return g, nil
}

// close stops every imposter and releases what the engine holds.
func (g *gateway) close() {
	if c, ok := g.config.(io.Closer); ok && g.local == nil {
		// A cluster's log stops moving the imposters before they stop.
		_ = c.Close()
	}
	if g.mirror != nil {
		// Within closeWrites, before the rest gets its own time.
		g.mirror.stopping()
		g.mirror.exportRequests(g.rec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g.rec.stopAll(ctx)
	if g.mirror != nil {
		g.mirror.close(g.config.State())
	}
	if g.local != nil {
		if err := g.local.Close(); err != nil {
			g.log.Error("closing the configuration log", "err", err)
		}
	}
	if g.repo != nil {
		g.repo.close() // what was committed reaches the repository
	}
	g.engine.close(ctx)
}

// loadInitial starts the imposters the configuration log holds, takes in a
// --datadir an older build wrote, then applies --configfile as mb does: its
// imposters replace all others, as a PUT /imposters would, except that one
// identical to what is already there is kept as it runs (a restart with the
// same file keeps its flows).
func (g *gateway) loadInitial(ctx context.Context) error {
	var fromConfig []json.RawMessage
	configfile := len(bytes.TrimSpace(g.opts.Imposters)) > 0
	if configfile {
		var err error
		if fromConfig, err = impostersField(g.opts.Imposters); err != nil {
			return fmt.Errorf("configfile: %w", err)
		}
	}
	if g.local != nil {
		// A cluster's log makes the reconciler follow its state itself,
		// from the moment the log exists.
		g.rec.Follow(ctx, config.Empty(), g.config.State())
	}
	if g.opts.DataDir != "" {
		if err := g.migrate(ctx); err != nil {
			return err
		}
	}
	if g.mirror != nil {
		if err := g.syncDatadir(ctx); err != nil {
			return err
		}
	}
	if configfile {
		if err := g.applyConfigfile(ctx, fromConfig); err != nil {
			return err
		}
	} else if g.repo != nil {
		if err := g.loadRepository(ctx); err != nil {
			return err
		}
	}
	if g.local != nil && g.opts.DataDir != "" {
		// Recorded requests of imposters deleted while the process was
		// down (kill -9 before their files went) go now. A cluster's
		// log may not have caught up yet: its nodes leave them.
		var keep []string
		for _, doc := range g.config.State().Imposters {
			keep = append(keep, recordKey(doc))
		}
		if err := g.engine.requests.Sweep(keep); err != nil {
			g.log.Warn("cannot remove the recorded requests of imposters gone", "err", err)
		}
	}
	return nil
}

// applyConfigfile applies --configfile's imposters.
func (g *gateway) applyConfigfile(ctx context.Context, fromConfig []json.RawMessage) error {
	m := g.maker()
	defer m.done()
	cmd := &config.Command{Op: config.OpReplaceAll, Keep: true, Imposters: make([]config.ImposterDoc, 0, len(fromConfig))}
	for _, raw := range fromConfig {
		doc, err := m.imposter(raw)
		if err != nil {
			return fmt.Errorf("configfile: %w", err)
		}
		cmd.Imposters = append(cmd.Imposters, doc)
	}
	// A file past what one command may hold (100,000 recorded stubs save
	// to ~79 MB) is applied in parts: the imposters with their first
	// stubs, then the rest of each one's stubs in order.
	first, rest := splitCommand(cmd, configPartBytes)
	if _, err := g.submit(ctx, m.command(first)); err != nil {
		return fmt.Errorf("configfile: %w", err)
	}
	for _, part := range rest {
		if _, err := g.submit(ctx, m.command(part)); err != nil {
			return fmt.Errorf("configfile: the imposter on port %d: %w", part.Port, err)
		}
	}
	return nil
}

// loadRepository starts the imposters the repository holds, replacing the
// log's as a --configfile does; an empty repository is given the log's.
func (g *gateway) loadRepository(ctx context.Context) error {
	list, err := g.repo.repo.LoadAll(ctx)
	if err != nil {
		return fmt.Errorf("imposters repository: %w", err)
	}
	if len(list) == 0 {
		g.repo.changed(config.Empty(), g.config.State())
		return nil
	}
	if err := g.applyConfigfile(ctx, list); err != nil {
		return fmt.Errorf("imposters repository: %w", err)
	}
	return nil
}

// configPartBytes is the most stub and header JSON one command of a
// --configfile carries: a third of configlog.MaxCommandBytes, leaving
// room for what the encoding adds.
const configPartBytes = 8 << 20

// splitCommand cuts an OpReplaceAll whose imposters' JSON exceeds part
// bytes into one OpReplaceAll holding every imposter's header and each
// one's first stubs (while the part has room) and OpInsertStubs appending the rest, each
// within part bytes (a single larger stub goes alone). A command within
// part bytes is returned as it is.
func splitCommand(cmd *config.Command, part int) (*config.Command, []*config.Command) {
	total := 0
	for _, doc := range cmd.Imposters {
		total += len(doc.Header)
		for _, st := range doc.Stubs {
			total += len(st.JSON)
		}
	}
	if total <= part {
		return cmd, nil
	}
	first := *cmd
	first.Imposters = make([]config.ImposterDoc, len(cmd.Imposters))
	var rest []*config.Command
	size := 0
	for i, doc := range cmd.Imposters {
		size += len(doc.Header)
		n := 0
		for n < len(doc.Stubs) && size+len(doc.Stubs[n].JSON) <= part {
			size += len(doc.Stubs[n].JSON)
			n++
		}
		first.Imposters[i] = config.ImposterDoc{Port: doc.Port, Header: doc.Header, Stubs: doc.Stubs[:n]}
		for sent := n; sent < len(doc.Stubs); {
			k, sz := 0, 0
			for sent+k < len(doc.Stubs) && (k == 0 || sz+len(doc.Stubs[sent+k].JSON) <= part) {
				sz += len(doc.Stubs[sent+k].JSON)
				k++
			}
			rest = append(rest, &config.Command{Op: config.OpInsertStubs, Port: doc.Port, Index: -1, Stubs: doc.Stubs[sent : sent+k]})
			sent += k
		}
	}
	return &first, rest
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
func (g *gateway) get(port int) (*imposter.Imposter, bool) { return g.rec.get(port) }

// snapshot returns the imposters ordered by port.
func (g *gateway) snapshot() []*imposter.Imposter { return g.rec.snapshot() }
