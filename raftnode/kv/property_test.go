package kv

import (
	"bytes"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

var keyGen = rapid.SampledFrom([]string{"a", "b", "c", "lease/1", "lease/2"})

func expectGen(maxVersion uint64) *rapid.Generator[Expect] {
	return rapid.Custom(func(t *rapid.T) Expect {
		switch rapid.IntRange(0, 2).Draw(t, "expect") {
		case 0:
			return Absent()
		case 1:
			return Version(rapid.Uint64Range(0, maxVersion+1).Draw(t, "v"))
		}
		return Any()
	})
}

// commandGen draws commands at clock readings that may run backwards, so
// the floor matters.
func commandGen(maxVersion uint64) *rapid.Generator[Command] {
	return rapid.Custom(func(t *rapid.T) Command {
		now := rapid.Uint64Range(0, 60).Draw(t, "now")
		key := keyGen.Draw(t, "key")
		e := expectGen(maxVersion).Draw(t, "e")
		switch rapid.IntRange(0, 5).Draw(t, "op") {
		case 0, 1:
			return Put{Key: key, Value: []byte(rapid.StringN(0, 4, 4).Draw(t, "val")), Expect: e,
				TTLMs: rapid.Uint64Range(0, 30).Draw(t, "ttl"), NowMs: now}
		case 2:
			return Delete{Key: key, Expect: e, NowMs: now}
		case 3:
			return TakeOnce{Key: key, Expect: e, NowMs: now}
		}
		return Evict{CutoffMs: now, Limit: rapid.Uint32Range(0, 3).Draw(t, "limit")}
	})
}

// TestSameLogReducesToSameBytesOnEveryReplica reduces one log on three
// replicas: one applying Go values, one applying decoded wire bytes, and one
// that installs a snapshot taken partway and reduces the rest.
func TestSameLogReducesToSameBytesOnEveryReplica(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 60).Draw(t, "n")
		cmds := make([]Command, n)
		for i := range cmds {
			cmds[i] = commandGen(uint64(n)).Draw(t, fmt.Sprintf("cmd%d", i))
		}
		cut := rapid.IntRange(0, n).Draw(t, "snapshot at")
		p := DefaultPolicy()
		a, b, c := mustFragment(t, p), mustFragment(t, p), mustFragment(t, p)
		for i, cmd := range cmds {
			idx := uint64(i + 1)
			if i == cut {
				snap, err := c.EncodeSnapshot()
				if err != nil {
					t.Fatal(err)
				}
				if c, err = DecodeSnapshot(snap, p); err != nil {
					t.Fatal(err)
				}
			}
			wire, err := EncodeCommand(cmd)
			if err != nil {
				t.Fatal(err)
			}
			decoded, err := DecodeCommand(wire)
			if err != nil {
				t.Fatal(err)
			}
			ra, rb, rc := a.Apply(cmd, idx), b.Apply(decoded, idx), c.Apply(cmd, idx)
			if !respEqual(ra, rb) || !respEqual(ra, rc) {
				t.Fatalf("index %d %#v: responses %#v / %#v / %#v", idx, cmd, ra, rb, rc)
			}
		}
		sa, _ := a.EncodeSnapshot()
		sb, _ := b.EncodeSnapshot()
		sc, _ := c.EncodeSnapshot()
		if !bytes.Equal(sa, sb) || !bytes.Equal(sa, sc) {
			t.Fatalf("snapshots differ:\n%x\n%x\n%x", sa, sb, sc)
		}
	})
}

// TestEvictionIsSemanticallyInvisible runs one workload against two
// fragments, only one of which is swept. With a clock that does not run
// backwards (the sweep's cutoff is a time already reached), every command
// and every read must answer identically. Quotas are left at their
// defaults, far above what the workload stores.
func TestEvictionIsSemanticallyInvisible(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := DefaultPolicy()
		swept, plain := mustFragment(t, p), mustFragment(t, p)
		var now uint64
		n := rapid.IntRange(1, 80).Draw(t, "n")
		for i := range n {
			idx := uint64(i + 1)
			now += rapid.Uint64Range(0, 4).Draw(t, "tick")
			cmd := commandGen(idx).Draw(t, "cmd")
			switch c := cmd.(type) {
			case Evict:
				c.CutoffMs = now - rapid.Uint64Range(0, min(now, 2)).Draw(t, "lag")
				if c.Limit == 0 {
					c.Limit = 1
				}
				swept.Apply(c, idx)
				cmd = nil
			case Put:
				c.NowMs = now
				cmd = c
			case Delete:
				c.NowMs = now
				cmd = c
			case TakeOnce:
				c.NowMs = now
				cmd = c
			}
			if cmd == nil {
				// evicted on one side only; fall through to the reads
			} else if rs, rp := swept.Apply(cmd, idx), plain.Apply(cmd, idx); !respEqual(rs, rp) {
				t.Fatalf("index %d %#v: swept %#v, unswept %#v", idx, cmd, rs, rp)
			}
			for _, k := range []string{"a", "b", "c", "lease/1", "lease/2"} {
				r1, ok1 := swept.Get(k, now)
				r2, ok2 := plain.Get(k, now)
				if ok1 != ok2 || (ok1 && !r1.Equal(&r2)) {
					t.Fatalf("read %q at %d: swept %+v %v, unswept %+v %v", k, now, r1, ok1, r2, ok2)
				}
			}
		}
	})
}
