package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/imposter"
)

// reconciler derives the running imposters from the configuration: it is
// the config.Reconciler every log drives. Each state the log applies is
// prepared (stubs compiled, listeners bound) and then committed (servers
// started, stub tables swapped, imposters stopped); a stub whose definition
// did not change keeps its compiled self, and with it where its responses
// cycle is.
type reconciler struct {
	e   *engine
	log *slog.Logger

	mu      sync.RWMutex // guards running; Prepare reads it, Commit writes it
	running map[int]*running

	resMu    sync.Mutex
	reserved map[int]net.Listener // port-0 imposters' listeners, bound by their maker
}

// running is one imposter the reconciler runs, and what it was built from.
type running struct {
	imp   *imposter.Imposter
	doc   *config.Imposter
	stubs map[uint64]compiled // by stub id
	// serving is false for an imposter whose port could not be bound when
	// the process started: it is configured, shown, and not served.
	serving bool
}

// compiled is a compiled stub and the definition it came from (with the
// responses proxyAlways had added to it then).
type compiled struct {
	doc *config.Stub
	st  *imposter.Stub
}

func newReconciler(e *engine, log *slog.Logger) *reconciler {
	return &reconciler{e: e, log: log, running: map[int]*running{}, reserved: map[int]net.Listener{}}
}

// get returns the running imposter on port.
func (r *reconciler) get(port int) (*imposter.Imposter, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	run, ok := r.running[port]
	if !ok {
		return nil, false
	}
	return run.imp, true
}

// snapshot returns the running imposters ordered by port.
func (r *reconciler) snapshot() []*imposter.Imposter {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*imposter.Imposter, 0, len(r.running))
	for _, port := range slices.Sorted(maps.Keys(r.running)) {
		out = append(out, r.running[port].imp)
	}
	return out
}

