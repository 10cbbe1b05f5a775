package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
	"github.com/riftgate/riftgate/internal/grpctest"
	pb "github.com/riftgate/riftgate/internal/grpctest/greeterpb"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The three proxy modes against a real grpc-go server: messages,
// metadata and statuses recorded as `is` responses, and replayed once the
// upstream is gone.
func TestGRPCProxyModes(t *testing.T) {
	up := grpctest.Start(t)
	rg := gatewaytest.Start(t)
	proxy := func(mode, gens string) int {
		return rg.PostImposter(greeterImposter(t, gatewaytest.FreePort(t), fmt.Sprintf(
			`[{"responses": [{"proxy": {"to": "grpc://%s", "mode": %q, "predicateGenerators": %s}}]}]`, up.Addr, mode, gens), ""))
	}
	t.Run("proxyAlways records every call, all kinds", func(t *testing.T) {
		port := proxy("proxyAlways", `[{"matches": {"path": true, "value": true}}]`)
		c := greeterClient(t, port)
		var header, trailer metadata.MD
		ctx := metadata.AppendToOutgoingContext(callCtx(t), "x-echo", "e1")
		r, err := c.SayHello(ctx, &pb.HelloRequest{Name: "ann"}, grpc.Header(&header), grpc.Trailer(&trailer))
		if err != nil || r.Message != "hello ann" || header.Get("up-h")[0] != "1" || trailer.Get("echo")[0] != "e1" {
			t.Fatalf("unary: %v %v %v %v", r, err, header, trailer)
		}
		_, err = c.SayHello(callCtx(t), &pb.HelloRequest{Name: "fail"})
		st := status.Convert(err)
		if st.Code() != codes.FailedPrecondition || st.Message() != "upstream says no" || len(st.Details()) != 1 {
			t.Fatalf("status: %v %v", st, st.Details())
		}
		s, err := c.SayHellos(callCtx(t), &pb.HelloRequest{Name: "n", Count: 3})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for {
			r, err := s.Recv()
			if err != nil {
				break
			}
			got = append(got, r.Message)
		}
		if strings.Join(got, ",") != "n 1,n 2,n 3" {
			t.Fatalf("server stream %v", got)
		}
		cs, _ := c.CollectHellos(callCtx(t))
		_ = cs.Send(&pb.HelloRequest{Name: "a"})
		_ = cs.Send(&pb.HelloRequest{Name: "b"})
		if r, err := cs.CloseAndRecv(); err != nil || r.Message != "a+b" {
			t.Fatalf("client stream %v %v", r, err)
		}
		// The recordings, replayed with no upstream: the replayable
		// imposter without its proxies, made again.
		code, body := rg.Do("GET", fmt.Sprintf("/imposters/%d?replayable=true&removeProxies=true", port), nil)
		if code != 200 {
			t.Fatalf("GET %d %s", code, body)
		}
		for _, want := range []string{`"up-h": "1"`, `"status": "FAILED_PRECONDITION"`, `google.rpc.ErrorInfo"`, `"message": "n 3"`, `"message": "a+b"`} {
			if !strings.Contains(string(body), want) {
				t.Fatalf("recordings lack %s: %s", want, body)
			}
		}
		if strings.Contains(string(body), `"proxy"`) || strings.Contains(string(body), "_proxyResponseTime") {
			t.Fatalf("replayable shows proxies or times: %s", body)
		}
		rg.Do("DELETE", fmt.Sprintf("/imposters/%d", port), nil)
		replayed := rg.PostImposter(json.RawMessage(body))
		calls := up.Calls.Load()
		c = greeterClient(t, replayed)
		if r, err := c.SayHello(callCtx(t), &pb.HelloRequest{Name: "ann"}); err != nil || r.Message != "hello ann" {
			t.Fatalf("replayed unary: %v %v", r, err)
		}
		_, err = c.SayHello(callCtx(t), &pb.HelloRequest{Name: "fail"})
		if st := status.Convert(err); st.Code() != codes.FailedPrecondition {
			t.Fatalf("replayed status: %v", st)
		} else if info, ok := st.Details()[0].(*errdetails.ErrorInfo); !ok || info.Reason != "NOPE" {
			t.Fatalf("replayed details: %v", st.Details())
		}
		cs, _ = c.CollectHellos(callCtx(t))
		_ = cs.Send(&pb.HelloRequest{Name: "a"})
		_ = cs.Send(&pb.HelloRequest{Name: "b"})
		if r, err := cs.CloseAndRecv(); err != nil || r.Message != "a+b" {
			t.Fatalf("replayed client stream %v %v", r, err)
		}
		if up.Calls.Load() != calls {
			t.Fatal("the replay called the upstream")
		}
	})
	t.Run("proxyTransparent records nothing", func(t *testing.T) {
		port := proxy("proxyTransparent", `[]`)
		c := greeterClient(t, port)
		for range 2 {
			if r, err := c.SayHello(callCtx(t), &pb.HelloRequest{Name: "t"}); err != nil || r.Message != "hello t" {
				t.Fatalf("%v %v", r, err)
			}
		}
		_, body := rg.Do("GET", fmt.Sprintf("/imposters/%d", port), nil)
		var imp struct{ Stubs []json.RawMessage }
		_ = json.Unmarshal(body, &imp)
		if len(imp.Stubs) != 1 {
			t.Fatalf("%d stubs: %s", len(imp.Stubs), body)
		}
	})
	t.Run("a bidi stream proxies each message", func(t *testing.T) {
		port := proxy("proxyTransparent", `[]`)
		s, err := greeterClient(t, port).Chat(callCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"x", "y"} {
			_ = s.Send(&pb.HelloRequest{Name: n})
			if r, err := s.Recv(); err != nil || r.Message != "echo "+n {
				t.Fatalf("chat %v %v", r, err)
			}
		}
	})
	t.Run("an unreachable upstream", func(t *testing.T) {
		port := rg.PostImposter(greeterImposter(t, gatewaytest.FreePort(t),
			fmt.Sprintf(`[{"responses": [{"proxy": {"to": "grpc://127.0.0.1:%d"}}]}]`, gatewaytest.FreePort(t)), ""))
		_, err := greeterClient(t, port).SayHello(callCtx(t), &pb.HelloRequest{})
		if st := status.Convert(err); st.Code() != codes.Internal || !strings.Contains(st.Message(), "Unable to connect") {
			t.Fatalf("%v", st)
		}
	})
}

