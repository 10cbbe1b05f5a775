package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/raftnode"
)

// pathPing is the peer route the reachability probe calls.
const pathPing = "/app/ping"

// Probing: every member calls every other once per probeEvery; one that
// answered within reachableFor is reachable.
const (
	probeEvery   = time.Second
	reachableFor = 3 * time.Second
)

// reachability is what this node's probes found of the other members.
type reachability struct {
	mu   sync.Mutex
	seen map[uint64]time.Time
}

func (r *reachability) probe(ctx context.Context, n *Node) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		var wg sync.WaitGroup
		for _, mb := range n.Current().Members {
			if mb.ID == n.Self() {
				continue
			}
			wg.Go(func() {
				pctx, cancel := context.WithTimeout(ctx, probeEvery)
				defer cancel()
				if _, err := n.group.CallPeer(pctx, mb.ID, pathPing, nil, 0); err == nil {
					r.mu.Lock()
					if r.seen == nil {
						r.seen = map[uint64]time.Time{}
					}
					r.seen[mb.ID] = time.Now()
					r.mu.Unlock()
				}
			})
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *reachability) reachable(id uint64) bool { return time.Since(r.last(id)) < reachableFor }

// last is when id last answered the probe.
func (r *reachability) last(id uint64) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[id]
}

// Status is GET /cluster: this node's view of the group.
type Status struct {
	Self            string         `json:"self"`
	Leader          *string        `json:"leader"` // null while no leader is known
	Term            uint64         `json:"term"`
	MembershipIndex uint64         `json:"membershipIndex"`
	AppliedIndex    uint64         `json:"appliedIndex"`
	Isolated        bool           `json:"isolated"`
	Members         []MemberStatus `json:"members"`
}

// MemberStatus is one member in Status.
type MemberStatus struct {
	Name    string `json:"name"`
	ID      string `json:"id"`
	Role    string `json:"role"` // "voter" or "learner"
	PeerURL string `json:"peerURL"`
	// Reachable: this node exchanged with it within reachableFor (always
	// true of itself). With the flow runtime, its sessions say: a call
	// answered, heartbeats included; without, the Raft probe.
	Reachable bool `json:"reachable"`
	// LastExchangeMs is how long ago that exchange was (null: never, and
	// for itself); LastError why its last session or dial failed.
	LastExchangeMs *int64 `json:"lastExchangeMs"`
	LastError      string `json:"lastError,omitempty"`
}

// SessionHealth lends the node the flow runtime's view of each member
// (Flows.LastExchange), which Status reports.
func (n *Node) SessionHealth(last func(id uint64) (time.Time, string)) { n.exchange.Store(&last) }

// memberHealth is member id's reachability, its last exchange and error.
func (n *Node) memberHealth(id uint64, now time.Time) (bool, *int64, string) {
	if id == n.Self() {
		return true, nil, ""
	}
	var last time.Time
	var why string
	if ex := n.exchange.Load(); ex != nil {
		last, why = (*ex)(id)
	} else {
		last = n.reach.last(id)
	}
	if last.IsZero() {
		return false, nil, why
	}
	ms := now.Sub(last).Milliseconds()
	reachable := now.Sub(last) < reachableFor
	if reachable {
		why = ""
	}
	return reachable, &ms, why
}

// Status reports this node's view of the group.
func (n *Node) Status() Status {
	m := n.Current()
	lv := n.group.LeaderView()
	st := Status{Self: n.opts.Name, Term: lv.Term, MembershipIndex: m.Index, AppliedIndex: n.group.Applied(),
		Isolated: n.IsIsolated(), Members: []MemberStatus{}}
	if mb, ok := m.Member(lv.Leader); ok {
		st.Leader = &mb.Name
	}
	now := time.Now()
	for _, mb := range m.Members {
		ms := MemberStatus{Name: mb.Name, ID: raftnode.FormatNodeID(mb.ID), Role: mb.Role.String(),
			PeerURL: strings.TrimSuffix(mb.URL, "/raft")}
		ms.Reachable, ms.LastExchangeMs, ms.LastError = n.memberHealth(mb.ID, now)
		st.Members = append(st.Members, ms)
	}
	slices.SortFunc(st.Members, func(a, b MemberStatus) int { return strings.Compare(a.Name, b.Name) })
	return st
}

// removeTimeout bounds DELETE /cluster/members/:name.
const removeTimeout = 30 * time.Second