// reserve binds a free port for an imposter that asked for port 0, and
// holds the listener for the command that will create it.
func (r *reconciler) reserve(spec *imposter.Spec) (int, error) {
	ln, err := imposter.Listen(spec, r.e.imposterOptions())
	if err != nil {
		return 0, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	r.resMu.Lock()
	r.reserved[port] = ln
	r.resMu.Unlock()
	return port, nil
}

// release closes a reservation no command took.
func (r *reconciler) release(ports ...int) {
	r.resMu.Lock()
	defer r.resMu.Unlock()
	for _, p := range ports {
		if ln, ok := r.reserved[p]; ok {
			ln.Close()
			delete(r.reserved, p)
		}
	}
}

// listen takes port's reservation, or binds it.
func (r *reconciler) listen(spec *imposter.Spec) (net.Listener, error) {
	r.resMu.Lock()
	ln, ok := r.reserved[spec.Port]
	delete(r.reserved, spec.Port)
	r.resMu.Unlock()
	if ok {
		return ln, nil
	}
	return imposter.Listen(spec, r.e.imposterOptions())
}

// plan is a prepared move of the running imposters to a new state.
type plan struct {
	r      *reconciler
	prev   *config.State
	next   *config.State
	stops  []*running // imposters that go
	swaps  []swap     // imposters whose stubs change
	starts []start    // imposters that come, or replace one on their port
}

type swap struct {
	run *running
	doc *config.Imposter
	// A whole new stub list: its stubs by id, in order, with their keys.
	stubs map[uint64]compiled
	list  []*imposter.Stub
	keys  []config.Key
	// Or, when only recordings changed the imposter (list is nil): the
	// stubs they added, and every stub changed, by id.
	added   []*imposter.Stub
	changed map[uint64]compiled
	// extends are the responses recordings added to running stubs, in
	// either case.
	extends []*imposter.Extension
}

type start struct {
	run *running
	ln  net.Listener // nil when it replaces an imposter, whose port it binds at Commit
	old *running
}

// Prepare implements config.Reconciler.
func (r *reconciler) Prepare(ctx context.Context, prev, next *config.State, _ config.Result) (config.Plan, error) {
	return r.prepare(ctx, prev, next, true)
}

// Follow implements config.Reconciler: a committed state is prepared come
// what may and committed. An imposter that cannot be built is left out (an
// older version of it stops), one whose port cannot be bound is configured
// and not served, and a plugin that cannot load is left to the stubs that
// use it; each is said in the log and tried again at the next change.
func (r *reconciler) Follow(ctx context.Context, prev, next *config.State) {
	p, _ := r.prepare(ctx, prev, next, false)
	p.Commit()
}

// prepare builds the plan from the running imposters to next. strict
// refuses the move at the first failure; otherwise the failure is logged
// and the move goes on without the imposter that failed.
func (r *reconciler) prepare(ctx context.Context, prev, next *config.State, strict bool) (*plan, error) {
	r.mu.RLock()
	cur := maps.Clone(r.running)
	r.mu.RUnlock()
	p := &plan{r: r, prev: prev, next: next}
	fail := func(port int, old *running, err error) error {
		if strict {
			p.Abort()
			return err
		}
		r.log.Error("cannot run a committed imposter; it is left out until the configuration changes again", "port", port, "err", err)
		if old != nil {
			p.stops = append(p.stops, old)
		}
		return nil
	}
	for _, port := range union(slices.Collect(maps.Keys(cur)), next.Ports()) {
		doc, old := next.Imposters[port], cur[port]
		switch {
		case doc == nil:
			p.stops = append(p.stops, old)
		case old != nil && bytes.Equal(old.doc.Header, doc.Header):
			moved := pluginsChanged(prev, next) && pluginsMoved(doc, prev, next)
			if old.doc == doc && !moved {
				continue
			}
			sw, err := r.recorded(old, doc, next, moved, strict)
			if sw == nil {
				sw, err = r.restub(old, doc, prev, next)
			}
			if err != nil {
				if err := fail(port, old, err); err != nil {
					return nil, err
				}
				continue
			}
			p.swaps = append(p.swaps, *sw)
		default:
			run, err := r.build(doc, next)
			if err != nil {
				if err := fail(port, old, err); err != nil {
					return nil, err
				}
				continue
			}
			st := start{run: run, old: old}
			if old == nil {
				// Unbound when not strict: serve tries the port again at
				// Commit and leaves the imposter unserved, said in the log.
				if st.ln, err = r.listen(run.imp.Spec()); err != nil && strict {
					_ = run.imp.Stop(ctx)
					run.imp.CloseRequests(false)
					p.Abort()
					return nil, err
				}
			}
			p.starts = append(p.starts, st)
		}
	}
	// A plugin that a changed command registers must load, whether or not
	// a stub uses it yet.
	for name, pl := range next.Plugins {
		if prev.Plugins[name] != pl {
			if _, _, err := r.e.load(next, pl.Hash, pl.Limits); err != nil {
				if strict {
					p.Abort()
					return nil, err
				}
				r.log.Error("cannot load a committed plugin", "plugin", name, "err", err)
			}
		}
	}
	return p, nil
}

func union(a, b []int) []int {
	return slices.Compact(slices.Sorted(slices.Values(append(a, b...))))
}

// pluginsChanged reports whether any registered plugin changed: only then
// need the stubs be read for the ones that use it.
func pluginsChanged(prev, next *config.State) bool {
	return !maps.Equal(prev.Plugins, next.Plugins)
}

// pluginsMoved reports whether a plugin some stub of doc uses by name now
// names another module or limits.
func pluginsMoved(doc *config.Imposter, prev, next *config.State) bool {
	moved := false
	doc.Each(func(st *config.Stub) bool {
		moved = stubPluginsMoved(st, prev, next)
		return !moved
	})
	return moved
}

// spec parses a stored imposter with its stubs.
func spec(doc *config.Imposter) (*imposter.Spec, error) {
	s, err := imposter.ParseSpec(doc.Header)
	if err != nil {
		return nil, err
	}
	s.RecordKey = recordKey(doc)
	s.Stubs = make([]*imposter.StubSpec, 0, doc.Len())
	doc.EachKeyed(func(k config.Key, st *config.Stub) bool {
		var ss *imposter.StubSpec
		if ss, err = stubSpec(doc, k, st); err == nil {
			s.Stubs = append(s.Stubs, ss)
		}
		return err == nil
	})
	return s, err
}

// recordKey names where an imposter's recorded requests are kept: its
// port and definition (stubs aside), so that a restart on --datadir finds
// them again, and an imposter that replaces another on its port starts
// apart from it.
func recordKey(doc *config.Imposter) string {
	return fmt.Sprintf("%d-%016x", doc.Port, xxhash.Sum64(doc.Header))
}

// stubSpec parses a stored stub of doc, with every response proxyAlways
// added.
func stubSpec(doc *config.Imposter, k config.Key, st *config.Stub) (*imposter.StubSpec, error) {
	var ss *imposter.StubSpec
	if p, ok := doc.Parsed(st.ID).(*imposter.StubSpec); ok {
		c := *p // shared with whoever parsed it: this one gets the id
		ss = &c
	} else {
		var err error
		if ss, err = imposter.ParseStub(st.Doc()); err != nil {
			return nil, err
		}
	}
	ss.ID, ss.Refs, ss.Key, ss.Recorded = st.ID, st.Refs, k, st.Recorded
	return ss, nil
}

// build compiles an imposter of the configuration, not yet serving.
func (r *reconciler) build(doc *config.Imposter, cfg *config.State) (*running, error) {
	s, err := spec(doc)
	if err != nil {
		return nil, err
	}
	imp, err := imposter.New(s, r.e.imposterOptions(), cfg)
	if err != nil {
		return nil, err
	}
	run := &running{imp: imp, doc: doc, stubs: make(map[uint64]compiled, doc.Len())}
	for _, st := range imp.Stubs() {
		d, _ := doc.Stub(st.Spec.ID)
		run.stubs[st.Spec.ID] = compiled{doc: d, st: st}
	}
	return run, nil
}

// same reports whether a running stub compiled from was is still what st
// defines, but for the responses proxyAlways added to st since.
func same(was, st *config.Stub) bool {
	return bytes.Equal(was.JSON, st.JSON) && st.NumMore() >= was.NumMore()
}

// recorded moves a running imposter to doc when only recordings made doc
// from the version it runs: the stubs they added are compiled and the
// responses they added to running stubs are, nothing else, so the move
// costs what the recordings do, however many stubs the imposter has. It
// returns nil when doc was made otherwise, for restub.
//
// Not strict (a committed state), a recorded stub or response that does
// not compile is left out, said in the log, rather than the imposter.
func (r *reconciler) recorded(run *running, doc *config.Imposter, next *config.State, moved, strict bool) (*swap, error) {
	ids, ok := doc.Changes(run.doc)
	if !ok || moved {
		return nil, nil
	}
	sw := &swap{run: run, doc: doc, changed: make(map[uint64]compiled, len(ids))}
	for _, id := range ids {
		st, ok := doc.Stub(id)
		if !ok {
			return nil, nil
		}
		if old, had := run.stubs[id]; had {
			if !same(old.doc, st) {
				return nil, nil
			}
			if st.NumMore() > old.doc.NumMore() {
				x, err := run.imp.Extend(old.st, st.More(old.doc.NumMore()), st.MoreParsed(old.doc.NumMore()), next)
				if err != nil {
					if strict {
						return nil, err
					}
					r.log.Error("a recorded response does not compile; it is left out", "port", doc.Port, "stub", id, "err", err)
					continue
				}
				sw.extends = append(sw.extends, x)
			}
			sw.changed[id] = compiled{doc: st, st: old.st}
			continue
		}
		k, _ := doc.Key(id)
		ss, err := stubSpec(doc, k, st)
		var c *imposter.Stub
		if err == nil {
			c, err = run.imp.CompileStub(ss, next)
		}
		if err != nil {
			if strict {
				return nil, err
			}
			r.log.Error("a recorded stub does not compile; it is left out", "port", doc.Port, "stub", id, "err", err)
			continue
		}
		sw.added = append(sw.added, c)
		sw.changed[id] = compiled{doc: st, st: c}
	}
	return sw, nil
}

// restub compiles the stub list doc gives a running imposter: a stub whose
// definition and plugins are unchanged is kept as it is, and a recompiled
// one (a proxyAlways recording added a response) goes on where it was.
func (r *reconciler) restub(run *running, doc *config.Imposter, prev, next *config.State) (*swap, error) {
	n := doc.Len()
	sw := &swap{run: run, doc: doc, stubs: make(map[uint64]compiled, n), list: make([]*imposter.Stub, 0, n), keys: make([]config.Key, 0, n)}
	var err error
	doc.EachKeyed(func(k config.Key, st *config.Stub) bool {
		old, had := run.stubs[st.ID]
		if had && same(old.doc, st) && !stubPluginsMoved(st, prev, next) {
			if st.NumMore() > old.doc.NumMore() {
				var x *imposter.Extension
				if x, err = run.imp.Extend(old.st, st.More(old.doc.NumMore()), st.MoreParsed(old.doc.NumMore()), next); err != nil {
					return false
				}
				sw.extends = append(sw.extends, x)
			}
			sw.stubs[st.ID] = compiled{doc: st, st: old.st}
			sw.list, sw.keys = append(sw.list, old.st), append(sw.keys, k)
			return true
		}
		var ss *imposter.StubSpec
		if ss, err = stubSpec(doc, k, st); err != nil {
			return false
		}
		var c *imposter.Stub
		if c, err = run.imp.CompileStub(ss, next); err != nil {
			return false
		}
		if had {
			c.Continue(old.st)
		}
		sw.stubs[st.ID] = compiled{doc: st, st: c}
		sw.list, sw.keys = append(sw.list, c), append(sw.keys, k)
		return true
	})
	if err != nil {
		return nil, err
	}
	return sw, nil
}

func stubPluginsMoved(st *config.Stub, prev, next *config.State) bool {
	for _, name := range st.Refs.Plugins {
		if prev.Plugins[name] != next.Plugins[name] {
			return true
		}
	}
	return false
}

// Commit implements config.Plan: imposters that go stop first, freeing
// their ports; then new ones serve and changed stub lists swap in.
func (p *plan) Commit() {
	r := p.r
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, run := range p.stops {
		r.stop(ctx, run)
	}
	for _, st := range p.starts {
		if st.old != nil {
			r.stop(ctx, st.old)
		}
	}
	r.mu.Lock()
	for _, run := range p.stops {
		delete(r.running, run.imp.Port())
	}
	for _, sw := range p.swaps {
		for _, x := range sw.extends {
			x.Commit()
		}
		if sw.list == nil {
			sw.run.imp.AddStubs(sw.added)
			maps.Copy(sw.run.stubs, sw.changed)
			sw.run.doc = sw.doc
			continue
		}
		sw.run.imp.SetStubs(sw.list, sw.keys)
		sw.run.stubs, sw.run.doc = sw.stubs, sw.doc
	}
	for _, st := range p.starts {
		r.serve(st.run, st.ln)
		r.running[st.run.imp.Port()] = st.run
	}
	r.mu.Unlock()
	if !p.recordingsOnly() {
		r.e.unloadUnused(p.next)
	}
}

// recordingsOnly reports whether the plan only adds what recordings made,
// which names no module: there is nothing to unload, and looking would
// read every stub.
func (p *plan) recordingsOnly() bool {
	if len(p.stops)+len(p.starts) > 0 || !maps.Equal(p.prev.Plugins, p.next.Plugins) {
		return false
	}
	for _, sw := range p.swaps {
		if sw.list != nil {
			return false
		}
	}
	return true
}

// serve starts run on ln, or on its port freshly bound when ln is nil (it
// replaces an imposter that held the port until now). A port that cannot
// be bound leaves the imposter configured and not served, said in the log.
func (r *reconciler) serve(run *running, ln net.Listener) {
	var err error
	if ln == nil {
		ln, err = imposter.Listen(run.imp.Spec(), r.e.imposterOptions())
	}
	if err == nil {
		err = run.imp.Serve(ln)
	}
	if err != nil {
		r.log.Error("cannot serve imposter", "port", run.imp.Port(), "err", err)
		return
	}
	run.serving = true
}

// stop stops an imposter that goes (deleted, or replaced): its recorded
// requests go with it.
func (r *reconciler) stop(ctx context.Context, run *running) {
	r.halt(ctx, run)
	run.imp.CloseRequests(false)
	if c := r.e.localClaims; c != nil {
		c.ForgetPort(run.imp.Port())
	}
}

func (r *reconciler) halt(ctx context.Context, run *running) {
	if err := run.imp.Stop(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		r.log.Warn("stopping imposter", "port", run.imp.Port(), "err", err)
	}
}

// Abort implements config.Plan: what Prepare bound or built is released.
func (p *plan) Abort() {
	ctx := context.Background()
	for _, st := range p.starts {
		if st.ln != nil {
			st.ln.Close()
		}
		_ = st.run.imp.Stop(ctx)
		st.run.imp.CloseRequests(false)
	}
}

// stopAll stops every imposter, when the process ends: with --datadir,
// their recorded requests wait for the next start.
func (r *reconciler) stopAll(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for port, run := range r.running {
		r.halt(ctx, run)
		run.imp.CloseRequests(true)
		delete(r.running, port)
	}
	r.release(slices.Collect(maps.Keys(r.reserved))...)
}
