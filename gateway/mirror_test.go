package gateway

import (
	"context"
	"sync"
	"testing"

	"github.com/riftgate/riftgate/gateway/flow"
)

// Each position is handed out once, the cycles that moved are reported
// once each, and one that moves again after being taken is reported again.
func TestLocalCycles(t *testing.T) {
	c := &localCycles{}
	var wg sync.WaitGroup
	seen := make([]map[uint64]bool, 8)
	for w := range seen {
		seen[w] = map[uint64]bool{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				pos, _ := c.Next(context.Background(), "c1:1", flow.Policy{})
				seen[w][pos] = true
			}
		}()
	}
	wg.Wait()
	all := map[uint64]bool{}
	for _, s := range seen {
		for p := range s {
			if all[p] {
				t.Fatalf("position %d handed out twice", p)
			}
			all[p] = true
		}
	}
	if len(all) != 8000 || c.get("c1:1") != 8000 {
		t.Fatalf("%d positions, counter %d", len(all), c.get("c1:1"))
	}
	if got := c.takeDirty(); len(got) != 1 || got[0] != "c1:1" {
		t.Fatalf("dirty %v", got)
	}
	if got := c.takeDirty(); len(got) != 0 {
		t.Fatalf("dirty again %v", got)
	}
	_, _ = c.Next(context.Background(), "c1:1", flow.Policy{})
	c.set("c2:7", 5)
	if got := c.takeDirty(); len(got) != 1 || c.get("c2:7") != 5 {
		t.Fatalf("dirty %v, c2:7 at %d", got, c.get("c2:7"))
	}
	if p, ok1, ok2 := func() (int, bool, bool) {
		port, id, ok := parseCycleName(cycleName(4545, 12))
		return port, ok && id == 12, ok
	}(); p != 4545 || !ok1 || !ok2 {
		t.Fatal("cycle names do not round-trip")
	}
}

// What --datadir adds to a cycled stub's request: the side table's
// lookup and the dirty mark (the stub's own counter costs one atomic add).
func BenchmarkLocalCycles(b *testing.B) {
	c := &localCycles{}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = c.Next(ctx, "c4545:12", flow.Policy{})
		}
	})
}
