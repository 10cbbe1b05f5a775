package raftnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Config describes one member of one group.
type Config struct {
	// NodeName is the stable name the node id is derived from.
	NodeName string
	// GroupID names the group; peers of another group are refused.
	GroupID string
	// DataDir holds raft.db.
	DataDir string
	// AdvertiseURL is where peers reach this node's Raft router, for
	// example "http://127.0.0.1:7000/raft".
	AdvertiseURL string
	// Secret authenticates every peer and admin request (HMAC-SHA256).
	Secret []byte
	// Bootstrap starts a new group with this node as its single voter when
	// the data directory is empty. Without it a fresh node waits to be
	// added by the leader.
	Bootstrap bool

	TickInterval    time.Duration // default 100ms
	ElectionTick    int           // default 10
	HeartbeatTick   int           // default 1
	MaxSizePerMsg   uint64        // default 1 MiB, capped to fit MaxMessageBytes
	MaxInflightMsgs int           // default 256
	// MaxCommandBytes is the largest encoded command the application can
	// propose (default 1 MiB). Larger proposals are refused, and bootstrap
	// fails if one could not fit a message body.
	MaxCommandBytes int
	// MaxMessageBytes caps a message batch body (default 16 MiB).
	MaxMessageBytes int64
	// MaxSnapshotBytes caps a snapshot message body (default 512 MiB).
	MaxSnapshotBytes int64
	// SnapshotEntries is how many applied entries trigger a snapshot
	// (default 10000); CatchUpEntries stay in the log behind it so slightly
	// lagging followers catch up without one (default 5000).
	SnapshotEntries uint64
	CatchUpEntries  uint64
	// LeaderTaskGrace bounds how long leader tasks get to stop (default 5s).
	LeaderTaskGrace time.Duration

	// HTTPClient carries peer traffic. Each call has its own deadline
	// (messages 5s, snapshots 10min), so a client-wide Timeout should be
	// longer than the largest snapshot transfer or unset.
	HTTPClient *http.Client
	Logger     *slog.Logger // default slog.Default()

	ownClient bool // HTTPClient was made here, so Close releases it
}

// frameOverhead is what a message batch adds around entry payloads: the
// proto Message and Entry fields, the frame lengths, the proposal header.
const frameOverhead = 4 << 10

// ErrConfig reports an unusable Config.
var ErrConfig = errors.New("raftnode: invalid config")

func (c *Config) normalize() error {
	if c.NodeName == "" || c.GroupID == "" || c.DataDir == "" || c.AdvertiseURL == "" {
		return fmt.Errorf("%w: NodeName, GroupID, DataDir and AdvertiseURL are required", ErrConfig)
	}
	if len(c.Secret) < 16 {
		return fmt.Errorf("%w: Secret must be at least 16 bytes", ErrConfig)
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.TickInterval <= 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	def(&c.ElectionTick, 10)
	def(&c.HeartbeatTick, 1)
	def(&c.MaxInflightMsgs, 256)
	def(&c.MaxCommandBytes, 1<<20)
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = 1 << 20
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 16 << 20
	}
	if c.MaxSnapshotBytes <= 0 {
		c.MaxSnapshotBytes = 512 << 20
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = 10000
	}
	if c.CatchUpEntries == 0 {
		c.CatchUpEntries = 5000
	}
	if c.LeaderTaskGrace <= 0 {
		c.LeaderTaskGrace = 5 * time.Second
	}
	if c.HTTPClient == nil {
		// No client-wide timeout: each call carries its own deadline, and a
		// snapshot legitimately takes longer than a heartbeat.
		c.HTTPClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8, DialContext: DialPeer}}
		c.ownClient = true
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c.fitCatchUp()
}

// fitCatchUp enforces catch-up sizing: raft sends at least one entry per
// append even past MaxSizePerMsg, so both a full batch and the largest
// single command must fit the body cap, or a lagging follower is refused
// the same append forever and never rejoins.
func (c *Config) fitCatchUp() error {
	room := c.MaxMessageBytes - frameOverhead
	if int64(c.MaxCommandBytes) > room {
		return fmt.Errorf("%w: MaxCommandBytes %d does not fit MaxMessageBytes %d (overhead %d)",
			ErrConfig, c.MaxCommandBytes, c.MaxMessageBytes, frameOverhead)
	}
	if int64(c.MaxSizePerMsg) > room {
		c.Logger.Info("raftnode: MaxSizePerMsg capped to fit the message body cap",
			"from", c.MaxSizePerMsg, "to", room)
		c.MaxSizePerMsg = uint64(room)
	}
	return nil
}

