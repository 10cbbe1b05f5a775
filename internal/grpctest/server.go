package grpctest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/riftgate/riftgate/internal/grpctest/greeterpb"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Server is a real grpc-go Greeter: it counts its calls, answers each
// kind of method from what it is sent, and can take its time.
type Server struct {
	pb.UnimplementedGreeterServer
	Addr  string
	Calls atomic.Int64
	// Delay is how long each call waits before it answers.
	Delay time.Duration
	srv   *grpc.Server
}

// Start serves a Greeter on a loopback port until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String(), srv: grpc.NewServer()}
	pb.RegisterGreeterServer(s.srv, s)
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(s.srv.Stop)
	return s
}

// Serve serves a Greeter on ln until the returned stop is called (a
// benchmark's limit).
func Serve(ln net.Listener) (stop func()) {
	s := &Server{Addr: ln.Addr().String(), srv: grpc.NewServer()}
	pb.RegisterGreeterServer(s.srv, s)
	go func() { _ = s.srv.Serve(ln) }()
	return s.srv.Stop
}

func (s *Server) begin(ctx context.Context) int64 {
	n := s.Calls.Add(1)
	if s.Delay > 0 {
		select {
		case <-time.After(s.Delay):
		case <-ctx.Done():
		}
	}
	return n
}

// SayHello answers "hello <name>" with header metadata up-h and trailer
// up-t (echoing x-echo); a name "fail" fails with FAILED_PRECONDITION and
// an ErrorInfo.
func (s *Server) SayHello(ctx context.Context, r *pb.HelloRequest) (*pb.HelloReply, error) {
	n := s.begin(ctx)
	md, _ := metadata.FromIncomingContext(ctx)
	_ = grpc.SetHeader(ctx, metadata.Pairs("up-h", "1"))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("up-t", "2", "echo", strings.Join(md.Get("x-echo"), ",")))
	if r.Name == "fail" {
		st, _ := status.New(codes.FailedPrecondition, "upstream says no").WithDetails(&errdetails.ErrorInfo{Reason: "NOPE", Domain: "grpctest"})
		return nil, st.Err()
	}
	return &pb.HelloReply{Id: n, Message: "hello " + r.Name, Mood: pb.Mood_HAPPY}, nil
}

// SayHellos streams count replies.
func (s *Server) SayHellos(r *pb.HelloRequest, stream grpc.ServerStreamingServer[pb.HelloReply]) error {
	s.begin(stream.Context())
	for i := range r.Count {
		if err := stream.Send(&pb.HelloReply{Id: int64(i + 1), Message: fmt.Sprintf("%s %d", r.Name, i+1)}); err != nil {
			return err
		}
	}
	return nil
}

// CollectHellos joins the names it is sent.
func (s *Server) CollectHellos(stream grpc.ClientStreamingServer[pb.HelloRequest, pb.HelloReply]) error {
	s.begin(stream.Context())
	var names []string
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&pb.HelloReply{Id: int64(len(names)), Message: strings.Join(names, "+")})
		}
		if err != nil {
			return err
		}
		names = append(names, r.Name)
	}
}

// Chat echoes each message.
func (s *Server) Chat(stream grpc.BidiStreamingServer[pb.HelloRequest, pb.HelloReply]) error {
	s.begin(stream.Context())
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&pb.HelloReply{Message: "echo " + r.Name}); err != nil {
			return err
		}
	}
}
