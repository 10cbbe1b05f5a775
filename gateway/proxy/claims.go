package proxy

import (
	"context"
	"strconv"
	"strings"
	"sync"
)

// Claims arbitrates proxyOnce: of all the requests that share one signature
// (the predicates they would record), exactly one calls the upstream. It is
// the state machine of seed 000 §11, per key:
//
//	Unclaimed → Pending(token) → Recorded
//	Pending(token) → Unclaimed   (the upstream call failed: nothing recorded)
//
// The local implementation keeps Pending in memory only; a cluster
// implementation routes the same calls to the key's owner.
type Claims interface {
	// Acquire returns won=true and a token when the caller must call the
	// upstream. Otherwise the signature was recorded meanwhile (the caller
	// waited while another request held it) and the caller replays.
	Acquire(ctx context.Context, key string) (token uint64, won bool, err error)
	// Recorded marks the claim done: call it only after the recorded stub
	// is stored (and persisted). Waiters replay.
	Recorded(ctx context.Context, key string, token uint64) error
	// Release returns the claim to Unclaimed after a failed upstream call;
	// one waiter wins the next attempt.
	Release(ctx context.Context, key string, token uint64) error
	// Forget drops a recorded claim, so that the next request proxies again
	// (the recorded stub is gone).
	Forget(ctx context.Context, key string) error
}

var _ Claims = (*LocalClaims)(nil)

// LocalClaims is the single-node Claims.
type LocalClaims struct {
	mu     sync.Mutex
	next   uint64
	claims map[string]*claim
}

type claim struct {
	token    uint64
	recorded bool
	done     chan struct{} // closed when a Pending claim ends
}

// NewLocalClaims returns an empty claim table.
func NewLocalClaims() *LocalClaims { return &LocalClaims{claims: map[string]*claim{}} }

// Acquire implements Claims.
func (l *LocalClaims) Acquire(ctx context.Context, key string) (uint64, bool, error) {
	for {
		l.mu.Lock()
		c := l.claims[key]
		switch {
		case c == nil:
			l.next++
			c = &claim{token: l.next, done: make(chan struct{})}
			l.claims[key] = c
			l.mu.Unlock()
			return c.token, true, nil
		case c.recorded:
			l.mu.Unlock()
			return 0, false, nil
		}
		done := c.done
		l.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return 0, false, ctx.Err()
		}
	}
}

// Recorded implements Claims.
func (l *LocalClaims) Recorded(_ context.Context, key string, token uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.claims[key]; c != nil && c.token == token && !c.recorded {
		close(c.done)
		// A recorded claim is never waited on nor matched by token again:
		// one shared entry spares the table a claim and a channel per
		// signature it ever recorded.
		l.claims[key] = recordedClaim
	}
	return nil
}

// recordedClaim is every recorded claim's entry in a LocalClaims table.
var recordedClaim = &claim{recorded: true}

// Release implements Claims.
func (l *LocalClaims) Release(_ context.Context, key string, token uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.claims[key]; c != nil && c.token == token && !c.recorded {
		delete(l.claims, key)
		close(c.done)
	}
	return nil
}

// ForgetPort drops the recorded claims of the imposter on port, which is
// gone (deleted or replaced): their keys would otherwise stay for the
// life of the process, one per signature it ever recorded. Pending ones
// end with their calls.
func (l *LocalClaims) ForgetPort(port int) {
	prefix := strconv.Itoa(port) + "|"
	l.mu.Lock()
	defer l.mu.Unlock()
	for key, c := range l.claims {
		if c.recorded && strings.HasPrefix(key, prefix) {
			delete(l.claims, key)
		}
	}
}

// Len returns how many claims the table holds.
func (l *LocalClaims) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.claims)
}

// Forget implements Claims.
func (l *LocalClaims) Forget(_ context.Context, key string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.claims[key]; c != nil && c.recorded {
		delete(l.claims, key)
	}
	return nil
}
