package flowlocal

import (
	"context"
	"errors"
	"testing"

	"github.com/riftgate/riftgate/flowshard"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/flow/flowtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSeamContract(t *testing.T) {
	ctx := context.Background()
	shard, err := flowshard.Open("", flowshard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer shard.Close(ctx)
	s := Store{Shard: shard}
	flowtest.Run(t, s)

	v, err := s.Put(ctx, "i1:o", "k", nil, flow.Policy{})
	if err != nil || v.Origin != Origin {
		t.Fatalf("Put = %+v %v; want origin %d", v, err, Origin)
	}
	shard.Close(ctx)
	if _, err := s.Put(ctx, "i1:a", "k", nil, flow.Policy{}); !errors.Is(err, flow.ErrUnavailable) {
		t.Fatalf("Put on a closed shard = %v, want ErrUnavailable", err)
	}
}
