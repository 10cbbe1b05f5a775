package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/mbdatadir"
	"github.com/riftgate/riftgate/gateway/reqlog"
)

// The single node's --datadir is also Mountebank's: the configuration log
// (config.db) stays the one durable truth, and the mirror keeps mb's
// layout (gateway/mbdatadir) beside it, written as each command commits,
// so that mb started on the folder serves what riftgate served. At start,
// folders that riftgate did not write (mb did, or a person) are taken into
// the log; docs/RATIONALE.md says why this way round.

// mirrorFile is riftgate's note of which imposter folders it wrote, and
// what they held when it last stopped cleanly.
const mirrorFile = "mb-mirror.json"

// manifest is mirrorFile's content.
type manifest struct {
	Version int `json:"version"`
	// Clean says the process that wrote it stopped cleanly: Imposters then
	// holds each folder's digest as it left it.
	Clean     bool              `json:"clean"`
	Imposters map[string]string `json:"imposters"`
	// Requests names, per imposter, the newest of its recorded requests'
	// files (<port>/requests/<name>.json) riftgate has: newer ones were
	// recorded by mb, and are taken in.
	Requests map[string]string `json:"requests,omitempty"`
	// Logs holds, at a clean stop, each imposter as the configuration log
	// had it (logPrint): a start that finds both the log and the folder
	// as they were takes the folder as it is, without comparing each stub.
	Logs map[string]string `json:"logs,omitempty"`
}

