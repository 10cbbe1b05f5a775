package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/riftgate/riftgate/gateway/grpcproto"
	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// grpcUpstream proxies a grpc imposter's calls to a gRPC server: `to` is
// grpc://host:port (plaintext, h2c) or grpcs://host:port (TLS; as mb's
// proxies, the upstream's certificate is not verified). A call goes up
// with the client's metadata and messages, and what comes back (messages,
// header and trailer metadata, the status and its details) is a response
// object, recorded as an `is`. A bidi stream's message is proxied as a
// call of its own: the message up, the upstream's answers to it down.
type grpcUpstream struct {
	to   string
	addr string // "" when `to` is no grpc URL
	tls  bool
	f    *Factory
	imp  *imposter.Imposter
	set  *grpcproto.Set
}

func (f *Factory) newGRPC(s spec, raw json.RawMessage, imp *imposter.Imposter) (imposter.Responder, error) {
	u, err := streamUpstream(s, raw)
	if err != nil {
		return nil, err
	}
	p, err := f.responder(s, raw)
	if err != nil {
		return nil, err
	}
	up := &grpcUpstream{to: s.To, f: f, imp: imp, set: imp.Spec().GRPC}
	switch u.Scheme {
	case "grpc", "http", "h2c":
		up.addr = u.Host
	case "grpcs", "https":
		up.addr, up.tls = u.Host, true
	}
	p.up = up
	return p, nil
}

// conn is the factory's client connection to the upstream, shared by
// every stub that proxies there and closed with the factory.
func (g *grpcUpstream) conn() (*grpc.ClientConn, error) {
	key := "grpc|" + strconv.FormatBool(g.tls) + "|" + g.addr
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	if cc := g.f.grpcConns[key]; cc != nil {
		return cc, nil
	}
	creds := insecure.NewCredentials()
	if g.tls {
		creds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // mb's proxies do not verify
	}
	cc, err := grpc.NewClient(g.addr, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(grpcproto.Codec{}), grpc.MaxCallRecvMsgSize(grpcMaxAnswer)))
	if err != nil {
		return nil, err
	}
	if g.f.grpcConns == nil {
		g.f.grpcConns = map[string]*grpc.ClientConn{}
	}
	g.f.grpcConns[key] = cc
	return cc, nil
}

// grpcMaxAnswer bounds one message from the upstream.
const grpcMaxAnswer = 16 << 20

// grpcOwnMetadata is metadata grpc-go sets on a call itself.
var grpcOwnMetadata = []string{"content-type", "user-agent", "te", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding"}

func (g *grpcUpstream) call(ctx context.Context, c *imposter.Call) (json.RawMessage, error) {
	r := c.Request
	if g.addr == "" {
		return nil, mberr.New(mberr.InvalidProxy, "Unable to proxy to any protocol other than grpc or grpcs").WithSource(g.to)
	}
	m := g.set.Method(r.Path)
	if m == nil {
		return nil, mberr.New(mberr.InvalidProxy, "no method "+r.Path)
	}
	cc, err := g.conn()
	if err != nil {
		return nil, mberr.New(mberr.InvalidProxy, "Unable to connect to "+strconv.Quote(g.to)+": "+err.Error())
	}
	// The messages to send: a client stream's value is their array.
	var values []json.RawMessage
	if !m.ClientStream || m.ServerStream {
		values = []json.RawMessage{json.RawMessage(r.Body)}
	} else {
		// Into a fresh slice: a RawMessage decoded into would reuse, and
		// overwrite, the request's own bytes.
		if err := json.Unmarshal(r.Body, &values); err != nil {
			return nil, mberr.New(mberr.InvalidProxy, "a client stream's value must be an array: "+err.Error())
		}
	}
	md := metadata.MD{}
	for _, kv := range r.Headers {
		k := strings.ToLower(kv.Name)
		if slices.Contains(grpcOwnMetadata, k) || strings.HasPrefix(k, ":") {
			continue
		}
		v := kv.Value
		if strings.HasSuffix(k, "-bin") {
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				continue
			}
			v = string(b)
		}
		md[k] = append(md[k], v)
	}
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(ctx, md), g.f.timeout())
	defer cancel()
	start := time.Now()
	var header, trailer metadata.MD
	s, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, r.Path,
		grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil {
		return nil, g.unreachable(err)
	}
	for _, v := range values {
		f, err := g.set.FromJSON(m.In, v)
		if err != nil {
			return nil, mberr.New(mberr.InvalidProxy, "the request is not a "+string(m.In.FullName())+": "+err.Error())
		}
		frame := grpcproto.Frame(f)
		if err := s.SendMsg(&frame); err != nil {
			break // the status comes with RecvMsg
		}
	}
	_ = s.CloseSend()
	var answers []json.RawMessage
	var callErr error
	for {
		var f grpcproto.Frame
		if err := s.RecvMsg(&f); err != nil {
			if !errors.Is(err, io.EOF) {
				callErr = err
			}
			break
		}
		js, err := g.set.ToJSON(m.Out, f)
		if err != nil {
			return nil, mberr.New(mberr.InvalidProxy, "the upstream's answer is not a "+string(m.Out.FullName())+": "+err.Error())
		}
		answers = append(answers, js)
	}
	st := status.Convert(callErr)
	if callErr != nil && len(answers) == 0 && header == nil && isTransport(callErr) {
		return nil, g.unreachable(callErr)
	}
	return g.isObject(m, answers, header, trailer, st, time.Since(start).Milliseconds()), nil
}

