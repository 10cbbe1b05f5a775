// Package kv is the replicated key/value fragment of the Raft substrate
// (seed 002, "The kv fragment"): pure state plus a pure reduction that an
// application embeds in its own state machine, so that a lease and the work
// it fences are ordered by the same log.
//
// A Fragment has no clock, no randomness and no IO. Apply reduces one
// Command at one Raft log index; every replica reducing the same log reaches
// byte-identical snapshots. The version of an entry is the log index of the
// write that created it, which makes it a fencing token: globally monotonic
// and comparable across keys.
//
// Expiry is decided at max(now_ms, floor), where the floor is the latest
// instant at which the fragment reclaimed anything, so time within a
// fragment never runs backwards. Reclamation is bounded (Evict) and driven by
// Sweep from a leader-only task.
//
// The package imports nothing of riftgate's; tenancy is the embedding
// application's business (see the kvapp subpackage for the pattern).
package kv