// logPrint identifies imp as the configuration log holds it: its header,
// and each stub's id (a stub's id changes with anything else of it) and
// number of recorded responses.
func logPrint(imp *config.Imposter) string {
	h := sha256.New()
	h.Write(imp.Header)
	var b []byte
	imp.Each(func(cs *config.Stub) bool {
		b = strconv.AppendUint(append(b[:0], '\n'), cs.ID, 10)
		b = strconv.AppendInt(append(b, ' '), int64(cs.NumMore()), 10)
		h.Write(b)
		return true
	})
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// mirror writes the configuration into mb's layout as it changes.
type mirror struct {
	root   string
	log    *slog.Logger
	cycles *localCycles
	// matches, under --debug, are what stubs matched (nil without).
	matches *localMatches

	mu    sync.Mutex // serializes writes: commits, the position flusher, close
	ports map[int]*mirrored
	// skip are folders that could not be read: left as they are, never
	// written, so nothing in them is lost.
	skip map[int]bool
	// resync are folders that lag the log (a stop cut their write short,
	// or they are missing), too large to write before the start serves:
	// the flusher writes them, keeping what they hold (nil: nothing)
	// where it is the log's. They are noted as riftgate's meanwhile.
	resync map[int]*mbdatadir.Imposter
	on     bool // set once the start's sync is done; commits are mirrored from then
	// written is the state the folders hold (the seq-th the log
	// committed); pending, under pendMu, a newer one for the flusher to
	// write: one that only recordings made, or one a large change made
	// (large: a change to an imposter of more than largeImposter stubs,
	// which may be long to write; busy while the flusher writes it, when
	// later changes wait for it too). Such a commit takes only pendMu,
	// never mu, which the flusher holds while it writes.
	written    *config.State
	writtenSeq uint64
	pendMu     sync.Mutex
	pending    *config.State
	pendingSeq uint64
	large      bool
	busy       bool
	seq        uint64 // states committed, under pendMu
	// marks are manifest.Requests; base, per imposter, the number of the
	// first request recorded that its folder does not have yet.
	marks map[int]string
	base  map[int]int64
	// stale are folders a write failed on: the log wins there at the next
	// start, whatever the folder holds.
	stale map[int]bool

	stop chan struct{}
	done chan struct{}
	// trash takes the folders of deleted imposters to the sweeper, which
	// removes them in the background (swept closes when it is done).
	trash chan string
	swept chan struct{}
	// unused are folders of stubs no stub uses (spare ones no stub took
	// over, those a cut write or a kill -9 left), for spares to take to
	// the sweeper, many at a time.
	unused []string
	spares chan []string
	// closeBy, set before stop closes, is when writes still under way
	// give up (cut).
	closeBy  time.Time
	stopOnce sync.Once
}

// mirrored is what the mirror knows of one imposter's folder: each stub's
// folder, files and definition, by stub id (not its responses: the state
// has them), and whether imposter.json is to be written again.
type mirrored struct {
	header json.RawMessage
	stubs  map[uint64]*mstub
	ids    []uint64 // in imposter.json's order
	dirty  bool     // imposter.json lags: the flusher writes it
	// order, when set, is the imposter as recordings last left it, whose
	// stubs' order ids is to take before imposter.json is written:
	// reading it at each write rather than at each flush keeps recording
	// O(1) per stub however many the imposter has.
	order *config.Imposter
	// metas are the stubs whose meta.json lags the responses recordings
	// added to them: the flusher writes it.
	metas map[uint64]bool
	// due is when the flusher may write imposter.json again: it lists
	// every stub, so that its writes after recordings cost O(1)
	// amortized per recording, the flusher waits after each write nine
	// times what the write took (at most a tenth of its time on them).
	due time.Time
	// spare are the folders of stubs that changes removed, by content,
	// kept a moment for a new stub of the same content to take over: a
	// replay sent in parts removes, with its first part, the stubs its
	// later parts bring back. The flusher removes them once no change
	// has touched them for spareFor; imposter.json no longer lists them.
	spare   map[contentSum][]spareStub
	nspare  int
	spareAt time.Time
}

// spareStub is a gone stub's folder; moved says its cycle had left the
// start, so that a stub taking it over writes its meta.json again.
type spareStub struct {
	*mstub
	moved bool
}

// mstub is a stub as written: more is how many responses proxyAlways had
// added to it (a stub's id changes whenever anything else of it does).
type mstub struct {
	*mbdatadir.Stub
	more int
	// sum is what the folder holds (contentSum of the stub's JSON when it
	// was written whole), zero once responses were added to it since.
	sum contentSum
	// metaDue is when the flusher may write meta.json again after
	// recordings: it lists every response file, so it waits, as
	// imposter.json does, nine times what its last write took.
	metaDue time.Time
	// matches are the files of its matches/ folder, oldest first (under
	// --debug only).
	matches []string
}

// writeHeader writes imposter.json from what the mirror knows.
func (m *mirror) writeHeader(port int, mp *mirrored) error {
	if mp.order != nil {
		mp.ids = make([]uint64, 0, mp.order.Len())
		mp.order.Each(func(cs *config.Stub) bool {
			mp.ids = append(mp.ids, cs.ID)
			return true
		})
		mp.order = nil
	}
	list := make([]*mbdatadir.Stub, len(mp.ids))
	for i, id := range mp.ids {
		list[i] = mp.stubs[id].Stub
	}
	mp.dirty = false
	return mbdatadir.WriteHeader(m.root, port, mp.header, list)
}

func newMirror(root string, log *slog.Logger, cycles *localCycles, matches *localMatches) *mirror {
	return &mirror{root: root, log: log, cycles: cycles, matches: matches, ports: map[int]*mirrored{}, skip: map[int]bool{}, resync: map[int]*mbdatadir.Imposter{},
		marks: map[int]string{}, base: map[int]int64{}, stale: map[int]bool{},
		stop: make(chan struct{}), done: make(chan struct{}), trash: make(chan string, 64), spares: make(chan []string, 1), swept: make(chan struct{})}
}

// mirrorReconciler mirrors every committed change after the running
// imposters follow it.
type mirrorReconciler struct {
	*reconciler
	m *mirror
}

func (r mirrorReconciler) Prepare(ctx context.Context, prev, next *config.State, res config.Result) (config.Plan, error) {
	p, err := r.reconciler.Prepare(ctx, prev, next, res)
	if err != nil {
		return nil, err
	}
	return thenPlan{p, func() { r.m.apply(prev, next) }}, nil
}

// thenPlan is a plan that does then once the plan it wraps has committed.
type thenPlan struct {
	config.Plan
	then func()
}

func (p thenPlan) Commit() {
	p.Plan.Commit()
	p.then()
}

// apply writes what changed from prev to next. A change made by proxy
// recordings alone is left to the flusher (at most 100 ms later, many
// recordings at once), so that recording pays no file writes, and so is
// one to an imposter of more than largeImposter stubs (a replay of a
// large recording is hundreds of thousands of files); any other change is
// written before its command answers, as mb writes it.
func (m *mirror) apply(prev, next *config.State) {
	m.pendMu.Lock()
	m.seq++
	seq := m.seq
	large := m.large || m.busy || changesLarge(prev, next)
	if large || recordedOnly(prev, next) {
		m.pending, m.pendingSeq = next, seq
		m.large = large
		m.pendMu.Unlock()
		return
	}
	m.pending = nil
	m.pendMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.on {
		m.catchUp(next, seq)
	}
}

// largeImposter is the size past which an imposter's changes are written
// by the flusher rather than before the change answers.
const largeImposter = 1000

// changesLarge reports whether next changes an imposter of more than
// largeImposter stubs (before or after) in more than its recordings.
func changesLarge(prev, next *config.State) bool {
	for port, n := range next.Imposters {
		p := prev.Imposters[port]
		if p == n || n.Len() <= largeImposter && (p == nil || p.Len() <= largeImposter) {
			continue
		}
		if p == nil || string(p.Header) != string(n.Header) {
			return true
		}
		if _, journaled := n.Changes(p); !journaled {
			return true
		}
	}
	for port, p := range prev.Imposters {
		if next.Imposters[port] == nil && p.Len() > largeImposter {
			return true
		}
	}
	return false
}

// takePending returns the state left for the flusher, if any; while it
// writes one a large change left, later changes are left to it too.
func (m *mirror) takePending() (*config.State, uint64) {
	m.pendMu.Lock()
	defer m.pendMu.Unlock()
	p, seq := m.pending, m.pendingSeq
	m.pending = nil
	m.busy, m.large = m.large, false
	return p, seq
}

// catchUpFolders writes the folders the start left lagging (resync),
// as the state last written has them; a change since (catchUp) wrote
// one that no longer lags.
func (m *mirror) catchUpFolders() {
	for port, f := range m.resync {
		if m.cut() {
			return // still noted as lagging
		}
		delete(m.resync, port)
		imp := m.written.Imposter(port)
		if imp == nil || m.ports[port] != nil || m.skip[port] {
			continue
		}
		if err := m.writeFrom(port, imp, f, byContent); err != nil {
			m.stale[port] = true
			if errors.Is(err, errCut) {
				return
			}
			m.log.Error("cannot write the imposter's folder in mb's layout; it is written again at the next start", "port", port, "err", err)
			continue
		}
		if f != nil && m.matches != nil {
			m.loadMatchesOf(port)
		}
	}
}

// wrote notes that the flusher wrote what it took.
func (m *mirror) wrote() {
	m.pendMu.Lock()
	m.busy = false
	m.pendMu.Unlock()
}

// recordedOnly reports whether recordings alone made next from prev.
func recordedOnly(prev, next *config.State) bool {
	for port, n := range next.Imposters {
		p := prev.Imposters[port]
		if p == n {
			continue
		}
		if p == nil || string(p.Header) != string(n.Header) {
			return false
		}
		if _, ok := n.Changes(p); !ok {
			return false
		}
	}
	return len(prev.Imposters) == len(next.Imposters)
}

// catchUp writes what changed from the state last written to next, the
// seq-th committed (an older one, which a flusher may bring late, is
// already written).
func (m *mirror) catchUp(next *config.State, seq uint64) {
	if seq <= m.writtenSeq {
		return
	}
	prev := m.written
	m.written, m.writtenSeq = next, seq
	portsChanged := false
	for _, port := range union(prev.Ports(), next.Ports()) {
		p, n := prev.Imposters[port], next.Imposters[port]
		if p == n {
			continue
		}
		if m.skip[port] {
			// A folder that could not be read is never written; but a
			// delete of its imposter is the user's, as mb's would be.
			if n == nil {
				delete(m.skip, port)
				if err := m.remove(port); err != nil {
					m.log.Error("cannot remove the imposter's folder", "port", port, "err", err)
				}
			}
			continue
		}
		var err error
		switch {
		case n == nil:
			err = m.remove(port)
			portsChanged = true
		case p == nil || string(p.Header) != string(n.Header):
			// A new imposter, or one that replaces another: mb deletes the
			// old one's folder and writes the new one.
			if p != nil {
				err = m.remove(port)
			}
			delete(m.base, port) // its requests are all new
			if err == nil {
				err = m.write(port, n, nil)
			}
			portsChanged = true
		default:
			err = m.restub(port, p, n)
		}
		switch {
		case errors.Is(err, errCut):
			m.stale[port] = true
			m.log.Info("the imposter's folder is written in mb's layout at the next start", "port", port)
		case err != nil:
			m.stale[port] = true
			m.log.Error("cannot write the imposter's folder in mb's layout; it is written again at the next start", "port", port, "err", err)
		}
	}
	if portsChanged {
		m.writeManifest(false, nil, nil)
	}
}

// remove removes an imposter's folder and forgets its cycles.
func (m *mirror) remove(port int) error {
	if mp := m.ports[port]; mp != nil {
		for id := range mp.stubs {
			m.forget(port, id)
		}
	}
	delete(m.ports, port)
	delete(m.marks, port)
	delete(m.base, port)
	delete(m.stale, port)
	delete(m.resync, port)
	return m.discard(port)
}

// discard takes an imposter's folder away now and leaves its removal to
// the sweeper, so that deleting 100,000 recorded stubs answers at once.
func (m *mirror) discard(port int) error {
	trash, err := mbdatadir.Remove(m.root, port)
	if err != nil || trash == "" {
		return err
	}
	select {
	case m.trash <- trash:
	default:
		// The sweeper is behind: it finds this one at the next start.
	}
	return nil
}

// sweep removes the folders of deleted imposters, those a stop left
// behind first, until close: a stop does not wait for a removal.
func (m *mirror) sweep() {
	defer close(m.swept)
	for _, dir := range mbdatadir.Trash(m.root) {
		if mbdatadir.RemoveAll(dir, m.stop) != nil {
			return
		}
	}
	for {
		select {
		case <-m.stop:
			return
		case dir := <-m.trash:
			if err := mbdatadir.RemoveAll(dir, m.stop); err != nil {
				m.log.Debug("a deleted imposter's folder is removed at the next start", "folder", dir, "err", err)
			}
		case dirs := <-m.spares:
			for _, dir := range dirs {
				if err := mbdatadir.RemoveAll(dir, m.stop); err != nil {
					m.log.Debug("a removed stub's folder is removed at the next start", "folder", dir, "err", err)
				}
			}
		}
	}
}

// write writes imp's folder whole. have, when set, is the folder as it is
// on disk: its stubs are kept where they hold what imp's do, with where
// their cycle is.
func (m *mirror) write(port int, imp *config.Imposter, have *mbdatadir.Imposter) error {
	return m.writeFrom(port, imp, have, byContent)
}

// keeping is how writeFrom pairs the stubs of a folder on disk with imp's.
type keeping int

const (
	// byContent keeps a folder's stub for the stub of imp in its place
	// that holds what it does.
	byContent keeping = iota
	// byIndex keeps the i-th stub's folder and position for imp's i-th
	// stub whatever it holds: imp was just made from the folder.
	byIndex
	// asIs takes the folder as imp's, stub for stub, without a look: its
	// digest is the one riftgate noted of imp at a clean stop.
	asIs
)

func (m *mirror) writeFrom(port int, imp *config.Imposter, have *mbdatadir.Imposter, keep keeping) error {
	if keep == asIs && (have == nil || len(have.Stubs) != imp.Len()) {
		keep = byContent
	}
	header, err := fileHeader(imp)
	if err != nil {
		return err
	}
	mp := &mirrored{header: header, stubs: make(map[uint64]*mstub, imp.Len()), metas: map[uint64]bool{}}
	used := map[string]bool{}
	i := 0
	var werr error
	// keepStub notes st as the folder of cs, the i-th stub.
	keepStub := func(cs *config.Stub, st *mbdatadir.Stub) bool {
		used[st.Dir] = true
		if st.NextIndex != 0 {
			m.cycles.set(cycleName(port, cs.ID), uint64(st.NextIndex))
		}
		c := *st
		c.Responses = nil // the state keeps them
		mp.stubs[cs.ID] = &mstub{Stub: &c, more: cs.NumMore(), sum: sumOf(cs)}
		mp.ids = append(mp.ids, cs.ID)
		i++
		return true
	}
	imp.Each(func(cs *config.Stub) bool {
		if m.cut() {
			werr = errCut
			return false
		}
		if keep == asIs {
			return keepStub(cs, have.Stubs[i])
		}
		def, rs, err := mbdatadir.SplitStub(cs.Doc())
		if err != nil {
			werr = err
			return false
		}
		var st *mbdatadir.Stub
		if have != nil && i < len(have.Stubs) {
			h := have.Stubs[i]
			switch {
			case sameStub(h, def, rs):
				st = h
			case keep == byIndex:
				// Same folder and position, the content riftgate made of it.
				st = mbdatadir.NewStub(def, rs)
				st.Dir, st.NextIndex = h.Dir, h.NextIndex
				if n := len(st.Order); n > 0 {
					st.NextIndex %= n
				}
				if werr = mbdatadir.WriteStub(m.root, port, st, 0); werr != nil {
					return false
				}
			}
		}
		if st == nil {
			st = mbdatadir.NewStub(def, rs)
			if werr = mbdatadir.WriteStub(m.root, port, st, 0); werr != nil {
				return false
			}
		}
		return keepStub(cs, st)
	})
	if werr != nil {
		return werr
	}
	if have != nil {
		for _, h := range have.Stubs {
			if !used[h.Dir] {
				if err := mbdatadir.RemoveStub(m.root, port, h); err != nil {
					return err
				}
			}
		}
	}
	if keep != byIndex {
		// A folder riftgate wrote: stub folders it does not list are
		// spare ones, or a write's that a stop or a kill -9 cut short.
		// The sweeper removes them.
		dirs, err := mbdatadir.StubDirs(m.root, port)
		if err != nil {
			return err
		}
		for _, dir := range dirs {
			if !used[dir] {
				m.unused = append(m.unused, filepath.Join(mbdatadir.Folder(m.root, port), dir))
			}
		}
	}
	m.ports[port] = mp
	if keep == asIs || have != nil && have.Digest() == digestOf(imp) {
		return nil // imposter.json already says this
	}
	return m.writeHeader(port, mp)
}

// fileHeader is the header imposter.json gets: riftgate's, in its order
// (mb's), unless it would list stubs twice.
func fileHeader(imp *config.Imposter) (json.RawMessage, error) {
	var h map[string]json.RawMessage
	if err := json.Unmarshal(imp.Header, &h); err != nil || h == nil {
		return nil, fmt.Errorf("the imposter on port %d: its header is no JSON object: %v", imp.Port, err)
	}
	if _, ok := h["stubs"]; ok {
		return mbdatadir.Canonical(imp.Header, "stubs")
	}
	return imp.Header, nil
}

// sameStub reports whether a stub on disk holds def and rs.
func sameStub(h *mbdatadir.Stub, def json.RawMessage, rs []json.RawMessage) bool {
	if string(h.Def) != string(def) || len(h.Responses) != len(rs) {
		return false
	}
	for i := range rs {
		if string(h.Responses[i]) != string(rs[i]) {
			return false
		}
	}
	return true
}

// restub writes the stub changes of an imposter whose header did not
// change: stubs gone, stubs added, responses a proxy recorded. When only
// recordings made next from prev (the imposter's journal says which stubs
// they touched), only those are looked at, and imposter.json is left to
// the flusher: a recording costs what it adds, not what the imposter has.
func (m *mirror) restub(port int, prev, imp *config.Imposter) error {
	mp := m.ports[port]
	if mp == nil {
		return m.write(port, imp, nil)
	}
	added := false
	// gone are the stubs this change removes, by what their folders hold:
	// a new stub with the same content takes one over (a replay, or a
	// PUT of what is there), and nothing is written or removed for it.
	var gone map[contentSum][]uint64
	sync := func(cs *config.Stub) error {
		ms := mp.stubs[cs.ID]
		if ms != nil && ms.more == cs.NumMore() {
			return nil
		}
		if m.cut() {
			return errCut
		}
		var sum contentSum
		if ms == nil {
			sum = sumOf(cs)
			if ok, err := m.takeOver(port, mp, cs, sum, gone); ok || err != nil {
				added = added || ok
				return err
			}
		}
		def, rs, err := mbdatadir.SplitStub(cs.Doc())
		if err != nil {
			return err
		}
		if ms == nil {
			st := mbdatadir.NewStub(def, rs)
			if err := mbdatadir.WriteStub(m.root, port, st, 0); err != nil {
				return err
			}
			st.Responses = nil
			mp.stubs[cs.ID] = &mstub{Stub: st, more: cs.NumMore(), sum: sum}
			added = true
			return nil
		}
		ms.sum = contentSum{}
		from := len(ms.Files)
		if len(rs) < from {
			from = 0 // cannot happen while ids change with definitions; write it whole
			ms.Files, ms.Order = nil, nil
		}
		ms.Responses = make([]json.RawMessage, from, len(rs))
		ms.AddResponses(rs[from:])
		ms.NextIndex = m.position(port, cs.ID, ms.Stub)
		err = mbdatadir.WriteStub(m.root, port, ms.Stub, from)
		ms.Responses, ms.more = nil, cs.NumMore()
		return err
	}
	// Responses proxyAlways added to a stub already written: its new
	// response files now, from the ones the state added (the stub's whole
	// JSON would cost O(n) each time), and its meta.json by the flusher.
	extend := func(cs *config.Stub) (bool, error) {
		ms := mp.stubs[cs.ID]
		if ms == nil || cs.NumMore() <= ms.more {
			return false, nil
		}
		add, err := mbdatadir.Compact(cs.More(ms.more))
		if err != nil {
			return false, err
		}
		from := len(ms.Files)
		ms.Responses = make([]json.RawMessage, from, from+len(add))
		ms.AddResponses(add)
		err = mbdatadir.WriteResponses(m.root, port, ms.Stub, from)
		ms.Responses, ms.more = nil, cs.NumMore()
		mp.metas[cs.ID] = true
		return true, err
	}
	ids, journaled := imp.Changes(prev)
	if journaled {
		for _, id := range ids {
			cs, ok := imp.Stub(id)
			if !ok {
				continue
			}
			done, err := extend(cs)
			if err == nil && !done {
				err = sync(cs)
			}
			if err != nil {
				return err
			}
		}
		if added {
			// Recordings remove nothing: the new stubs' places are all
			// that changed, which the flusher reads when it writes.
			mp.order, mp.dirty = imp, true
		}
		return nil
	}
	mp.order = nil
	order := make([]uint64, 0, imp.Len())
	gone = m.goneBySum(mp, imp)
	var err error
	imp.Each(func(cs *config.Stub) bool {
		order = append(order, cs.ID)
		err = sync(cs)
		return err == nil
	})
	if err != nil {
		return err
	}
	if !added && slices.Equal(order, mp.ids) {
		return nil
	}
	keep := make(map[uint64]bool, len(order))
	for _, id := range order {
		keep[id] = true
	}
	for id := range mp.stubs {
		if !keep[id] {
			if err := m.removeGone(port, mp, id); err != nil {
				return err
			}
		}
	}
	mp.ids = order
	return m.writeHeader(port, mp)
}

// contentSum identifies a stub's JSON (SHA-256's first 16 bytes).
type contentSum [16]byte

func sumOf(cs *config.Stub) contentSum {
	h := sha256.Sum256(cs.Doc())
	return contentSum(h[:16])
}

// goneBySum are the written stubs of mp that imp no longer has, by sum.
func (m *mirror) goneBySum(mp *mirrored, imp *config.Imposter) map[contentSum][]uint64 {
	var gone map[contentSum][]uint64
	for id, ms := range mp.stubs {
		if ms.sum == (contentSum{}) {
			continue
		}
		if _, kept := imp.Stub(id); !kept {
			if gone == nil {
				gone = map[contentSum][]uint64{}
			}
			gone[ms.sum] = append(gone[ms.sum], id)
		}
	}
	return gone
}

// takeOver gives cs, a new stub whose content is sum, the folder of a
// gone one holding the same content, if there is one (one this change
// removes, or a spare one): its cycle starts again, as a new stub's.
func (m *mirror) takeOver(port int, mp *mirrored, cs *config.Stub, sum contentSum, gone map[contentSum][]uint64) (bool, error) {
	var sp spareStub
	if ids := gone[sum]; len(ids) > 0 {
		gone[sum] = ids[1:]
		sp = m.release(port, mp, ids[0])
	} else if list := mp.spare[sum]; len(list) > 0 {
		sp, mp.spare[sum] = list[len(list)-1], list[:len(list)-1]
		if len(mp.spare[sum]) == 0 {
			delete(mp.spare, sum)
		}
		mp.nspare--
		mp.spareAt = time.Now()
	} else {
		return false, nil
	}
	ms := sp.mstub
	ms.more = cs.NumMore()
	mp.stubs[cs.ID] = ms
	if len(ms.matches) > 0 {
		// What the gone stub matched is not the new one's.
		ms.matches = nil
		if err := mbdatadir.RemoveMatches(m.root, port, ms.Stub); err != nil {
			return true, err
		}
	}
	if sp.moved {
		ms.NextIndex = 0
		return true, mbdatadir.WriteMeta(m.root, port, ms.Stub)
	}
	return true, nil
}

// release takes the stub id out of what the mirror writes, its folder
// left as it is.
func (m *mirror) release(port int, mp *mirrored, id uint64) spareStub {
	ms := mp.stubs[id]
	moved := ms.NextIndex != 0 || m.position(port, id, ms.Stub) != 0
	delete(mp.stubs, id)
	delete(mp.metas, id)
	m.forget(port, id)
	return spareStub{ms, moved}
}

// spareFor is how long a gone stub's folder waits, untouched, for a stub
// of its content to take it over; sparePerFlush bounds how many unused
// folders the flusher hands to the sweeper at a time.
const (
	spareFor      = 2 * time.Second
	sparePerFlush = 2000
)

// removeGone removes the folder of stub id, which a change removed; one
// whose content is known is kept a moment as spare.
func (m *mirror) removeGone(port int, mp *mirrored, id uint64) error {
	sp := m.release(port, mp, id)
	if sp.sum == (contentSum{}) {
		return mbdatadir.RemoveStub(m.root, port, sp.Stub)
	}
	if mp.spare == nil {
		mp.spare = map[contentSum][]spareStub{}
	}
	mp.spare[sp.sum] = append(mp.spare[sp.sum], sp)
	mp.nspare++
	mp.spareAt = time.Now()
	return nil
}

// removeUnused hands the folders of removed stubs to the sweeper: the
// spare ones no change has wanted for spareFor, and those no stub uses,
// at most sparePerFlush at a time. A stop leaves them: the next start
// finds them unused.
func (m *mirror) removeUnused() {
	for port, mp := range m.ports {
		if mp.nspare == 0 || time.Since(mp.spareAt) < spareFor {
			continue
		}
		for _, list := range mp.spare {
			for _, sp := range list {
				m.unused = append(m.unused, filepath.Join(mbdatadir.Folder(m.root, port), sp.Dir))
			}
		}
		mp.spare, mp.nspare = nil, 0
	}
	if len(m.unused) == 0 {
		return
	}
	n := min(len(m.unused), sparePerFlush)
	select {
	case m.spares <- m.unused[:n:n]:
		m.unused = m.unused[n:]
		if len(m.unused) == 0 {
			m.unused = nil
		}
	default: // the sweeper is busy
	}
}

// stopping tells the flusher and the sweeper to stop, and a write under
// way to give up after closeWrites. It comes first as the process stops:
// what else the stop does with the folders waits for that write.
func (m *mirror) stopping() {
	m.stopOnce.Do(func() {
		m.closeBy = time.Now().Add(closeWrites)
		close(m.stop)
	})
}

// closeWrites is how long a stop waits for the folders to catch up with
// the log (a large change is written in the background): past it, what
// they lack is written at the next start, and the process exits.
var closeWrites = 3 * time.Second // a variable for a test

// errCut is a write given up because the process stops.
var errCut = errors.New("the process stops")

// cut reports whether a long write is to give up: the process is
// stopping, and the time it gives the folders has passed.
func (m *mirror) cut() bool {
	select {
	case <-m.stop:
		return time.Now().After(m.closeBy)
	default:
		return false
	}
}

// forget drops what the mirror keeps of a stub that is gone.
func (m *mirror) forget(port int, id uint64) {
	k := cycleName(port, id)
	m.cycles.forget(k)
	if m.matches != nil {
		m.matches.forget(k)
	}
}

// position is where the stub's cycle is, as mb's nextIndex.
func (m *mirror) position(port int, id uint64, st *mbdatadir.Stub) int {
	if len(st.Order) == 0 {
		return 0
	}
	return int(m.cycles.get(cycleName(port, id)) % uint64(len(st.Order)))
}

// digestOf is the digest mb's layout of imp has (mbdatadir.Imposter.Digest).
func digestOf(imp *config.Imposter) string {
	header, err := mbdatadir.Canonical(imp.Header, "stubs")
	if err != nil {
		return ""
	}
	d := mbdatadir.NewDigest(header)
	imp.Each(func(cs *config.Stub) bool {
		def, rs, err := mbdatadir.SplitStub(cs.Doc())
		if err == nil {
			d.Add(def, rs)
		}
		return true
	})
	return d.Sum()
}

// flushPositions writes the meta.json of every stub whose cycle moved,
// and the imposter.json that recordings left behind.
func (m *mirror) flushPositions(all bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.on {
		return
	}
	m.catchUpFolders()
	if p, seq := m.takePending(); p != nil {
		m.catchUp(p, seq) // first, so that new stubs' positions have a file
		m.wrote()
	}
	if m.matches != nil {
		m.flushMatches()
	}
	if !all {
		m.removeUnused()
	}
	keys := m.cycles.takeDirty()
	for port, mp := range m.ports {
		for id := range mp.metas {
			ms, now := mp.stubs[id], time.Now()
			if ms != nil && !all && now.Before(ms.metaDue) {
				continue
			}
			delete(mp.metas, id)
			if ms == nil {
				continue
			}
			ms.NextIndex = m.position(port, id, ms.Stub)
			if err := mbdatadir.WriteMeta(m.root, port, ms.Stub); err != nil {
				m.stale[port] = true
				m.log.Error("cannot write the imposter's folder in mb's layout; it is written again at the next start", "port", port, "err", err)
			}
			ms.metaDue = time.Now().Add(9 * time.Since(now))
		}
		if now := time.Now(); mp.dirty && (all || !now.Before(mp.due)) {
			err := m.writeHeader(port, mp)
			mp.due = time.Now().Add(9 * time.Since(now))
			if err != nil {
				m.stale[port] = true
				m.log.Error("cannot write the imposter's folder in mb's layout; it is written again at the next start", "port", port, "err", err)
			}
		}
	}
	for _, k := range keys {
		port, id, ok := parseCycleName(k)
		if !ok || m.skip[port] {
			continue
		}
		mp := m.ports[port]
		if mp == nil {
			continue
		}
		ms := mp.stubs[id]
		if ms == nil {
			continue
		}
		ms.NextIndex = m.position(port, id, ms.Stub)
		if err := mbdatadir.WriteMeta(m.root, port, ms.Stub); err != nil {
			m.log.Error("cannot write where a stub's responses cycle", "port", port, "err", err)
		}
	}
}

// positionsEvery is how often moved cycles are written to meta.json: a
// kill -9 forgets at most this much of where cycles are; a clean stop
// forgets nothing.
const positionsEvery = 100 * time.Millisecond

// run writes moved cycles until close.
func (m *mirror) run() {
	defer close(m.done)
	t := time.NewTicker(positionsEvery)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.flushPositions(false)
		}
	}
}

