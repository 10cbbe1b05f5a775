// Package plugins is riftgate's WebAssembly host: it registers stub plugins,
// validates them against ABI v1 (sdk/ABI.md), compiles them once with an
// on-disk cache, keeps a bounded pool of instances per module, runs calls
// under per-module limits, and serves the rift_v1 host imports against a
// per-call flow handle.
//
// It runs on wazero's compiler. Each distinct (memory limit, deadline on or
// off) pair gets its own wazero runtime, because wazero sets both per
// runtime; all runtimes share one compilation cache, so a module is compiled
// once whatever its limits.
package plugins

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Config configures a Host.
type Config struct {
	// CacheDir holds compiled code between runs. Empty keeps the cache in
	// memory only.
	CacheDir string
	// Logger receives guest log lines and WASI stdout/stderr (at debug).
	// Nil uses slog.Default().
	Logger *slog.Logger
	// Defaults fill the zero fields of the Limits given to Register; their
	// own zero fields take the ABI defaults.
	Defaults Limits
}

// ModuleInfo describes a registered module.
type ModuleInfo struct {
	Name   string
	Hash   string   // hex SHA-256 of the module's bytes
	Size   int      // bytes
	Entry  []string // the (i32) -> i32 exports, sorted
	Limits Limits   // with every default filled in
}

// Host runs plugin modules. Its methods are safe for concurrent use.
type Host struct {
	log      *slog.Logger
	defaults Limits
	cache    wazero.CompilationCache

	// modules is read lock-free on every call; writers copy it under mu.
	modules atomic.Pointer[map[string]*version]
	// open counts versions not yet closed, so Close can wait for them.
	open atomic.Int64
	// insts maps each live instance's api.Module to its *instance, for
	// the watchdog and Close.
	insts sync.Map

	// shut is set once Close starts; Call reads it to tell "closed" from
	// "no such module".
	shut atomic.Bool

	// mu serializes registry changes and guards runtimes and stats.
	mu       sync.Mutex
	runtimes map[uint32]wazero.Runtime // by memory page limit, which wazero fixes per runtime
	stats    map[string]*stats

	// cmu guards compiled. It is separate from mu, and never held while
	// compiling, because a call that retires a swapped-out version takes it:
	// that call must not wait for someone else's compilation.
	cmu      sync.Mutex
	compiled map[compiledKey]*compiledModule

	wd watchdog
}

type compiledKey struct {
	hash  [sha256.Size]byte
	pages uint32 // the runtime's memory limit
	// stoppable: compiled from interruptible(wasm), for a deadline.
	stoppable bool
}

// compiledModule is one compilation, shared by every version registered with
// the same bytes and runtime.
type compiledModule struct {
	key   compiledKey
	cm    wazero.CompiledModule
	refs  int // guarded by Host.cmu
	entry []string
	init  bool
	// maxPages is the memory's effective maximum: the module's own, clamped
	// to the runtime's limit by wazero.
	maxPages uint32
}

// NewHost makes a Host. Close it to free its runtimes and cache.
func NewHost(ctx context.Context, cfg Config) (*Host, error) {
	if err := cfg.Defaults.validate(); err != nil {
		return nil, fmt.Errorf("plugins: defaults: %w", err)
	}
	h := &Host{
		log:      cfg.Logger,
		defaults: cfg.Defaults.orDefaults(abiDefaults()),
		runtimes: make(map[uint32]wazero.Runtime),
		compiled: make(map[compiledKey]*compiledModule),
		stats:    make(map[string]*stats),
		wd:       watchdog{epoch: time.Now()},
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if cfg.CacheDir == "" {
		h.cache = wazero.NewCompilationCache()
	} else {
		c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("plugins: compilation cache %s: %w", cfg.CacheDir, err)
		}
		h.cache = c
	}
	empty := map[string]*version{}
	h.modules.Store(&empty)
	return h, nil
}

