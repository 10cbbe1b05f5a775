package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/raftnode"
)

// GroupID names the configuration group on the wire: peers of another
// group are refused.
const GroupID = "riftgate-config"

// MaxVoters is how many voters the group grows to; further members stay
// learners (a larger quorum only slows every write).
const MaxVoters = 5

// Options are one member's cluster settings, as the start command's
// --cluster-* flags give them.
type Options struct {
	Name      string   // --cluster-node-name: the stable name the node id derives from
	Listen    string   // --cluster-listen: host:port of the peer listener
	Advertise string   // --cluster-advertise: the URL peers use; "" is http://<Listen>
	Bootstrap bool     // --cluster-bootstrap: start a new cluster when the datadir has none
	Join      []string // --cluster-join: peer URLs of members to ask for admission
	Secret    []byte   // --cluster-secret-file or RIFTGATE_CLUSTER_SECRET
	DataDir   string   // --datadir: the group keeps raft.db in <DataDir>/cluster
	Logger    *slog.Logger

	// tune adjusts the group's Raft settings (tests: faster ticks, early
	// snapshots).
	tune func(*raftnode.Config)
}

// Node is one running member: the peer listener, the Raft group that
// replicates the configuration, the membership it implies, and what the
// engine borrows of it (the configuration log, the /cluster admin routes).
type Node struct {
	opts   Options
	log    *slog.Logger
	group  *raftnode.Group[state, entry, response]
	follow *follower
	peers  *http.ServeMux
	srv    *http.Server
	ln     net.Listener

	members atomic.Pointer[raftnode.Membership]
	mu      sync.Mutex
	changed chan struct{} // closed and replaced when the membership changes

	reach   reachability
	metrics metrics
	counter atomic.Pointer[flowCounter] // the flow runtime's count (CountFlows)
	// exchange is the flow runtime's LastExchange (SessionHealth).
	exchange atomic.Pointer[func(id uint64) (time.Time, string)]

	ctx      context.Context // the node's own, cancelled by Close
	cancel   context.CancelFunc
	start    context.Context // Start's: a signal that stops the process ends the waits of starting
	wg       sync.WaitGroup
	stopTask func()
	closed   atomic.Bool
}

var _ Membership = (*Node)(nil)

// Validate checks o as the start command takes it and fills in Advertise.
func (o *Options) Validate() error {
	switch {
	case o.Name == "":
		return errors.New("--cluster-node-name is required in cluster mode")
	case o.Listen == "":
		return errors.New("--cluster-listen is required in cluster mode")
	case o.DataDir == "":
		return errors.New("--datadir is required in cluster mode: the node keeps its Raft log there")
	case o.Bootstrap && len(o.Join) > 0:
		return errors.New("--cluster-bootstrap starts a new cluster and --cluster-join enters one: give one of them")
	case !o.Bootstrap && len(o.Join) == 0:
		return errors.New("give --cluster-bootstrap (the first node) or --cluster-join (the others)")
	case len(o.Secret) < 16:
		return errors.New("the cluster secret (--cluster-secret-file or RIFTGATE_CLUSTER_SECRET) must be at least 16 bytes")
	}
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return fmt.Errorf("--cluster-listen %q: %w", o.Listen, err)
	}
	if o.Advertise == "" {
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			return fmt.Errorf("--cluster-listen %q names no address peers can reach: give --cluster-advertise", o.Listen)
		}
		o.Advertise = "http://" + o.Listen
	}
	o.Advertise = strings.TrimSuffix(o.Advertise, "/")
	for _, u := range append([]string{o.Advertise}, o.Join...) {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("%q is not a peer URL (http://host:port)", u)
		}
	}
	return nil
}