// proxyOnce under 64 concurrent first calls: the upstream is called once,
// every call gets its answer, and one stub is recorded.
func TestGRPCProxyOnceConcurrent(t *testing.T) {
	up := grpctest.Start(t)
	up.Delay = 200 * time.Millisecond
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(greeterImposter(t, gatewaytest.FreePort(t), fmt.Sprintf(
		`[{"responses": [{"proxy": {"to": "grpc://%s", "mode": "proxyOnce", "predicateGenerators": [{"matches": {"value": true}}]}}]}]`, up.Addr), ""))
	c := greeterClient(t, port)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Go(func() {
			r, err := c.SayHello(callCtx(t), &pb.HelloRequest{Name: "once"})
			if err == nil && (r.Message != "hello once" || r.Id != 1) {
				err = fmt.Errorf("answer %v", r)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := up.Calls.Load(); n != 1 {
		t.Fatalf("the upstream was called %d times", n)
	}
	_, body := rg.Do("GET", fmt.Sprintf("/imposters/%d", port), nil)
	var imp struct{ Stubs []json.RawMessage }
	_ = json.Unmarshal(body, &imp)
	if len(imp.Stubs) != 2 {
		t.Fatalf("%d stubs: %s", len(imp.Stubs), body)
	}
	// Another message is another signature: one more call.
	if r, err := c.SayHello(callCtx(t), &pb.HelloRequest{Name: "twice"}); err != nil || r.Message != "hello twice" || up.Calls.Load() != 2 {
		t.Fatalf("%v %v %d", r, err, up.Calls.Load())
	}
}
