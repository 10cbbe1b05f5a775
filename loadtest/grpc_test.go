package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/reflection"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// startEchoGRPC serves testdata/echo.proto's echo.Echo with grpc-go,
// messages as dynamicpb, and reflection, until the test ends. Unary
// answers "echo:" and the text (NOT_FOUND for "fail"); ServerStream
// answers n times; ClientStream joins the texts; Bidi echoes each.
func startEchoGRPC(t *testing.T) (addr string, conns *countingListener) {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{"testdata"}})}
	files, err := c.Compile(context.Background(), "echo.proto")
	if err != nil {
		t.Fatal(err)
	}
	msg := files[0].Messages().ByName("Msg")
	text := msg.Fields().ByName("text")
	n := msg.Fields().ByName("n")
	reply := func(s string) *dynamicpb.Message {
		m := dynamicpb.NewMessage(msg)
		m.Set(text, protoreflect.ValueOfString(s))
		return m
	}
	recv := func(s grpc.ServerStream) (*dynamicpb.Message, error) {
		m := dynamicpb.NewMessage(msg)
		return m, s.RecvMsg(m)
	}
	sd := grpc.ServiceDesc{ServiceName: "echo.Echo", HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Unary", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := dynamicpb.NewMessage(msg)
			if err := dec(in); err != nil {
				return nil, err
			}
			if in.Get(text).String() == "fail" {
				return nil, status.Error(codes.NotFound, "no such thing")
			}
			return reply("echo:" + in.Get(text).String()), nil
		}}},
		Streams: []grpc.StreamDesc{
			{StreamName: "ServerStream", ServerStreams: true, Handler: func(_ any, s grpc.ServerStream) error {
				in, err := recv(s)
				if err != nil {
					return err
				}
				for i := int64(0); i < in.Get(n).Int(); i++ {
					if err := s.SendMsg(reply(in.Get(text).String())); err != nil {
						return err
					}
				}
				return nil
			}},
			{StreamName: "ClientStream", ClientStreams: true, Handler: func(_ any, s grpc.ServerStream) error {
				var all strings.Builder
				for {
					in, err := recv(s)
					if errors.Is(err, io.EOF) {
						return s.SendMsg(reply(all.String()))
					}
					if err != nil {
						return err
					}
					all.WriteString(in.Get(text).String())
				}
			}},
			{StreamName: "Bidi", ServerStreams: true, ClientStreams: true, Handler: func(_ any, s grpc.ServerStream) error {
				for {
					in, err := recv(s)
					if errors.Is(err, io.EOF) {
						return nil
					}
					if err != nil {
						return err
					}
					if err := s.SendMsg(reply("echo:" + in.Get(text).String())); err != nil {
						return err
					}
				}
			}},
		}}
	srv := grpc.NewServer()
	srv.RegisterService(&sd, struct{}{})
	var res protodesc.Resolver = files.AsResolver()
	rpb.RegisterServerReflectionServer(srv, reflection.NewServerV1(reflection.ServerOptions{Services: srv, DescriptorResolver: res}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(cl) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return ln.Addr().String(), cl
}

func TestGRPCLoad(t *testing.T) {
	addr, conns := startEchoGRPC(t)
	proto := []string{"echo.proto"}
	for _, tc := range []struct {
		name, method string
		protos       []string
		msgs         []string
		check        string
		expect       codes.Code
		wantErrors   bool
	}{
		{"unary from the proto", "echo.Echo/Unary", proto, []string{`{"text":"hi"}`}, `body contains echo:hi`, codes.OK, false},
		{"unary by reflection", "/echo.Echo/Unary", nil, []string{`{"text":"hi"}`}, `jsonpath $.text == "echo:hi"`, codes.OK, false},
		{"server stream", "echo.Echo/ServerStream", proto, []string{`{"text":"s","n":3}`}, `body contains [{"text":"s"},{"text":"s"},{"text":"s"}]`, codes.OK, false},
		{"client stream", "echo.Echo/ClientStream", nil, []string{`{"text":"a"}`, `{"text":"b"}`, `{"text":"c"}`}, `body contains abc`, codes.OK, false},
		{"bidi", "echo.Echo/Bidi", proto, []string{`{"text":"a"}`, `{"text":"b"}`}, `body contains echo:b`, codes.OK, false},
		{"unexpected status", "echo.Echo/Unary", proto, []string{`{"text":"fail"}`}, "", codes.OK, true},
		{"expected status", "echo.Echo/Unary", proto, []string{`{"text":"fail"}`}, "", codes.NotFound, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := conns.n.Load()
			x := &GRPCExchange{Method: tc.method, ProtoFiles: tc.protos, ImportPaths: []string{"testdata"}, Messages: tc.msgs, Expect: tc.expect}
			o := Options{Targets: []string{"grpc://" + addr}, Connections: 3, Requests: 60, Scenario: simple("/"), GRPC: x}
			if tc.check != "" {
				o.Checks = []string{tc.check}
			}
			res := run(t, o)
			if res.Requests != 60 {
				t.Fatalf("%d requests", res.Requests)
			}
			if tc.wantErrors {
				if res.ErrorKinds["status"] != 60 || !strings.Contains(res.ErrorExamples["status"], "NotFound") {
					t.Errorf("errors %v %v", res.ErrorKinds, res.ErrorExamples)
				}
				return
			}
			if res.Errors != 0 || res.Statuses[strconv.Itoa(int(tc.expect))] != 60 {
				t.Fatalf("errors %v %v statuses %v", res.ErrorKinds, res.ErrorExamples, res.Statuses)
			}
			for _, c := range res.Checks {
				if c.Fails != 0 || c.Passes != 60 {
					t.Errorf("check %q: %d passes, %d fails (%s)", c.Check, c.Passes, c.Fails, c.Example)
				}
			}
			// One connection per user, and one for reflection.
			if n := conns.n.Load() - before; n > 4 {
				t.Errorf("%d connections for 3 users", n)
			}
		})
	}
}