func (c *Config) electionTimeout() time.Duration {
	return time.Duration(c.ElectionTick) * c.TickInterval
}

type readState = raft.ReadState

// Errors returned by proposals and admin calls.
var (
	ErrNoLeader         = errors.New("raftnode: no leader")
	ErrNotLeader        = errors.New("raftnode: not the leader")
	ErrCommandTooLarge  = errors.New("raftnode: command larger than MaxCommandBytes")
	ErrClosed           = errors.New("raftnode: group closed")
	ErrOutcomeUnknown   = errors.New("raftnode: leadership changed before the proposal applied; outcome unknown")
	ErrMembershipChange = errors.New("raftnode: membership change refused")
)

// Group is one running member of a Raft group: storage, transport, the raft
// node and the state-machine adapter, driven by one Ready loop.
type Group[S, C, R any] struct {
	cfg   Config
	id    uint64
	log   *slog.Logger
	store *Storage
	sm    *StateMachine[S, C, R]
	node  raft.Node
	tr    *transport

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	failed atomic.Pointer[error]
	closed atomic.Bool

	members atomic.Pointer[Membership]
	lead    atomic.Uint64
	term    atomic.Uint64
	leading atomic.Bool

	seq     atomic.Uint64
	waitMu  sync.Mutex
	waiters map[uint64]chan Result[R]

	appliedMu sync.Mutex
	appliedCh chan struct{} // closed and replaced after every apply

	subMu sync.Mutex
	subs  map[chan struct{}]struct{}

	leadMu sync.Mutex
	leadCh chan struct{} // closed and replaced whenever the known leader changes

	readMu sync.Mutex
	reads  map[uint64]chan uint64 // ReadBarrier waiters by request seq

	peerMux *http.ServeMux // the Raft router, application routes included

	confMu    sync.Mutex // one membership change at a time from this node
	snapIndex uint64     // Ready loop only
	campaign  bool       // Ready loop only: campaign once bootstrapped
}

// Routers are the HTTP handlers a host mounts. Raft serves peers and must be
// reachable at Config.AdvertiseURL; Cluster is the membership admin API.
type Routers struct {
	Raft    http.Handler
	Cluster http.Handler
}