// Start opens the member's group in <DataDir>/cluster, serves the peer
// listener and, when the node is not a member yet and --cluster-join names
// members, asks them to admit it as a learner; the leader promotes it to
// voter once it has caught up. It returns once the node is a member (or
// was one), or when ctx ends. A restarted node, with the same flags, finds
// itself a member and joins nothing.
func Start(ctx context.Context, opts Options) (*Node, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	dir := filepath.Join(opts.DataDir, "cluster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("cluster: peer listener: %w", err)
	}
	ln = raftnode.PeerListener(ln) // Raft's connections and the flow sessions alike

	n := &Node{opts: opts, log: opts.Logger, ln: ln, changed: make(chan struct{}), peers: http.NewServeMux()}
	n.follow = newFollower(n.log)
	n.ctx, n.cancel = context.WithCancel(context.WithoutCancel(ctx))
	n.start = ctx
	rc := raftnode.Config{
		NodeName: opts.Name, GroupID: GroupID, DataDir: dir,
		AdvertiseURL: opts.Advertise + "/raft", Secret: opts.Secret, Bootstrap: opts.Bootstrap,
		MaxCommandBytes: maxEntryBytes, Logger: n.log,
	}
	if opts.tune != nil {
		opts.tune(&rc)
	}
	n.group, err = raftnode.Bootstrap(n.ctx, rc, machine{}, observer{n})
	if err != nil {
		ln.Close()
		n.cancel()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	m := n.group.Membership()
	n.setMembers(m)
	n.group.State().Read(func(s *state, applied uint64) { n.follow.offer(s.Config, applied) })

	r := n.group.Routers()
	n.peers.Handle("/raft/", http.StripPrefix("/raft", r.Raft))
	n.peers.Handle("/cluster/", http.StripPrefix("/cluster", r.Cluster))
	n.group.HandlePeer(pathPing, 0, func(context.Context, uint64, []byte) ([]byte, error) { return nil, nil })
	n.srv = &http.Server{Handler: n.peers, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(n.log.Handler(), slog.LevelDebug)}
	n.wg.Add(2)
	go func() {
		defer n.wg.Done()
		_ = n.srv.Serve(ln)
	}()
	go func() {
		defer n.wg.Done()
		n.follow.run(n.ctx)
	}()
	if err := n.join(ctx); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return nil, errors.Join(err, n.Close(cctx))
	}
	n.stopTask = n.group.WatchLeader(func(uint64) []raftnode.LeaderTask {
		return []raftnode.LeaderTask{n.promoteLearners}
	})
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.reach.probe(n.ctx, n)
	}()
	n.log.Info("cluster member started", "id", raftnode.FormatNodeID(n.group.ID()), "peer", opts.Advertise)
	return n, nil
}

