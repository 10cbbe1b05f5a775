package proxy

import (
	"context"
	"fmt"
	"runtime"
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

// A recorded claim stays for as long as its recording, one per signature
// ever recorded: it holds no more than its key (the table's own slots
// aside), not a claim and a channel each.
func TestRecordedClaimsHoldOnlyTheirKeys(t *testing.T) {
	ctx := context.Background()
	const n = 20000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("8080|[{\"deepEquals\":{\"path\":\"/r/%d\"}}]", i)
	}
	l := NewLocalClaims()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, k := range keys {
		token, ok, err := l.Acquire(ctx, k)
		if err != nil || !ok {
			t.Fatalf("Acquire %s: %v %v", k, ok, err)
		}
		if err := l.Recorded(ctx, k, token); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapObjects-before.HeapObjects) / n
	t.Logf("%.2f objects held per recorded claim", per)
	if per > 0.5 {
		t.Errorf("a recorded claim holds %.2f objects, want only its map slot", per)
	}
	if _, ok, _ := l.Acquire(ctx, keys[7]); ok {
		t.Fatal("a recorded claim was acquired again")
	}
	runtime.KeepAlive(keys)
	runtime.KeepAlive(l)
}
