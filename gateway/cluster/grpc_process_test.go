package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/cluster/clustertest"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
	"github.com/riftgate/riftgate/internal/grpctest"
	pb "github.com/riftgate/riftgate/internal/grpctest/greeterpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// grpcImposter is a Greeter imposter for a cluster (the .proto by its
// absolute path, which every node reads).
func grpcImposter(t *testing.T, port int, rift any, stubs []any) map[string]any {
	t.Helper()
	root, err := gatewaytest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	imp := map[string]any{"protocol": "grpc", "port": port,
		"services": map[string]any{"riftgate.test.Greeter": map[string]any{"file": "greeter.proto"}},
		"options":  map[string]any{"protobufjs": map[string]any{"includeDirs": []string{filepath.Join(root, "internal", "grpctest", "greeterpb")}}},
		"stubs":    stubs}
	if rift != nil {
		imp["_rift"] = rift
	}
	return imp
}

func greeterOn(t *testing.T, n *clustertest.Node, port int) pb.GreeterClient {
	t.Helper()
	cc, err := grpc.NewClient(n.Host+":"+strconv.Itoa(port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewGreeterClient(cc)
}

// gRPC flows across a 3-node cluster: a flow named by metadata walks its
// scenario and its response cycle wherever its calls land, and proxyOnce
// calls the upstream once for 64 concurrent first calls spread over the
// nodes.
func TestGRPCAcrossNodes(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	up := grpctest.Start(t)
	up.Delay = 200 * time.Millisecond
	port := gatewaytest.FreePort(t)
	is := func(msg string) map[string]any {
		return map[string]any{"is": map[string]any{"value": map[string]any{"message": msg}}}
	}
	eq := func(name string) []any {
		return []any{map[string]any{"equals": map[string]any{"value": map[string]any{"name": name}}}}
	}
	postServed(t, c, port, grpcImposter(t, port,
		map[string]any{"flowState": map[string]any{"flowIdSource": "metadata:x-user", "durability": "sync", "cycles": "flow"}},
		[]any{
			map[string]any{"scenarioName": "s", "requiredScenarioState": "Started", "newScenarioState": "in",
				"predicates": eq("login"), "responses": []any{is("welcome")}},
			map[string]any{"scenarioName": "s", "requiredScenarioState": "in", "predicates": eq("whoami"), "responses": []any{is("logged in")}},
			map[string]any{"predicates": eq("whoami"), "responses": []any{is("anonymous")}},
			map[string]any{"predicates": eq("next"), "responses": []any{is("1"), is("2"), is("3")}},
			map[string]any{"responses": []any{map[string]any{"proxy": map[string]any{"to": "grpc://" + up.Addr, "mode": "proxyOnce",
				"predicateGenerators": []any{map[string]any{"matches": map[string]any{"value": true}}}}}}},
		}))
	clients := []pb.GreeterClient{greeterOn(t, c.Nodes[0], port), greeterOn(t, c.Nodes[1], port), greeterOn(t, c.Nodes[2], port)}
	ask := func(i int, user, name string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "x-user", user)
		r, err := clients[i%3].SayHello(ctx, &pb.HelloRequest{Name: name}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatalf("%s %s on n%d: %v", user, name, i%3+1, err)
		}
		return r.Message
	}
	if got := ask(0, "ann", "login"); got != "welcome" {
		t.Fatalf("login: %q", got)
	}
	for i := range 3 {
		if got := ask(i, "ann", "whoami"); got != "logged in" {
			t.Fatalf("ann on n%d: %q", i+1, got)
		}
	}
	if got := ask(1, "bob", "whoami"); got != "anonymous" {
		t.Fatalf("bob: %q", got)
	}
	var seq []string
	for i := range 4 {
		seq = append(seq, ask(i, "ann", "next"))
	}
	seq = append(seq, ask(2, "bob", "next"))
	if fmt.Sprint(seq) != "[1 2 3 1 1]" {
		t.Fatalf("cycles per user across nodes: %v", seq)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 64 {
		wg.Go(func() { errs <- ask(i, "u"+strconv.Itoa(i), "proxied") })
	}
	wg.Wait()
	close(errs)
	for got := range errs {
		if got != "hello proxied" {
			t.Fatalf("proxied: %q", got)
		}
	}
	if n := up.Calls.Load(); n != 1 {
		t.Fatalf("the upstream was called %d times for one signature across 3 nodes", n)
	}
	code, body := c.Nodes[2].Do("GET", "/imposters/"+strconv.Itoa(port), nil)
	var imp struct{ Stubs []json.RawMessage }
	if err := json.Unmarshal(body, &imp); code != 200 || err != nil || len(imp.Stubs) != 6 {
		t.Fatalf("n3's stubs after the recording: %d %d %s", code, len(imp.Stubs), body)
	}
}