// join asks the members named by --cluster-join to admit this node as a
// learner, until one does or ctx ends. A node the membership already
// holds (a restart) asks nothing; a node asked twice is admitted once.
func (n *Node) join(ctx context.Context) error {
	if len(n.opts.Join) == 0 {
		return nil
	}
	// A restarted node first replays what its log has committed: its
	// membership may well hold it already.
	replayed := time.Now().Add(5 * time.Second)
	for n.group.Applied() < n.group.Status().HardState.GetCommit() && time.Now().Before(replayed) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	body := map[string]string{"name": n.opts.Name, "url": n.opts.Advertise + "/raft"}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	for attempt := 0; ; attempt++ {
		if _, ok := n.Current().Member(n.Self()); ok {
			return nil
		}
		for _, u := range n.opts.Join {
			c := &raftnode.AdminClient{BaseURL: strings.TrimSuffix(u, "/") + "/cluster", Group: GroupID, Secret: n.opts.Secret, HTTP: hc}
			err := c.Do(ctx, http.MethodPost, "/learners", body, nil)
			switch {
			case err == nil:
				n.log.Info("admitted as a learner", "via", u)
				return nil
			case strings.Contains(err.Error(), "is already a"):
				return nil // admitted before: this is a restart, or a retried join
			case strings.Contains(err.Error(), "was removed"):
				return fmt.Errorf("cluster: node %q was removed from the cluster and a removed node never returns: start it with a new --cluster-node-name and an empty --datadir", n.opts.Name)
			}
			if attempt%20 == 0 {
				n.log.Warn("cannot join yet; retrying", "via", u, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: joining via %s: %w", strings.Join(n.opts.Join, ","), ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// promoteLearners runs on the leader: each learner that has caught up
// becomes a voter, up to MaxVoters.
func (n *Node) promoteLearners(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m := n.group.Membership()
		if len(m.Voters()) >= MaxVoters {
			continue
		}
		for _, id := range m.Learners() {
			// raftnode refuses a learner that has not caught up.
			if _, err := n.group.Promote(ctx, id); err == nil {
				mb, _ := m.Member(id)
				n.log.Info("learner promoted to voter", "member", mb.Name)
				break
			}
		}
	}
}

// Self implements Membership.
func (n *Node) Self() uint64 { return n.group.ID() }

// Current implements Membership: the membership this node has applied.
func (n *Node) Current() raftnode.Membership { return n.members.Load().Clone() }

// IsIsolated reports raftnode's isolated-owner rule now.
func (n *Node) IsIsolated() bool { return n.group.IsIsolated() }

// IsIsolatedAt implements Membership.
func (n *Node) IsIsolatedAt(now time.Time) bool { return n.group.IsIsolatedAt(now) }

// LeaderChanged implements Membership.
func (n *Node) LeaderChanged() <-chan struct{} { return n.group.LeaderChanged() }

// MembershipChanged returns a channel closed at the next change of the
// applied membership: read Current after it closes, then wait again.
func (n *Node) MembershipChanged() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.changed
}

func (n *Node) setMembers(m raftnode.Membership) {
	if cur := n.members.Load(); cur != nil && cur.Index >= m.Index && m.Index != 0 {
		return
	}
	n.members.Store(&m)
	n.mu.Lock()
	close(n.changed)
	n.changed = make(chan struct{})
	n.mu.Unlock()
}

// ConfigLog is gateway.Cluster.Log: the configuration log on the group,
// driving rec on this node. It returns once this node runs a configuration
// it has confirmed current with the leader, or what it has when it cannot
// confirm that within catchUpTimeout.
func (n *Node) ConfigLog(rec config.Reconciler) (config.Log, error) {
	n.follow.attach(rec)
	ctx, cancel := context.WithTimeout(n.start, catchUpTimeout)
	defer cancel()
	if err := n.Barrier(ctx); err != nil {
		n.log.Warn("serving the configuration this node has: it cannot confirm it is current yet", "err", err)
		_, idx := n.follow.applied()
		_ = n.follow.wait(ctx, idx)
	}
	return configLog{n}, nil
}

// Applied is the log index of the configuration this node runs (the last
// configuration command its reconciler followed): with WaitApplied, what
// the flow runtime's proxyOnce waiters need to replay a recording only once
// their node serves it.
func (n *Node) Applied() uint64 {
	n.follow.mu.Lock()
	defer n.follow.mu.Unlock()
	return n.follow.haveIdx
}

// WaitApplied returns once this node runs the configuration at index or
// later. index is a log index, which need not hold a configuration
// command: another node's Applied is the index of the state it started
// from or restored as often as that of a command. So this waits for the
// group to apply index, then for the reconciler to follow whatever that
// offered (the observer offers under the state lock, before the index
// shows as applied).
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	if err := n.group.WaitApplied(ctx, index); err != nil {
		return err
	}
	_, idx := n.follow.applied()
	return n.follow.wait(ctx, idx)
}

// Barrier returns once this node runs everything the group had committed
// when it was called (a Raft read barrier, then the reconciler catching
// up): the admin API's ?consistent=true.
func (n *Node) Barrier(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, barrierTimeout)
	defer cancel()
	if err := n.group.ReadBarrier(ctx); err != nil {
		return unavailable("this node cannot confirm its configuration is current (no leader, or no quorum)", err)
	}
	_, idx := n.follow.applied()
	return n.follow.wait(ctx, idx)
}

// HandlePeer serves an application route (under /app/) on the peer
// listener, signed as Raft's traffic is: see raftnode.Group.HandlePeer.
func (n *Node) HandlePeer(path string, limit int64, h raftnode.PeerHandler) {
	n.group.HandlePeer(path, limit, h)
}

// CallPeer calls member id's application route: see raftnode.Group.CallPeer.
func (n *Node) CallPeer(ctx context.Context, id uint64, path string, body []byte, respCap int64) ([]byte, error) {
	return n.group.CallPeer(ctx, id, path, body, respCap)
}

// Handle mounts h on the peer listener at pattern, outside the signed
// routes: for traffic that authenticates itself.
func (n *Node) Handle(pattern string, h http.Handler) { n.peers.Handle(pattern, h) }

// transferTimeout bounds how long a leaving leader waits for another
// voter to take over.
const transferTimeout = 3 * time.Second

// handOff moves the leadership of a leaving leader to the other voter that
// has most of the log, so that writes pause for one election round rather
// than an election timeout: a rolling restart stops each node with
// SIGTERM.
func (n *Node) handOff(ctx context.Context) {
	if !n.group.IsLeader() {
		return
	}
	st := n.group.Status()
	var to, match uint64
	var reachable bool
	for _, id := range n.Current().Voters() {
		pr, ok := st.Progress[id]
		if !ok || id == n.Self() {
			continue
		}
		// A voter this node's probe reached beats one it did not; then the
		// one with most of the log.
		r := n.reach.reachable(id) || pr.RecentActive
		if to == 0 || r && !reachable || r == reachable && pr.Match > match {
			to, match, reachable = id, pr.Match, r
		}
	}
	if to == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, transferTimeout)
	defer cancel()
	n.group.TransferLeadership(ctx, to)
	for n.group.IsLeader() && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	mb, _ := n.Current().Member(to)
	n.log.Info("leadership handed over before leaving", "to", mb.Name, "done", !n.group.IsLeader())
}

// Close stops the peer listener, the leader's tasks and the group; every
// goroutine the node started has returned when it returns.
func (n *Node) Close(ctx context.Context) error {
	if n.closed.Swap(true) {
		return nil
	}
	n.handOff(ctx)
	n.follow.detach()
	_ = n.srv.Close()
	if n.stopTask != nil {
		n.stopTask()
	}
	err := n.group.Close(ctx)
	n.cancel()
	n.wg.Wait()
	return err
}
