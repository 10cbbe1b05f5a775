package mbdatadir

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// writeJSON makes the folders a file needs, replaces a file whole, leaves
// no temporary file, and says when it cannot write.
func TestWriteJSON(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "2525", "stubs", "s1", "responses", "r1.json")
	for _, tt := range []struct{ raw, want string }{
		{`{"is":{"body":"a"}}`, "{\n  \"is\": {\n    \"body\": \"a\"\n  }\n}"},
		{`{"is":{}}`, "{\n  \"is\": {}\n}"}, // shorter: the old bytes are gone
	} {
		if err := writeJSON(path, []byte(tt.raw)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != tt.want {
			t.Fatalf("wrote %q (%v), want %q", got, err, tt.want)
		}
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left: %v", err)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o755&^umask(t) {
		t.Errorf("folder made as %v (%v)", fi.Mode(), err)
	}
	// A file where a folder must be: an error, not a panic or a silent loss.
	blocker := filepath.Join(root, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(filepath.Join(blocker, "meta.json"), []byte(`{}`)); err == nil {
		t.Error("wrote under a file")
	}
	if err := writeJSON(filepath.Join(root, "bad.json"), []byte(`{`)); err == nil {
		t.Error("wrote invalid JSON")
	}
}

// umask reads the process's umask by making a folder.
func umask(t *testing.T) os.FileMode {
	dir := filepath.Join(t.TempDir(), "probe")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	return 0o777 &^ fi.Mode().Perm()
}

// BenchmarkWriteStub writes a new recorded stub's folder: its response
// and its meta.json, as the mirror does for each proxyOnce recording.
func BenchmarkWriteStub(b *testing.B) {
	root := b.TempDir()
	resp := []byte(`{"is":{"statusCode":200,"headers":{"Content-Type":"text/plain"},"body":"hello"}}`)
	b.ResetTimer()
	for i := range b.N {
		st := &Stub{Dir: "stubs/s" + strconv.Itoa(i), Responses: []json.RawMessage{resp}, Files: []string{"responses/r0.json"}, Order: []int{0}}
		if err := WriteStub(root, 2525, st, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// readFile reads what os.ReadFile reads, whatever the size (around the
// room it leaves past the size included), and says a missing file is one.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{0, 1, 511, 512, 513, 4096, 70_000} {
		path := filepath.Join(dir, strconv.Itoa(n))
		want := make([]byte, n)
		for i := range want {
			want[i] = byte('a' + i%26)
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := readFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%d bytes: read %d bytes, %v", n, len(got), err)
		}
	}
	if _, err := readFile(filepath.Join(dir, "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
}
