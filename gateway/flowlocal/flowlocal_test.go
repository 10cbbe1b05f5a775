package flowlocal

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/flowshard"
	"github.com/riftgate/riftgate/gateway/flow"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSeamSemanticsOverFlowshard(t *testing.T) {
	ctx := context.Background()
	shard, err := flowshard.Open("", flowshard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer shard.Close(ctx)
	s := Store{Shard: shard}
	p := flow.Policy{}

	if _, err := s.Get(ctx, "i1:a", "k"); !errors.Is(err, flow.ErrNotFound) {
		t.Fatalf("Get absent = %v, want ErrNotFound", err)
	}
	v, err := s.Put(ctx, "i1:a", "k", []byte("1"), p)
	if err != nil || v.V == 0 || v.Origin != Origin {
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
	keys, err := s.Keys(ctx, "i1:a")
	if err != nil || strings.Join(keys, ",") != "k,new" {
		t.Fatalf("Keys = %v %v", keys, err)
	}
	if _, err := s.Put(ctx, "i1:a", strings.Repeat("k", 2000), nil, p); !errors.Is(err, flow.ErrTooLarge) {
		t.Fatalf("huge key = %v, want ErrTooLarge", err)
	}
	if err := s.Delete(ctx, "i1:a", "k", p); err != nil {
		t.Fatal(err)
	}
	if err := s.Clear(ctx, "i1:a"); err != nil {
		t.Fatal(err)
	}
	if keys, _ := s.Keys(ctx, "i1:a"); len(keys) != 0 {
		t.Fatalf("keys after Clear: %v", keys)
	}
	shard.Close(ctx)
	if _, err := s.Put(ctx, "i1:a", "k", nil, p); !errors.Is(err, flow.ErrUnavailable) {
		t.Fatalf("Put on a closed shard = %v, want ErrUnavailable", err)
	}
}
