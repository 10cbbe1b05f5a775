package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// GRPCExchange makes each request of a run one gRPC call: every virtual
// user keeps one client connection (one HTTP/2 connection) to each
// target, grpc://host:port (plaintext) or grpcs://host:port (TLS), and
// calls Method with one call in flight. The message types come from
// ProtoFiles, compiled when the run starts, or, without them, from the
// server's reflection service. Messages are given in protobuf's JSON
// mapping and encoded once: a unary or server-streaming call sends the
// first, a client- or bidirectional-streaming one sends them all, then
// reads every answer to the end of the stream. The latency is the whole
// call. A call whose status is not Expect (OK by default) is an error
// of kind `status` (`timeout` for DEADLINE_EXCEEDED); statuses are
// counted by their gRPC code (0 is OK). Checks read the last answer
// message as JSON (an array of them for a stream), as the body.
type GRPCExchange struct {
	Method      string   // "/pkg.Service/Method", or "pkg.Service/Method"
	ProtoFiles  []string // .proto files; none: server reflection
	ImportPaths []string // where ProtoFiles and their imports are found
	Messages    []string // JSON; none: one empty message
	Metadata    []string // "key: value" pairs sent with every call
	Expect      codes.Code

	desc  protoreflect.MethodDescriptor
	wire  [][]byte // Messages encoded
	md    metadata.MD
	sdesc grpc.StreamDesc
}

// grpcStatusError is a call that ended with an unexpected status.
type grpcStatusError struct {
	got, want codes.Code
	msg       string
}

func isGRPCStatus(err error) bool {
	var e *grpcStatusError
	return errors.As(err, &e)
}

func (e *grpcStatusError) Error() string {
	return fmt.Sprintf("grpc status %s (%s), expected %s", e.got, truncate([]byte(e.msg)), e.want)
}

// ParseGRPCCode reads a status code by name (OK, NOT_FOUND, in any
// case) or number.
func ParseGRPCCode(s string) (codes.Code, error) {
	var c codes.Code
	if err := c.UnmarshalJSON([]byte(`"` + strings.ToUpper(strings.TrimSpace(s)) + `"`)); err == nil {
		return c, nil
	}
	if err := c.UnmarshalJSON([]byte(strings.TrimSpace(s))); err == nil {
		return c, nil
	}
	return 0, fmt.Errorf("grpc status %q: want a code's name (OK, NOT_FOUND, ...) or number", s)
}

// resolve finds the method's types (in the proto files, or by reflection
// from target) and encodes the messages.
func (x *GRPCExchange) resolve(ctx context.Context, target target) error {
	method := strings.TrimPrefix(x.Method, "/")
	svc, name, ok := strings.Cut(method, "/")
	if !ok || svc == "" || name == "" {
		return fmt.Errorf("grpc method %q: want pkg.Service/Method", x.Method)
	}
	x.Method = "/" + method
	var files resolver
	var err error
	if len(x.ProtoFiles) > 0 {
		files, err = compileProtos(ctx, x.ProtoFiles, x.ImportPaths)
	} else {
		files, err = reflectFiles(ctx, target, svc)
	}
	if err != nil {
		return err
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return fmt.Errorf("grpc service %s: %w", svc, err)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return fmt.Errorf("grpc service %s: %s is not a service", svc, d.FullName())
	}
	if x.desc = sd.Methods().ByName(protoreflect.Name(name)); x.desc == nil {
		return fmt.Errorf("grpc service %s has no method %s", svc, name)
	}
	x.sdesc = grpc.StreamDesc{StreamName: name, ServerStreams: x.desc.IsStreamingServer(), ClientStreams: x.desc.IsStreamingClient()}
	msgs := x.Messages
	if len(msgs) == 0 {
		msgs = []string{"{}"}
	}
	if !x.desc.IsStreamingClient() {
		msgs = msgs[:1]
	}
	x.wire = nil
	for _, js := range msgs {
		m := dynamicpb.NewMessage(x.desc.Input())
		if err := protojson.Unmarshal([]byte(js), m); err != nil {
			return fmt.Errorf("grpc message for %s: %w", x.desc.Input().FullName(), err)
		}
		b, err := proto.Marshal(m)
		if err != nil {
			return fmt.Errorf("grpc message for %s: %w", x.desc.Input().FullName(), err)
		}
		x.wire = append(x.wire, b)
	}
	x.md = metadata.MD{}
	for _, kv := range x.Metadata {
		k, v, ok := strings.Cut(kv, ":")
		if !ok {
			return fmt.Errorf("grpc metadata %q: want \"key: value\"", kv)
		}
		x.md.Append(strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v))
	}
	return nil
}