// close writes where every cycle is and notes that the folders are as
// riftgate left them.
func (m *mirror) close(state *config.State) {
	m.mu.Lock()
	on := m.on
	m.mu.Unlock()
	if !on {
		return
	}
	m.stopping()
	<-m.done
	<-m.swept
	m.flushPositions(true)
	m.mu.Lock()
	defer m.mu.Unlock()
	digests := make(map[int]string, len(m.ports))
	prints := make(map[int]string, len(m.ports))
	for port := range m.ports {
		if imp := state.Imposter(port); imp != nil && !m.stale[port] {
			digests[port], prints[port] = digestOf(imp), logPrint(imp)
		}
	}
	m.writeManifest(true, digests, prints)
}

// writeManifest notes the folders riftgate keeps; clean with their
// digests, and the log's prints of them, at a clean stop.
func (m *mirror) writeManifest(clean bool, digests, prints map[int]string) {
	man := manifest{Version: 1, Clean: clean, Imposters: map[string]string{}}
	// Lagging folders: the log wins over them at the next start.
	for port := range m.resync {
		man.Imposters[strconv.Itoa(port)] = ""
	}
	for port := range m.stale {
		man.Imposters[strconv.Itoa(port)] = ""
	}
	for port := range m.ports {
		man.Imposters[strconv.Itoa(port)] = digests[port]
		if p := prints[port]; p != "" {
			if man.Logs == nil {
				man.Logs = map[string]string{}
			}
			man.Logs[strconv.Itoa(port)] = p
		}
		if mark := m.marks[port]; mark != "" {
			if man.Requests == nil {
				man.Requests = map[string]string{}
			}
			man.Requests[strconv.Itoa(port)] = mark
		}
	}
	b, _ := json.MarshalIndent(man, "", "  ")
	path := filepath.Join(m.root, mirrorFile)
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, b, 0o644)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		m.log.Error("cannot write "+mirrorFile, "err", err)
	}
}

