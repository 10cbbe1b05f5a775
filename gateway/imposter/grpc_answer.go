package imposter

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/riftgate/riftgate/gateway/grpcproto"
	"github.com/riftgate/riftgate/gateway/message"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
)

// A gRPC imposter's response object (an `is`, what an inject returns,
// what a proxy records) is JSON, held whole in message.Response.Body as a
// ws imposter's is, so that behaviors replace tokens in every string of
// it. Its fields, mountebank-grpc's (docs/grpc.md):
//
//	value     the message, in protobuf's JSON mapping; for a method that
//	          streams its answer, an array of messages (an object is one)
//	metadata  {initial: {...}, trailing: {...}}: header and trailer
//	          metadata, each value a string or an array of strings
//	          (base64 for a key ending in -bin)
//	error     {status, message, details}: the call fails with status (a
//	          code's name, OUT_OF_RANGE, or its number), after the
//	          messages of value for a stream; details are google.rpc
//	          Any messages in JSON ({"@type": ..., ...})
type grpcAnswer struct {
	values  []json.RawMessage
	header  metadata.MD
	trailer metadata.MD
	st      *status.Status // nil: OK
	// enc caches values encoded per method (*grpcproto.Method), for an
	// answer that is compiled once and given many times.
	enc sync.Map
}

// grpcEncoded is an answer's values encoded for one method.
type grpcEncoded struct {
	frames []grpcproto.Frame
	err    error
}

// maxGRPCMessages bounds the messages one answer streams.
const maxGRPCMessages = 100000

// grpcAnswerOf compiles a response object against set (which an error's
// details may name types of). An empty object answers an empty message.
func grpcAnswerOf(set *grpcproto.Set, obj []byte) (*grpcAnswer, error) {
	a := &grpcAnswer{}
	if len(bytes.TrimSpace(obj)) == 0 {
		return a, nil
	}
	m, err := message.Members(obj, "value", "metadata", "error")
	if err != nil {
		return nil, fmt.Errorf("a grpc response must be an object: %w", err)
	}
	if v := bytes.TrimSpace(m[0]); len(v) > 0 && !isNull(v) {
		if v[0] == '[' {
			if err := json.Unmarshal(v, &a.values); err != nil {
				return nil, fmt.Errorf("'value' must be a message or an array of messages: %w", err)
			}
			if len(a.values) > maxGRPCMessages {
				return nil, fmt.Errorf("'value' holds more than %d messages", maxGRPCMessages)
			}
		} else {
			a.values = []json.RawMessage{v}
		}
		for _, v := range a.values {
			if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '{' {
				return nil, errors.New("each message of 'value' must be a JSON object")
			}
		}
	}
	if md := m[1]; len(md) > 0 && !isNull(md) {
		mm, err := message.Members(md, "initial", "trailing")
		if err != nil {
			return nil, errors.New("'metadata' must be an object: {initial, trailing}")
		}
		if a.header, err = grpcMetadata(mm[0]); err != nil {
			return nil, fmt.Errorf("metadata.initial: %w", err)
		}
		if a.trailer, err = grpcMetadata(mm[1]); err != nil {
			return nil, fmt.Errorf("metadata.trailing: %w", err)
		}
	}
	if e := m[2]; len(e) > 0 && !isNull(e) {
		if a.st, err = grpcStatus(set, e); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// grpcMetadata reads a metadata object: each value a string, a number or
// an array of them; a key ending in -bin holds base64, sent as its bytes.
func grpcMetadata(raw json.RawMessage) (metadata.MD, error) {
	if len(raw) == 0 || isNull(raw) {
		return nil, nil
	}
	kvs, err := message.ReadMultiMap(raw)
	if err != nil {
		return nil, err
	}
	md := metadata.MD{}
	for _, kv := range kvs {
		k := strings.ToLower(kv.Name)
		if err := checkMetadataKey(k); err != nil {
			return nil, err
		}
		v := kv.Value
		if strings.HasSuffix(k, "-bin") {
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				if b, err = base64.RawStdEncoding.DecodeString(v); err != nil {
					return nil, fmt.Errorf("%s: a -bin value must be base64", k)
				}
			}
			v = string(b)
		}
		md[k] = append(md[k], v)
	}
	return md, nil
}

// checkMetadataKey refuses what gRPC keeps for itself or cannot send.
func checkMetadataKey(k string) error {
	if k == "" || strings.HasPrefix(k, "grpc-") || strings.HasPrefix(k, ":") {
		return fmt.Errorf("%q is not a metadata key a server may set", k)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%q is not a valid metadata key", k)
		}
	}
	return nil
}

// grpcStatus reads an error object: {status, message, details}.
func grpcStatus(set *grpcproto.Set, raw json.RawMessage) (*status.Status, error) {
	m, err := message.Members(raw, "status", "message", "details")
	if err != nil {
		return nil, errors.New("'error' must be an object: {status, message, details}")
	}
	code := codes.Unknown
	if s := bytes.TrimSpace(m[0]); len(s) > 0 && !isNull(s) {
		if s[0] == '"' {
			var name string
			_ = json.Unmarshal(s, &name)
			s = []byte(`"` + strings.ToUpper(strings.TrimSpace(name)) + `"`)
			if n, ok := message.WholeNumber(json.RawMessage(`"` + name + `"`)); ok {
				s = []byte(fmt.Sprint(n))
			}
		}
		if err := code.UnmarshalJSON(s); err != nil {
			return nil, fmt.Errorf("error.status: %s is no gRPC status (a name such as NOT_FOUND, or a number from 0 to 16)", s)
		}
	}
	p := &spb.Status{Code: int32(code)}
	if len(m[1]) > 0 && !isNull(m[1]) {
		p.Message = jsString(m[1])
	}
	if d := m[2]; len(d) > 0 && !isNull(d) {
		var list []json.RawMessage
		if err := json.Unmarshal(d, &list); err != nil {
			return nil, errors.New("error.details must be an array of messages, each with its @type")
		}
		for i, e := range list {
			a := &anypb.Any{}
			if err := (protojson.UnmarshalOptions{Resolver: set.Resolver()}).Unmarshal(e, a); err != nil {
				return nil, fmt.Errorf("error.details[%d]: %s", i, grpcproto.ErrorText(err))
			}
			p.Details = append(p.Details, a)
		}
	}
	if code == codes.OK {
		return nil, nil // an OK status is no error: the answer is its messages
	}
	return status.FromProto(p), nil
}

// frames encodes the answer's messages for m, once per method.
func (a *grpcAnswer) frames(set *grpcproto.Set, m *grpcproto.Method) ([]grpcproto.Frame, error) {
	if len(a.values) == 0 {
		return nil, nil
	}
	if e, ok := a.enc.Load(m); ok {
		e := e.(*grpcEncoded)
		return e.frames, e.err
	}
	e := &grpcEncoded{}
	for _, v := range a.values {
		b, err := set.FromJSON(m.Out, v)
		if err != nil {
			e.frames, e.err = nil, err
			break
		}
		e.frames = append(e.frames, b)
	}
	a.enc.Store(m, e)
	return e.frames, e.err
}
