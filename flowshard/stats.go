package flowshard

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Histogram bucket counts. Bucket i of a batch-size histogram counts
// batches of fewer than 2^i ops (the last bucket: everything larger); bucket
// i of a commit-latency histogram counts commits that took less than 2^i
// microseconds (the last bucket: everything slower, about 0.5 s and up).
const (
	batchBuckets   = 17
	latencyBuckets = 20
)

// Stats is a snapshot of a Store's counters for metrics. Gauges (Flows,
// Entries, Bytes) include entries that have expired but have not been swept
// yet; everything else counts since Open.
type Stats struct {
	Flows   int64 // flows held in memory
	Entries int64 // entries held in memory
	Bytes   int64 // sum of len(key)+len(value) over those entries
	// Tombstones are deleted keys kept, with the version of their delete,
	// until their TTL passes, so that replicas learn deletes.
	Tombstones int64

	// Puts counts writes (Put, successful CAS, Delete, records Merge stored) by their
	// Durability.
	Puts [3]uint64
	// Gets counts Get and Keys calls that found their flow, by the
	// Durability of the flow's latest write (Sync for a flow loaded from
	// disk and not written since).
	Gets [3]uint64
	// SyncReadWaits counts reads that waited for the commit of a Sync write
	// they would otherwise have seen before it was durable.
	SyncReadWaits uint64

	Batches    uint64 // bbolt transactions committed
	BatchedOps uint64 // disk ops in those transactions
	// Superseded counts the batched ops that a later op of their batch on
	// the same key replaced before the transaction wrote them.
	Superseded   uint64
	CommitErrors uint64 // failed commits (every Sync write in them got ErrWriteFailed)
	// BatchSizes[i]: batches of fewer than 2^i ops; the last bucket is open.
	BatchSizes [batchBuckets]uint64
	// CommitLatency[i]: commits (write plus fsync) under 2^i µs; the last
	// bucket is open.
	CommitLatency [latencyBuckets]uint64
	CommitNanos   uint64 // total time spent committing

	EvictedLRU     uint64 // whole flows shed because MaxFlows was reached
	ExpiredFlows   uint64 // whole flows dropped because their TTL passed
	ExpiredEntries uint64 // single entries dropped because their TTL passed
	Cleared        uint64 // flows removed by Clear or DeletePrefix
}

// counters is the live, atomically updated form of Stats.
type counters struct {
	entries, bytes, tombstones           atomic.Int64
	puts                                 [3]atomic.Uint64
	gets                                 [3]atomic.Uint64
	syncReadWaits                        atomic.Uint64
	batches, batchedOps, commitErrors    atomic.Uint64
	superseded                           atomic.Uint64
	batchSizes                           [batchBuckets]atomic.Uint64
	commitLatency                        [latencyBuckets]atomic.Uint64
	commitNanos                          atomic.Uint64
	evictedLRU, expiredFlows, expiredEnt atomic.Uint64
	cleared                              atomic.Uint64
}

func (c *counters) commit(ops, superseded int, d time.Duration, err error) {
	if err != nil {
		c.commitErrors.Add(1)
		return
	}
	c.batches.Add(1)
	c.batchedOps.Add(uint64(ops))
	c.superseded.Add(uint64(superseded))
	c.batchSizes[bucket(uint64(ops), batchBuckets)].Add(1)
	c.commitLatency[bucket(uint64(d.Microseconds()), latencyBuckets)].Add(1)
	c.commitNanos.Add(uint64(d.Nanoseconds()))
}

// bucket is the index of the first power of two greater than n, capped.
func bucket(n uint64, buckets int) int {
	return min(bits.Len64(n), buckets-1)
}

func (c *counters) snapshot() Stats {
	s := Stats{
		Entries:        c.entries.Load(),
		Bytes:          c.bytes.Load(),
		Tombstones:     c.tombstones.Load(),
		SyncReadWaits:  c.syncReadWaits.Load(),
		Batches:        c.batches.Load(),
		BatchedOps:     c.batchedOps.Load(),
		Superseded:     c.superseded.Load(),
		CommitErrors:   c.commitErrors.Load(),
		CommitNanos:    c.commitNanos.Load(),
		EvictedLRU:     c.evictedLRU.Load(),
		ExpiredFlows:   c.expiredFlows.Load(),
		ExpiredEntries: c.expiredEnt.Load(),
		Cleared:        c.cleared.Load(),
	}
	for i := range s.Puts {
		s.Puts[i] = c.puts[i].Load()
		s.Gets[i] = c.gets[i].Load()
	}
	for i := range s.BatchSizes {
		s.BatchSizes[i] = c.batchSizes[i].Load()
	}
	for i := range s.CommitLatency {
		s.CommitLatency[i] = c.commitLatency[i].Load()
	}
	return s
}