// readManifest reads mirrorFile; a missing one is an empty, clean one.
func readManifest(root string) (manifest, error) {
	man := manifest{Clean: true, Imposters: map[string]string{}}
	b, err := os.ReadFile(filepath.Join(root, mirrorFile))
	if errors.Is(err, os.ErrNotExist) {
		return man, nil
	}
	if err != nil {
		return man, err
	}
	if err := json.Unmarshal(b, &man); err != nil || man.Version != 1 {
		return man, fmt.Errorf("%s: not riftgate's (version 1): %v", mirrorFile, err)
	}
	if man.Imposters == nil {
		man.Imposters = map[string]string{}
	}
	return man, nil
}

// syncDatadir brings the log and mb's folders together at start, before
// --configfile (which wins over both, as over mb's datadir):
//   - a folder riftgate wrote and no one changed since (its digest is the
//     one noted at the last clean stop, or the last stop was not clean)
//     follows the log: what differs is written again, cycles kept;
//   - a folder someone else wrote or changed is taken into the log, in
//     place of what the log had on its port, with where its cycles are;
//   - a folder riftgate wrote that is gone was deleted: so is its imposter;
//   - an imposter the log has and no folder (a datadir riftgate kept
//     before it wrote mb's layout) gets its folder;
//   - a folder that cannot be read is said at error and left as it is.
func (g *gateway) syncDatadir(ctx context.Context) error {
	m := g.mirror
	state := g.config.State()
	man, err := readManifest(m.root)
	if err != nil {
		// Without it, neither side may lose anything: the log wins where
		// it has the imposter, and other folders are taken in.
		g.log.Error("cannot read the note of the folders riftgate wrote; the configuration log wins where it has an imposter", "err", err)
		man = manifest{Version: 1, Imposters: map[string]string{}}
		for _, port := range state.Ports() {
			man.Imposters[strconv.Itoa(port)] = ""
		}
	}
	ports, err := mbdatadir.Ports(m.root)
	if err != nil {
		return fmt.Errorf("datadir: %w", err)
	}
	folders := map[int]*mbdatadir.Imposter{}
	for _, port := range ports {
		imp, err := mbdatadir.Read(m.root, port)
		switch {
		case errors.Is(err, mbdatadir.ErrNoImposter):
			g.log.Warn(fmt.Sprintf("Skipping %d during loading; missing imposter.json", port))
		case err != nil:
			m.skip[port] = true
			g.log.Error("cannot read an imposter of the datadir; its folder is left as it is, and not served unless the configuration log has it", "port", port, "err", err)
		default:
			folders[port] = imp
		}
	}
	// Nothing else writes yet: the flusher has not started, and commits
	// are not mirrored until m.on.
	for _, port := range ports {
		f := folders[port]
		if f == nil {
			continue
		}
		digest, noted := man.Imposters[strconv.Itoa(port)]
		// A digest of "" marks a folder riftgate could not finish writing.
		unchanged := noted && man.Clean && digest != "" && digest == f.Digest()
		ours := noted && (!man.Clean || digest == "" || unchanged)
		have := state.Imposter(port)
		// Both as a clean stop left them: the folder is the log's.
		unchanged = unchanged && have != nil && man.Logs[strconv.Itoa(port)] == logPrint(have)
		since, whole := "", !ours
		switch {
		case ours && have != nil && !unchanged && have.Len() > largeImposter:
			m.resync[port] = f
			since = man.Requests[strconv.Itoa(port)]
		case ours && have != nil:
			keep := byContent
			if unchanged {
				keep = asIs
			}
			err = m.writeFrom(port, have, f, keep)
			since = man.Requests[strconv.Itoa(port)]
		case ours:
			// The log deleted it; the folder's removal was lost.
			if err := m.discard(port); err != nil {
				g.log.Error("cannot remove the folder of a deleted imposter", "port", port, "err", err)
			}
			continue
		default:
			err = g.takeIn(ctx, f)
		}
		if err == nil {
			m.marks[port] = since
			g.importRequests(port, since, whole)
		}
		if err != nil {
			m.skip[port] = true
			g.log.Error("cannot load an imposter of the datadir; its folder is left as it is", "port", port, "err", err)
		}
	}
	for _, port := range state.Ports() {
		if folders[port] != nil || m.skip[port] || m.ports[port] != nil {
			continue
		}
		if digest := man.Imposters[strconv.Itoa(port)]; digest != "" && man.Clean {
			// Deleted from the folder while riftgate was stopped (mb's
			// DELETE, or a person): deleted. (A folder noted without a
			// digest lagged the log: its write may never have begun.)
			g.log.Info("the datadir no longer has an imposter; it is deleted", "port", port)
			if err := g.deleteQuietly(ctx, port); err != nil {
				return fmt.Errorf("datadir: %w", err)
			}
			continue
		}
		m.base[port] = 0 // the requests it has go to its new folder
		if state.Imposter(port).Len() > largeImposter {
			m.resync[port] = nil // written by the flusher
			continue
		}
		if err := m.write(port, state.Imposter(port), nil); err != nil {
			g.log.Error("cannot write the imposter's folder in mb's layout", "port", port, "err", err)
		}
	}
	if m.matches != nil {
		m.loadMatches()
	}
	m.mu.Lock()
	m.on = true
	m.written = g.config.State()
	m.pendMu.Lock()
	m.writtenSeq, m.pending, m.large = m.seq, nil, false
	m.pendMu.Unlock()
	m.writeManifest(false, nil, nil)
	m.mu.Unlock()
	go m.run()
	go m.sweep()
	return nil
}

