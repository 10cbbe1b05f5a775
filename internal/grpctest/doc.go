// Package grpctest holds what the gRPC imposter tests share: the Greeter
// service they call (greeterpb, generated from greeterpb/greeter.proto
// with protoc, protoc-gen-go and protoc-gen-go-grpc), and a real grpc-go
// server of it, the upstream of proxy tests and the limit of benchmarks.
package grpctest

//go:generate protoc -I greeterpb --go_out=greeterpb --go_opt=paths=source_relative --go-grpc_out=greeterpb --go-grpc_opt=paths=source_relative greeterpb/greeter.proto
