// Package grpcproto is what a gRPC imposter knows of its services: the
// .proto files (or the descriptor set) it was made from, compiled once
// when the imposter is created, its methods by path, and the conversions
// between a message on the wire and protobuf's JSON mapping, which is how
// stubs, predicates, recordings and scripts see a message. It also serves
// gRPC server reflection from those descriptors, so that a client with no
// .proto file (grpcurl, Postman) can list and call the services.
package grpcproto

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	// The google.rpc error details (BadRequest, ErrorInfo...), known to
	// every imposter so that a status's details can name them without a
	// proto of their own.
	_ "google.golang.org/genproto/googleapis/rpc/errdetails"
)

// Set is an imposter's compiled services. It never changes once made, so
// any number of requests share it.
type Set struct {
	files    *protoregistry.Files
	types    *protoregistry.Types
	fds      *descriptorpb.FileDescriptorSet
	services []string
	methods  map[string]*Method
}

// Method is one method of a service, by its path ("/pkg.Service/Method").
type Method struct {
	Path         string
	Desc         protoreflect.MethodDescriptor
	In, Out      protoreflect.MessageDescriptor
	ClientStream bool
	ServerStream bool
	set          *Set
}

// Source names one service and the .proto file that declares it, as
// mountebank-grpc's `services` object does.
type Source struct {
	Service string
	File    string
}

// Compile compiles the .proto files of sources, looking imports (and the
// files themselves) up in includeDirs, or from the working directory when
// there are none, as protobufjs's includeDirs do; the well-known types
// (google/protobuf/*.proto) are built in. An error is the compiler's
// message, position and all.
func Compile(ctx context.Context, sources []Source, includeDirs []string) (*Set, error) {
	if len(sources) == 0 {
		return nil, errors.New("no services")
	}
	var files []string
	for _, s := range sources {
		if s.File == "" {
			return nil, fmt.Errorf("service %s names no file", s.Service)
		}
		if !slices.Contains(files, s.File) {
			files = append(files, s.File)
		}
	}
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: includeDirs}),
		// A service definition is all an imposter needs: no source
		// positions kept in memory.
		SourceInfoMode: protocompile.SourceInfoNone,
	}
	compiled, err := c.Compile(ctx, files...)
	if err != nil {
		return nil, err
	}
	fds := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	for _, f := range compiled {
		appendFile(fds, f, seen)
	}
	set, err := fromSet(fds)
	if err != nil {
		return nil, err
	}
	for _, s := range sources {
		if !slices.Contains(set.services, s.Service) {
			return nil, fmt.Errorf("service %s is not declared in %s", s.Service, s.File)
		}
	}
	return set, nil
}

// appendFile adds f and, before it, every file it imports, once each.
func appendFile(fds *descriptorpb.FileDescriptorSet, f protoreflect.FileDescriptor, seen map[string]bool) {
	if seen[f.Path()] {
		return
	}
	seen[f.Path()] = true
	imports := f.Imports()
	for i := range imports.Len() {
		appendFile(fds, imports.Get(i).FileDescriptor, seen)
	}
	fds.File = append(fds.File, protodesc.ToFileDescriptorProto(f))
}

// FromDescriptorSet reads a serialized FileDescriptorSet (what `protoc
// --descriptor_set_out --include_imports` writes): every service in it is
// served.
func FromDescriptorSet(b []byte) (*Set, error) {
	fds := &descriptorpb.FileDescriptorSet{}
	if err := proto.Unmarshal(b, fds); err != nil {
		return nil, fmt.Errorf("not a descriptor set: %w", err)
	}
	set, err := fromSet(fds)
	if err != nil {
		return nil, err
	}
	if len(set.services) == 0 {
		return nil, errors.New("the descriptor set declares no service")
	}
	return set, nil
}

func fromSet(fds *descriptorpb.FileDescriptorSet) (*Set, error) {
	files, err := protodesc.NewFiles(fds)
	if err != nil {
		return nil, fmt.Errorf("descriptor set: %w", err)
	}
	s := &Set{files: files, types: new(protoregistry.Types), fds: fds, methods: map[string]*Method{}}
	var regErr error
	files.RangeFiles(func(f protoreflect.FileDescriptor) bool {
		regErr = s.register(f)
		return regErr == nil
	})
	if regErr != nil {
		return nil, regErr
	}
	slices.Sort(s.services)
	return s, nil
}

// register adds f's types (for Any and extensions in JSON) and services.
func (s *Set) register(f protoreflect.FileDescriptor) error {
	if err := s.registerTypes(f.Messages(), f.Enums(), f.Extensions()); err != nil {
		return err
	}
	svcs := f.Services()
	for i := range svcs.Len() {
		sd := svcs.Get(i)
		s.services = append(s.services, string(sd.FullName()))
		ms := sd.Methods()
		for j := range ms.Len() {
			md := ms.Get(j)
			p := "/" + string(sd.FullName()) + "/" + string(md.Name())
			s.methods[p] = &Method{Path: p, Desc: md, In: md.Input(), Out: md.Output(),
				ClientStream: md.IsStreamingClient(), ServerStream: md.IsStreamingServer(), set: s}
		}
	}
	return nil
}

