// Package raftnode is riftgate's generic Raft substrate on go.etcd.io/raft/v3:
// durable log and snapshot storage (one bbolt file, raft.db), an
// authenticated HTTP transport, node and group identity, membership admin,
// follower-to-leader forwarding, a state-machine seam, group bootstrap and
// a leader-task lifecycle. It knows nothing of riftgate outside raftnode/.
//
// # The state-machine seam
//
// An application supplies an AppStateMachine[S, C, R]: a pure,
// deterministic reduction Apply(*S, C, index) R plus ApplyMembership,
// InitialState, NoopResponse and a snapshot encoding. No clocks, random
// numbers or IO: every replica reducing the same log must reach identical
// state. Commands (C) and responses (R) cross the network as CBOR.
//
// Effects belong in an Observer[S, C, R]. Its hooks run with the state
// write lock held and may only queue closures on the Effects buffer; the
// adapter runs them after the lock is released, so a subscriber that reads
// the state back cannot deadlock or see a half-applied batch.
//
// ReadOnlyState[S] (Group.State) is the local, advisory read model:
// Read blocks for the read lock, TryRead does not. Group.ReadBarrier
// (ReadIndex) makes the reads after it linearizable.
//
// SnapshotCodec offers magic bytes + u16 version + CBOR body for
// applications that want a version to migrate from; the adapter stores
// whatever EncodeSnapshot returns, verbatim, inside its own envelope
// ("RGSN", version 1) that also carries the membership.
//
// # Running a group
//
//	g, err := raftnode.Bootstrap(ctx, raftnode.Config{
//		NodeName: "n1", GroupID: "config", DataDir: dir,
//		AdvertiseURL: "http://10.0.0.1:7000/raft", Secret: secret,
//		Bootstrap: true, // only on the first node of a new group
//	}, app, observer)
//	r := g.Routers()
//	mux.Handle("/raft/", http.StripPrefix("/raft", r.Raft))
//	mux.Handle("/cluster/", http.StripPrefix("/cluster", r.Cluster))
//	resp, err := g.ProposeAndWait(ctx, cmd) // forwarded when a follower
//	defer g.Close(ctx)
//
// Other nodes start without Bootstrap and are admitted by the leader:
// AddLearner, then Promote (ConfChangeV2, one change at a time). Node ids
// are xxh64 of the node name with a fixed seed (NodeIDFromName), never 0,
// and a removed id is never admitted again.
//
// IsIsolated reports whether this node cannot see a current leader that a
// quorum acknowledged within an election timeout; WatchLeader runs tasks
// only while this node leads and never overlaps two generations.
//
// Catch-up sizing: Bootstrap caps MaxSizePerMsg so a full append, and the
// largest command (Config.MaxCommandBytes), fit the transport body cap
// (MaxMessageBytes), and fails if the command cannot fit at all.
//
// The conformance suite in raftnode/conformance checks any adapter against
// the contract StateMachine implements.
package raftnode