// Admin is gateway.Cluster.Admin, the routes under /cluster on the admin
// API:
//
//	GET    /cluster                the group as this node sees it (Status)
//	GET    /cluster/flows          the flows each member holds (Ownership)
//	DELETE /cluster/members/:name  remove a member for good
func (n *Node) Admin() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /cluster", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, n.Status())
	})
	mux.HandleFunc("GET /cluster/flows", n.serveOwnership)
	mux.HandleFunc("DELETE /cluster/members/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		id := raftnode.NodeIDFromName(name)
		if _, ok := n.Current().Member(id); !ok {
			writeErr(w, mberr.New(mberr.NoSuchResource, fmt.Sprintf("no member named %q", name)))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), removeTimeout)
		defer cancel()
		_, err := n.group.Remove(ctx, id)
		switch {
		case err == nil:
			n.log.Info("member removed", "member", name)
			writeJSON(w, http.StatusOK, n.Status())
		case errors.Is(err, raftnode.ErrMembershipChange):
			writeErr(w, mberr.New(mberr.ResourceConflict, err.Error()))
		default:
			writeErr(w, unavailable("the member was not removed", err))
		}
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // Status holds strings, numbers and booleans
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func writeErr(w http.ResponseWriter, e *mberr.Error) {
	var b bytes.Buffer
	_ = json.Indent(&b, mberr.Body(e), "", "  ")
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(e.Status)
	_, _ = w.Write(b.Bytes())
}

// metrics counts what this node's proposals met.
type metrics struct {
	forwarded atomic.Int64 // proposals sent to a leader elsewhere
	mu        sync.Mutex
	failures  map[string]int64 // by reason
}

func (m *metrics) failed(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failures == nil {
		m.failures = map[string]int64{}
	}
	m.failures[reason]++
}

// WriteMetrics writes the group's metrics in Prometheus's text format,
// each family after a blank line: gateway.Cluster.Metrics, appended to GET
// /metrics.
func (n *Node) WriteMetrics(w io.Writer) {
	metric := func(name, kind, help string) {
		fmt.Fprintf(w, "\n# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
	}
	b2i := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	st := n.Status()
	metric("riftgate_cluster_leader", "gauge", "1 while this node leads the configuration group")
	fmt.Fprintf(w, "riftgate_cluster_leader %d\n", b2i(n.group.IsLeader()))
	metric("riftgate_cluster_term", "gauge", "Raft term this node is in")
	fmt.Fprintf(w, "riftgate_cluster_term %d\n", st.Term)
	metric("riftgate_cluster_applied_index", "gauge", "Last Raft log index this node applied")
	fmt.Fprintf(w, "riftgate_cluster_applied_index %d\n", st.AppliedIndex)
	metric("riftgate_cluster_membership_index", "gauge", "Log index of the membership this node applied (m_idx)")
	fmt.Fprintf(w, "riftgate_cluster_membership_index %d\n", st.MembershipIndex)
	metric("riftgate_cluster_isolated", "gauge", "1 while this node sees no leader a quorum acknowledged (owner-side flow operations refuse)")
	fmt.Fprintf(w, "riftgate_cluster_isolated %d\n", b2i(st.Isolated))
	metric("riftgate_cluster_members", "gauge", "Members by role")
	roles := map[string]int{"voter": 0, "learner": 0}
	for _, mb := range st.Members {
		roles[mb.Role]++
	}
	for _, r := range slices.Sorted(maps.Keys(roles)) {
		fmt.Fprintf(w, "riftgate_cluster_members{role=%q} %d\n", r, roles[r])
	}
	metric("riftgate_cluster_member_reachable", "gauge", "1 when the member answered this node's probe lately")
	for _, mb := range st.Members {
		fmt.Fprintf(w, "riftgate_cluster_member_reachable{member=%q} %d\n", mb.Name, b2i(mb.Reachable))
	}
	metric("riftgate_cluster_proposals_forwarded_total", "counter", "Configuration proposals this node sent to the leader")
	fmt.Fprintf(w, "riftgate_cluster_proposals_forwarded_total %d\n", n.metrics.forwarded.Load())
	metric("riftgate_cluster_proposals_failed_total", "counter", "Configuration changes this node could not make, by reason")
	n.metrics.mu.Lock()
	fails := maps.Clone(n.metrics.failures)
	n.metrics.mu.Unlock()
	for _, r := range slices.Sorted(maps.Keys(fails)) {
		fmt.Fprintf(w, "riftgate_cluster_proposals_failed_total{reason=%q} %d\n", r, fails[r])
	}
}
