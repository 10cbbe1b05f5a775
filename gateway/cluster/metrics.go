package cluster

import (
	"fmt"
	"io"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// flowMetrics are the flow runtime's counters, exported by WriteMetrics.
type flowMetrics struct {
	rpcLatency latency
	serving    atomic.Int64 // requests being answered
	unsyncedN  atomic.Int64 // flows in unsynced
	unsynced   sync.Map     // flow id -> struct{}: a sync write no replica acknowledged

	sheds, fenced, notOwner, isolated, adopting atomic.Uint64
	adoptions, adoptNanos                       atomic.Uint64
	pushed, pushFailed, pushDropped, repaired   atomic.Uint64
	toldFailed                                  atomic.Uint64 // pushes told to this node that it could not merge
	dialFailures                                atomic.Uint64
	silentSessions                              atomic.Uint64 // calling sessions reset by the heartbeat
	expired                                     atomic.Uint64 // requests read after their deadline, refused
}

// latency is a histogram of durations in power-of-two microsecond buckets:
// bucket i counts observations under 2^i µs.
type latency struct {
	buckets [24]atomic.Uint64
	sum     atomic.Uint64 // ns
}

func (l *latency) observe(d time.Duration) {
	us := uint64(max(d.Microseconds(), 0))
	l.buckets[min(bits.Len64(us), len(l.buckets)-1)].Add(1)
	l.sum.Add(uint64(d.Nanoseconds()))
}

// Quantile is the upper bound of the bucket holding quantile q (0 < q < 1),
// and how many observations there were.
func (l *latency) Quantile(q float64) (time.Duration, uint64) {
	var counts [len(l.buckets)]uint64
	total := uint64(0)
	for i := range l.buckets {
		counts[i] = l.buckets[i].Load()
		total += counts[i]
	}
	if total == 0 {
		return 0, 0
	}
	rank := uint64(q * float64(total))
	seen := uint64(0)
	for i, c := range counts {
		if seen += c; seen > rank {
			return time.Duration(1<<i) * time.Microsecond, total
		}
	}
	return time.Duration(1<<(len(counts)-1)) * time.Microsecond, total
}

// RPCLatency reports the owner RPC latency quantile q as this node has
// seen it (a bucket's upper bound) and the number of RPCs: what the
// benchmarks print as p50 and p99.
func (f *Flows) RPCLatency(q float64) (time.Duration, uint64) { return f.rpcLatency.Quantile(q) }

// WriteMetrics writes the runtime's metrics in Prometheus's text format,
// each family after a blank line: the engine's GET /metrics appends them
// to its own (gateway.Cluster.Metrics).
func (f *Flows) WriteMetrics(w io.Writer) {
	metric := func(name, kind, help string) {
		fmt.Fprintf(w, "\n# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
	}
	metric("riftgate_cluster_owner_rpc_seconds", "histogram", "Latency of owner RPCs this node sent, from send to answer")
	cum := uint64(0)
	for i := range f.rpcLatency.buckets {
		cum += f.rpcLatency.buckets[i].Load()
		le := fmt.Sprintf("%g", float64(uint64(1)<<i)/1e6)
		if i == len(f.rpcLatency.buckets)-1 {
			le = "+Inf"
		}
		fmt.Fprintf(w, "riftgate_cluster_owner_rpc_seconds_bucket{le=%q} %d\n", le, cum)
	}
	fmt.Fprintf(w, "riftgate_cluster_owner_rpc_seconds_sum %g\n", float64(f.rpcLatency.sum.Load())/1e9)
	fmt.Fprintf(w, "riftgate_cluster_owner_rpc_seconds_count %d\n", cum)
	metric("riftgate_cluster_flow_refusals_total", "counter", "Flow operations refused with 503, by reason")
	for _, r := range []struct {
		reason string
		n      *atomic.Uint64
	}{{"shed", &f.sheds}, {"fenced", &f.fenced}, {"not_owner", &f.notOwner}, {"isolated", &f.isolated}, {"adopting", &f.adopting},
		{"expired", &f.expired}} {
		fmt.Fprintf(w, "riftgate_cluster_flow_refusals_total{reason=%q} %d\n", r.reason, r.n.Load())
	}
	metric("riftgate_cluster_flow_ops_in_flight", "gauge", "Flow operations holding a bridge permit")
	fmt.Fprintf(w, "riftgate_cluster_flow_ops_in_flight %d\n", f.permits.Load())
	metric("riftgate_cluster_adoptions_total", "counter", "Membership changes whose flows this node adopted")
	fmt.Fprintf(w, "riftgate_cluster_adoptions_total %d\n", f.adoptions.Load())
	metric("riftgate_cluster_adoption_seconds_total", "counter", "Time spent adopting flows")
	fmt.Fprintf(w, "riftgate_cluster_adoption_seconds_total %g\n", float64(f.adoptNanos.Load())/1e9)
	metric("riftgate_cluster_adopted_membership_index", "gauge", "The membership index this node's flows are adopted at")
	fmt.Fprintf(w, "riftgate_cluster_adopted_membership_index %d\n", f.adopted.Load())
	metric("riftgate_cluster_replica_pushes_total", "counter", "Flow changes pushed to successors, by outcome")
	fmt.Fprintf(w, "riftgate_cluster_replica_pushes_total{outcome=\"ok\"} %d\n", f.pushed.Load())
	fmt.Fprintf(w, "riftgate_cluster_replica_pushes_total{outcome=\"failed\"} %d\n", f.pushFailed.Load())
	fmt.Fprintf(w, "riftgate_cluster_replica_pushes_total{outcome=\"dropped\"} %d\n", f.pushDropped.Load())
	metric("riftgate_cluster_replica_merge_failures_total", "counter", "Pushes from owners this node could not merge (anti-entropy repairs them)")
	fmt.Fprintf(w, "riftgate_cluster_replica_merge_failures_total %d\n", f.toldFailed.Load())
	metric("riftgate_cluster_replica_repaired_total", "counter", "Records anti-entropy brought to this node's replicas")
	fmt.Fprintf(w, "riftgate_cluster_replica_repaired_total %d\n", f.repaired.Load())
	f.peerMu.RLock()
	ids := make([]uint64, 0, len(f.peers))
	for id := range f.peers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	type lag struct {
		age time.Duration
		n   int
	}
	lags := make([]lag, len(ids))
	for i, id := range ids {
		lags[i].age, lags[i].n = f.peers[id].push.lag()
	}
	f.peerMu.RUnlock()
	metric("riftgate_cluster_replica_lag_seconds", "gauge", "Age of the oldest change waiting to be pushed to a successor")
	for i, id := range ids {
		fmt.Fprintf(w, "riftgate_cluster_replica_lag_seconds{peer=%q} %g\n", formatID(id), lags[i].age.Seconds())
	}
	metric("riftgate_cluster_replica_queue", "gauge", "Changes waiting to be pushed to a successor")
	for i, id := range ids {
		fmt.Fprintf(w, "riftgate_cluster_replica_queue{peer=%q} %d\n", formatID(id), lags[i].n)
	}
	metric("riftgate_cluster_peer_dial_failures_total", "counter", "Sessions to peers that could not be opened")
	fmt.Fprintf(w, "riftgate_cluster_peer_dial_failures_total %d\n", f.dialFailures.Load())
	metric("riftgate_cluster_silent_sessions_total", "counter", "Sessions to peers reset after they answered nothing, not even a heartbeat")
	fmt.Fprintf(w, "riftgate_cluster_silent_sessions_total %d\n", f.silentSessions.Load())
}