// Bootstrap opens (or creates) the member's storage, restores the adapter
// from its latest snapshot, starts the raft node, the transport and the
// Ready loop, and returns the running group. Close stops all of it.
func Bootstrap[S, C, R any](ctx context.Context, cfg Config, app AppStateMachine[S, C, R], obs Observer[S, C, R]) (*Group[S, C, R], error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	id := NodeIDFromName(cfg.NodeName)
	log := cfg.Logger.With("group", cfg.GroupID, "node", cfg.NodeName)
	store, err := OpenStorage(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	sm, err := NewStateMachine(store, app, obs, log)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	g := &Group[S, C, R]{
		cfg: cfg, id: id, log: log, store: store, sm: sm,
		waiters:   map[uint64]chan Result[R]{},
		reads:     map[uint64]chan uint64{},
		appliedCh: make(chan struct{}),
		leadCh:    make(chan struct{}),
		subs:      map[chan struct{}]struct{}{},
	}
	// A boot nonce keeps sequence numbers of this run apart from those of
	// earlier runs replayed from the log.
	g.seq.Store(uint64(time.Now().UnixNano()))
	m := sm.Membership()
	g.members.Store(&m)
	g.ctx, g.cancel = context.WithCancel(context.WithoutCancel(ctx))
	g.tr = &transport{
		auth: NewPeerAuth(cfg.GroupID, cfg.Secret), self: id, selfURL: cfg.AdvertiseURL,
		client: cfg.HTTPClient, msgCap: cfg.MaxMessageBytes, snapCap: cfg.MaxSnapshotBytes, log: log,
		staleAfter: cfg.electionTimeout() / 2,
		resolve: func(id uint64) string {
			mb, _ := g.members.Load().Member(id)
			return mb.URL
		},
		step:     func(ctx context.Context, m *pb.Message) error { return g.node.Step(ctx, m) },
		reportUR: func(id uint64) { g.node.ReportUnreachable(id) },
		reportSS: func(id uint64, st raft.SnapshotStatus) { g.node.ReportSnapshot(id, st) },
	}
	g.tr.start(g.ctx)
	g.peerMux = g.raftRouter()
	applied, _ := sm.Applied()
	rc := &raft.Config{
		ID:                        id,
		ElectionTick:              cfg.ElectionTick,
		HeartbeatTick:             cfg.HeartbeatTick,
		Storage:                   store,
		Applied:                   applied,
		MaxSizePerMsg:             cfg.MaxSizePerMsg,
		MaxInflightMsgs:           cfg.MaxInflightMsgs,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		StepDownOnRemoval:         true,
		DisableProposalForwarding: true, // followers forward over HTTP to get the response back
		Logger:                    raftLogger{log},
	}
	sm.confHook = func(cc pb.ConfChangeI) { g.node.ApplyConfChange(cc) }
	g.snapIndex = applied
	last, _ := store.LastIndex()
	fresh := last == 0 && applied == 0
	if fresh && cfg.Bootstrap {
		cctx, err := encMode.Marshal(confContext{Name: cfg.NodeName, URL: cfg.AdvertiseURL})
		if err != nil {
			g.abort()
			return nil, fmt.Errorf("raftnode: encode bootstrap peer: %w", err)
		}
		g.node = raft.StartNode(rc, []raft.Peer{{ID: id, Context: cctx}})
	} else {
		g.node = raft.RestartNode(rc)
	}
	g.campaign = fresh && cfg.Bootstrap
	g.wg.Add(1)
	go g.run()
	log.Info("raftnode: group started", "id", FormatNodeID(id), "applied", applied, "bootstrap", fresh && cfg.Bootstrap)
	return g, nil
}

func (g *Group[S, C, R]) abort() {
	g.tr.stop()
	g.cancel()
	_ = g.store.Close()
}

// ID is this member's node id.
func (g *Group[S, C, R]) ID() uint64 { return g.id }

// Routers returns the handlers to mount (see Routers).
func (g *Group[S, C, R]) Routers() Routers {
	return Routers{Raft: g.peerMux, Cluster: g.clusterRouter()}
}

// State is the local read model.
func (g *Group[S, C, R]) State() ReadOnlyState[S] { return g.sm.ReadOnly() }

// Status is raft's own view of this node.
func (g *Group[S, C, R]) Status() raft.Status { return g.node.Status() }

// Membership is the applied membership.
func (g *Group[S, C, R]) Membership() Membership { return g.members.Load().Clone() }

// Applied is the last applied log index.
func (g *Group[S, C, R]) Applied() uint64 {
	i, _ := g.sm.Applied()
	return i
}

// run is the Ready loop: it owns ticking, persistence, sending and applying.
func (g *Group[S, C, R]) run() {
	defer g.wg.Done()
	ticker := time.NewTicker(g.cfg.TickInterval)
	defer ticker.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-ticker.C:
			g.node.Tick()
		case rd := <-g.node.Ready():
			if err := g.handleReady(rd); err != nil {
				g.log.Error("raftnode: ready loop stopped", "err", err)
				g.failed.Store(&err)
				g.setLeading(false, 0)
				return
			}
			g.node.Advance()
			if g.campaign && g.Applied() > 0 {
				// A lone bootstrap voter need not wait out an election
				// timeout; raft refuses to campaign before it has applied
				// its own membership entry.
				g.campaign = false
				_ = g.node.Campaign(g.ctx)
			}
		}
	}
}

