package grpcproto

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"
	v1reflectiongrpc "google.golang.org/grpc/reflection/grpc_reflection_v1"
	v1alphareflectiongrpc "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Frame is one message as it crossed the wire, undecoded: the imposter's
// one handler reads and writes Frames for every method, and decodes them
// with the method's types itself.
type Frame []byte

// Codec passes Frames through as they are and encodes the generated
// messages of the services grpc-go runs itself (reflection) as protobuf
// does. It is forced on the server, so it serves whatever content-subtype
// a client names.
type Codec struct{}

// Marshal encodes v.
func (Codec) Marshal(v any) ([]byte, error) {
	switch v := v.(type) {
	case *Frame:
		return *v, nil
	case Frame:
		return v, nil
	case proto.Message:
		return proto.Marshal(v)
	}
	return nil, fmt.Errorf("grpcproto: cannot encode %T", v)
}

// Unmarshal decodes data into v; a Frame gets its own copy, as grpc-go
// reuses data's buffer.
func (Codec) Unmarshal(data []byte, v any) error {
	switch v := v.(type) {
	case *Frame:
		*v = append((*v)[:0], data...)
		return nil
	case proto.Message:
		return proto.Unmarshal(data, v)
	}
	return fmt.Errorf("grpcproto: cannot decode into %T", v)
}

// Name is the codec's content-subtype.
func (Codec) Name() string { return "proto" }

// reflectionNames are the reflection services' own, which are listed with
// the set's.
var reflectionNames = []string{"grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}

// GetServiceInfo lists the set's services (and reflection's), as
// reflection's ServiceInfoProvider: the names are what it needs.
func (s *Set) GetServiceInfo() map[string]grpc.ServiceInfo {
	out := make(map[string]grpc.ServiceInfo, len(s.services)+len(reflectionNames))
	for _, n := range s.services {
		out[n] = grpc.ServiceInfo{}
	}
	for _, n := range reflectionNames {
		out[n] = grpc.ServiceInfo{}
	}
	return out
}

// extensions answers reflection's questions about extensions from the
// set's types.
type extensions struct{ s *Set }

func (e extensions) FindExtensionByName(n protoreflect.FullName) (protoreflect.ExtensionType, error) {
	return e.s.types.FindExtensionByName(n)
}

func (e extensions) FindExtensionByNumber(m protoreflect.FullName, f protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	return e.s.types.FindExtensionByNumber(m, f)
}

func (e extensions) RangeExtensionsByMessage(m protoreflect.FullName, f func(protoreflect.ExtensionType) bool) {
	e.s.types.RangeExtensionsByMessage(m, f)
}

// RegisterReflection registers server reflection (v1 and v1alpha) on srv,
// answering from the set's descriptors: the set's services, not srv's,
// whose one handler serves every method.
func (s *Set) RegisterReflection(srv *grpc.Server) {
	opts := reflection.ServerOptions{Services: s, DescriptorResolver: reflectionFiles{s}, ExtensionResolver: extensions{s}}
	v1reflectiongrpc.RegisterServerReflectionServer(srv, reflection.NewServerV1(opts))
	v1alphareflectiongrpc.RegisterServerReflectionServer(srv, reflection.NewServer(opts))
}

// reflectionFiles finds files and names among the set's, then the
// reflection service's own (which the set does not declare).
type reflectionFiles struct{ s *Set }

func (r reflectionFiles) FindFileByPath(p string) (protoreflect.FileDescriptor, error) {
	if f, err := r.s.files.FindFileByPath(p); err == nil {
		return f, nil
	}
	return protoregistry.GlobalFiles.FindFileByPath(p)
}

func (r reflectionFiles) FindDescriptorByName(n protoreflect.FullName) (protoreflect.Descriptor, error) {
	if d, err := r.s.files.FindDescriptorByName(n); err == nil {
		return d, nil
	}
	return protoregistry.GlobalFiles.FindDescriptorByName(n)
}