// SplitGRPCMessages reads -body for a gRPC call: one JSON message, or a
// JSON array of them (a client stream's).
func SplitGRPCMessages(body string) ([]string, error) {
	body = strings.TrimSpace(body)
	if body == "" {
		return nil, nil
	}
	if !strings.HasPrefix(body, "[") {
		return []string{body}, nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		return nil, fmt.Errorf("grpc messages: %w", err)
	}
	out := make([]string, len(raw))
	for i, r := range raw {
		out[i] = string(r)
	}
	return out, nil
}

// resolver finds descriptors by full name.
type resolver interface {
	FindDescriptorByName(protoreflect.FullName) (protoreflect.Descriptor, error)
}

// compileProtos compiles .proto files with protocompile (pure Go); the
// well-known types are built in.
func compileProtos(ctx context.Context, files, importPaths []string) (resolver, error) {
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: importPaths})}
	linked, err := c.Compile(ctx, files...)
	if err != nil {
		return nil, fmt.Errorf("compiling %s: %w", strings.Join(files, ", "), err)
	}
	return linked.AsResolver(), nil
}

// reflectFiles asks target's reflection service (v1) for the file that
// defines service and every file it imports.
func reflectFiles(ctx context.Context, t target, service string) (resolver, error) {
	cc, err := dialGRPC(t)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	stream, err := rpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("grpc reflection on %s: %w", t.addr, err)
	}
	defer func() { _ = stream.CloseSend() }()
	got := map[string]*descriptorpb.FileDescriptorProto{}
	ask := func(req *rpb.ServerReflectionRequest) error {
		if err := stream.Send(req); err != nil {
			return fmt.Errorf("grpc reflection on %s: %w", t.addr, err)
		}
		resp, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("grpc reflection on %s: %w", t.addr, err)
		}
		if e := resp.GetErrorResponse(); e != nil {
			return fmt.Errorf("grpc reflection on %s: %s", t.addr, e.GetErrorMessage())
		}
		for _, b := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
			fd := new(descriptorpb.FileDescriptorProto)
			if err := proto.Unmarshal(b, fd); err != nil {
				return fmt.Errorf("grpc reflection on %s: %w", t.addr, err)
			}
			got[fd.GetName()] = fd
		}
		return nil
	}
	if err := ask(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: service}}); err != nil {
		return nil, err
	}
	// Servers send the imports along, or not: ask for the missing ones,
	// and take the well-known types from the ones compiled in.
	for asked := map[string]bool{}; ; {
		var missing string
		for _, fd := range got {
			for _, dep := range fd.GetDependency() {
				if got[dep] == nil && !asked[dep] {
					missing = dep
				}
			}
		}
		if missing == "" {
			break
		}
		asked[missing] = true
		if d, err := protoregistry.GlobalFiles.FindFileByPath(missing); err == nil {
			got[missing] = protodesc.ToFileDescriptorProto(d)
			continue
		}
		if err := ask(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileByFilename{FileByFilename: missing}}); err != nil {
			return nil, err
		}
	}
	set := &descriptorpb.FileDescriptorSet{}
	for _, fd := range got {
		set.File = append(set.File, fd)
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		return nil, fmt.Errorf("grpc reflection on %s: %w", t.addr, err)
	}
	return files, nil
}

// dialGRPC makes a client connection to t (it connects lazily).
func dialGRPC(t target) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if t.tls != nil {
		cfg := t.tls.Clone()
		cfg.NextProtos = []string{"h2"}
		creds = credentials.NewTLS(cfg)
	}
	cc, err := grpc.NewClient(t.addr, grpc.WithTransportCredentials(creds), grpc.WithAuthority(string(t.host)))
	if err != nil {
		return nil, fmt.Errorf("grpc %s: %w", t.addr, err)
	}
	return cc, nil
}

