package imposter

import (
	"context"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/grpcproto"
	"google.golang.org/grpc/codes"
)

func greeterSet(t testing.TB) *grpcproto.Set {
	t.Helper()
	s, err := grpcproto.Compile(context.Background(), []grpcproto.Source{{Service: "riftgate.test.Greeter", File: "greeter.proto"}},
		[]string{"../../internal/grpctest/greeterpb"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGRPCAnswerOf(t *testing.T) {
	set := greeterSet(t)
	unary := set.Method("/riftgate.test.Greeter/SayHello")
	for _, tc := range []struct {
		name, obj string
		frames    int
		code      codes.Code
		err       string
	}{
		{"empty", ``, 0, codes.OK, ""},
		{"one message", `{"value": {"id": 1}}`, 1, codes.OK, ""},
		{"a stream", `{"value": [{"id": 1}, {"id": 2}]}`, 2, codes.OK, ""},
		{"status by name", `{"error": {"status": "not_found", "message": "x"}}`, 0, codes.NotFound, ""},
		{"status by number", `{"error": {"status": 11}}`, 0, codes.OutOfRange, ""},
		{"status as a numeric string", `{"error": {"status": "14"}}`, 0, codes.Unavailable, ""},
		{"no status is UNKNOWN", `{"error": {"message": "x"}}`, 0, codes.Unknown, ""},
		{"OK is no error", `{"error": {"status": "OK"}, "value": {"id": 3}}`, 1, codes.OK, ""},
		{"details", `{"error": {"status": 3, "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{"field": "name"}]}]}}`, 0, codes.InvalidArgument, ""},
		{"metadata", `{"metadata": {"initial": {"a": ["1", "2"], "b-bin": "AAE="}, "trailing": {"c": 3}}}`, 0, codes.OK, ""},
		{"not an object", `[1]`, 0, codes.OK, "must be an object"},
		{"a value that is no message", `{"value": "text"}`, 0, codes.OK, "JSON object"},
		{"bad status", `{"error": {"status": "NOPE"}}`, 0, codes.OK, "no gRPC status"},
		{"status out of range", `{"error": {"status": 99}}`, 0, codes.OK, "no gRPC status"},
		{"unknown detail type", `{"error": {"status": 3, "details": [{"@type": "type.googleapis.com/x.Y"}]}}`, 0, codes.OK, "details[0]"},
		{"reserved key", `{"metadata": {"initial": {"grpc-message": "x"}}}`, 0, codes.OK, "not a metadata key"},
		{"bad key", `{"metadata": {"trailing": {"a b": "x"}}}`, 0, codes.OK, "not a valid metadata key"},
		{"bad -bin", `{"metadata": {"initial": {"k-bin": "%%%"}}}`, 0, codes.OK, "base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := grpcAnswerOf(set, []byte(tc.obj))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := a.st.Code(); got != tc.code {
				t.Fatalf("code %v, want %v", got, tc.code)
			}
			frames, err := a.frames(set, unary)
			if err != nil || len(frames) != tc.frames {
				t.Fatalf("frames %d %v", len(frames), err)
			}
		})
	}
	a, _ := grpcAnswerOf(set, []byte(`{"metadata": {"initial": {"b-bin": "AAE="}}}`))
	if got := a.header.Get("b-bin"); len(got) != 1 || got[0] != "\x00\x01" {
		t.Fatalf("-bin metadata %q", got)
	}
	// A value that does not fit the method's output fails when it is
	// encoded, once per method.
	a, _ = grpcAnswerOf(set, []byte(`{"value": {"nope": 1}}`))
	if _, err := a.frames(set, unary); err == nil {
		t.Fatal("an unknown field encoded")
	}
}

// FuzzGRPCAnswer: no response object crashes the compiler or the
// encoder.
func FuzzGRPCAnswer(f *testing.F) {
	set := greeterSet(f)
	m := set.Method("/riftgate.test.Greeter/SayHellos")
	for _, s := range []string{`{"value": [{"id": 1}]}`, `{"error": {"status": "NOT_FOUND", "details": []}}`,
		`{"metadata": {"initial": {"a-bin": "AA=="}}}`, `{}`, `[`, `{"value": {"at": "2026-01-01T00:00:00Z"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		a, err := grpcAnswerOf(set, obj)
		if err != nil {
			return
		}
		_, _ = a.frames(set, m)
	})
}
