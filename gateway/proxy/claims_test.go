package proxy

import (
	"context"
	"testing"
)

// An imposter that goes takes its recorded claims with it; another port's
// stay, and so do claims still pending.
func TestForgetPort(t *testing.T) {
	ctx := context.Background()
	l := NewLocalClaims()
	claim := func(port int, sig string, record bool) {
		t.Helper()
		token, won, err := l.Acquire(ctx, ClaimKey(port, sig))
		if err != nil || !won {
			t.Fatalf("%d %s: won %v, %v", port, sig, won, err)
		}
		if record {
			if err := l.Recorded(ctx, ClaimKey(port, sig), token); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, sig := range []string{"a", "b", "c"} {
		claim(4545, sig, true)
		claim(45450, sig, true)
	}
	claim(4545, "pending", false)
	l.ForgetPort(4545)
	if n := l.Len(); n != 4 {
		t.Fatalf("%d claims left, want 4545's pending one and 45450's three", n)
	}
	// Forgotten: the next request for a signature proxies (wins) again.
	if _, won, _ := l.Acquire(ctx, ClaimKey(4545, "a")); !won {
		t.Fatal("a forgotten recording still replays")
	}
	if _, won, _ := l.Acquire(ctx, ClaimKey(45450, "a")); won {
		t.Fatal("another port's recording was forgotten")
	}
}
