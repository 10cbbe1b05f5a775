// Package cluster is riftgate's cluster runtime (seed 000 §9–12): the
// configuration log on a raftnode group, flow ownership by rendezvous
// hashing with one signed owner RPC, replicas on the two successors,
// fencing, adoption and cluster-wide proxyOnce claims. It lends the engine
// its seams (gateway.Cluster): a config.Log, a flow.Store, proxy.Claims and
// the /cluster admin routes. No engine package imports it; the start
// command builds it and hands the seams to gateway.Run.
//
// The package has two halves that meet at Membership: the group (the Raft
// group, the configuration log, membership admin) tells the flow runtime
// (ownership, the owner RPC, replicas, adoption) which membership is
// committed and whether this node is isolated.
//
// # The group
//
// Start opens a member (Node): its peer listener (Raft under /raft/, the
// membership admin under /cluster/, application routes under /raft/app/,
// and whatever Handle mounts), its Raft group in <datadir>/cluster, and, for
// a new node with --cluster-join, its admission as a learner; the leader
// promotes caught-up learners to voters, up to MaxVoters. The group's state
// machine (machine.go) embeds config.State and the membership, and
// config.Apply is its reduction; commands over one entry travel in parts
// (command.go). Node.ConfigLog is gateway.Cluster.Log: a change is checked
// and dry-run on the node that takes it, proposed with only the module
// bytes the cluster lacks, and answered once that node runs it
// (configlog.go). Node.Admin serves GET /cluster and DELETE
// /cluster/members/:name; Node.Recordings gathers recorded requests from
// every member; Node.Barrier is ?consistent=true.
//
// Beyond Membership, a Node offers the flow runtime MembershipChanged (a
// channel closed at the next change), Applied and WaitApplied (the
// configuration index this node runs), HandlePeer and CallPeer (signed
// peer routes) and Handle (a route on the peer listener).
//
// # The flows
//
// NewFlows opens the node's flowshard and runs the flow runtime on a
// Membership (flows.go): Flows is the engine's flow.Store, and lends
// Claims (claims.go) and Cycles (cycles.go), all owned by rendezvous over
// the voters at the applied membership index. An operation takes a permit
// and a deadline, then runs on this node (owner.go: the owner's checks,
// the flow's lock, flowshard, replication) or goes to the owner over a
// session (session.go: one PeerAuth-signed Upgrade, then counted, tagged
// frames; peers.go: the calling side; wire.go: the bodies). Owners push
// changed records to the two successors and offer them digests every 5 s
// (replica.go); when the voters change, each node adopts the flows it now
// owns from every member it reaches, after fencing their old owners
// (adopt.go). The start command mounts Flows.Handler on the peer listener
// under /flows/.
package cluster

import (
	"time"

	"github.com/riftgate/riftgate/raftnode"
)

// Membership is what the flow runtime needs of the Raft group.
type Membership interface {
	// Self is this node's id (raftnode's id of --cluster-node-name).
	Self() uint64
	// Current is the committed membership this node has applied; its
	// Index is the m_idx that ownership is computed at.
	Current() raftnode.Membership
	// IsIsolatedAt reports the isolated-owner rule (seed 000 §11) at now:
	// true unless this node sees a leader that a quorum acknowledged
	// recently.
	IsIsolatedAt(now time.Time) bool
	// LeaderChanged returns a channel closed when the leader this node
	// knows next changes: an owner waiting out an election wakes on it.
	LeaderChanged() <-chan struct{}
}