// isTransport reports a call that never reached the upstream's handler.
func isTransport(err error) bool {
	st := status.Convert(err)
	return st.Code().String() == "Unavailable" && strings.Contains(st.Message(), "connection")
}

func (g *grpcUpstream) unreachable(err error) error {
	return mberr.New(mberr.InvalidProxy, "Unable to connect to "+strconv.Quote(g.to)+": "+status.Convert(err).Message())
}

// isObject renders what the upstream answered as a response object.
func (g *grpcUpstream) isObject(m *grpcproto.Method, answers []json.RawMessage, header, trailer metadata.MD, st *status.Status, ms int64) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{`)
	if m.ServerStream {
		b.WriteString(`"value":[`)
		for i, a := range answers {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(a)
		}
		b.WriteString(`]`)
	} else if len(answers) > 0 {
		b.WriteString(`"value":`)
		b.Write(answers[0])
	}
	h, t := mdJSON(header, "content-type"), mdJSON(trailer)
	if h != nil || t != nil {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(`"metadata":{`)
		if h != nil {
			b.WriteString(`"initial":`)
			b.Write(h)
		}
		if t != nil {
			if h != nil {
				b.WriteByte(',')
			}
			b.WriteString(`"trailing":`)
			b.Write(t)
		}
		b.WriteString(`}`)
	}
	if st.Code() != 0 {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(`"error":{"status":`)
		b.Write(message.AppendJSONString(nil, codeName(st)))
		b.WriteString(`,"message":`)
		b.Write(message.AppendJSONString(nil, st.Message()))
		if d := st.Proto().GetDetails(); len(d) > 0 {
			var list []json.RawMessage
			for _, a := range d {
				js, err := protojson.MarshalOptions{Resolver: g.set.Resolver()}.Marshal(a)
				if err == nil {
					list = append(list, js)
				}
			}
			if len(list) > 0 {
				dj, _ := json.Marshal(list)
				b.WriteString(`,"details":`)
				b.Write(dj)
			}
		}
		b.WriteString(`}`)
	}
	if b.Len() > 1 {
		b.WriteByte(',')
	}
	b.WriteString(`"_proxyResponseTime":`)
	b.WriteString(strconv.FormatInt(ms, 10))
	b.WriteString(`}`)
	return b.Bytes()
}

// codeName is a status code's name as the gRPC spec spells it
// (NOT_FOUND), which an `is` error reads back.
func codeName(st *status.Status) string {
	if c := int(st.Code()); c < len(codeNames) {
		return codeNames[c]
	}
	return strconv.Itoa(int(st.Code()))
}

var codeNames = []string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
	"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

// mdJSON renders metadata as an object (keys sorted, -bin values as
// base64), without grpc-go's own keys and skip; nil when nothing is left.
func mdJSON(md metadata.MD, skip ...string) []byte {
	var keys []string
	for k := range md {
		if !strings.HasPrefix(k, "grpc-") && !strings.HasPrefix(k, ":") && !slices.Contains(skip, k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	var kvs []message.KV
	for _, k := range keys {
		for _, v := range md[k] {
			if strings.HasSuffix(k, "-bin") {
				v = base64.StdEncoding.EncodeToString([]byte(v))
			}
			kvs = append(kvs, message.KV{Name: k, Value: v})
		}
	}
	var b bytes.Buffer
	message.WriteMultiMap(&b, kvs)
	return b.Bytes()
}

func (g *grpcUpstream) response(is json.RawMessage) (*message.Response, error) {
	return g.imp.BuildResponse(is)
}

func (g *grpcUpstream) isJSON(r *message.Response, orig json.RawMessage) json.RawMessage {
	again, err := g.response(orig)
	if err == nil && bytes.Equal(again.Body, r.Body) {
		return orig
	}
	return r.Body // behaviors rewrote it: their object is what is recorded
}
