package ui_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
	pb "github.com/riftgate/riftgate/internal/grpctest/greeterpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// The imposter page shows a grpc imposter's recorded calls: the method's
// path, the message, the metadata; a hostile string in the message as
// text.
func TestBrowserGRPCRequests(t *testing.T) {
	rg := gatewaytest.Start(t)
	root, err := gatewaytest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	port := rg.PostImposter(fmt.Sprintf(`{"protocol":"grpc","recordRequests":true,
		"services":{"riftgate.test.Greeter":{"file":"greeter.proto"}},
		"options":{"protobufjs":{"includeDirs":[%q]}},
		"stubs":[{"responses":[{"is":{"value":{"id":1}}}]}]}`, filepath.Join(root, "internal", "grpctest", "greeterpb")))
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-shown", "yes")
	if _, err := pb.NewGreeterClient(cc).SayHello(ctx, &pb.HelloRequest{Name: hostile}); err != nil {
		t.Fatal(err)
	}
	p := browser(t)
	p.open(fmt.Sprintf("%s/imposters/%d", rg.URL, port))
	p.wait("the recorded call", `document.querySelectorAll("#requests tr.request").length === 1`)
	row := eval[string](p, `document.querySelector("#requests tr.request").innerText`)
	for _, w := range []string{"gRPC", "/riftgate.test.Greeter/SayHello", `"name": `, "onerror", "headers"} {
		if !strings.Contains(row, w) {
			t.Errorf("the row lacks %q:\n%s", w, row)
		}
	}
	meta := eval[string](p, `document.querySelector("#requests tr.request details pre").textContent`)
	if !strings.Contains(meta, `"x-shown": "yes"`) {
		t.Errorf("metadata: %s", meta)
	}
	noScript(t, p)
}
