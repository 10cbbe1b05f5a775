package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/mbdatadir"
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

// A stop that comes while the folder of a large imposter is being written
// gives up the write rather than wait for it (here at once), notes the
// folder as lagging, and the next start serves the imposter and writes the
// folder in the background; the imposter is never taken for deleted.
func TestStopCutsALargeWriteAndTheNextStartFinishesIt(t *testing.T) {
	defer func(d time.Duration) { closeWrites = d }(closeWrites)
	closeWrites = 0
	dir := t.TempDir()
	start := func() *gateway {
		g, err := newGateway(context.Background(), Options{Logger: slog.New(slog.DiscardHandler), DataDir: dir}, newLogRing(10))
		if err != nil {
			t.Fatal(err)
		}
		if err := g.loadInitial(context.Background()); err != nil {
			t.Fatal(err)
		}
		return g
	}
	g := start()
	const n = 3 * largeImposter
	var stubs []string
	for i := range n {
		stubs = append(stubs, fmt.Sprintf(`{"predicates":[{"equals":{"path":"/%d"}}],"responses":[{"is":{"body":"%d"}}]}`, i, i))
	}
	m := g.maker()
	doc, err := m.imposter([]byte(`{"protocol":"http","host":"127.0.0.1","stubs":[` + strings.Join(stubs, ",") + `]}`))
	if err == nil {
		_, err = g.submit(context.Background(), m.command(&config.Command{Op: config.OpCreateImposter, Imposters: []config.ImposterDoc{doc}}))
	}
	m.done()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	g.close()
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the stop took %v", took)
	}
	if f, err := mbdatadir.Read(dir, doc.Port); err == nil && len(f.Stubs) == n {
		t.Log("the flusher wrote the folder before the stop came: the cut is not exercised")
	}
	man, err := readManifest(dir)
	if err != nil || !man.Clean {
		t.Fatalf("manifest %+v, %v", man, err)
	}
	g = start()
	defer g.close()
	if imp := g.config.State().Imposter(doc.Port); imp == nil || imp.Len() != n {
		t.Fatalf("after a restart the log has %v", imp)
	}
	// The start serves at once; the flusher writes the folder.
	want := digestOf(g.config.State().Imposter(doc.Port))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		f, err := mbdatadir.Read(dir, doc.Port)
		if err == nil && len(f.Stubs) == n && f.Digest() == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after a restart the folder lags the log: %v", err)
		}
	}
}
