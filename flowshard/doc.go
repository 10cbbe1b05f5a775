// Package flowshard is riftgate's per-node flow store: every flow this node
// owns or replicates, held in memory and kept durable in one bbolt file
// (flow.db), separate from the Raft store so that the two fsync policies
// never contend.
//
// # Flows, keys and versions
//
// A flow is a small map from key to value, named by a scoped flow id such
// as "i8080:abc" (one imposter's flow) or "f:abc" (the fleet namespace).
// Flow ids and keys are non-empty UTF-8 strings of at most
// Options.MaxKeyBytes (1 KiB); values are at most Options.MaxValueBytes
// (64 KiB). Violations fail with ErrBadKey or ErrTooLarge before anything
// is stored.
//
// Every stored value carries a Version, the fencing tuple (MIdx, V, Origin).
// V is the flow's write counter: each Put, successful CAS and Delete of the
// flow advances it by one, whatever the key, and the write stamps
// (Policy.MIdx, V, Policy.Origin). Because deletes advance it too, a version
// that a CAS caller saw is never handed out again while the flow exists,
// even if the key is deleted and written again. A Delete leaves a tombstone:
// the key, absent to every reader, with the version of its delete, kept for
// the delete's TTL, so that replicas learn deletes. The counter ends with the
// flow: Clear, DeletePrefix, LRU shedding, or the flow's TTL running out
// (see below) start it again from zero. A single node passes MIdx 0 and a
// fixed Origin.
//
// Merge is the replica path: it stores records (values and tombstones) that
// Records read on another node, each with the version it carries, only
// where that version is higher than the stored one (compared by MIdx, then
// V, then Origin), so a copy converges on the highest tuple of every key
// whatever order records arrive in; Summaries tells two copies apart
// without copying them.
//
// # Linearizability
//
// Each flow has its own lock, and every operation on a flow runs under it,
// against the in-memory state, which is authoritative; the disk is a
// durable copy of it. Operations on one flow are therefore linearizable and
// operations on different flows do not wait for each other. A write
// returns once its effect is in memory and, depending on its durability,
// on disk.
//
// # Durability
//
// The durability is chosen per write (in practice per imposter, via
// Policy.Durability) and says when the write is acknowledged:
//
//   - Memory: never written to disk. It is acknowledged at once and is lost
//     on restart. A Memory write over a key that an earlier durable write
//     put on disk deletes that disk copy, so a restart cannot bring an older
//     value back.
//
//   - Async: queued for the writer and acknowledged at once. A crash loses
//     what was acknowledged but not committed yet: at most the batch being
//     committed plus the batch being queued, each bounded by
//     Options.MaxPending ops (4096 by default; writers arriving together can
//     overshoot it by one op each, since the bound is checked before the
//     flow lock is taken). In time, that is at most one commit interval: the
//     time one bbolt commit of such a batch takes: on an idle machine here
//     about 1.6 ms for one op and about 9 ms for 1000 (FACTS.md), and
//     several times that when the disk is busy (see docs/flowshard.md),
//     plus AsyncInterval (5 ms): a batch of Async writes alone waits that
//     long for more before it commits, so that Async does not pay a commit
//     (and its fsync) per write. When the queue is full, Async writers wait
//     for the writer, so the bound holds under overload too.
//
//   - Sync: acknowledged only after the bbolt commit that contains the write
//     has returned, including its fsyncs. Concurrent Sync writes share a
//     commit (group commit), which is what lets Sync scale with concurrency
//     where one commit per write gives about 600 writes/s.
//
// A read (Get, Keys, a failed CAS) of a flow whose latest Sync write has not
// committed yet waits for that commit, so no reader ever sees a Sync value
// that a crash could take back. Async values are visible before they are
// durable, by definition.
//
// A Sync write that fails after it reached memory (ctx expired while
// waiting for the commit, or ErrWriteFailed when the commit itself failed)
// has an unknown outcome, like a timed-out RPC: the value is visible in
// memory and may or may not be on disk. After a failed commit (a full disk,
// Options.MaxFileBytes reached) memory stays authoritative and ahead of the
// disk until the keys are written again; failures are logged and counted in
// Stats.CommitErrors.
//
// A store opened with path "" is purely in memory: every durability behaves
// as Memory and nothing touches the disk.
//
// # The writer
//
// One goroutine owns every write transaction. It commits whatever is queued
// as one transaction and looks again. It never waits on a timer while the
// queue is empty, so a lone Sync write costs exactly one commit (bbolt's own
// DB.Batch waits 10 ms per batch and reached about 3k writes/s here). Its
// one wait is bounded: once something is queued, it gives the Sync writers
// that the previous commit just released up to a quarter of that commit's
// duration (2 ms at most) to queue their next write. Without that, N steady
// Sync writers split into two halves that take turns, and every commit
// carries N/2 writes instead of about N. Each commit costs bbolt's two
// fdatasyncs (pages, then meta) plus the pages it dirtied, so Sync
// throughput is about N divided by the commit latency.
//
// # TTL
//
// Each write gives its key a time to live, Policy.TTL or
// Options.DefaultTTL (5 minutes), counted from the write and refreshed by
// every later write of the key; reads do not refresh it. An expired entry is
// absent to every reader at once (lazy expiry on access) and is deleted from
// memory and disk either then or by the background sweeper, which visits at
// most Options.SweepBatch flows every Options.SweepInterval. A flow lives as
// long as the latest TTL of any of its writes (deletes included): when that
// has passed, all its entries have expired and the flow, counter included,
// is gone.
//
// # Bounded flows
//
// At most Options.MaxFlows flows (100k) are held. Creating one more sheds
// the least recently accessed flow (any operation on a flow counts as an
// access) as a whole, in memory and on disk: never single keys, because a
// half-evicted scenario would be torn state.
//
// # Restart
//
// Open loads the file into memory. Entries and flows whose TTL has passed
// (by the wall clock at open) are dropped, on disk too, and if more than
// MaxFlows flows remain the ones written longest ago are shed. Every write
// acknowledged under Sync before a crash is there afterwards. Access order is
// not stored: after a restart, the most recently written flow counts as the
// most recently accessed.
//
// # On-disk format
//
// One bucket holds a record per entry or tombstone (key: uvarint(len(flow
// id)) ‖ flow id ‖ key). Every value starts with a format version byte,
// currently 2; the meta bucket records the file format, and a file with an
// unknown format or an undecodable record is refused with ErrCorrupt rather
// than misread. Open migrates a format-1 file (no tombstones; a flow record
// kept the counter of deleted keys) in the transaction that loads it.
// codec.go documents the exact bytes and the migration path.
//
// # Lifecycle
//
// Close stops the sweeper, waits for operations in progress, commits
// everything queued (Async writes included) and closes the file; no
// goroutine of the store outlives it. Operations after Close fail with
// ErrClosed.
package flowshard