// runtime returns the runtime for k, making it (with WASI and rift_v1) on
// first use. The caller holds h.mu, and has checked h.shut under it.
func (h *Host) runtime(ctx context.Context, pages uint32) (wazero.Runtime, error) {
	if rt, ok := h.runtimes[pages]; ok {
		return rt, nil
	}
	rc := wazero.NewRuntimeConfigCompiler().
		WithCompilationCache(h.cache).
		WithMemoryLimitPages(pages)
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("plugins: instantiate WASI: %w", err)
	}
	b := rt.NewHostModuleBuilder(hostModule)
	for _, f := range hostFuncs {
		b.NewFunctionBuilder().WithGoModuleFunction(bind(f), f.params, f.results).Export(f.name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("plugins: instantiate %s: %w", hostModule, err)
	}
	h.runtimes[pages] = rt
	return rt, nil
}

// compile returns the compilation of wasm for runtime rt (named k.rt),
// reusing one made earlier from the same bytes.
func (h *Host) compile(ctx context.Context, rt wazero.Runtime, k compiledKey, wasm []byte) (*compiledModule, error) {
	h.cmu.Lock()
	if c, ok := h.compiled[k]; ok {
		c.refs++
		h.cmu.Unlock()
		return c, nil
	}
	h.cmu.Unlock()
	if k.stoppable {
		stoppable, err := interruptible(wasm)
		if err != nil {
			// wazero's word on a module it refuses too is the one to give.
			if cm, cerr := rt.CompileModule(ctx, wasm); cerr != nil {
				err = fmt.Errorf("does not compile: %w", cerr)
			} else {
				_ = cm.Close(ctx)
			}
			return nil, fmt.Errorf("%w: %w", ErrInvalidModule, err)
		}
		wasm = stoppable
	}
	cm, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return nil, fmt.Errorf("%w: does not compile: %w", ErrInvalidModule, err)
	}
	c := &compiledModule{key: k, cm: cm, refs: 1}
	if err := c.validate(); err != nil {
		_ = cm.Close(ctx)
		return nil, fmt.Errorf("%w: %w", ErrInvalidModule, err)
	}
	h.cmu.Lock()
	if prev, ok := h.compiled[k]; ok {
		// Another registration of the same bytes won the race.
		prev.refs++
		h.cmu.Unlock()
		_ = cm.Close(ctx)
		return prev, nil
	}
	h.compiled[k] = c
	h.cmu.Unlock()
	return c, nil
}

// releaseCompiled drops one reference to c and closes it with the last.
func (h *Host) releaseCompiled(c *compiledModule) {
	h.cmu.Lock()
	c.refs--
	last := c.refs == 0
	if last {
		delete(h.compiled, c.key)
	}
	h.cmu.Unlock()
	if last {
		_ = c.cm.Close(context.Background())
	}
}

// validate checks the module's shape against ABI v1 section 1 and records
// its entry points. Every problem found is reported, not just the first.
func (c *compiledModule) validate() error {
	var errs []error
	fns := c.cm.ExportedFunctions()
	mem, ok := c.cm.ExportedMemories()["memory"]
	if !ok {
		errs = append(errs, errors.New(`does not export a memory named "memory"`))
	} else {
		c.maxPages, _ = mem.Max()
	}
	if len(c.cm.ImportedMemories()) > 0 {
		errs = append(errs, errors.New("imports a memory; a plugin must define its own"))
	}
	if m, ok := fns[abiMarker]; !ok {
		errs = append(errs, fmt.Errorf("does not export %s () -> (): not an ABI v1 module", abiMarker))
	} else if !sigIs(m, nil, nil) {
		errs = append(errs, fmt.Errorf("%s has type %s, want () -> ()", abiMarker, sigString(m)))
	}
	if _, ok := fns["_start"]; ok {
		errs = append(errs, errors.New("exports _start: a command module exits after main; build a reactor (no _start) instead"))
	}
	if f, ok := fns["_initialize"]; ok {
		if !sigIs(f, nil, nil) {
			errs = append(errs, fmt.Errorf("_initialize has type %s, want () -> ()", sigString(f)))
		}
		c.init = true
	}
	entry := []api.ValueType{api.ValueTypeI32}
	for name, f := range fns {
		if sigIs(f, entry, entry) {
			c.entry = append(c.entry, name)
		}
	}
	slices.Sort(c.entry)
	if len(c.entry) == 0 {
		errs = append(errs, errors.New("exports no entry point of type (i32) -> i32"))
	}
	for _, f := range c.cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		switch mod {
		case wasi_snapshot_preview1.ModuleName:
			// Resolved, and its signatures checked, when instantiated.
		case hostModule:
			hf, ok := lookupHostFunc(name)
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("imports %s.%s, which this host does not provide", mod, name))
			case !sigIs(f, hf.params, hf.results):
				errs = append(errs, fmt.Errorf("imports %s.%s as %s, want %s", mod, name, sigString(f), hf.sig()))
			}
		default:
			errs = append(errs, fmt.Errorf("imports %s.%s: only %s and %s may be imported", mod, name, hostModule, wasi_snapshot_preview1.ModuleName))
		}
	}
	return errors.Join(errs...)
}