func (s *Set) registerTypes(ms protoreflect.MessageDescriptors, es protoreflect.EnumDescriptors, xs protoreflect.ExtensionDescriptors) error {
	for i := range es.Len() {
		if err := s.types.RegisterEnum(dynamicpb.NewEnumType(es.Get(i))); err != nil {
			return err
		}
	}
	for i := range xs.Len() {
		if err := s.types.RegisterExtension(dynamicpb.NewExtensionType(xs.Get(i))); err != nil {
			return err
		}
	}
	for i := range ms.Len() {
		m := ms.Get(i)
		if m.IsMapEntry() {
			continue
		}
		if err := s.types.RegisterMessage(dynamicpb.NewMessageType(m)); err != nil {
			return err
		}
		if err := s.registerTypes(m.Messages(), m.Enums(), m.Extensions()); err != nil {
			return err
		}
	}
	return nil
}

// Services lists the services' full names, sorted.
func (s *Set) Services() []string { return s.services }

// Method returns the method at path ("/pkg.Service/Method"), or nil.
func (s *Set) Method(path string) *Method { return s.methods[path] }

// DescriptorSet is the set as a serialized FileDescriptorSet, every
// import included.
func (s *Set) DescriptorSet() []byte {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(s.fds)
	return b
}

// resolver finds a message type named in JSON (an Any's @type) among the
// set's own, then the process's (google.protobuf's well-known types and
// google.rpc's details).
type resolver struct{ s *Set }

func (r resolver) FindMessageByName(n protoreflect.FullName) (protoreflect.MessageType, error) {
	if t, err := r.s.types.FindMessageByName(n); err == nil {
		return t, nil
	}
	return protoregistry.GlobalTypes.FindMessageByName(n)
}

func (r resolver) FindMessageByURL(url string) (protoreflect.MessageType, error) {
	if t, err := r.s.types.FindMessageByURL(url); err == nil {
		return t, nil
	}
	return protoregistry.GlobalTypes.FindMessageByURL(url)
}

func (r resolver) FindExtensionByName(n protoreflect.FullName) (protoreflect.ExtensionType, error) {
	if t, err := r.s.types.FindExtensionByName(n); err == nil {
		return t, nil
	}
	return protoregistry.GlobalTypes.FindExtensionByName(n)
}

func (r resolver) FindExtensionByNumber(m protoreflect.FullName, f protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	if t, err := r.s.types.FindExtensionByNumber(m, f); err == nil {
		return t, nil
	}
	return protoregistry.GlobalTypes.FindExtensionByNumber(m, f)
}

// Resolver resolves the types JSON may name (an Any's @type): the set's,
// then the process's.
func (s *Set) Resolver() interface {
	protoregistry.MessageTypeResolver
	protoregistry.ExtensionTypeResolver
} {
	return resolver{s}
}

// jsonOut is how a message is shown: field names as the .proto spells
// them and every field present, defaults included, as mountebank-grpc's
// loader (keepCase, defaults) shows them, so that a predicate on a
// field that holds its default still finds it.
func (s *Set) jsonOut() protojson.MarshalOptions {
	return protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true, Resolver: resolver{s}}
}

// ToJSON decodes a message of type md from the wire into protobuf's JSON
// mapping; bytes that are not such a message are an error.
func (s *Set) ToJSON(md protoreflect.MessageDescriptor, wire []byte) ([]byte, error) {
	m := dynamicpb.NewMessage(md)
	if err := (proto.UnmarshalOptions{Resolver: resolver{s}}).Unmarshal(wire, m); err != nil {
		return nil, err
	}
	js, err := s.jsonOut().Marshal(m)
	if err != nil {
		return nil, err
	}
	// protojson varies its whitespace on purpose; a recorded request and
	// a predicate on its text need one form.
	var b bytes.Buffer
	if err := json.Compact(&b, js); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// FromJSON encodes a JSON message of type md for the wire. Both the
// .proto's field names and their lowerCamelCase JSON names are read.
func (s *Set) FromJSON(md protoreflect.MessageDescriptor, js []byte) ([]byte, error) {
	m := dynamicpb.NewMessage(md)
	if err := (protojson.UnmarshalOptions{Resolver: resolver{s}}).Unmarshal(js, m); err != nil {
		return nil, fmt.Errorf("%s: %w", md.FullName(), err)
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}

// FindFileByPath and FindDescriptorByName make the set a
// protodesc.Resolver (reflection's).
func (s *Set) FindFileByPath(p string) (protoreflect.FileDescriptor, error) {
	return s.files.FindFileByPath(p)
}

// FindDescriptorByName finds a descriptor among the set's files.
func (s *Set) FindDescriptorByName(n protoreflect.FullName) (protoreflect.Descriptor, error) {
	return s.files.FindDescriptorByName(n)
}

// ErrorText is an error as a client is told it: one line.
func ErrorText(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