// takeIn puts an imposter folder's definition in the log, in place of
// what the log has on its port, keeping the folder and its cycles.
func (g *gateway) takeIn(ctx context.Context, f *mbdatadir.Imposter) error {
	m := g.mirror
	mk := g.maker()
	defer mk.done()
	doc, err := mk.imposter(f.JSON())
	if err != nil {
		return err
	}
	_, err = g.submit(ctx, mk.command(&config.Command{Op: config.OpReplaceImposter, Imposters: []config.ImposterDoc{doc}}))
	if err != nil {
		return err
	}
	g.log.Info(fmt.Sprintf("Loading %s:%d from datadir", protocolOf(f.Header), f.Port))
	imp := g.config.State().Imposter(f.Port)
	if imp == nil {
		return fmt.Errorf("the imposter on port %d was not kept", f.Port)
	}
	return m.writeFrom(f.Port, imp, f, byIndex)
}

// deleteQuietly deletes the imposter on port from the log.
func (g *gateway) deleteQuietly(ctx context.Context, port int) error {
	_, err := g.submit(ctx, &config.Command{Op: config.OpDeleteImposter, Port: port})
	return err
}

func protocolOf(header json.RawMessage) string {
	var h struct {
		Protocol string `json:"protocol"`
	}
	_ = json.Unmarshal(header, &h)
	return h.Protocol
}