// handleReady follows raftexample's order: persist the snapshot, then the
// hard state and entries; send (a leader sends first); apply the snapshot
// and committed entries.
// Installing the snapshot persists it before swapping the state, so the
// first and fourth steps happen together, before anything else.
func (g *Group[S, C, R]) handleReady(rd raft.Ready) error {
	if rd.SoftState != nil {
		g.setLeading(rd.SoftState.RaftState == raft.StateLeader, rd.SoftState.Lead)
	}
	// A leader sends before it persists (raft thesis §10.2.1, as etcd's
	// server does): the followers write the entries while it does. That
	// takes one disk write off every commit, and off a new leader's first
	// append, the message that ends the followers' isolation after an
	// election. Only in a term it already persisted: a Ready that starts
	// a term (a lone voter campaigning and winning at once) persists the
	// term and vote before anything names them.
	early := g.leading.Load() && (raft.IsEmptyHardState(rd.HardState) || rd.HardState.GetTerm() == g.term.Load())
	if !raft.IsEmptyHardState(rd.HardState) {
		g.term.Store(rd.HardState.GetTerm())
	}
	if early {
		g.tr.send(rd.Messages)
	}
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := g.sm.InstallSnapshot(rd.Snapshot); err != nil {
			return err
		}
		g.snapIndex = rd.Snapshot.GetMetadata().GetIndex()
		m := g.sm.Membership()
		g.members.Store(&m)
		g.notifyApplied()
	}
	if err := g.store.Save(rd.HardState, rd.Entries, rd.MustSync); err != nil {
		return err
	}
	if !early {
		g.tr.send(rd.Messages)
	}
	if len(rd.ReadStates) > 0 {
		g.deliverReads(rd.ReadStates)
	}
	if len(rd.CommittedEntries) == 0 {
		return nil
	}
	results, err := g.sm.ApplyEntries(rd.CommittedEntries)
	confChanged := false
	for _, e := range rd.CommittedEntries {
		if e.GetType() != pb.EntryNormal {
			m := g.sm.Membership()
			g.members.Store(&m)
			confChanged = true
			break
		}
	}
	g.deliver(results)
	g.notifyApplied()
	if err != nil {
		return err
	}
	return g.maybeSnapshot(confChanged)
}

// maybeSnapshot snapshots every SnapshotEntries entries, and after every
// membership change: raft sends a member whose entries are compacted away
// the stored snapshot, and a new member refuses one whose ConfState does
// not name it, so the stored snapshot must never predate the membership.
func (g *Group[S, C, R]) maybeSnapshot(confChanged bool) error {
	applied, _ := g.sm.Applied()
	if applied-g.snapIndex < g.cfg.SnapshotEntries && (!confChanged || applied == g.snapIndex) {
		return nil
	}
	snap, err := g.sm.Snapshot()
	if err != nil {
		return err
	}
	g.snapIndex = snap.GetMetadata().GetIndex()
	if g.snapIndex <= g.cfg.CatchUpEntries {
		return nil
	}
	if err := g.store.Compact(g.snapIndex - g.cfg.CatchUpEntries); err != nil && !errors.Is(err, raft.ErrCompacted) {
		return err
	}
	return nil
}

func (g *Group[S, C, R]) deliver(results []Result[R]) {
	g.waitMu.Lock()
	defer g.waitMu.Unlock()
	for _, r := range results {
		if r.Origin != g.id {
			continue
		}
		if ch, ok := g.waiters[r.Seq]; ok {
			ch <- r
			delete(g.waiters, r.Seq)
		}
	}
}

func (g *Group[S, C, R]) notifyApplied() {
	g.appliedMu.Lock()
	close(g.appliedCh)
	g.appliedCh = make(chan struct{})
	g.appliedMu.Unlock()
}

// WaitApplied blocks until this node has applied index.
func (g *Group[S, C, R]) WaitApplied(ctx context.Context, index uint64) error {
	for {
		g.appliedMu.Lock()
		ch := g.appliedCh
		g.appliedMu.Unlock()
		if g.Applied() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-g.ctx.Done():
			return ErrClosed
		}
	}
}

func (g *Group[S, C, R]) setLeading(leading bool, lead uint64) {
	// leading first: whoever LeaderChanged wakes finds both in place
	// (IsIsolated on a new leader reads them both).
	was := g.leading.Swap(leading)
	if g.lead.Swap(lead) != lead {
		g.leadMu.Lock()
		close(g.leadCh)
		g.leadCh = make(chan struct{})
		g.leadMu.Unlock()
	}
	if was == leading {
		return
	}
	if !leading {
		// Proposals this node made as leader may be truncated by the next
		// one; their waiters would otherwise wait out their deadline.
		g.waitMu.Lock()
		for seq, ch := range g.waiters {
			ch <- Result[R]{Err: ErrOutcomeUnknown}
			delete(g.waiters, seq)
		}
		g.waitMu.Unlock()
	}
	g.subMu.Lock()
	for ch := range g.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	g.subMu.Unlock()
}

