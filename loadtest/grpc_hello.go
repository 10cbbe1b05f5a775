package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/bufbuild/protocompile"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The grpc-unary bench case: riftgate's gRPC imposter and the raw grpc-go
// server (riftload hello -grpc-port) answer bench.Bench/Unary with the
// same message.
const (
	benchProtoFile = "bench.proto"
	benchProto     = `syntax = "proto3";

package bench;

service Bench {
  rpc Unary(Request) returns (Reply);
}

message Request {
  int32 id = 1;
  string name = 2;
}

message Reply {
  int32 id = 1;
  string data = 2;
}
`
	benchGRPCMethod  = "/bench.Bench/Unary"
	benchGRPCRequest = `{"id":1,"name":"riftload"}`
	benchGRPCReply   = `{"id":100,"data":"mock response"}`
)

// writeBenchProto writes bench.proto into dir and returns its path.
func writeBenchProto(dir string) (string, error) {
	p := filepath.Join(dir, benchProtoFile)
	if err := os.WriteFile(p, []byte(benchProto), 0o644); err != nil {
		return "", fmt.Errorf("bench proto: %w", err)
	}
	return p, nil
}

// benchReply is the raw server's answer, encoded once: the case's limit
// is grpc-go doing nothing but carry it.
func benchReply(ctx context.Context) ([]byte, error) {
	c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(map[string]string{benchProtoFile: benchProto})}}
	files, err := c.Compile(ctx, benchProtoFile)
	if err != nil {
		return nil, fmt.Errorf("bench proto: %w", err)
	}
	m := dynamicpb.NewMessage(files[0].Messages().ByName("Reply"))
	if err := protojson.Unmarshal([]byte(benchGRPCReply), m); err != nil {
		return nil, err
	}
	return proto.Marshal(m)
}

// ServeGRPCHello serves bench.Bench/Unary on ln with grpc-go until ctx
// ends: every call is answered with the bench's reply, encoded once at
// start, whatever it asked (the request is not decoded), as the fastest
// grpc-go server answering that message would.
func ServeGRPCHello(ctx context.Context, ln net.Listener) error {
	reply, err := benchReply(ctx)
	if err != nil {
		return err
	}
	sd := grpc.ServiceDesc{ServiceName: "bench.Bench", HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Unary", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil {
				return nil, err
			}
			return &reply, nil
		}}}}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	srv.RegisterService(&sd, struct{}{})
	stop := context.AfterFunc(ctx, srv.Stop)
	defer stop()
	return srv.Serve(ln)
}

// probeGRPC makes one call of x on target and checks its answer is want
// (JSON, compared as the answer's JSON).
func probeGRPC(ctx context.Context, target string, x *GRPCExchange, want string) error {
	o := Options{Targets: []string{target}, Connections: 1, Requests: 1, Timeout: 5 * time.Second,
		Scenario: &Scenario{NoFlowHeader: true, Steps: []Step{{Path: "/"}}}, GRPC: x,
		Checks: []string{"body contains " + compactJSON(want)}}
	res, err := Run(ctx, o)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if res.Errors > 0 {
		for _, ex := range res.ErrorExamples {
			return fmt.Errorf("probe: %s", ex)
		}
	}
	for _, c := range res.Checks {
		if c.Fails > 0 {
			return fmt.Errorf("probe: the answer is not %s: %s", want, c.Example)
		}
	}
	return nil
}

// compactJSON is s without insignificant spaces, as grpcBody writes
// answers.
func compactJSON(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return s
	}
	return b.String()
}

// probeH2 asks target's path over h2c and checks the answer's status and
// body.
func probeH2(target string, st probeStep) error {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Protocols: p}}
	defer c.CloseIdleConnections()
	resp, err := c.Get(target + st.path)
	if err != nil {
		return fmt.Errorf("probe h2: %w", err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.ProtoMajor != 2 || resp.StatusCode != st.status || b.String() != st.body {
		return fmt.Errorf("probe h2: %s %d %q, want HTTP/2 %d %q", resp.Proto, resp.StatusCode, b.String(), st.status, st.body)
	}
	return nil
}
