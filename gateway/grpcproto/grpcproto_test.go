package grpcproto

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func greeter(t testing.TB) *Set {
	t.Helper()
	s, err := Compile(context.Background(), []Source{{Service: "riftgate.test.Greeter", File: "greeter.proto"}}, []string{"../../internal/grpctest/greeterpb"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCompile(t *testing.T) {
	s := greeter(t)
	if got := strings.Join(s.Services(), ","); got != "riftgate.test.Greeter" {
		t.Fatalf("services %s", got)
	}
	for _, tc := range []struct {
		path           string
		client, server bool
	}{
		{"/riftgate.test.Greeter/SayHello", false, false},
		{"/riftgate.test.Greeter/SayHellos", false, true},
		{"/riftgate.test.Greeter/CollectHellos", true, false},
		{"/riftgate.test.Greeter/Chat", true, true},
	} {
		m := s.Method(tc.path)
		if m == nil || m.ClientStream != tc.client || m.ServerStream != tc.server || m.In.FullName() != "riftgate.test.HelloRequest" {
			t.Fatalf("%s: %+v", tc.path, m)
		}
	}
	if s.Method("/riftgate.test.Greeter/Nope") != nil {
		t.Fatal("a method that does not exist")
	}
	// The set round-trips through its descriptor set, imports and all.
	again, err := FromDescriptorSet(s.DescriptorSet())
	if err != nil || again.Method("/riftgate.test.Greeter/Chat") == nil {
		t.Fatalf("from its own set: %v", err)
	}
}

func TestCompileErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("syntax.proto", "syntax = \"proto3\";\nmessage A { string x = 1 }\n")
	write("import.proto", "syntax = \"proto3\";\nimport \"missing.proto\";\n")
	write("type.proto", "syntax = \"proto3\";\nservice S { rpc M(Nope) returns (Nope); }\n")
	for _, tc := range []struct{ file, service, want string }{
		{"syntax.proto", "A", "syntax.proto:2:26: syntax error"},
		{"import.proto", "S", "missing.proto"},
		{"type.proto", "S", "type.proto:2:19: method S.M: unknown request type Nope"},
		{"none.proto", "S", "none.proto"},
	} {
		_, err := Compile(context.Background(), []Source{{Service: tc.service, File: tc.file}}, []string{dir})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.file, err, tc.want)
		}
	}
	if _, err := FromDescriptorSet([]byte("not a set")); err == nil {
		t.Fatal("garbage as a descriptor set")
	}
}

// The wire bytes and the JSON of a message, both ways: the JSON shows
// every field, defaults too, by its .proto name; both spellings are read.
func TestJSONGolden(t *testing.T) {
	s := greeter(t)
	in, out := s.Method("/riftgate.test.Greeter/SayHello").In, s.Method("/riftgate.test.Greeter/SayHello").Out
	wire, err := s.FromJSON(out, []byte(`{"id": "100", "message": "hi", "at": "2026-01-02T03:04:05Z", "mood": "HAPPY"}`))
	if err != nil {
		t.Fatal(err)
	}
	// id=100 (08 64), message "hi" (12 02 6869), at {seconds:
	// 1767323045} (1a 06 08 a5..06), mood HAPPY (20 01).
	const golden = "0864120268691a0608a5ebdcca062001"
	if got := hex.EncodeToString(wire); got != golden {
		t.Fatalf("wire %s, want %s", got, golden)
	}
	js, err := s.ToJSON(out, wire)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js, []byte(`"id":"100"`)) || !bytes.Contains(js, []byte(`"mood":"HAPPY"`)) || !bytes.Contains(js, []byte(`"at":"2026-01-02T03:04:05Z"`)) {
		t.Fatalf("json %s", js)
	}
	req, err := s.ToJSON(in, []byte{0x0a, 0x03, 'b', 'o', 'b'})
	if err != nil {
		t.Fatal(err)
	}
	if string(bytes.ReplaceAll(req, []byte(" "), nil)) != `{"name":"bob","count":0,"tags":[]}` {
		t.Fatalf("request json %s", req)
	}
	if _, err := s.ToJSON(in, []byte{0x0a, 0x09, 'x'}); err == nil {
		t.Fatal("a truncated message decoded")
	}
	if _, err := s.FromJSON(out, []byte(`{"nope": 1}`)); err == nil || !strings.Contains(err.Error(), "riftgate.test.HelloReply") {
		t.Fatalf("an unknown field: %v", err)
	}
}

// FuzzToJSON: no input crashes the decoder, and what decodes encodes
// back to a message that decodes to the same JSON.
func FuzzToJSON(f *testing.F) {
	s := greeter(f)
	md := s.Method("/riftgate.test.Greeter/SayHello").Out
	f.Add([]byte{0x08, 0x64, 0x12, 0x02, 'h', 'i'})
	f.Add([]byte{0x1a, 0x02, 0x08, 0x01})
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, wire []byte) {
		js, err := s.ToJSON(md, wire)
		if err != nil {
			return
		}
		again, err := s.FromJSON(md, js)
		if err != nil {
			t.Fatalf("%s does not encode: %v", js, err)
		}
		js2, err := s.ToJSON(md, again)
		if err != nil || !bytes.Equal(js, js2) {
			t.Fatalf("round trip %s -> %s (%v)", js, js2, err)
		}
	})
}

// FuzzDescriptorSet: no bytes crash the descriptor set reader.
func FuzzDescriptorSet(f *testing.F) {
	f.Add(greeter(f).DescriptorSet())
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := FromDescriptorSet(b)
		if err == nil && len(s.Services()) == 0 {
			t.Fatal("a set without services")
		}
	})
}