// cycleName is the imposter package's name for a stub's cycle.
func cycleName(port int, id uint64) string {
	return "c" + strconv.Itoa(port) + ":" + strconv.FormatUint(id, 10)
}

func parseCycleName(k string) (int, uint64, bool) {
	p, i, ok := strings.Cut(strings.TrimPrefix(k, "c"), ":")
	if !ok {
		return 0, 0, false
	}
	port, err1 := strconv.Atoi(p)
	id, err2 := strconv.ParseUint(i, 10, 64)
	return port, id, err1 == nil && err2 == nil
}

// localCycles keeps a single node's response cycles when --datadir keeps
// them across restarts: a counter per stub, and which moved since they
// were last written.
type localCycles struct {
	m sync.Map // name → *cycle

	mu    sync.Mutex
	dirty []string
}

type cycle struct {
	pos   atomic.Uint64
	dirty atomic.Bool
}

func (c *localCycles) of(key string) *cycle {
	if v, ok := c.m.Load(key); ok {
		return v.(*cycle)
	}
	v, _ := c.m.LoadOrStore(key, &cycle{})
	return v.(*cycle)
}

// Next implements imposter.Cycles.
func (c *localCycles) Next(_ context.Context, key string, _ flow.Policy) (uint64, error) {
	cy := c.of(key)
	pos := cy.pos.Add(1) - 1
	if cy.dirty.CompareAndSwap(false, true) {
		c.mu.Lock()
		c.dirty = append(c.dirty, key)
		c.mu.Unlock()
	}
	return pos, nil
}