func sigIs(f api.FunctionDefinition, params, results []api.ValueType) bool {
	return slices.Equal(f.ParamTypes(), params) && slices.Equal(f.ResultTypes(), results)
}

func sigString(f api.FunctionDefinition) string {
	return hostFunc{params: f.ParamTypes(), results: f.ResultTypes()}.sig()
}

// Register validates and compiles wasm and makes it callable as name. A
// module already registered under name is replaced atomically: calls in
// flight finish on the old version, whose instances are closed when the last
// of them returns. Registering the same bytes with the same limits again is
// a no-op; the same bytes under another name reuse the compilation.
func (h *Host) Register(ctx context.Context, name string, wasm []byte, lim Limits) (ModuleInfo, error) {
	if name == "" {
		return ModuleInfo{}, fmt.Errorf("plugins: register: %w: empty name", ErrInvalidModule)
	}
	if err := lim.validate(); err != nil {
		return ModuleInfo{}, fmt.Errorf("plugins: register %q: %w", name, err)
	}
	lim = lim.orDefaults(h.defaults)
	sum := sha256.Sum256(wasm)
	info := ModuleInfo{Name: name, Hash: hex.EncodeToString(sum[:]), Size: len(wasm), Limits: lim}

	h.mu.Lock()
	if h.shut.Load() {
		h.mu.Unlock()
		return ModuleInfo{}, fmt.Errorf("plugins: register %q: %w", name, ErrClosed)
	}
	if old := (*h.modules.Load())[name]; old != nil && old.info.Hash == info.Hash && old.lim == lim {
		h.mu.Unlock()
		return old.info, nil
	}
	if lim.Deadline > 0 {
		h.startWatchdog()
	}
	key := compiledKey{hash: sum, pages: lim.MemoryPages, stoppable: lim.Deadline > 0}
	rt, err := h.runtime(ctx, key.pages)
	if err != nil {
		h.mu.Unlock()
		return ModuleInfo{}, fmt.Errorf("plugins: register %q: %w", name, err)
	}
	st := h.stats[name]
	if st == nil {
		st = new(stats)
	}
	h.mu.Unlock()

	c, err := h.compile(ctx, rt, key, wasm)
	if err != nil {
		if h.shut.Load() {
			err = ErrClosed // the runtime was closed under the compiler
		}
		return ModuleInfo{}, fmt.Errorf("plugins: register %q: %w", name, err)
	}
	info.Entry = slices.Clone(c.entry)
	v := h.newVersion(info, lim, c, rt, st)

	// Start one instance now: it proves the imports resolve and that
	// _initialize runs, so a bad module fails here and not on a request.
	inst, err := v.instantiate(ctx)
	if err != nil {
		v.release()
		return ModuleInfo{}, fmt.Errorf("plugins: register %q: %w: %w", name, ErrInvalidModule, err)
	}
	<-v.slots
	v.idle <- inst

	h.mu.Lock()
	if h.shut.Load() {
		h.mu.Unlock()
		v.release()
		return ModuleInfo{}, fmt.Errorf("plugins: register %q: %w", name, ErrClosed)
	}
	h.stats[name] = st
	old := h.swap(name, v)
	h.mu.Unlock()
	if old != nil {
		old.release()
	}
	h.log.Info("plugin registered", "module", name, "sha256", info.Hash, "bytes", info.Size, "entry", info.Entry)
	return info, nil
}

