package mbdatadir

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// sample is an imposter of two stubs, one cycling with a repeat, with
// fixed names so that its files are the same every time.
func sample(t *testing.T) (header json.RawMessage, stubs []*Stub) {
	t.Helper()
	header, err := Canonical(json.RawMessage(`{"protocol":"http","port":4545,"name":"<x>","stubs":[]}`), "stubs")
	if err != nil {
		t.Fatal(err)
	}
	for i, raw := range []string{
		`{"predicates":[{"equals":{"path":"/a"}}],"scenarioName":"s","responses":[{"is":{"body":"one"},"repeat":2},{"is":{"body":"two"}}]}`,
		`{"responses":[{"proxy":{"to":"http://127.0.0.1:1","mode":"proxyOnce"}}]}`,
	} {
		def, rs, err := SplitStub(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		st := NewStub(def, rs)
		st.Dir = "stubs/s" + string(rune('1'+i))
		for k := range st.Files {
			st.Files[k] = "responses/r" + string(rune('1'+k)) + ".json"
		}
		stubs = append(stubs, st)
	}
	stubs[0].NextIndex = 2
	return header, stubs
}

// The files written are mb's, byte for byte as pinned here (mb 2.9.1's
// JSON.stringify(obj, null, 2)); -update rewrites the pins.
func TestWriteGolden(t *testing.T) {
	root := t.TempDir()
	header, stubs := sample(t)
	for _, st := range stubs {
		if err := WriteStub(root, 4545, st, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteHeader(root, 4545, header, stubs); err != nil {
		t.Fatal(err)
	}
	var files []string
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return err
	})
	want := []string{"4545/imposter.json", "4545/stubs/s1/meta.json", "4545/stubs/s1/responses/r1.json",
		"4545/stubs/s1/responses/r2.json", "4545/stubs/s2/meta.json", "4545/stubs/s2/responses/r1.json"}
	if len(files) != len(want) {
		t.Fatalf("wrote %v, want %v", files, want)
	}
	for i, f := range files {
		rel, _ := filepath.Rel(root, f)
		if rel != want[i] {
			t.Fatalf("wrote %s, want %s", rel, want[i])
		}
		got, _ := os.ReadFile(f)
		golden := filepath.Join("testdata", "golden", rel)
		if *update {
			_ = os.MkdirAll(filepath.Dir(golden), 0o755)
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		pinned, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(pinned) {
			t.Errorf("%s:\n%s\nwant:\n%s", rel, got, pinned)
		}
	}
}

// Read gives back what was written: the same digest, the stubs' folders,
// files, cycles and positions, and the imposter as mb's API takes it.
func TestReadWhatWasWritten(t *testing.T) {
	root := t.TempDir()
	header, stubs := sample(t)
	for _, st := range stubs {
		if err := WriteStub(root, 4545, st, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteHeader(root, 4545, header, stubs); err != nil {
		t.Fatal(err)
	}
	imp, err := Read(root, 4545)
	if err != nil {
		t.Fatal(err)
	}
	written := &Imposter{Port: 4545, Header: header, Stubs: stubs}
	if imp.Digest() != written.Digest() {
		t.Errorf("digest %s, want %s", imp.Digest(), written.Digest())
	}
	for i, st := range imp.Stubs {
		w := stubs[i]
		if st.Dir != w.Dir || !reflect.DeepEqual(st.Files, w.Files) || !reflect.DeepEqual(st.Order, w.Order) || st.NextIndex != w.NextIndex {
			t.Errorf("stub %d: %+v, want %+v", i, st, w)
		}
	}
	if got := imp.Stubs[0].Order; !reflect.DeepEqual(got, []int{0, 0, 1}) {
		t.Errorf("orderWithRepeats %v", got)
	}
	var doc struct {
		Port  int `json:"port"`
		Stubs []struct {
			ScenarioName string            `json:"scenarioName"`
			Responses    []json.RawMessage `json:"responses"`
		} `json:"stubs"`
	}
	if err := json.Unmarshal(imp.JSON(), &doc); err != nil {
		t.Fatalf("%v: %s", err, imp.JSON())
	}
	if doc.Port != 4545 || len(doc.Stubs) != 2 || doc.Stubs[0].ScenarioName != "s" || len(doc.Stubs[0].Responses) != 2 {
		t.Errorf("JSON: %s", imp.JSON())
	}
	if ports, err := Ports(root); err != nil || !reflect.DeepEqual(ports, []int{4545}) {
		t.Errorf("Ports: %v %v", ports, err)
	}
}

// A damaged folder is an error that names the file, never a silent
// partial imposter.
func TestReadRefuses(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"no imposter.json", map[string]string{"x.txt": ""}, "missing imposter.json"},
		{"not JSON", map[string]string{"imposter.json": `{"port":`}, "imposter.json: not a JSON object"},
		{"another port", map[string]string{"imposter.json": `{"port":1}`}, "not the folder's 4545"},
		{"stub outside", map[string]string{"imposter.json": `{"port":4545,"stubs":[{"meta":{"dir":"../../etc"}}]}`}, "not a folder inside"},
		{"no meta.json", map[string]string{"imposter.json": `{"port":4545,"stubs":[{"meta":{"dir":"stubs/a"}}]}`}, "meta.json"},
		{"missing response", map[string]string{
			"imposter.json":     `{"port":4545,"stubs":[{"meta":{"dir":"stubs/a"}}]}`,
			"stubs/a/meta.json": `{"responseFiles":["responses/r.json"],"orderWithRepeats":[0],"nextIndex":0}`,
		}, "responses/r.json"},
		{"order out of range", map[string]string{
			"imposter.json":     `{"port":4545,"stubs":[{"meta":{"dir":"stubs/a"}}]}`,
			"stubs/a/meta.json": `{"responseFiles":[],"orderWithRepeats":[3],"nextIndex":0}`,
		}, "names response 3 of 0"},
		{"response not an object", map[string]string{
			"imposter.json":            `{"port":4545,"stubs":[{"meta":{"dir":"stubs/a"}}]}`,
			"stubs/a/meta.json":        `{"responseFiles":["responses/r.json"],"orderWithRepeats":[0],"nextIndex":0}`,
			"stubs/a/responses/r.json": `[1]`,
		}, "not a JSON object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for rel, content := range c.files {
				p := filepath.Join(root, "4545", rel)
				_ = os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Read(root, 4545)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one saying %q", err, c.want)
			}
		})
	}
}

