package flowshard_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/riftgate/riftgate/flowshard"
)

func Example() {
	dir, _ := os.MkdirTemp("", "flowshard")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	s, err := flowshard.Open(filepath.Join(dir, "flow.db"), flowshard.Options{})
	if err != nil {
		panic(err)
	}
	// One node: membership index 0, a fixed origin. Sync returns after the
	// fsync that covers the write.
	p := flowshard.Policy{Durability: flowshard.Sync, TTL: time.Minute, Origin: 1}
	v, _ := s.Put(ctx, "i8080:alice", "state", []byte("Started"), p)
	fmt.Println("put", v)

	// A scenario transition: only from the version just read.
	cur, _ := s.Get(ctx, "i8080:alice", "state", nil)
	if _, err := s.CAS(ctx, "i8080:alice", "state", cur.Version.V, []byte("Paid"), p); err != nil {
		panic(err)
	}
	_, err = s.CAS(ctx, "i8080:alice", "state", cur.Version.V, []byte("Paid twice"), p)
	fmt.Println("stale CAS:", errors.Is(err, flowshard.ErrVersionMismatch))

	// Deleting the imposter deletes its flows.
	n, _ := s.DeletePrefix(ctx, "i8080:")
	fmt.Println("deleted flows:", n)
	if err := s.Close(ctx); err != nil {
		panic(err)
	}
	// Output:
	// put {0 1 1}
	// stale CAS: true
	// deleted flows: 1
}
