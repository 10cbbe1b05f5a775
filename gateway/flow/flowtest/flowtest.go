// Package flowtest holds the contract every flow.Store owes the engine, as
// a test any implementation runs against itself: the local store over
// flowshard, and the cluster's owner RPC.
package flowtest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/flow"
)

func keys(s flow.Snapshot) string {
	var ks []string
	for _, e := range s {
		ks = append(ks, e.Key+"="+string(e.Value))
	}
	return strings.Join(ks, ",")
}

// Run checks s against the seam's contract. s must be empty of flows under
// the prefix "i1:" and "i2:", and every write must be allowed.
func Run(t *testing.T, s flow.Store) {
	ctx := context.Background()
	p := flow.Policy{}

	t.Run("get-put-cas-delete", func(t *testing.T) {
		if _, err := s.Get(ctx, "i1:a", "k", nil); !errors.Is(err, flow.ErrNotFound) {
			t.Fatalf("Get absent = %v, want ErrNotFound", err)
		}
		v, err := s.Put(ctx, "i1:a", "k", []byte("1"), p)
		if err != nil || v.V == 0 {
			t.Fatalf("Put = %+v %v", v, err)
		}
		cur, err := s.CAS(ctx, "i1:a", "k", v.V+7, []byte("2"), p)
		if !errors.Is(err, flow.ErrVersionMismatch) || string(cur.Value) != "1" {
			t.Fatalf("CAS mismatch = %q %v; want the current value back", cur.Value, err)
		}
		if _, err := s.CAS(ctx, "i1:a", "k", v.V, []byte("2"), p); err != nil {
			t.Fatalf("CAS = %v", err)
		}
		if _, err := s.CAS(ctx, "i1:a", "new", 0, []byte("x"), p); err != nil {
			t.Fatalf("CAS absent with 0 = %v", err)
		}
		snap, err := s.Load(ctx, "i1:a")
		if err != nil || keys(snap) != "k=2,new=x" {
			t.Fatalf("Load = %v %v", keys(snap), err)
		}
		if _, err := s.Put(ctx, "i1:a", strings.Repeat("k", flow.MaxKeyBytes+1), nil, p); !errors.Is(err, flow.ErrTooLarge) {
			t.Fatalf("huge key = %v, want ErrTooLarge", err)
		}
		if _, err := s.Put(ctx, "i1:a", "big", make([]byte, flow.MaxValueBytes+1), p); !errors.Is(err, flow.ErrTooLarge) {
			t.Fatalf("huge value = %v, want ErrTooLarge", err)
		}
		if _, err := s.Put(ctx, "i1:a", "", nil, p); !errors.Is(err, flow.ErrBadKey) {
			t.Fatalf("empty key = %v, want ErrBadKey", err)
		}
		if err := s.Delete(ctx, "i1:a", "k", p); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, "i1:a", "k", p); !errors.Is(err, flow.ErrNotFound) {
			t.Fatalf("Delete absent = %v, want ErrNotFound", err)
		}
		if err := s.Clear(ctx, "i1:a"); err != nil {
			t.Fatal(err)
		}
		if snap, _ := s.Load(ctx, "i1:a"); len(snap) != 0 {
			t.Fatalf("Load after Clear: %v", keys(snap))
		}
	})

	t.Run("commit", func(t *testing.T) {
		commit := func(base []flow.KeyVersion, ws ...flow.Write) flow.Snapshot {
			t.Helper()
			if got, err := s.Commit(ctx, "i1:c", base, ws, p); err != nil || got != nil {
				t.Fatalf("Commit = %v, %v; want nothing, nil", keys(got), err)
			}
			snap, err := s.Load(ctx, "i1:c")
			if err != nil {
				t.Fatal(err)
			}
			return snap
		}
		snap := commit(nil, flow.Write{Key: "a", Value: []byte("1")}, flow.Write{Key: "b", Value: []byte("2")})
		if keys(snap) != "a=1,b=2" {
			t.Fatalf("after a Commit on an absent flow: %v", keys(snap))
		}
		base := snap.Versions()
		if _, err := s.Put(ctx, "i1:c", "c", []byte("3"), p); err != nil {
			t.Fatal(err)
		}
		cur, err := s.Commit(ctx, "i1:c", base, []flow.Write{{Key: "a", Value: []byte("lost")}}, p)
		if !errors.Is(err, flow.ErrVersionMismatch) || keys(cur) != "a=1,b=2,c=3" {
			t.Fatalf("stale Commit = %v, %v; want the current flow back", keys(cur), err)
		}
		snap = commit(cur.Versions(), flow.Write{Key: "a", Delete: true}, flow.Write{Key: "c", Value: []byte("33")})
		if keys(snap) != "b=2,c=33" {
			t.Fatalf("after a Commit: %v", keys(snap))
		}
		if _, err := s.Commit(ctx, "i1:c", snap.Versions(), []flow.Write{{Key: "ok", Value: nil}, {Key: strings.Repeat("k", flow.MaxKeyBytes+1)}}, p); !errors.Is(err, flow.ErrTooLarge) {
			t.Fatalf("a Commit with a huge key = %v, want ErrTooLarge", err)
		}
		if _, err := s.Get(ctx, "i1:c", "ok", nil); !errors.Is(err, flow.ErrNotFound) {
			t.Fatalf("a refused Commit wrote: %v", err)
		}
	})

	t.Run("list-delete-prefix-stats", func(t *testing.T) {
		for _, id := range []string{"i2:a", "i2:b", "i2:c", "i20:x"} {
			if _, err := s.Put(ctx, id, "k", []byte("v"), p); err != nil {
				t.Fatal(err)
			}
		}
		ids, more, err := s.List(ctx, "i2:", "", 2)
		if err != nil || !slices.Equal(ids, []string{"i2:a", "i2:b"}) || !more {
			t.Fatalf("List page 1 = %v %v %v", ids, more, err)
		}
		ids, more, err = s.List(ctx, "i2:", ids[1], 2)
		if err != nil || !slices.Equal(ids, []string{"i2:c"}) || more {
			t.Fatalf("List page 2 = %v %v %v", ids, more, err)
		}
		st, err := s.Stats(ctx)
		if err != nil || st.Flows < 4 || st.Entries < 4 {
			t.Fatalf("Stats = %+v %v", st, err)
		}
		n, err := s.DeletePrefix(ctx, "i2:")
		if err != nil || n != 3 {
			t.Fatalf("DeletePrefix = %d %v", n, err)
		}
		if ids, _, _ := s.List(ctx, "i2", "", 10); !slices.Equal(ids, []string{"i20:x"}) {
			t.Fatalf("after DeletePrefix: %v", ids)
		}
	})
}
