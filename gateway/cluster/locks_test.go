package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestOpCtx holds the pooled operation context to the context contract
// though its timer runs only once Done is asked for.
func TestOpCtx(t *testing.T) {
	t.Run("ends at its deadline once waited on", func(t *testing.T) {
		now := time.Now()
		c := newOpCtx(now, now.Add(20*time.Millisecond))
		defer c.release()
		if err := c.Err(); err != nil {
			t.Fatalf("Err before the deadline: %v", err)
		}
		if at, ok := c.OpTime(); !ok || !at.Equal(now) {
			t.Fatalf("OpTime = %v, %v; want the operation's reading %v", at, ok, now)
		}
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done not closed 5 s after a 20 ms deadline")
		}
		if elapsed := time.Since(now); elapsed < 20*time.Millisecond {
			t.Fatalf("Done closed after %v, before the deadline", elapsed)
		}
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err after Done = %v, want DeadlineExceeded", err)
		}
	})
	t.Run("a past deadline is done at once", func(t *testing.T) {
		now := time.Now()
		c := newOpCtx(now, now.Add(-time.Millisecond))
		defer c.release()
		select {
		case <-c.Done():
		default:
			t.Fatal("Done open for a deadline already past")
		}
		if c.Err() == nil {
			t.Fatal("Err nil for a deadline already past")
		}
	})
	t.Run("reuse after firing starts afresh", func(t *testing.T) {
		// The pool hands the same context back; one that fired must come
		// back open, with no timer left from its last use.
		for range 50 {
			now := time.Now()
			c := newOpCtx(now, now.Add(-time.Millisecond))
			<-c.Done()
			c.release()
			c = newOpCtx(now, now.Add(time.Hour))
			if err := c.Err(); err != nil {
				t.Fatalf("a reused context: Err = %v", err)
			}
			select {
			case <-c.Done():
				t.Fatal("a reused context is done before its deadline")
			default:
			}
			c.release()
		}
	})
}