// Bad input is refused before the run: an unknown method, a message that
// is not the method's type, a proto that does not compile.
func TestGRPCLoadRefusesBadInput(t *testing.T) {
	addr, _ := startEchoGRPC(t)
	for _, x := range []*GRPCExchange{
		{Method: "echo.Echo/Nope", ProtoFiles: []string{"echo.proto"}, ImportPaths: []string{"testdata"}},
		{Method: "echo.Missing/Unary"},
		{Method: "echo.Echo/Unary", Messages: []string{`{"nope":1}`}},
		{Method: "echo.Echo/Unary", ProtoFiles: []string{"missing.proto"}, ImportPaths: []string{"testdata"}},
	} {
		_, err := Run(context.Background(), Options{Targets: []string{"grpc://" + addr}, Connections: 1, Requests: 1, Scenario: simple("/"), GRPC: x})
		if err == nil {
			t.Errorf("%+v: no error", x)
		}
	}
}

// The command line: a grpc:// URL names the method, -body the message,
// -H the metadata, and the summary reads as any other.
func TestGRPCLoadCommandLine(t *testing.T) {
	addr, _ := startEchoGRPC(t)
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"-n", "40", "-c", "2", "-proto", "echo.proto", "-import-path", "testdata",
		"-body", `{"text":"cli"}`, "-H", "x-k: v", "-check", "body contains echo:cli", "-threshold", "errors<1%", "-progress", "never",
		"grpc://" + addr + "/echo.Echo/Unary"}, &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), "40") {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
}

// FuzzSplitGRPCMessages: -body is one message or an array of them; what
// comes out is JSON, one text per message, and nothing panics.
func FuzzSplitGRPCMessages(f *testing.F) {
	f.Add(`{"a":1}`)
	f.Add(`[{"a":1},{"b":[2]}]`)
	f.Add(`[`)
	f.Fuzz(func(t *testing.T, body string) {
		msgs, err := SplitGRPCMessages(body)
		if err != nil {
			return
		}
		if strings.HasPrefix(strings.TrimSpace(body), "[") {
			for _, m := range msgs {
				if !json.Valid([]byte(m)) {
					t.Fatalf("%q: not JSON %q", body, m)
				}
			}
		} else if strings.TrimSpace(body) != "" && len(msgs) != 1 {
			t.Fatalf("%q: %d messages", body, len(msgs))
		}
	})
}