// grpcConn returns the worker's client connection to target t, made on
// first use.
func (w *worker) grpcConn(t int) (*grpc.ClientConn, error) {
	if w.grpc == nil {
		w.grpc = make([]*grpc.ClientConn, len(w.r.targets))
	}
	if cc := w.grpc[t]; cc != nil {
		return cc, nil
	}
	cc, err := dialGRPC(w.r.targets[t])
	if err != nil {
		return nil, err
	}
	w.grpc[t] = cc
	return cc, nil
}

// connectGRPC connects the worker to target t before the run starts.
func (w *worker) connectGRPC(t int) {
	if cc, err := w.grpcConn(t); err == nil {
		cc.Connect()
	}
}

// rawCodec sends and receives messages already encoded: the run encodes
// its messages once, and decodes answers only for the checks.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	p := v.(*[]byte)
	*p = append((*p)[:0], data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

var grpcRaw = grpc.ForceCodec(rawCodec{})

// doGRPC makes one call on the worker's connection to target t. The
// status is left in w.grpcCode; with checks, the answer's JSON in
// w.resp's body.
func (w *worker) doGRPC(ctx context.Context, t int, x *GRPCExchange, decode bool) error {
	cc, err := w.grpcConn(t)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, w.r.opts.Timeout)
	defer cancel()
	if len(x.md) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, x.md)
	}
	w.grpcOut = w.grpcOut[:0]
	if !x.sdesc.ServerStreams && !x.sdesc.ClientStreams {
		out := w.grpcBuf[:0] // the answer's room, kept from call to call
		err = cc.Invoke(ctx, x.Method, &x.wire[0], &out, grpcRaw)
		w.grpcBuf = out
		if err == nil {
			w.grpcOut = append(w.grpcOut, out)
		}
	} else {
		err = w.grpcStream(ctx, cc, x)
	}
	st := status.Convert(err)
	w.grpcCode = st.Code()
	if decode {
		w.grpcBody(x)
	}
	if st.Code() != x.Expect {
		if st.Code() == codes.DeadlineExceeded {
			return fmt.Errorf("grpc: %w", context.DeadlineExceeded)
		}
		return &grpcStatusError{got: st.Code(), want: x.Expect, msg: st.Message()}
	}
	return nil
}

// grpcStream makes a streaming call: every message sent, then every
// answer read.
func (w *worker) grpcStream(ctx context.Context, cc *grpc.ClientConn, x *GRPCExchange) error {
	s, err := cc.NewStream(ctx, &x.sdesc, x.Method, grpcRaw)
	if err != nil {
		return err
	}
	for i := range x.wire {
		if err := s.SendMsg(&x.wire[i]); err != nil {
			if errors.Is(err, io.EOF) {
				break // the server ended the call: RecvMsg has its status
			}
			return err
		}
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	for {
		var b []byte
		if err := s.RecvMsg(&b); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		w.grpcOut = append(w.grpcOut, b)
	}
}

// grpcBody puts the answers, as JSON, in w.resp's body for the checks:
// the message of a unary or client-streaming call, an array for a server
// stream.
func (w *worker) grpcBody(x *GRPCExchange) {
	w.resp.Reset()
	var parts []string
	for _, b := range w.grpcOut {
		m := dynamicpb.NewMessage(x.desc.Output())
		if proto.Unmarshal(b, m) != nil {
			continue
		}
		js, err := protojson.Marshal(m)
		if err != nil {
			continue
		}
		// protojson varies its spacing on purpose: compacted, the
		// answer reads the same to `body contains` from build to build.
		var b bytes.Buffer
		if json.Compact(&b, js) == nil {
			js = b.Bytes()
		}
		parts = append(parts, string(js))
	}
	if x.sdesc.ServerStreams {
		w.resp.SetBodyString("[" + strings.Join(parts, ",") + "]")
	} else if len(parts) > 0 {
		w.resp.SetBodyString(parts[len(parts)-1])
	}
}

// closeGRPC closes the worker's client connections.
func (w *worker) closeGRPC() {
	for _, cc := range w.grpc {
		if cc != nil {
			_ = cc.Close()
		}
	}
}