func (c *localCycles) get(key string) uint64 {
	if v, ok := c.m.Load(key); ok {
		return v.(*cycle).pos.Load()
	}
	return 0
}

func (c *localCycles) set(key string, pos uint64) { c.of(key).pos.Store(pos) }

func (c *localCycles) forget(key string) { c.m.Delete(key) }

// takeDirty returns the cycles that moved since the last call.
func (c *localCycles) takeDirty() []string {
	c.mu.Lock()
	keys := c.dirty
	c.dirty = nil
	c.mu.Unlock()
	for _, k := range keys {
		if v, ok := c.m.Load(k); ok {
			v.(*cycle).dirty.Store(false)
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(keys)))
}

// importRequests takes the recorded requests of port's folder named after
// since (mb recorded them) into the running imposter's, and notes that
// the folder has every request recorded so far. whole says the folder's
// requests are all the imposter's (it was taken in): what riftgate kept
// of them goes first.
func (g *gateway) importRequests(port int, since string, whole bool) {
	m := g.mirror
	imp, ok := g.rec.get(port)
	if !ok || imp.RecordedLog() == nil {
		return
	}
	log := imp.RecordedLog()
	if whole {
		log.Reset()
	}
	reqs, bad, err := mbdatadir.Requests(m.root, port, since)
	if err != nil {
		g.log.Error("cannot read the imposter's recorded requests in the datadir", "port", port, "err", err)
	}
	for path, err := range bad {
		g.log.Error("a recorded request of the datadir cannot be read; it is left as it is", "file", path, "err", err)
	}
	for _, r := range reqs {
		log.AppendJSON(r.Time, r.JSON)
		m.marks[port] = r.Name
	}
	m.base[port] = log.Next()
}

