package imposter

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/riftgate/riftgate/gateway/grpcproto"
	"github.com/riftgate/riftgate/gateway/mberr"
)

// grpcFields are the imposter fields a grpc imposter reads besides mb's:
// mountebank-grpc's services and options, and riftgate's protoset.
var grpcFields = set("services", "options", "protoset")

// grpcIsFields are the fields of a grpc response object (grpc_answer.go).
var grpcIsFields = set("value", "metadata", "error")

// grpcCompileTimeout bounds compiling an imposter's .proto files.
const grpcCompileTimeout = 30 * time.Second

// IsGRPC reports whether the imposter speaks gRPC.
func (s *Spec) IsGRPC() bool { return s.Protocol == "grpc" }

// parseGRPC compiles a grpc imposter's services: the .proto files its
// `services` name, found in `options.protobufjs.includeDirs` (mountebank-
// grpc's shape), or a base64 FileDescriptorSet in `protoset`. A file that
// does not compile is refused with the compiler's message.
func parseGRPC(s *Spec, obj object) error {
	services, protoset := obj.get("services"), obj.get("protoset")
	var err error
	switch {
	case truthy(protoset):
		var b64 string
		if json.Unmarshal(protoset, &b64) != nil {
			return mberr.New(mberr.BadData, "'protoset' must be a base64 string (a serialized FileDescriptorSet)")
		}
		raw, derr := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		if derr != nil {
			return mberr.New(mberr.BadData, "'protoset' is not base64: "+derr.Error())
		}
		if s.GRPC, err = grpcproto.FromDescriptorSet(raw); err != nil {
			return mberr.New(mberr.BadData, "invalid protoset: "+grpcproto.ErrorText(err))
		}
	case truthy(services):
		var svcs map[string]struct {
			File string `json:"file"`
		}
		if json.Unmarshal(services, &svcs) != nil || len(svcs) == 0 {
			return mberr.New(mberr.BadData, `'services' must be an object naming each service's file: {"pkg.Service": {"file": "service.proto"}}`).WithSource(services)
		}
		var srcs []grpcproto.Source
		for name, v := range svcs {
			srcs = append(srcs, grpcproto.Source{Service: name, File: v.File})
		}
		sort.Slice(srcs, func(i, j int) bool { return srcs[i].Service < srcs[j].Service })
		dirs, derr := includeDirs(obj.get("options"))
		if derr != nil {
			return derr
		}
		ctx, cancel := context.WithTimeout(context.Background(), grpcCompileTimeout)
		defer cancel()
		if s.GRPC, err = grpcproto.Compile(ctx, srcs, dirs); err != nil {
			return mberr.New(mberr.BadData, "cannot compile the services: "+grpcproto.ErrorText(err)).WithSource(services)
		}
	default:
		return mberr.New(mberr.BadData, "a grpc imposter needs 'services' (each with its .proto file) or 'protoset'")
	}
	return nil
}

// includeDirs reads options.protobufjs.includeDirs.
func includeDirs(options json.RawMessage) ([]string, error) {
	if !truthy(options) {
		return nil, nil
	}
	var o struct {
		Protobufjs struct {
			IncludeDirs []string `json:"includeDirs"`
		} `json:"protobufjs"`
	}
	d := json.NewDecoder(bytes.NewReader(options))
	if err := d.Decode(&o); err != nil {
		return nil, mberr.New(mberr.BadData, "'options.protobufjs.includeDirs' must be an array of directories: "+err.Error()).WithSource(options)
	}
	return o.Protobufjs.IncludeDirs, nil
}

// grpcIgnored drops the warnings about the fields of grpc response
// objects, which mb's `is` has not.
func grpcIgnored(fields []string) []string {
	var out []string
	for _, f := range fields {
		if i := strings.LastIndex(f, ".is."); i >= 0 && grpcIsFields[f[i+len(".is."):]] {
			continue
		}
		if strings.HasPrefix(f, "defaultResponse.") && grpcIsFields[f[len("defaultResponse."):]] {
			continue
		}
		out = append(out, f)
	}
	return out
}