func TestOrder(t *testing.T) {
	for _, c := range []struct {
		rs   string
		want []int
	}{
		{`[{"is":{}},{"is":{}}]`, []int{0, 1}},
		{`[{"repeat":3},{"repeat":0},{"repeat":"2"},{"repeat":1.5}]`, []int{0, 0, 0, 1, 2, 2, 3, 3}},
		{`[{"repeat":-1},{}]`, []int{1}},
	} {
		var rs []json.RawMessage
		if err := json.Unmarshal([]byte(c.rs), &rs); err != nil {
			t.Fatal(err)
		}
		if got := Order(rs); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Order(%s) = %v, want %v", c.rs, got, c.want)
		}
	}
}

// FuzzParse: imposter.json and meta.json of any content are parsed or
// refused, never a panic, and what is accepted stays inside the folder.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"port":4545,"stubs":[{"meta":{"dir":"stubs/a"},"predicates":[]}]}`), []byte(`{"responseFiles":["responses/r.json"],"orderWithRepeats":[0,0],"nextIndex":7}`))
	f.Add([]byte(`{"port":4545,"stubs":null}`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, header, meta []byte) {
		if imp, err := parseHeader(header, 4545); err == nil {
			for _, st := range imp.Stubs {
				if !filepath.IsLocal(st.Dir) {
					t.Fatalf("accepted %q", st.Dir)
				}
			}
			_ = imp.JSON()
			_ = imp.Digest()
		}
		if m, err := parseMeta(meta); err == nil {
			for _, i := range m.OrderWithRepeats {
				if i < 0 || i >= len(m.ResponseFiles) {
					t.Fatalf("accepted order %v for %d files", m.OrderWithRepeats, len(m.ResponseFiles))
				}
			}
			if m.NextIndex < 0 || (len(m.OrderWithRepeats) > 0 && m.NextIndex >= len(m.OrderWithRepeats)) {
				t.Fatalf("nextIndex %d for %d positions", m.NextIndex, len(m.OrderWithRepeats))
			}
		}
	})
}