// subscribeLeadership returns a channel signalled (coalesced) whenever
// this node gains or loses leadership.
func (g *Group[S, C, R]) subscribeLeadership() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	g.subMu.Lock()
	g.subs[ch] = struct{}{}
	g.subMu.Unlock()
	return ch, func() {
		g.subMu.Lock()
		delete(g.subs, ch)
		g.subMu.Unlock()
	}
}

// LeaderChanged returns a channel closed when the leader this node knows
// next changes (to another node, or to none): a caller waiting for a
// leader to take a request asks again then rather than on a timer.
func (g *Group[S, C, R]) LeaderChanged() <-chan struct{} {
	g.leadMu.Lock()
	defer g.leadMu.Unlock()
	return g.leadCh
}

// IsLeader reports whether this node currently leads.
func (g *Group[S, C, R]) IsLeader() bool { return g.leading.Load() }

// LeaderView is what this node knows about the current leader.
type LeaderView struct {
	Leader    uint64 // 0 when unknown
	LeaderURL string
	Term      uint64
	IsSelf    bool
	// HeardAt is when an authenticated message from the leader last
	// arrived (zero on the leader itself).
	HeardAt time.Time
}

// LeaderView reports the leader as this node sees it; the forwarder uses it.
func (g *Group[S, C, R]) LeaderView() LeaderView {
	lead := g.lead.Load()
	v := LeaderView{Leader: lead, Term: g.term.Load(), IsSelf: lead == g.id && g.leading.Load()}
	if lead != 0 {
		v.LeaderURL = g.tr.url(lead)
		if lead != g.id {
			v.HeardAt = g.tr.lastHeard(lead)
		}
	}
	return v
}

// IsIsolated reports whether this node cannot see a current leader that a
// quorum acknowledged recently. A leader checks that a quorum of voters
// (itself included) was heard from within an election timeout, the same
// window CheckQuorum uses; a follower checks that it heard from the leader
// within that window. Owner-side writes and strong reads refuse while it
// is true.
func (g *Group[S, C, R]) IsIsolated() bool { return g.IsIsolatedAt(time.Now()) }

// IsIsolatedAt is IsIsolated at now, a clock reading the caller already
// has: an owner asks on every operation and reads the clock once for it.
func (g *Group[S, C, R]) IsIsolatedAt(now time.Time) bool {
	if g.closed.Load() || g.failed.Load() != nil {
		return true
	}
	lead := g.lead.Load()
	if lead == 0 {
		return true
	}
	if _, member := g.members.Load().Member(g.id); !member {
		return true // removed, or not yet admitted
	}
	window := g.cfg.electionTimeout()
	if lead != g.id {
		return now.Sub(g.tr.lastHeard(lead)) >= window
	}
	if !g.leading.Load() {
		return true
	}
	// Counted over the members in place: every owner operation of a
	// cluster asks, and Voters would allocate each time.
	voters, seen := 0, 0
	for _, mb := range g.members.Load().Members {
		if mb.Role != RoleVoter {
			continue
		}
		voters++
		if mb.ID == g.id || now.Sub(g.tr.lastHeard(mb.ID)) < window {
			seen++
		}
	}
	return seen < voters/2+1
}

// TransferLeadership asks raft to hand leadership to member to.
func (g *Group[S, C, R]) TransferLeadership(ctx context.Context, to uint64) {
	g.node.TransferLeadership(ctx, g.lead.Load(), to)
}

// Close stops the leader tasks, the Ready loop, the raft node and the
// transport, and closes the storage. Every goroutine the group started has
// returned when it returns nil.
func (g *Group[S, C, R]) Close(ctx context.Context) error {
	if g.closed.Swap(true) {
		return nil
	}
	g.cancel()
	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		g.node.Stop()
		g.tr.stop()
		if g.cfg.ownClient {
			g.cfg.HTTPClient.CloseIdleConnections()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("raftnode: close: %w", ctx.Err())
	}
	err := g.store.Close()
	if f := g.failed.Load(); f != nil {
		err = errors.Join(*f, err)
	}
	return err
}
