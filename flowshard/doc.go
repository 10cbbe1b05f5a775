// Package flowshard is riftgate's per-node flow store: every flow this node
// owns or replicates, held in memory and kept durable in one bbolt file
// (flow.db), separate from the Raft store so the two fsync policies never
// contend.
//
// TODO: full reference.
package flowshard