// exportRequests writes the requests recorded since the folders were last
// written, one file each, as mb keeps them. It runs as the process stops,
// before the imposters close their recorded requests.
func (m *mirror) exportRequests(rec *reconciler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.on {
		return
	}
	var r reqlog.Record
	var buf bytes.Buffer
	for port := range m.ports {
		imp, ok := rec.get(port)
		if !ok || imp.RecordedLog() == nil {
			continue
		}
		from := m.base[port]
		snap := imp.RecordedLog().SnapshotFrom(from, 0)
		c := snap.Cursor(0)
		for {
			seq, rc, ok := c.Next()
			if !ok {
				break
			}
			if seq < from || r.Decode(rc) != nil {
				continue
			}
			buf.Reset()
			r.AppendJSON(&buf)
			name, err := mbdatadir.WriteRequest(m.root, port, r.Time, buf.Bytes())
			if err != nil {
				m.log.Error("cannot write a recorded request in mb's layout", "port", port, "err", err)
				break
			}
			if mbdatadir.NameLess(m.marks[port], name) || m.marks[port] == "" {
				m.marks[port] = name
			}
			m.base[port] = seq + 1
		}
		if err := c.Err(); err != nil {
			m.log.Error("cannot read the recorded requests to write them in mb's layout", "port", port, "err", err)
		}
		snap.Close()
	}
}

// clearRequests removes an imposter's recorded requests from its folder,
// as mb's DELETE /imposters/:id/savedRequests does.
func (m *mirror) clearRequests(port int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.on || m.skip[port] || m.ports[port] == nil {
		return
	}
	if err := mbdatadir.RemoveRequests(m.root, port); err != nil {
		m.log.Error("cannot remove the imposter's recorded requests from its folder", "port", port, "err", err)
	}
}
