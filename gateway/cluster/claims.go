package cluster

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/proxy"
	"github.com/riftgate/riftgate/ring"
)

// proxyOnce across the cluster (seed 000 §11): the claim for (port,
// signature) is owned like a flow, under ring.ClassClaim, and its owner
// runs the state machine of proxy.Claims in memory:
//
//	Unclaimed → Pending(token) → Recorded(index)
//
// The winner's node calls Recorded once the record-stub command has
// committed and applied there, with that node's applied configuration
// index; a waiter on another node replays only once its node has applied
// that index too, so it finds the recording instead of proxying again.
// Pending is leased (claimLease): a winner whose node died frees the claim
// when the lease ends, and an owner that restarts forgets every claim. With
// no owner the answer is unavailable, and the upstream is never called.

// claimLease bounds a Pending claim: longer than an upstream call and its
// recording take (the proxy's own timeout is 30 s), short enough that the
// waiters of a winner whose node died are not held for long.
const claimLease = 40 * time.Second

// claimPoll is how long an owner holds a waiter's Acquire before telling it
// to ask again, well inside the caller's deadline.
const claimPoll = time.Second

type claimTable struct {
	mu sync.Mutex
	m  map[string]*claimState
}

type claimState struct {
	token    uint64
	recorded bool
	index    uint64
	expires  time.Time
	done     chan struct{} // closed when Pending ends
}

func (t *claimTable) init() { t.m = map[string]*claimState{} }

// Claims is the cluster's proxy.Claims.
func (f *Flows) Claims() proxy.Claims { return clusterClaims{f} }

type clusterClaims struct{ f *Flows }

var _ proxy.Claims = clusterClaims{}

// claimID names a claim on the ring and on the wire: the port, and a hash
// of the signature, which may be kilobytes of predicates.
func claimID(key string) string {
	port, sig, _ := strings.Cut(key, "|")
	h := sha256.Sum256([]byte(sig))
	return port + "|" + hex.EncodeToString(h[:16])
}

// Acquire implements proxy.Claims.
func (c clusterClaims) Acquire(ctx context.Context, key string) (uint64, bool, error) {
	id := claimID(key)
	for {
		r := request{op: opClaimAcquire, flow: id}
		var a answer
		if err := c.f.do(ctx, ring.ClassClaim, &r, &a); err != nil {
			return 0, false, err
		}
		switch a.state {
		case claimWon:
			return a.n, true, nil
		case claimRecorded:
			if ci := c.f.cfg.Config; ci != nil && a.index > ci.Applied() {
				wctx, cancel := context.WithTimeout(ctx, c.f.deadline)
				err := ci.WaitApplied(wctx, a.index)
				cancel()
				if err != nil {
					return 0, false, fmt.Errorf("cluster: the recording is at configuration index %d and this node still runs %d: %w", a.index, ci.Applied(), err)
				}
			}
			return 0, false, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, false, err
		}
		if d, ok := flow.Budget(ctx); ok && !time.Now().Before(d) {
			return 0, false, flow.ErrBudget
		}
	}
}

// Recorded implements proxy.Claims.
func (c clusterClaims) Recorded(ctx context.Context, key string, token uint64) error {
	r := request{op: opClaimRecorded, flow: claimID(key), token: token}
	if ci := c.f.cfg.Config; ci != nil {
		r.index = ci.Applied()
	}
	var a answer
	return c.f.do(ctx, ring.ClassClaim, &r, &a)
}

// Release implements proxy.Claims.
func (c clusterClaims) Release(ctx context.Context, key string, token uint64) error {
	r := request{op: opClaimRelease, flow: claimID(key), token: token}
	var a answer
	return c.f.do(ctx, ring.ClassClaim, &r, &a)
}

// Forget implements proxy.Claims.
func (c clusterClaims) Forget(ctx context.Context, key string) error {
	r := request{op: opClaimForget, flow: claimID(key)}
	var a answer
	return c.f.do(ctx, ring.ClassClaim, &r, &a)
}

func newToken() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) | 1 // never 0
}

// serveClaim runs a claim operation on its owner, past the owner checks.
func (f *Flows) serveClaim(ctx *opCtx, _ *view, r *request, a *answer) {
	t := &f.claims
	a.status = statusOK
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.m[r.flow]
	switch r.op {
	case opClaimRecorded:
		if c != nil && c.token == r.token && !c.recorded {
			c.recorded, c.index = true, r.index
			close(c.done)
		}
	case opClaimRelease:
		if c != nil && c.token == r.token && !c.recorded {
			delete(t.m, r.flow)
			close(c.done)
		}
	case opClaimForget:
		if c != nil && c.recorded {
			delete(t.m, r.flow)
		}
	case opClaimAcquire:
		for waited := false; ; waited = true {
			now := time.Now()
			switch {
			case c == nil || !c.recorded && now.After(c.expires):
				if c != nil {
					close(c.done) // the lease of a winner that never came back
				}
				c = &claimState{token: newToken(), expires: now.Add(claimLease), done: make(chan struct{})}
				t.m[r.flow] = c
				a.state, a.n = claimWon, c.token
				return
			case c.recorded:
				a.state, a.index = claimRecorded, c.index
				return
			case waited:
				a.state = claimPending
				return
			}
			done := c.done
			t.mu.Unlock()
			wait := min(claimPoll, time.Until(ctx.deadline)-50*time.Millisecond, time.Until(c.expires))
			timer := time.NewTimer(max(wait, 0))
			select {
			case <-done:
			case <-timer.C:
			case <-ctx.Done():
			}
			timer.Stop()
			t.mu.Lock()
			c = t.m[r.flow]
		}
	}
}
