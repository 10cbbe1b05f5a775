package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riftgate/riftgate/flowshard"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/raftnode"
	"github.com/riftgate/riftgate/ring"
)

// FlowsConfig configures a node's flow runtime.
type FlowsConfig struct {
	// Membership is the Raft group's view (the other half of this package).
	Membership Membership
	// Secret is the cluster secret; sessions are opened with raftnode's
	// PeerAuth under it.
	Secret []byte
	// ShardPath is flow.db ("": in memory only); MaxFlows its flow cap.
	ShardPath string
	MaxFlows  int
	// PeerURL is where member m answers sessions. The default is m's Raft
	// URL with its last path element ("/raft") replaced by sessionPath,
	// which is where the group mounts Handler.
	PeerURL func(m raftnode.Member) string
	// Dial opens connections to peers (the default is raftnode.DialPeer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Permits bounds the flow operations this node has in flight (1024);
	// past it an operation is shed at once. Deadline bounds each (2 s).
	Permits  int
	Deadline time.Duration
	// AntiEntropy is the pause between replica pulls (5 s).
	AntiEntropy time.Duration
	// Config, when set, lets proxyOnce waiters replay a recording only
	// once their node has applied it.
	Config ConfigIndex
	Logger *slog.Logger
}

// ConfigIndex is what proxyOnce claims need of the configuration log.
type ConfigIndex interface {
	// Applied is the last configuration index this node has applied.
	Applied() uint64
	// WaitApplied returns once this node has applied index.
	WaitApplied(ctx context.Context, index uint64) error
}

// Flows is one node's flow runtime (seed 000 §9–12): it implements
// flow.Store for the engine, routing each operation to its flow's owner by
// rendezvous hashing over the voters of the committed membership, and it
// answers, as an owner, the operations other nodes route to it. It also
// lends the engine proxyOnce claims (Claims) and response-cycle positions
// (Cycles), owned the same way.
//
// An operation goes: a permit of the bridge (shed at once when none is
// free) and a deadline, then this node's owner path or one RPC on a
// session to the owner. The owner checks, in order, the caller's
// membership index, that it owns the key, that it is not isolated, and
// that it has adopted its flows at that index; then, under the flow's
// lock, it applies the operation to its flowshard stamped (m_idx, v+1,
// self), pushes the changed records to the key's two successors, and
// answers (under `sync`, once its own commit and one successor's are
// done). Any failure reaches the engine as flow.ErrUnavailable.
type Flows struct {
	cfg      FlowsConfig
	log      *slog.Logger
	self     uint64
	auth     *raftnode.PeerAuth
	shard    *flowshard.Store
	locks    flowLocks
	deadline time.Duration

	permits atomic.Int64
	view    atomic.Pointer[view]
	// watched: the membership signals its changes, so operations read the
	// view built at the last one instead of asking Current each time.
	watched bool
	work    chan *request // requests for idle answering goroutines
	changed chan struct{} // capacity 1: a newer view was installed
	// floor is the highest membership index at which another node adopted
	// from this one: owner operations under an older view are refused.
	floor   atomic.Uint64
	adopted atomic.Uint64 // the view index whose adoption is done
	// held: flows that adoption could not settle (adopt.go); nil when
	// none.
	held atomic.Pointer[heldFlows]

	peerMu sync.RWMutex
	peers  map[uint64]*peer

	// deleting orders a prefix delete (drain, then delete; held for
	// writing) against anti-entropy's repair pushes (read, then queue;
	// held for reading): a repair read before the delete is queued before
	// its drain, and one read after it finds nothing to push.
	deleting sync.RWMutex

	sessMu   sync.Mutex
	sessions map[*session]struct{} // answering sessions, closed by Close

	claims claimTable
	recall recallCache
	flowMetrics

	ctx    context.Context
	cancel context.CancelFunc
	lifeMu sync.Mutex // orders spawn against Close
	wg     sync.WaitGroup
	closed atomic.Bool
}

// view is ownership at one committed membership.
type view struct {
	idx     uint64
	ring    *ring.Ring
	voters  []uint64
	urls    map[uint64]string // session URL of every member
	members []uint64          // every member but this node, voters and learners
}