// Recorded requests are read in mb's order (epoch, pid, counter: not the
// names' text order), only those after since, and a damaged one is named
// and skipped.
func TestRequests(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "4545", "requests")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"100-7-2.json":  `{"path":"/b","timestamp":"2026-12-05T06:00:00.100Z"}`,
		"100-7-10.json": `{"path":"/c","timestamp":"2026-12-05T06:00:00.100Z"}`,
		"99-7-1.json":   `{"path":"/a","timestamp":"2026-12-05T06:00:00.099Z"}`,
		"101-7-11.json": `[not json`,
		"notes.txt":     `ignored`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reqs, bad, err := Requests(root, 4545, "")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range reqs {
		var p struct{ Path string }
		_ = json.Unmarshal(r.JSON, &p)
		paths = append(paths, p.Path)
	}
	if !reflect.DeepEqual(paths, []string{"/a", "/b", "/c"}) || len(bad) != 1 {
		t.Fatalf("paths %v, bad %v", paths, bad)
	}
	if reqs[0].Time.UnixMilli() != 1796450400099 {
		t.Errorf("time %v", reqs[0].Time)
	}
	reqs, _, _ = Requests(root, 4545, "100-7-2")
	if len(reqs) != 1 || reqs[0].Name != "100-7-10" {
		t.Fatalf("since 100-7-2: %+v", reqs)
	}
	name, err := WriteRequest(root, 4545, reqs[0].Time, reqs[0].JSON)
	if err != nil || !strings.HasPrefix(name, "1796450400100-") {
		t.Fatalf("WriteRequest: %s %v", name, err)
	}
	if !NameLess("100-7-10", name) || NameLess(name, "100-7-10") {
		t.Error("NameLess")
	}
	if err := RemoveRequests(root, 4545); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("requests still there: %v", err)
	}
}

// Remove takes the folder away at once, imposter.json first, and leaves
// the rest for RemoveAll, which a stop interrupts and a later call ends.
func TestRemoveLeavesTheRestToRemoveAll(t *testing.T) {
	root := t.TempDir()
	dir := Folder(root, 4545)
	for i := range 50 {
		sd := filepath.Join(dir, "stubs", "s"+strings.Repeat("x", i%3)+string(rune('a'+i%26))+string(rune('a'+i/26)))
		if err := os.MkdirAll(filepath.Join(sd, "responses"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"meta.json", "responses/r.json"} {
			if err := os.WriteFile(filepath.Join(sd, f), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "imposter.json"), []byte(`{"protocol":"http"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	trash, err := Remove(root, 4545)
	if err != nil || trash == "" {
		t.Fatalf("Remove: %q, %v", trash, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the folder is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(trash, "imposter.json")); !os.IsNotExist(err) {
		t.Fatalf("what was taken away still has an imposter.json (mb would load it): %v", err)
	}
	if got := Trash(root); len(got) != 1 || got[0] != trash {
		t.Fatalf("Trash = %v, want [%s]", got, trash)
	}
	stopped := make(chan struct{})
	close(stopped)
	if err := RemoveAll(trash, stopped); err == nil {
		t.Fatal("RemoveAll ran on after its stop")
	}
	if err := RemoveAll(trash, make(chan struct{})); err != nil {
		t.Fatal(err)
	}
	if got := Trash(root); len(got) != 0 {
		t.Fatalf("left behind: %v", got)
	}
	if trash, err := Remove(root, 4545); err != nil || trash != "" {
		t.Fatalf("Remove of a folder that is not there: %q, %v", trash, err)
	}
}
