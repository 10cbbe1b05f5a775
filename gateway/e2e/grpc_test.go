package e2e_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
	"github.com/riftgate/riftgate/gateway/grpcproto"
	pb "github.com/riftgate/riftgate/internal/grpctest/greeterpb"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// greeterDir is where the Greeter's .proto is, for an imposter's
// includeDirs.
func greeterDir(t *testing.T) string {
	t.Helper()
	root, err := gatewaytest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "internal", "grpctest", "greeterpb")
}

// greeterImposter is a grpc imposter of the Greeter with stubs (a JSON
// array) and extra top-level fields (JSON members, or "").
func greeterImposter(t *testing.T, port int, stubs, extra string) string {
	t.Helper()
	if extra != "" {
		extra = "," + extra
	}
	return fmt.Sprintf(`{"protocol":"grpc","port":%d,"recordRequests":true,
		"services":{"riftgate.test.Greeter":{"file":"greeter.proto"}},
		"options":{"protobufjs":{"includeDirs":[%q]}},"stubs":%s%s}`, port, greeterDir(t), stubs, extra)
}

// greeterClient dials an imposter with grpc-go, closed when the test ends.
func greeterClient(t *testing.T, port int, opts ...grpc.DialOption) pb.GreeterClient {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewGreeterClient(cc)
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The shape, every method kind, metadata both ways, statuses and
// their details.
func TestGRPCMethodKinds(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(greeterImposter(t, gatewaytest.FreePort(t), `[
	  {"predicates": [{"equals": {"path": "/riftgate.test.Greeter/SayHello", "value": {"name": "bob"}, "metadata": {"x-tier": "gold"}}}],
	   "responses": [{"is": {"value": {"id": 100, "message": "mock response", "mood": "HAPPY", "at": "2026-01-02T03:04:05Z"},
	                         "metadata": {"initial": {"k": "v"}, "trailing": {"k2": ["v2", "v3"]}}}}]},
	  {"predicates": [{"matches": {"path": "unaryunary|sayhello$"}, "caseSensitive": false}, {"startsWith": {"value": {"name": "err"}}}],
	   "responses": [{"is": {"error": {"status": "OUT_OF_RANGE", "message": "invalid message",
	                         "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TOO_BIG", "domain": "riftgate.test"}]},
	                         "metadata": {"trailing": {"why": "because"}}}}]},
	  {"predicates": [{"equals": {"path": "/riftgate.test.Greeter/SayHello"}}],
	   "responses": [{"is": {"error": {"status": 5, "message": "no such greeting"}}}]},
	  {"predicates": [{"endsWith": {"path": "/SayHellos"}}, {"deepEquals": {"value": {"name": "ann", "count": 3, "tags": []}}}],
	   "responses": [{"is": {"value": [{"id": 1}, {"id": 2, "message": "two"}, {"id": 3}]}}]},
	  {"predicates": [{"endsWith": {"path": "/SayHellos"}}],
	   "responses": [{"is": {"value": [{"id": 1}], "error": {"status": "RESOURCE_EXHAUSTED", "message": "enough"}}}]},
	  {"predicates": [{"endsWith": {"path": "/CollectHellos"}}, {"contains": {"value": "\"name\":\"second\""}}],
	   "responses": [{"is": {"value": {"id": 2, "message": "got two"}}}]},
	  {"predicates": [{"endsWith": {"path": "/Chat"}}, {"exists": {"value": {"name": true}}}, {"equals": {"value": {"name": "bye"}}}],
	   "responses": [{"is": {"error": {"status": "ABORTED", "message": "bye"}}}]},
	  {"predicates": [{"endsWith": {"path": "/Chat"}}],
	   "responses": [{"is": {"value": [{"message": "echo 1"}, {"message": "echo 2"}]}}, {"is": {"value": {"message": "again"}}}]}
	]`, ""))
	c := greeterClient(t, port)

	t.Run("unary", func(t *testing.T) {
		var header, trailer metadata.MD
		ctx := metadata.AppendToOutgoingContext(callCtx(t), "x-tier", "gold")
		r, err := c.SayHello(ctx, &pb.HelloRequest{Name: "bob"}, grpc.Header(&header), grpc.Trailer(&trailer))
		if err != nil {
			t.Fatal(err)
		}
		if r.Id != 100 || r.Message != "mock response" || r.Mood != pb.Mood_HAPPY || r.At.AsTime().Year() != 2026 {
			t.Fatalf("reply %v", r)
		}
		if got := header.Get("k"); len(got) != 1 || got[0] != "v" {
			t.Fatalf("header metadata %v", header)
		}
		if got := trailer.Get("k2"); strings.Join(got, ",") != "v2,v3" {
			t.Fatalf("trailer metadata %v", trailer)
		}
	})
	t.Run("status and details", func(t *testing.T) {
		var trailer metadata.MD
		_, err := c.SayHello(callCtx(t), &pb.HelloRequest{Name: "error please"}, grpc.Trailer(&trailer))
		st := status.Convert(err)
		if st.Code() != codes.OutOfRange || st.Message() != "invalid message" {
			t.Fatalf("status %v", st)
		}
		if len(st.Details()) != 1 {
			t.Fatalf("details %v", st.Details())
		}
		if info, ok := st.Details()[0].(*errdetails.ErrorInfo); !ok || info.Reason != "TOO_BIG" {
			t.Fatalf("detail %#v", st.Details()[0])
		}
		if trailer.Get("why")[0] != "because" {
			t.Fatalf("trailer %v", trailer)
		}
		// The metadata predicate fails without it: the next stub's status
		// by number.
		_, err = c.SayHello(callCtx(t), &pb.HelloRequest{Name: "bob"})
		if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != "no such greeting" {
			t.Fatalf("status %v", st)
		}
	})
	t.Run("server stream", func(t *testing.T) {
		s, err := c.SayHellos(callCtx(t), &pb.HelloRequest{Name: "ann", Count: 3})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for {
			r, err := s.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%d%s", r.Id, r.Message))
		}
		if strings.Join(got, ",") != "1,2two,3" {
			t.Fatalf("stream %v", got)
		}
		// Messages, then a status.
		s, err = c.SayHellos(callCtx(t), &pb.HelloRequest{Name: "zed"})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := s.Recv(); err != nil || r.Id != 1 {
			t.Fatalf("first %v %v", r, err)
		}
		if _, err := s.Recv(); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("end %v", err)
		}
	})
	t.Run("client stream", func(t *testing.T) {
		s, err := c.CollectHellos(callCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"first", "second"} {
			if err := s.Send(&pb.HelloRequest{Name: n}); err != nil {
				t.Fatal(err)
			}
		}
		r, err := s.CloseAndRecv()
		if err != nil || r.Message != "got two" {
			t.Fatalf("reply %v %v", r, err)
		}
	})
	t.Run("bidi", func(t *testing.T) {
		s, err := c.Chat(callCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, n := range []string{"a", "b"} {
			if err := s.Send(&pb.HelloRequest{Name: n}); err != nil {
				t.Fatal(err)
			}
			want := 2
			if n == "b" {
				want = 1
			}
			for range want {
				r, err := s.Recv()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, r.Message)
			}
		}
		if err := s.Send(&pb.HelloRequest{Name: "bye"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); status.Code(err) != codes.Aborted {
			t.Fatalf("end %v", err)
		}
		if strings.Join(got, ",") != "echo 1,echo 2,again" {
			t.Fatalf("chat %v", got)
		}
	})

	// Each message was recorded in the request shape {path, value,
	// metadata, peer}: a client stream's value is its messages.
	status, body := rg.Do("GET", fmt.Sprintf("/imposters/%d", port), nil)
	if status != 200 {
		t.Fatalf("GET %d %s", status, body)
	}
	var imp struct {
		NumberOfRequests int `json:"numberOfRequests"`
		Requests         []struct {
			Path     string            `json:"path"`
			Value    json.RawMessage   `json:"value"`
			Metadata map[string]any    `json:"metadata"`
			Peer     string            `json:"peer"`
			Extra    map[string]string `json:"-"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(body, &imp); err != nil {
		t.Fatal(err)
	}
	// 3 unary, 2 server streams, 1 client stream, 3 chat messages.
	if imp.NumberOfRequests != 9 || len(imp.Requests) != 9 {
		t.Fatalf("numberOfRequests %d, %d recorded: %s", imp.NumberOfRequests, len(imp.Requests), body)
	}
	first := imp.Requests[0]
	if first.Path != "/riftgate.test.Greeter/SayHello" || first.Metadata["x-tier"] != "gold" || !strings.Contains(first.Peer, "127.0.0.1:") {
		t.Fatalf("first request %+v", first)
	}
	var v map[string]any
	if err := json.Unmarshal(first.Value, &v); err != nil || v["name"] != "bob" {
		t.Fatalf("first value %s", first.Value)
	}
	var collected []map[string]any
	if err := json.Unmarshal(imp.Requests[5].Value, &collected); err != nil || len(collected) != 2 || collected[1]["name"] != "second" {
		t.Fatalf("client stream value %s", imp.Requests[5].Value)
	}
	// mb's metrics count them, by the imposter's label.
	_, metrics := rg.Do("GET", "/metrics", nil)
	if want := fmt.Sprintf(`mb_predicate_match_duration_seconds_count{imposter="[grpc:%d] "} 9`, port); !strings.Contains(string(metrics), want) {
		t.Fatalf("metrics lack %s:\n%s", want, metrics)
	}
}

// A grpc imposter kept under --datadir is compiled again on restart and
// answers as before.
func TestGRPCSurvivesRestart(t *testing.T) {
	rg := gatewaytest.Start(t, "--datadir", t.TempDir())
	port := rg.PostImposter(greeterImposter(t, gatewaytest.FreePort(t), `[{"responses": [{"is": {"value": {"message": "kept"}}}]}]`, ""))
	rg.Stop()
	rg.Restart()
	r, err := greeterClient(t, port).SayHello(callCtx(t), &pb.HelloRequest{}, grpc.WaitForReady(true))
	if err != nil || r.Message != "kept" {
		t.Fatalf("after a restart: %v %v", r, err)
	}
}

// A method that does not exist, a message that is not the method's type,
// one past the size limit: the statuses grpc-go's own servers give.
func TestGRPCBadCalls(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(greeterImposter(t, gatewaytest.FreePort(t), `[{"responses": [{"is": {"value": {"id": 7}}}]}]`, ""))
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(grpcproto.Codec{}), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	raw := func(method string, msg []byte) error {
		f, out := grpcproto.Frame(msg), grpcproto.Frame(nil)
		return cc.Invoke(callCtx(t), method, &f, &out)
	}
	for _, tc := range []struct {
		name, method string
		msg          []byte
		want         codes.Code
		text         string
	}{
		{"unknown method", "/riftgate.test.Greeter/Nope", nil, codes.Unimplemented, "unknown method Nope for service riftgate.test.Greeter"},
		{"unknown service", "/other.Svc/Call", nil, codes.Unimplemented, "unknown service other.Svc"},
		// Field 1 (name, a string) sent as a varint, then a truncated field.
		{"not the input type", "/riftgate.test.Greeter/SayHello", []byte{0x08, 0x01, 0x12, 0x05, 'a'}, codes.InvalidArgument, "riftgate.test.HelloRequest"},
		{"garbage", "/riftgate.test.Greeter/SayHello", []byte{0xff, 0xff, 0xff, 0xff, 0xff}, codes.InvalidArgument, "not a"},
		{"oversized", "/riftgate.test.Greeter/SayHello", append([]byte{0x0a, 0x80, 0x80, 0x80, 0x03}, make([]byte, 6<<20)...), codes.ResourceExhausted, ""},
		{"fine", "/riftgate.test.Greeter/SayHello", []byte{0x0a, 0x01, 'x'}, codes.OK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := raw(tc.method, tc.msg)
			st := status.Convert(err)
			if st.Code() != tc.want || !strings.Contains(st.Message(), tc.text) {
				t.Fatalf("got %v, want %v with %q", st, tc.want, tc.text)
			}
		})
	}
	// The imposter still answers, and the admin API too.
	c := greeterClient(t, port)
	if r, err := c.SayHello(callCtx(t), &pb.HelloRequest{}); err != nil || r.Id != 7 {
		t.Fatalf("after: %v %v", r, err)
	}
}

// Bad definitions are refused when the imposter is made, in mb's error
// shape, with the compiler's message.
func TestGRPCBadDefinitions(t *testing.T) {
	rg := gatewaytest.Start(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "broken.proto"), []byte("syntax = \"proto3\";\nmessage A { string x = 1 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"syntax error", fmt.Sprintf(`{"protocol":"grpc","services":{"A":{"file":"broken.proto"}},"options":{"protobufjs":{"includeDirs":[%q]}}}`, dir), "broken.proto:2:"},
		{"missing file", `{"protocol":"grpc","services":{"a.B":{"file":"nope.proto"}}}`, "nope.proto"},
		{"service not in file", fmt.Sprintf(`{"protocol":"grpc","services":{"riftgate.test.Other":{"file":"greeter.proto"}},"options":{"protobufjs":{"includeDirs":[%q]}}}`, greeterDir(t)), "riftgate.test.Other is not declared"},
		{"no services", `{"protocol":"grpc"}`, "needs 'services'"},
		{"bad protoset", `{"protocol":"grpc","protoset":"bm90IGEgc2V0"}`, "invalid protoset"},
		{"bad status", greeterImposter(t, gatewaytest.FreePort(t), `[{"responses":[{"is":{"error":{"status":"NOPE"}}}]}]`, ""), "no gRPC status"},
		{"reserved metadata", greeterImposter(t, gatewaytest.FreePort(t), `[{"responses":[{"is":{"metadata":{"initial":{"grpc-status":"1"}}}}]}]`, ""), "not a metadata key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := rg.Do("POST", "/imposters", json.RawMessage(tc.body))
			if status != 400 || !strings.Contains(string(body), `"code": "bad data"`) || !strings.Contains(string(body), tc.want) {
				t.Fatalf("%d %s", status, body)
			}
		})
	}
}

// A descriptor set (protoc --descriptor_set_out) instead of .proto files.
func TestGRPCProtoset(t *testing.T) {
	rg := gatewaytest.Start(t)
	set, err := grpcproto.Compile(context.Background(), []grpcproto.Source{{Service: "riftgate.test.Greeter", File: "greeter.proto"}}, []string{greeterDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(set.DescriptorSet())
	port := rg.PostImposter(fmt.Sprintf(`{"protocol":"grpc","port":%d,"protoset":%s,"stubs":[{"responses":[{"is":{"value":{"message":"from a set"}}}]}]}`, gatewaytest.FreePort(t), b))
	r, err := greeterClient(t, port).SayHello(callCtx(t), &pb.HelloRequest{})
	if err != nil || r.Message != "from a set" {
		t.Fatalf("%v %v", r, err)
	}
}

// A client's deadline and its cancellation end a `wait`: the call ends
// when the client says, not when the stub would have answered.
func TestGRPCDeadlineAndCancel(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(greeterImposter(t, gatewaytest.FreePort(t),
		`[{"responses": [{"is": {"value": {"id": 1}}, "behaviors": [{"wait": 3000}]}]}]`, ""))
	c := greeterClient(t, port)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.SayHello(ctx, &pb.HelloRequest{})
	if status.Code(err) != codes.DeadlineExceeded || time.Since(start) > 2*time.Second {
		t.Fatalf("deadline: %v after %v", err, time.Since(start))
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start = time.Now()
	_, err = c.SayHello(ctx, &pb.HelloRequest{})
	if status.Code(err) != codes.Canceled || time.Since(start) > 2*time.Second {
		t.Fatalf("cancel: %v after %v", err, time.Since(start))
	}
	// Without a deadline, the wait is served.
	start = time.Now()
	if _, err := c.SayHello(callCtx(t), &pb.HelloRequest{}); err != nil || time.Since(start) < 3*time.Second {
		t.Fatalf("wait: %v after %v", err, time.Since(start))
	}
}

// Faults break the connection the call came on.
func TestGRPCFaults(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(greeterImposter(t, gatewaytest.FreePort(t), `[
	  {"predicates": [{"equals": {"value": {"name": "reset"}}}], "responses": [{"fault": "CONNECTION_RESET_BY_PEER"}]},
	  {"predicates": [{"equals": {"value": {"name": "garbage"}}}], "responses": [{"fault": "RANDOM_DATA_THEN_CLOSE"}]},
	  {"responses": [{"is": {"value": {"id": 1}}}]}]`, ""))
	c := greeterClient(t, port)
	for _, name := range []string{"reset", "garbage"} {
		_, err := c.SayHello(callCtx(t), &pb.HelloRequest{Name: name})
		if status.Code(err) != codes.Unavailable && status.Code(err) != codes.Internal {
			t.Fatalf("%s: %v", name, err)
		}
		// The client reconnects and the next call is answered.
		if r, err := c.SayHello(callCtx(t), &pb.HelloRequest{Name: "ok"}); err != nil || r.Id != 1 {
			t.Fatalf("after %s: %v %v", name, r, err)
		}
	}
}

// Hostile clients: bytes that are no HTTP/2, and a client that opens
// streams and never reads what they answer. Neither stops the imposter,
// and deleting it ends the calls at once.
func TestGRPCHostileClients(t *testing.T) {
	rg := gatewaytest.Start(t)
	big := strings.Repeat("x", 16<<10)
	port := rg.PostImposter(greeterImposter(t, gatewaytest.FreePort(t), `[
	  {"predicates": [{"endsWith": {"path": "Chat"}}], "responses": [{"is": {"value": {"message": "`+big+`"}}}]},
	  {"responses": [{"is": {"value": {"id": 1}}}]}]`, ""))
	for _, junk := range [][]byte{[]byte("GET / HTTP/1.1\r\n\r\n"), []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff\xff\xff\xff\xff\xff\xff\xff"), make([]byte, 100000)} {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write(junk)
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, _ = io.Copy(io.Discard, conn)
		conn.Close()
	}
	// 64 bidi streams, each sending 200 messages whose 16 KiB answers it
	// never reads: 205 MiB if the server queued what it cannot send;
	// HTTP/2 flow control holds it back.
	pid := pidOf(t, rg)
	before := rss(t, pid)
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	slow := pb.NewGreeterClient(cc)
	ctx, cancel := context.WithCancel(context.Background())
	var senders sync.WaitGroup
	defer senders.Wait()
	defer cancel()
	for range 64 {
		s, err := slow.Chat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		senders.Go(func() {
			for range 200 {
				if s.Send(&pb.HelloRequest{Name: "x"}) != nil {
					return
				}
			}
		})
	}
	time.Sleep(2 * time.Second)
	grown := rss(t, pid) - before
	if grown > 100<<20 {
		t.Fatalf("RSS grew by %d MiB for clients that do not read", grown>>20)
	}
	t.Logf("RSS grew by %d KiB for 64 streams not read", grown>>10)
	// Another client is answered meanwhile.
	if r, err := greeterClient(t, port).SayHello(callCtx(t), &pb.HelloRequest{}); err != nil || r.Id != 1 {
		t.Fatalf("meanwhile: %v %v", r, err)
	}
	start := time.Now()
	if status, body := rg.Do("DELETE", fmt.Sprintf("/imposters/%d", port), nil); status != 200 {
		t.Fatalf("DELETE %d %s", status, body)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("DELETE took %v", d)
	}
}

// Flows by a metadata key: each flow walks the scenario on its own.
func TestGRPCFlowsByMetadata(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(greeterImposter(t, gatewaytest.FreePort(t), `[
	  {"scenarioName": "greet", "requiredScenarioState": "Started", "newScenarioState": "greeted",
	   "responses": [{"is": {"value": {"message": "hello"}}}]},
	  {"scenarioName": "greet", "requiredScenarioState": "greeted",
	   "responses": [{"is": {"value": {"message": "hello again"}}}]}]`,
		`"_rift": {"flowState": {"flowIdSource": "metadata:x-flow-id"}}`))
	c := greeterClient(t, port)
	ask := func(flow string) string {
		ctx := metadata.AppendToOutgoingContext(callCtx(t), "x-flow-id", flow)
		r, err := c.SayHello(ctx, &pb.HelloRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Message
	}
	got := []string{ask("u1"), ask("u1"), ask("u2"), ask("u2"), ask("u1")}
	if strings.Join(got, ",") != "hello,hello again,hello,hello again,hello again" {
		t.Fatalf("flows %v", got)
	}
}

// TLS with the built-in certificate and with the imposter's own, and
// mutualAuth asking for the client's.
func TestGRPCTLS(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(greeterImposter(t, gatewaytest.FreePort(t), `[{"responses": [{"is": {"value": {"id": 9}}}]}]`, `"mutualAuth": true`))
	var sawRequest bool
	var mu sync.Mutex
	cfg := &tls.Config{InsecureSkipVerify: true, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		mu.Lock()
		sawRequest = true
		mu.Unlock()
		return &tls.Certificate{}, nil
	}}
	c := greeterClient(t, port, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if r, err := c.SayHello(callCtx(t), &pb.HelloRequest{}); err != nil || r.Id != 9 {
		t.Fatalf("tls: %v %v", r, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !sawRequest {
		t.Fatal("mutualAuth did not ask for a client certificate")
	}
	// Plaintext against it fails.
	plain := greeterClient(t, port)
	if _, err := plain.SayHello(callCtx(t), &pb.HelloRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext to a TLS imposter: %v", err)
	}
}

// grpcurlPath finds grpcurl on PATH or where `go install` puts it
// (.ci/run installs it).
func grpcurlPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "grpcurl")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("grpcurl not found: go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4 (.ci/run does)")
	return ""
}

// grpcurl lists and calls the services through reflection alone: no
// .proto on the client's side.
func TestGRPCReflectionWithGrpcurl(t *testing.T) {
	bin := grpcurlPath(t)
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(greeterImposter(t, gatewaytest.FreePort(t), `[
	  {"predicates": [{"equals": {"value": {"name": "curl"}}}], "responses": [{"is": {"value": {"id": 42, "message": "hi curl", "mood": "GRUMPY"}}}]},
	  {"responses": [{"is": {"value": [{"id": 1}, {"id": 2}]}}]}]`, ""))
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, append([]string{"-plaintext"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run(addr, "list"); !strings.Contains(out, "riftgate.test.Greeter") || !strings.Contains(out, "grpc.reflection.v1.ServerReflection") {
		t.Fatalf("list: %s", out)
	}
	if out := run(addr, "describe", "riftgate.test.HelloReply"); !strings.Contains(out, "google.protobuf.Timestamp at = 3") {
		t.Fatalf("describe: %s", out)
	}
	out := run("-d", `{"name": "curl"}`, addr, "riftgate.test.Greeter/SayHello")
	var reply map[string]any
	if err := json.Unmarshal([]byte(out), &reply); err != nil || reply["id"] != "42" || reply["message"] != "hi curl" || reply["mood"] != "GRUMPY" {
		t.Fatalf("call: %v %s", err, out)
	}
	if out := run("-d", `{}`, addr, "riftgate.test.Greeter/SayHellos"); strings.Count(out, `"id"`) != 2 {
		t.Fatalf("stream: %s", out)
	}
}

// inject (with its state), a decorator, copy from the message and a wasm
// plugin answer gRPC calls with response objects.
func TestGRPCComputedResponses(t *testing.T) {
	rg := gatewaytest.Start(t, "--allowInjection")
	echo := filepath.Join(gatewaytest.WasmDir(t), "examples", "echo-c.wasm")
	port := rg.PostImposter(greeterImposter(t, gatewaytest.FreePort(t), fmt.Sprintf(`[
	  {"predicates": [{"equals": {"value": {"name": "inject"}}}],
	   "responses": [{"inject": "function (config) { config.state.n = (config.state.n || 0) + 1; return {value: {id: config.state.n, message: config.request.path + ' ' + config.request.value.name + ' ' + config.request.metadata['x-who']}}; }"}]},
	  {"predicates": [{"equals": {"value": {"name": "decorate"}}}],
	   "responses": [{"is": {"value": {"message": "plain"}},
	     "behaviors": [{"decorate": "function (request, response) { response.value.message = response.value.message.toUpperCase(); response.error = {status: 'DATA_LOSS', message: 'decorated'}; }"}]}]},
	  {"predicates": [{"startsWith": {"value": {"name": "copy"}}}],
	   "responses": [{"is": {"value": {"message": "you said ${name}"}},
	     "behaviors": [{"copy": {"from": "value", "into": "${name}", "using": {"method": "jsonpath", "selector": "$.name"}}}]}]},
	  {"predicates": [{"equals": {"value": {"name": "wasm"}}}],
	   "responses": [{"wasm": {"module": %q, "config": {"template": "{\"value\": {\"message\": \"{{method}} {{path}}\"}, \"metadata\": {\"initial\": {\"from\": \"plugin\"}}}"}}}]}
	]`, echo), ""))
	c := greeterClient(t, port)
	ctx := metadata.AppendToOutgoingContext(callCtx(t), "x-who", "me")
	for i := int64(1); i <= 2; i++ {
		r, err := c.SayHello(ctx, &pb.HelloRequest{Name: "inject"})
		if err != nil || r.Id != i || r.Message != "/riftgate.test.Greeter/SayHello inject me" {
			t.Fatalf("inject %d: %v %v", i, r, err)
		}
	}
	_, err := c.SayHello(ctx, &pb.HelloRequest{Name: "decorate"})
	if st := status.Convert(err); st.Code() != codes.DataLoss || st.Message() != "decorated" {
		t.Fatalf("decorate: %v", st)
	}
	if r, err := c.SayHello(ctx, &pb.HelloRequest{Name: "copycat"}); err != nil || r.Message != "you said copycat" {
		t.Fatalf("copy: %v %v", r, err)
	}
	var header metadata.MD
	r, err := c.SayHello(ctx, &pb.HelloRequest{Name: "wasm"}, grpc.Header(&header))
	if err != nil || r.Message != "POST /riftgate.test.Greeter/SayHello" || header.Get("from")[0] != "plugin" {
		t.Fatalf("wasm: %v %v %v", r, err, header)
	}
}

// An imposter's own key and cert: a client that trusts only that cert
// (no InsecureSkipVerify) calls it.
func TestGRPCOwnCertificate(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "grpc-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(priv)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	k, _ := json.Marshal(string(keyPEM))
	c, _ := json.Marshal(string(certPEM))
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(greeterImposter(t, gatewaytest.FreePort(t), `[{"responses": [{"is": {"value": {"id": 5}}}]}]`,
		fmt.Sprintf(`"key": %s, "cert": %s`, k, c)))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	client := greeterClient(t, port, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if r, err := client.SayHello(callCtx(t), &pb.HelloRequest{}); err != nil || r.Id != 5 {
		t.Fatalf("%v %v", r, err)
	}
}

// lookup reads a CSV row keyed by the message, and `riftgate save` writes
// a file from which a new riftgate serves the imposter again (services,
// options, stubs and all).
func TestGRPCLookupAndSave(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "greetings.csv")
	if err := os.WriteFile(csv, []byte("name,greeting\nada,hello Ada\ngrace,hi Grace\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(greeterImposter(t, gatewaytest.FreePort(t), fmt.Sprintf(`[
	  {"responses": [{"is": {"value": {"message": "${row}[greeting]"}},
	    "behaviors": [{"lookup": {"key": {"from": "value", "using": {"method": "jsonpath", "selector": "$.name"}},
	      "fromDataSource": {"csv": {"path": %q, "keyColumn": "name"}}, "into": "${row}"}}]}]}
	]`, csv), ""))
	c := greeterClient(t, port)
	for name, want := range map[string]string{"ada": "hello Ada", "grace": "hi Grace"} {
		if r, err := c.SayHello(callCtx(t), &pb.HelloRequest{Name: name}); err != nil || r.Message != want {
			t.Fatalf("lookup of %s: %v %v, want %q", name, r, err, want)
		}
	}

	saved := filepath.Join(dir, "saved.json")
	cmd := exec.Command(gatewaytest.Binary(t), "save", "--port", strconv.Itoa(rg.Port), "--host", "127.0.0.1", "--savefile", saved)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("riftgate save: %v\n%s", err, out)
	}
	rg.Stop()
	gatewaytest.Start(t, "--configfile", saved)
	c2 := greeterClient(t, port)
	if r, err := c2.SayHello(callCtx(t), &pb.HelloRequest{Name: "ada"}, grpc.WaitForReady(true)); err != nil || r.Message != "hello Ada" {
		t.Fatalf("from the saved file: %v %v", r, err)
	}
}
