package flowshard

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The crash tests run this test binary again as a child (see TestMain) that
// writes under load and reports every acknowledged write on stdout, one line
// per write, written only after the write returned. The parent kill -9s it
// mid-load, reads what is left in the pipe, reopens the file and checks the
// acknowledged writes against it. A kill keeps the page cache, so this tests
// the process dying, not the machine losing power.
const (
	crashEnv      = "FLOWSHARD_CRASH_CHILD"
	crashPathEnv  = "FLOWSHARD_CRASH_PATH"
	crashWriters  = 32
	crashReaders  = 4
	crashPending  = 256 // the child's MaxPending: it bounds Async's loss
	crashMaxAlive = 30 * time.Second
)

var crashModes = map[string]Durability{"memory": Memory, "async": Async, "sync": Sync}

// crashChild is the child's main: writer g puts key k<n> = "g-n" into flow
// w<g> for n = 0, 1, ... and prints "A g n v" once each Put returned. Readers
// print "S g n" for keys they saw through Keys, which must be as durable as
// an acknowledgement.
func crashChild(mode string) int {
	d, ok := crashModes[mode]
	if !ok {
		fmt.Fprintln(os.Stderr, "unknown mode", mode)
		return 2
	}
	s, err := Open(os.Getenv(crashPathEnv), Options{MaxPending: crashPending})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), crashMaxAlive)
	defer cancel()
	var wg sync.WaitGroup
	for g := range crashWriters {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				v, err := s.Put(ctx, fmt.Sprint("w", g), fmt.Sprint("k", n), fmt.Appendf(nil, "%d-%d", g, n), Policy{Durability: d, Origin: 1})
				if err != nil {
					return
				}
				os.Stdout.Write(fmt.Appendf(nil, "A %d %d %d\n", g, n, v.V))
			}
		})
	}
	for r := range crashReaders {
		wg.Go(func() {
			for i := r; ctx.Err() == nil; i++ {
				g := i % crashWriters
				keys, err := s.Keys(ctx, fmt.Sprint("w", g))
				if err != nil {
					return
				}
				best := -1
				for _, k := range keys {
					n, _ := strconv.Atoi(strings.TrimPrefix(k, "k"))
					best = max(best, n)
				}
				if best >= 0 {
					os.Stdout.Write(fmt.Appendf(nil, "S %d %d\n", g, best))
				}
			}
		})
	}
	wg.Wait()
	s.Close(context.Background())
	return 0
}

type crashResult struct {
	acked    map[[2]int]uint64 // (g, n) -> V
	seen     map[[2]int]bool
	maxAcked [crashWriters]int
}

// runCrash runs the child in mode until it acknowledged target writes (or
// for 10 s on a slow disk), kills it with SIGKILL and returns what it
// acknowledged.
func runCrash(t *testing.T, mode, path string, target int) crashResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+mode, crashPathEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	res := crashResult{acked: map[[2]int]uint64{}, seen: map[[2]int]bool{}}
	for i := range res.maxAcked {
		res.maxAcked[i] = -1
	}
	killed := false
	deadline := time.Now().Add(10 * time.Second)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var kind string
		var g, n int
		var v uint64
		fmt.Sscan(sc.Text(), &kind, &g, &n, &v)
		switch kind {
		case "A":
			res.acked[[2]int{g, n}] = v
			res.maxAcked[g] = max(res.maxAcked[g], n)
		case "S":
			res.seen[[2]int{g, n}] = true
		default:
			t.Fatalf("child said %q", sc.Text())
		}
		if !killed && (len(res.acked) >= target || time.Now().After(deadline)) {
			// Kill mid-load; lines already in the pipe are still read below.
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child ended before it was killed: %v", err)
	}
	// However slow the disk, the kill must land mid-load.
	if len(res.acked) < crashWriters {
		t.Fatalf("only %d acknowledgements before the deadline", len(res.acked))
	}
	t.Logf("%s: child killed after %d acknowledged writes (%v)", mode, len(res.acked), err)
	return res
}

// durable reopens path and returns, per writer, the keys present and their
// versions, after checking each value.
func durable(t *testing.T, path string) map[[2]int]uint64 {
	t.Helper()
	s := open(t, path, Options{})
	got := map[[2]int]uint64{}
	ids, _, err := s.Flows(bg, "", "", crashWriters+1)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		g, _ := strconv.Atoi(strings.TrimPrefix(id, "w"))
		keys, err := s.Keys(bg, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			n, _ := strconv.Atoi(strings.TrimPrefix(k, "k"))
			e := mustGet(t, s, id, k)
			if string(e.Value) != fmt.Sprintf("%d-%d", g, n) {
				t.Fatalf("%s/%s = %q", id, k, e.Value)
			}
			got[[2]int{g, n}] = e.Version.V
		}
	}
	return got
}

func TestCrashSync(t *testing.T) {
	path := dbPath(t)
	res := runCrash(t, "sync", path, 3000)
	got := durable(t, path)
	for w, v := range res.acked {
		if gv, ok := got[w]; !ok || gv != v {
			t.Fatalf("acknowledged write %v (v%d) not durable: got v%d, %v", w, v, gv, ok)
		}
	}
	for w := range res.seen {
		if _, ok := got[w]; !ok {
			t.Fatalf("write %v was read before the crash but is not durable", w)
		}
	}
	t.Logf("sync: %d acknowledged, %d durable, %d reads checked", len(res.acked), len(got), len(res.seen))
}

func TestCrashAsync(t *testing.T) {
	path := dbPath(t)
	res := runCrash(t, "async", path, 20000)
	got := durable(t, path)
	lost := 0
	for g := range crashWriters {
		// Batches commit in order, so each writer's durable writes are a
		// prefix of its writes: no holes.
		n := 0
		for ; ; n++ {
			if _, ok := got[[2]int{g, n}]; !ok {
				break
			}
		}
		for m := n; m <= res.maxAcked[g]+crashPending+crashWriters; m++ {
			if _, ok := got[[2]int{g, m}]; ok {
				t.Fatalf("writer %d: write %d durable but %d lost", g, m, n)
			}
		}
		lost += max(0, res.maxAcked[g]+1-n)
	}
	// What was lost is at most the batch being committed plus the one
	// queued, each bounded by MaxPending (softly: plus one op per writer).
	bound := 2 * (crashPending + crashWriters)
	if lost > bound {
		t.Fatalf("lost %d acknowledged Async writes, bound %d", lost, bound)
	}
	t.Logf("async: %d acknowledged, %d durable, %d lost (bound %d)", len(res.acked), len(got), lost, bound)
}

func TestCrashMemory(t *testing.T) {
	path := dbPath(t)
	res := runCrash(t, "memory", path, 20000)
	if got := durable(t, path); len(got) != 0 {
		t.Fatalf("%d Memory writes on disk after the crash", len(got))
	}
	t.Logf("memory: %d acknowledged, none on disk", len(res.acked))
}