// swap installs v (or removes name, if v is nil) and returns the version it
// replaced. The caller holds h.mu and releases the old version after
// unlocking.
func (h *Host) swap(name string, v *version) *version {
	cur := *h.modules.Load()
	next := make(map[string]*version, len(cur)+1)
	for n, x := range cur {
		next[n] = x
	}
	old := cur[name]
	if v == nil {
		delete(next, name)
	} else {
		next[name] = v
	}
	h.modules.Store(&next)
	if old != nil {
		old.retired.Store(true)
	}
	return old
}

// Unregister removes the module registered as name. Calls in flight finish.
func (h *Host) Unregister(_ context.Context, name string) error {
	h.mu.Lock()
	if (*h.modules.Load())[name] == nil {
		h.mu.Unlock()
		return fmt.Errorf("plugins: unregister %q: %w", name, ErrUnknownModule)
	}
	old := h.swap(name, nil)
	delete(h.stats, name)
	h.mu.Unlock()
	old.release()
	return nil
}

// Module returns the module registered as name.
func (h *Host) Module(name string) (ModuleInfo, bool) {
	v := (*h.modules.Load())[name]
	if v == nil {
		return ModuleInfo{}, false
	}
	return v.info, true
}

// Modules returns every registered module, sorted by name.
func (h *Host) Modules() []ModuleInfo {
	m := *h.modules.Load()
	out := make([]ModuleInfo, 0, len(m))
	for _, v := range m {
		out = append(out, v.info)
	}
	slices.SortFunc(out, func(a, b ModuleInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Stats returns every registered module's counters, sorted by name.
func (h *Host) Stats() []ModuleStats {
	m := *h.modules.Load()
	out := make([]ModuleStats, 0, len(m))
	for name, v := range m {
		out = append(out, v.stats.snapshot(name, v.info.Hash))
	}
	slices.SortFunc(out, func(a, b ModuleStats) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Close unregisters every module, waits (until ctx ends) for calls in flight
// to return, and then closes every instance, runtime and the cache. Calls
// still running when ctx ends are stopped by closing their runtime.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.shut.Swap(true) {
		h.mu.Unlock()
		return nil
	}
	cur := *h.modules.Load()
	empty := map[string]*version{}
	h.modules.Store(&empty)
	h.mu.Unlock()
	for _, v := range cur {
		v.retired.Store(true)
		v.release()
	}

	// Versions close when their last call returns; give them until ctx
	// ends. Polling keeps Close from leaving a waiter goroutine behind.
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for h.open.Load() > 0 {
		select {
		case <-ctx.Done():
			h.log.Warn("plugin host closing with calls in flight", "versions", h.open.Load())
			goto force
		case <-tick.C:
		}
	}
force:
	// Stop the calls still running: their guests trap at their next loop,
	// and their versions close as they return.
	h.insts.Range(func(_, v any) bool {
		v.(*instance).cc.abort()
		return true
	})
	for stop := time.Now().Add(time.Second); h.open.Load() > 0 && time.Now().Before(stop); {
		<-tick.C
	}
	h.mu.Lock()
	rts := h.runtimes
	h.runtimes = nil
	h.mu.Unlock()
	var errs []error
	bg := context.WithoutCancel(ctx)
	for _, rt := range rts {
		errs = append(errs, rt.Close(bg))
	}
	errs = append(errs, h.cache.Close(bg))
	h.stopWatchdog()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("plugins: close: %w", err)
	}
	return nil
}