// NewFlows opens the node's flowshard and starts the runtime's loops
// (adoption, replica pushes, anti-entropy). Close stops them.
func NewFlows(cfg FlowsConfig) (*Flows, error) {
	if cfg.Membership == nil || len(cfg.Secret) < 16 {
		return nil, errors.New("cluster: flows need the membership and a secret of at least 16 bytes")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PeerURL == nil {
		cfg.PeerURL = defaultPeerURL
	}
	if cfg.Dial == nil {
		cfg.Dial = raftnode.DialPeer // keepalive and a user timeout: see raftnode/liveconn.go
	}
	if cfg.Permits <= 0 {
		cfg.Permits = 1024
	}
	if cfg.Deadline <= 0 {
		cfg.Deadline = 2 * time.Second
	}
	if cfg.AntiEntropy <= 0 {
		cfg.AntiEntropy = 5 * time.Second
	}
	shard, err := flowshard.Open(cfg.ShardPath, flowshard.Options{MaxFlows: cfg.MaxFlows, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("cluster: flow store: %w", err)
	}
	f := &Flows{
		cfg: cfg, log: cfg.Logger.With("component", "flows"), self: cfg.Membership.Self(),
		auth: raftnode.NewPeerAuth(authGroup, cfg.Secret), shard: shard, locks: newFlowLocks(),
		deadline: cfg.Deadline, changed: make(chan struct{}, 1), work: make(chan *request),
		peers: map[uint64]*peer{}, sessions: map[*session]struct{}{},
	}
	f.claims.init()
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.currentView()
	if w, ok := cfg.Membership.(membershipWatcher); ok {
		f.watched = true
		f.spawn(func() { f.watch(w) })
	}
	f.spawn(f.adoptLoop)
	f.spawn(f.antiEntropyLoop)
	f.spawn(f.heartbeatLoop)
	return f, nil
}

// membershipWatcher is a Membership that signals its changes (the group's
// Node does). Without it the runtime asks Current on every operation.
type membershipWatcher interface {
	// MembershipChanged returns a channel closed at the next change.
	MembershipChanged() <-chan struct{}
}

// watch rebuilds the view at every membership change. Operations may run
// on the view before a change for the moment this takes; the fence covers
// that: a new owner raises its predecessor's floor before it adopts.
func (f *Flows) watch(w membershipWatcher) {
	for {
		ch := w.MembershipChanged()
		f.currentView()
		select {
		case <-ch:
		case <-f.ctx.Done():
			return
		}
	}
}

// opView is the view an operation uses.
func (f *Flows) opView() *view {
	if f.watched {
		return f.view.Load()
	}
	return f.currentView()
}

// spawn runs fn on a goroutine that Close waits for, unless Close began.
func (f *Flows) spawn(fn func()) bool {
	f.lifeMu.Lock()
	defer f.lifeMu.Unlock()
	if f.closed.Load() {
		return false
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		fn()
	}()
	return true
}

// defaultPeerURL replaces the last element of m's Raft URL by sessionPath.
func defaultPeerURL(m raftnode.Member) string {
	u := strings.TrimSuffix(m.URL, "/")
	if i := strings.LastIndex(u, "/"); i > len("http://") {
		u = u[:i]
	}
	return u + sessionPath
}

// Shard is this node's flowshard, beneath the runtime.
func (f *Flows) Shard() *flowshard.Store { return f.shard }

// Close stops the runtime: sessions, loops, then the flowshard.
func (f *Flows) Close(ctx context.Context) error {
	f.lifeMu.Lock()
	if f.closed.Swap(true) {
		f.lifeMu.Unlock()
		return nil
	}
	f.lifeMu.Unlock()
	f.cancel()
	f.sessMu.Lock()
	for s := range f.sessions {
		s.kill(errSessionClosed)
	}
	f.sessMu.Unlock()
	f.peerMu.Lock()
	for _, p := range f.peers {
		p.close()
	}
	f.peerMu.Unlock()
	done := make(chan struct{})
	go func() { f.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("cluster: close flows: %w", ctx.Err())
	}
	return f.shard.Close(ctx)
}

// currentView returns ownership at the membership this node has applied,
// building it when the membership changed.
func (f *Flows) currentView() *view {
	m := f.cfg.Membership.Current()
	v := f.view.Load()
	if v != nil && v.idx >= m.Index {
		return v
	}
	nv := f.buildView(m)
	for {
		if f.view.CompareAndSwap(v, nv) {
			f.syncPeers(nv)
			select {
			case f.changed <- struct{}{}:
			default:
			}
			return nv
		}
		if v = f.view.Load(); v.idx >= nv.idx {
			return v
		}
	}
}

func (f *Flows) buildView(m raftnode.Membership) *view {
	voters := m.Voters()
	r, err := ring.New(m.Index, voters)
	if err != nil { // membership never holds id 0 or duplicates
		f.log.Error("cluster: membership gives no ring", "err", err)
		r, _ = ring.New(m.Index, nil)
	}
	v := &view{idx: m.Index, ring: r, voters: voters, urls: map[uint64]string{}}
	for _, mb := range m.Members {
		v.urls[mb.ID] = f.cfg.PeerURL(mb)
		if mb.ID != f.self {
			v.members = append(v.members, mb.ID)
		}
	}
	return v
}

// errRefused marks an unavailable answer given before the operation could
// take effect anywhere: shed, refused by the owner's checks, or never sent.
// Other failures (a deadline, a lost session) leave a write's outcome
// unknown.
var errRefused = fmt.Errorf("%w: refused", flow.ErrUnavailable)

// errShed is the bridge's answer when every permit is taken.
var errShed = fmt.Errorf("%w: too many flow operations in flight on this node (shed)", errRefused)

// do runs one owner operation: a permit, a deadline, then this node's
// owner path or an RPC to the owner. A caller whose membership index turns
// out stale learns the owner's, refreshes its view and tries once more.
func (f *Flows) do(ctx context.Context, class string, r *request, a *answer) error {
	if f.closed.Load() {
		return fmt.Errorf("%w: %w", flow.ErrUnavailable, errSessionClosed)
	}
	if f.permits.Add(1) > int64(f.cfg.Permits) {
		f.permits.Add(-1)
		f.sheds.Add(1)
		return flow.Unavailable(flow.CauseShed, errShed)
	}
	defer f.permits.Add(-1)
	// The operation's one clock reading: its deadline, its budget, and
	// below, the owner's checks and its flowshard operation all use it.
	now := time.Now()
	deadline := now.Add(f.deadline)
	if d, ok := flow.Budget(ctx); ok && d.Before(deadline) {
		if !d.After(now) {
			return flow.ErrBudget // spent on earlier operations, or in a queue
		}
		deadline = d
	}
	for attempt := 0; ; attempt++ {
		v := f.opView()
		owner := v.ring.Owner(class, r.flow)
		if owner == 0 {
			return fmt.Errorf("%w: the cluster has no voters", flow.ErrUnavailable)
		}
		r.mIdx = v.idx
		r.budget = uint64(max(deadline.Sub(now).Milliseconds(), 1))
		r.remote = owner != f.self
		if !r.remote {
			r.ownerAt = v
			oc := newOpCtx(now, deadline)
			f.serveOwner(oc, r, a)
			oc.release()
			r.ownerAt = nil
		} else {
			err := f.call(owner, slotOps, deadline, r, a)
			f.rpcLatency.observe(time.Since(now))
			if err != nil {
				cause := flow.CauseUnreachable
				if errors.Is(err, errNoAnswer) {
					cause = flow.CauseDeadline
				}
				if errors.Is(err, errNotSent) {
					return flow.Unavailable(cause, fmt.Errorf("%w: owner %s: %w", errRefused, formatID(owner), err))
				}
				return flow.Unavailable(cause, fmt.Errorf("owner %s: %w", formatID(owner), err))
			}
		}
		if a.status == statusFenced && a.mIdx > r.mIdx && attempt == 0 && f.waitView(a.mIdx, deadline) {
			now = time.Now()
			continue
		}
		return statusErr(a)
	}
}

// waitView waits, until deadline, for this node to apply membership index
// idx; it reports whether it did.
func (f *Flows) waitView(idx uint64, deadline time.Time) bool {
	for {
		if f.currentView().idx >= idx {
			return true
		}
		if time.Now().Add(5 * time.Millisecond).After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// statusErr maps an answer's status to the seam's errors. Success,
// not-found and mismatch are for the caller to read.
func statusErr(a *answer) error {
	switch a.status {
	case statusOK, statusNotFound, statusMismatch:
		return nil
	case statusTooLarge:
		return fmt.Errorf("%w: %s", flow.ErrTooLarge, a.msg)
	case statusBadKey:
		return fmt.Errorf("%w: %s", flow.ErrBadKey, a.msg)
	case statusFenced, statusNotOwner:
		return flow.Unavailable(flow.CauseFenced, fmt.Errorf("%w: %s", errRefused, a.msg))
	case statusIsolated:
		return flow.Unavailable(flow.CauseIsolated, fmt.Errorf("%w: %s", errRefused, a.msg))
	case statusAdopting:
		return flow.Unavailable(flow.CauseAdopting, fmt.Errorf("%w: %s", errRefused, a.msg))
	case statusExpired:
		return flow.Unavailable(flow.CauseDeadline, fmt.Errorf("%w: %s", errRefused, a.msg))
	case statusUnavailable:
		// The owner starts its message with the cause it knows.
		if c := flow.CauseOf(a.msg); c != "" {
			return flow.Unavailable(c, fmt.Errorf("%w: %s", flow.ErrUnavailable, a.msg))
		}
	}
	return fmt.Errorf("%w: %s", flow.ErrUnavailable, a.msg)
}

var (
	_ flow.Store      = (*Flows)(nil)
	_ flow.Speculator = (*Flows)(nil)
)

// checkKey applies the seam's caps before anything travels.
func checkKey(flowID, key string, value []byte) error {
	switch {
	case flowID == "" || key == "":
		return fmt.Errorf("%w: empty flow id or key", flow.ErrBadKey)
	case len(flowID) > flow.MaxKeyBytes || len(key) > flow.MaxKeyBytes:
		return fmt.Errorf("%w: flow id or key over %d bytes", flow.ErrTooLarge, flow.MaxKeyBytes)
	case len(value) > flow.MaxValueBytes:
		return fmt.Errorf("%w: value of %d bytes (max %d)", flow.ErrTooLarge, len(value), flow.MaxValueBytes)
	}
	return nil
}

// Get implements flow.Store.
func (f *Flows) Get(ctx context.Context, flowID, key string, dst []byte) (flow.Entry, error) {
	if err := checkKey(flowID, key, nil); err != nil {
		return flow.Entry{}, err
	}
	r := request{op: opGet, flow: flowID, key: key}
	a := pooledAnswer()
	defer putAnswer(a)
	if err := f.do(ctx, ring.ClassFlow, &r, a); err != nil {
		return flow.Entry{}, err
	}
	f.remember(&r, a)
	if a.status == statusNotFound || !a.present {
		return flow.Entry{}, flow.ErrNotFound
	}
	return flow.Entry{Value: a.valueCopy(dst), Version: a.ver}, nil
}

// pooledAnswer is an answer from ansPool for one operation of the engine's:
// its values live in its rooms, so what the operation returns is copied
// out (or is the caller's own) before putAnswer.
func pooledAnswer() *answer {
	a := ansPool.Get().(*answer)
	a.reset()
	return a
}

// Put implements flow.Store.
func (f *Flows) Put(ctx context.Context, flowID, key string, value []byte, p flow.Policy) (flow.Version, error) {
	if err := checkKey(flowID, key, value); err != nil {
		return flow.Version{}, err
	}
	r := request{op: opPut, flow: flowID, key: key, value: value, policy: toWire(p)}
	var a answer
	if err := f.do(ctx, ring.ClassFlow, &r, &a); err != nil {
		return flow.Version{}, err
	}
	return a.ver, nil
}

// CAS implements flow.Store.
func (f *Flows) CAS(ctx context.Context, flowID, key string, expect uint64, value []byte, p flow.Policy) (flow.Entry, error) {
	if err := checkKey(flowID, key, value); err != nil {
		return flow.Entry{}, err
	}
	r := request{op: opCAS, flow: flowID, key: key, expect: expect, value: value, policy: toWire(p)}
	a := pooledAnswer()
	defer putAnswer(a)
	if err := f.do(ctx, ring.ClassFlow, &r, a); err != nil {
		return flow.Entry{}, err
	}
	f.remember(&r, a)
	return casResult(a, value)
}

// casResult is the entry a CAS or a Swap of written answered: the one
// written (written itself: the owner answers what it wrote), or on a
// mismatch the current one, copied out of a.
func casResult(a *answer, written []byte) (flow.Entry, error) {
	if a.status == statusMismatch {
		var v []byte
		if a.present {
			v = a.valueCopy(nil)
		}
		return flow.Entry{Value: v, Version: a.ver}, flow.ErrVersionMismatch
	}
	return flow.Entry{Value: written, Version: a.ver}, nil
}

// Swap implements flow.Speculator: one owner operation that reads and
// conditionally writes under the flow's lock. An owner of an older build,
// which does not know it, gets a Get and a CAS on the version read, which
// decide the same.
func (f *Flows) Swap(ctx context.Context, flowID, key string, old flow.Entry, value []byte, p flow.Policy) (flow.Entry, error) {
	if err := checkKey(flowID, key, value); err != nil {
		return flow.Entry{}, err
	}
	r := request{op: opSwap, flow: flowID, key: key, hasOld: old.Version.V != 0, old: old.Value, value: value, policy: toWire(p)}
	a := pooledAnswer()
	defer putAnswer(a)
	err := f.do(ctx, ring.ClassFlow, &r, a)
	if err != nil && a.status == statusBadRequest && r.remote {
		return f.swapByVersion(ctx, flowID, key, old, value, p)
	}
	if err != nil {
		return flow.Entry{}, err
	}
	f.mergeCarried(ctx, a)
	f.remember(&r, a)
	return casResult(a, value)
}

// swapByVersion is Swap as a Get and a CAS on the version it read.
func (f *Flows) swapByVersion(ctx context.Context, flowID, key string, old flow.Entry, value []byte, p flow.Policy) (flow.Entry, error) {
	cur, err := f.Get(ctx, flowID, key, nil)
	switch {
	case errors.Is(err, flow.ErrNotFound):
		cur = flow.Entry{}
	case err != nil:
		return flow.Entry{}, err
	}
	if (cur.Version.V != 0) != (old.Version.V != 0) || cur.Version.V != 0 && !bytes.Equal(cur.Value, old.Value) {
		return cur, flow.ErrVersionMismatch
	}
	return f.CAS(ctx, flowID, key, cur.Version.V, value, p)
}

// Recall implements flow.Speculator from the answers of other owners.
func (f *Flows) Recall(flowID, key string) (flow.Entry, bool) { return f.recall.get(flowID, key) }

// remember keeps what an answer from another owner says a key holds.
func (f *Flows) remember(r *request, a *answer) {
	if !r.remote {
		return
	}
	switch {
	case a.status == statusNotFound || a.status == statusMismatch && !a.present:
		f.recall.put(r.flow, r.key, nil, false)
	case a.status == statusOK && r.op == opGet && a.present || a.status == statusMismatch:
		f.recall.put(r.flow, r.key, a.value, true)
	case a.status == statusOK:
		f.recall.put(r.flow, r.key, r.value, true) // what a CAS or a Swap wrote
	}
}

// Delete implements flow.Store.
func (f *Flows) Delete(ctx context.Context, flowID, key string, p flow.Policy) error {
	if err := checkKey(flowID, key, nil); err != nil {
		return err
	}
	r := request{op: opDelete, flow: flowID, key: key, policy: toWire(p)}
	var a answer
	if err := f.do(ctx, ring.ClassFlow, &r, &a); err != nil {
		return err
	}
	if a.status == statusNotFound {
		return flow.ErrNotFound
	}
	return nil
}

// Load implements flow.Store.
func (f *Flows) Load(ctx context.Context, flowID string) (flow.Snapshot, error) {
	if err := checkKey(flowID, "-", nil); err != nil {
		return nil, err
	}
	r := request{op: opLoad, flow: flowID}
	var a answer
	if err := f.do(ctx, ring.ClassFlow, &r, &a); err != nil {
		return nil, err
	}
	return a.snap, nil
}

// Commit implements flow.Store.
func (f *Flows) Commit(ctx context.Context, flowID string, base []flow.KeyVersion, writes []flow.Write, p flow.Policy) (flow.Snapshot, error) {
	for _, w := range writes {
		if err := checkKey(flowID, w.Key, w.Value); err != nil {
			return nil, err
		}
	}
	r := request{op: opCommit, flow: flowID, base: base, writes: writes, policy: toWire(p)}
	var a answer
	if err := f.do(ctx, ring.ClassFlow, &r, &a); err != nil {
		return nil, err
	}
	if a.status == statusMismatch {
		return a.snap, flow.ErrVersionMismatch
	}
	return nil, nil
}

// Clear implements flow.Store: every key of the flow is deleted by its
// owner, so that the deletes reach the replicas as tombstones.
func (f *Flows) Clear(ctx context.Context, flowID string) error {
	if err := checkKey(flowID, "-", nil); err != nil {
		return err
	}
	r := request{op: opClearFlow, flow: flowID}
	var a answer
	return f.do(ctx, ring.ClassFlow, &r, &a)
}

// List implements flow.Store over the whole cluster: every member lists
// the flows it holds, and the pages merge. It fails only when more members
// are unreachable than a flow has replicas, since every flow then has a
// reachable copy.
func (f *Flows) List(ctx context.Context, prefix, after string, limit int) ([]string, bool, error) {
	if limit <= 0 {
		return nil, false, fmt.Errorf("%w: limit %d", flow.ErrBadKey, limit)
	}
	r := request{op: opList, flow: prefix, key: after, limit: uint64(limit)}
	answers, failed := f.broadcast(ctx, &r)
	if failed > ring.ReplicaSuccessors {
		return nil, false, fmt.Errorf("%w: %d members unreachable", flow.ErrUnavailable, failed)
	}
	var ids []string
	more := false
	for _, a := range answers {
		ids = append(ids, a.ids...)
		more = more || a.more
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) > limit {
		ids, more = ids[:limit], true
	}
	return ids, more, nil
}

// DeletePrefix implements flow.Store over the whole cluster: every member
// removes the flows it holds under prefix, and counts those it owns. It
// runs in two rounds, each member draining its pushes before it deletes.
// In the first a member also fences the prefix, so that no copy still
// travelling from a member that has not deleted yet (a push, an adoption
// page, a repair) brings a flow back; the second deletes again and lifts
// the fence. Only the second round's failures are reported: a member that
// missed the first, or whose older build refused it, deletes in the
// second.
func (f *Flows) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	n, failed := 0, 0
	for _, op := range [...]byte{opFencePrefix, opDeletePrefix} {
		r := request{op: op, flow: prefix}
		answers, down := f.broadcast(ctx, &r)
		for _, a := range answers {
			n += int(a.n)
		}
		failed = down
	}
	if failed > 0 {
		return n, fmt.Errorf("%w: %d members unreachable; their copies of %q remain until their TTL", flow.ErrUnavailable, failed, prefix)
	}
	return n, nil
}

// Stats implements flow.Store: the flows this node holds.
func (f *Flows) Stats(context.Context) (flow.Stats, error) {
	st := f.shard.Stats()
	return flow.Stats{
		Flows: st.Flows, Entries: st.Entries, Bytes: st.Bytes, Writes: st.Puts,
		Batches: st.Batches, EvictedLRU: st.EvictedLRU, Expired: st.ExpiredFlows,
	}, nil
}

// broadcast sends r to this node and every other member, in parallel, and
// returns the answers that came back and how many members failed.
func (f *Flows) broadcast(ctx context.Context, r *request) ([]*answer, int) {
	v := f.currentView()
	deadline := time.Now().Add(f.deadline)
	if d, ok := flow.Budget(ctx); ok && d.Before(deadline) {
		deadline = d
	}
	r.mIdx, r.budget = v.idx, uint64(f.deadline.Milliseconds())
	answers := make([]*answer, len(v.members)+1)
	errs := make([]error, len(answers))
	var wg sync.WaitGroup
	for i, id := range v.members {
		answers[i] = &answer{}
		wg.Go(func() {
			if errs[i] = f.call(id, slotBulk, deadline, r, answers[i]); errs[i] == nil && answers[i].status != statusOK {
				errs[i] = statusErr(answers[i])
			}
		})
	}
	local := &answer{}
	oc := newOpCtx(time.Now(), deadline)
	f.serveNode(oc, r, local)
	oc.release()
	wg.Wait()
	answers[len(answers)-1] = local
	out, failed := answers[:0], 0
	for i, a := range answers {
		if i < len(errs) && errs[i] != nil || a.status != statusOK {
			failed++
			continue
		}
		out = append(out, a)
	}
	return out, failed
}
