// Package mbdatadir reads and writes the folder Mountebank 2.9.1 keeps
// under --datadir, so that riftgate and mb can serve the same folder.
//
// mb's layout, one folder per imposter:
//
//	<datadir>/<port>/imposter.json      the imposter without its responses;
//	                                    each stub names its folder in meta.dir
//	<port>/stubs/<name>/meta.json       responseFiles, orderWithRepeats (the
//	                                    cycle, repeats expanded), nextIndex
//	<port>/stubs/<name>/responses/*.json one response each
//	<port>/stubs/<name>/matches/*.json   under --debug, what it matched
//	<port>/requests/*.json              recorded requests, one each
//
// The package knows nothing of riftgate's configuration: gateway/mirror.go
// keeps such a folder in step with the configuration log.
package mbdatadir

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riftgate/riftgate/gateway/message"
)

// ErrNoImposter is returned for a folder without imposter.json (mb skips
// one with a warning).
var ErrNoImposter = errors.New("missing imposter.json")

// maxOrder bounds a stub's expanded cycle: riftgate refuses a longer one
// when it compiles the stub, and a file must not make us allocate more.
const maxOrder = 1 << 16

// Stub is one stub of an imposter folder.
type Stub struct {
	// Dir is the stub's folder, relative to the imposter's ("stubs/<name>").
	Dir string
	// Def is the stub as imposter.json lists it, without meta and
	// responses, its keys sorted.
	Def json.RawMessage
	// Responses are the stub's responses, in order, compacted.
	Responses []json.RawMessage
	// Files are the responses' files, relative to Dir.
	Files []string
	// Order is meta.json's orderWithRepeats: a response index per position.
	Order []int
	// NextIndex is the position of the next response in Order.
	NextIndex int
}

// Imposter is one imposter folder.
type Imposter struct {
	Port int
	// Header is imposter.json without its stubs, its keys sorted.
	Header json.RawMessage
	Stubs  []*Stub
}

// Folder is the imposter's folder under root.
func Folder(root string, port int) string { return filepath.Join(root, strconv.Itoa(port)) }

// Ports lists the folders under root whose name is a port, sorted. A
// missing root has none.
func Ports(root string) ([]int, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ports []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil || !e.IsDir() || p <= 0 || p > math.MaxUint16 || strconv.Itoa(p) != e.Name() {
			continue
		}
		ports = append(ports, p)
	}
	sort.Ints(ports)
	return ports, nil
}

// Read reads the imposter folder of port under root. A folder without
// imposter.json is ErrNoImposter; any file that is missing, not JSON or
// not of mb's shape is an error naming it.
func Read(root string, port int) (*Imposter, error) {
	dir := Folder(root, port)
	b, err := os.ReadFile(filepath.Join(dir, "imposter.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoImposter
	}
	if err != nil {
		return nil, err
	}
	imp, err := parseHeader(b, port)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "imposter.json"), err)
	}
	if err := readStubs(dir, imp.Stubs); err != nil {
		return nil, err
	}
	return imp, nil
}

// readStubs reads the stubs' files, several stubs at a time: a folder of
// 100,000 recorded stubs is 200,000 files, each a few syscalls and a
// parse. The error is the first stub's, in order.
func readStubs(dir string, stubs []*Stub) error {
	errs := make([]error, len(stubs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(stubs), 2*runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(stubs); i = int(next.Add(1) - 1) {
				errs[i] = readStub(dir, stubs[i])
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// parseHeader parses imposter.json: the header and each stub's definition
// and folder, not yet its responses.
func parseHeader(b []byte, port int) (*Imposter, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	var p int
	if err := json.Unmarshal(obj["port"], &p); err != nil || p != port {
		return nil, fmt.Errorf("its port is %s, not the folder's %d", obj["port"], port)
	}
	var raws []json.RawMessage
	if s, ok := obj["stubs"]; ok && !isNull(s) {
		if err := json.Unmarshal(s, &raws); err != nil {
			return nil, fmt.Errorf("stubs is not a list: %w", err)
		}
	}
	delete(obj, "stubs")
	delete(obj, "requests") // mb drops them before saving
	imp := &Imposter{Port: port, Header: marshal(obj), Stubs: make([]*Stub, 0, len(raws))}
	for i, raw := range raws {
		var so map[string]json.RawMessage
		if err := json.Unmarshal(raw, &so); err != nil || so == nil {
			return nil, fmt.Errorf("stub %d is not an object", i)
		}
		var meta struct {
			Dir string `json:"dir"`
		}
		if err := json.Unmarshal(so["meta"], &meta); err != nil || meta.Dir == "" || !filepath.IsLocal(meta.Dir) {
			return nil, fmt.Errorf("stub %d: meta.dir is not a folder inside the imposter's: %s", i, so["meta"])
		}
		delete(so, "meta")
		delete(so, "responses") // mb reads them from meta.json's files
		imp.Stubs = append(imp.Stubs, &Stub{Dir: meta.Dir, Def: marshal(so)})
	}
	return imp, nil
}

// meta is a stub's meta.json.
type meta struct {
	ResponseFiles    []string `json:"responseFiles"`
	OrderWithRepeats []int    `json:"orderWithRepeats"`
	NextIndex        int      `json:"nextIndex"`
}

// readStub reads a stub's meta.json and responses.
func readStub(dir string, st *Stub) error {
	path := filepath.Join(dir, st.Dir, "meta.json")
	b, err := readFile(path)
	if err != nil {
		return err
	}
	m, err := parseMeta(b)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	st.Files, st.Order, st.NextIndex = m.ResponseFiles, m.OrderWithRepeats, m.NextIndex
	st.Responses = make([]json.RawMessage, len(m.ResponseFiles))
	for i, f := range m.ResponseFiles {
		rp := filepath.Join(dir, st.Dir, f)
		b, err := readFile(rp)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, b); err != nil || !isObject(buf.Bytes()) {
			return fmt.Errorf("%s: not a JSON object: %v", rp, err)
		}
		st.Responses[i] = buf.Bytes()
	}
	return nil
}

// parseMeta parses and checks a meta.json.
func parseMeta(b []byte) (*meta, error) {
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("not mb's meta.json: %w", err)
	}
	for _, f := range m.ResponseFiles {
		if !filepath.IsLocal(f) {
			return nil, fmt.Errorf("response file %q is not inside the stub's folder", f)
		}
	}
	if len(m.OrderWithRepeats) > maxOrder {
		return nil, fmt.Errorf("orderWithRepeats has %d positions; at most %d are taken", len(m.OrderWithRepeats), maxOrder)
	}
	for _, i := range m.OrderWithRepeats {
		if i < 0 || i >= len(m.ResponseFiles) {
			return nil, fmt.Errorf("orderWithRepeats names response %d of %d", i, len(m.ResponseFiles))
		}
	}
	if m.NextIndex < 0 {
		return nil, fmt.Errorf("nextIndex %d is negative", m.NextIndex)
	}
	if n := len(m.OrderWithRepeats); n > 0 {
		m.NextIndex %= n
	} else {
		m.NextIndex = 0
	}
	return &m, nil
}

// JSON is the imposter as mb's API takes it: the header with its stubs,
// each with its responses.
func (imp *Imposter) JSON() []byte {
	var b bytes.Buffer
	b.Write(imp.Header[:len(imp.Header)-1])
	if len(imp.Header) > 2 {
		b.WriteByte(',')
	}
	b.WriteString(`"stubs":[`)
	for i, st := range imp.Stubs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(message.WithArray(st.Def, "responses", st.Responses))
	}
	b.WriteString("]}")
	return b.Bytes()
}

// Digest identifies what an imposter folder defines: its header, and each
// stub's definition and responses, in order (not where the cycles are).
func (imp *Imposter) Digest() string {
	d := NewDigest(imp.Header)
	for _, st := range imp.Stubs {
		d.Add(st.Def, st.Responses)
	}
	return d.Sum()
}

// Digester computes an imposter's Digest from its parts, as it goes.
type Digester struct{ h hash.Hash }

// NewDigest starts the digest of an imposter with its canonical header.
func NewDigest(header json.RawMessage) *Digester {
	d := &Digester{h: sha256.New()}
	d.h.Write(header)
	d.h.Write([]byte{'\n'})
	return d
}

// Add adds a stub, canonical.
func (d *Digester) Add(def json.RawMessage, rs []json.RawMessage) {
	d.h.Write([]byte("stub\n"))
	d.h.Write(def)
	d.h.Write([]byte{'\n'})
	for _, r := range rs {
		d.h.Write(r)
		d.h.Write([]byte{'\n'})
	}
}

// Sum is the digest, in hex.
func (d *Digester) Sum() string {
	return hex.EncodeToString(d.h.Sum(nil))
}

// Canonical is the form a header or a stub takes in an Imposter: the
// object's keys sorted, without the keys named in drop, compacted.
func Canonical(obj json.RawMessage, drop ...string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil || m == nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	for _, k := range drop {
		delete(m, k)
	}
	return marshal(m), nil
}

// SplitStub splits a stub's JSON into its canonical definition (without
// responses) and its responses, compacted, as an Imposter holds them.
func SplitStub(stub json.RawMessage) (def json.RawMessage, rs []json.RawMessage, err error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(stub, &m); err != nil || m == nil {
		return nil, nil, fmt.Errorf("stub: not a JSON object: %v", err)
	}
	if r, ok := m["responses"]; ok && !isNull(r) {
		if err := json.Unmarshal(r, &rs); err != nil {
			return nil, nil, fmt.Errorf("stub: responses is not a list: %w", err)
		}
	}
	if rs, err = Compact(rs); err != nil {
		return nil, nil, err
	}
	delete(m, "responses")
	delete(m, "meta")
	return marshal(m), rs, nil
}

// Order is mb's orderWithRepeats for responses: each response's index as
// many times as its repeat says (a missing or zero repeat is once).
func Order(rs []json.RawMessage) []int {
	var out []int
	for i, r := range rs {
		for k := 0; k < repeats(r) && len(out) < maxOrder; k++ {
			out = append(out, i)
		}
	}
	return out
}

// repeats is mb's `response.repeat || 1`, compared as JavaScript compares
// a counter with it.
func repeats(r json.RawMessage) int {
	var o struct {
		Repeat json.RawMessage `json:"repeat"`
	}
	_ = json.Unmarshal(r, &o)
	var f float64
	if err := json.Unmarshal(o.Repeat, &f); err != nil {
		var s string
		if json.Unmarshal(o.Repeat, &s) != nil {
			return 1
		}
		if f, err = strconv.ParseFloat(s, 64); err != nil {
			return 1 // NaN: mb's loop runs no time, but `|| 1` already gave 1 for ""
		}
	}
	if f == 0 {
		return 1
	}
	if f < 0 {
		return 0
	}
	return int(math.Min(math.Ceil(f), maxOrder))
}

// counter makes names unique within the process, as mb's does.
var counter atomic.Uint64

// Name is a new file or folder name in mb's form: epoch-pid-counter.
func Name() string { return nameAt(time.Now()) }

func nameAt(ts time.Time) string {
	return fmt.Sprintf("%d-%d-%d", ts.UnixMilli(), os.Getpid(), counter.Add(1))
}

// NewStub names a stub's folder and files for def and its responses.
func NewStub(def json.RawMessage, rs []json.RawMessage) *Stub {
	st := &Stub{Dir: "stubs/" + Name(), Def: def, Responses: rs, Order: Order(rs)}
	for range rs {
		st.Files = append(st.Files, "responses/"+Name()+".json")
	}
	return st
}

// AddResponses adds responses to st, as mb's addResponse does: new files,
// their positions appended to the cycle.
func (st *Stub) AddResponses(rs []json.RawMessage) {
	for _, r := range rs {
		i := len(st.Files)
		st.Files = append(st.Files, "responses/"+Name()+".json")
		st.Responses = append(st.Responses, r)
		for k := 0; k < repeats(r) && len(st.Order) < maxOrder; k++ {
			st.Order = append(st.Order, i)
		}
	}
}

// WriteStub writes the stub's responses from the from-th on, and its
// meta.json.
func WriteStub(root string, port int, st *Stub, from int) error {
	if err := WriteResponses(root, port, st, from); err != nil {
		return err
	}
	return WriteMeta(root, port, st)
}

// WriteResponses writes the stub's responses from the from-th on.
func WriteResponses(root string, port int, st *Stub, from int) error {
	dir := filepath.Join(Folder(root, port), st.Dir)
	for i := from; i < len(st.Files); i++ {
		if err := writeJSON(filepath.Join(dir, st.Files[i]), st.Responses[i]); err != nil {
			return err
		}
	}
	return nil
}

// Compact returns rs compacted, as SplitStub returns a stub's responses.
func Compact(rs []json.RawMessage) ([]json.RawMessage, error) {
	if len(rs) == 0 {
		return rs, nil
	}
	out := make([]json.RawMessage, len(rs))
	for i, r := range rs {
		var buf bytes.Buffer
		if err := json.Compact(&buf, r); err != nil {
			return nil, err
		}
		out[i] = buf.Bytes()
	}
	return out, nil
}

// WriteMeta writes the stub's meta.json.
func WriteMeta(root string, port int, st *Stub) error {
	m := meta{ResponseFiles: st.Files, OrderWithRepeats: st.Order, NextIndex: st.NextIndex}
	if m.ResponseFiles == nil {
		m.ResponseFiles = []string{}
	}
	if m.OrderWithRepeats == nil {
		m.OrderWithRepeats = []int{}
	}
	b, _ := json.Marshal(m)
	return writeJSON(filepath.Join(Folder(root, port), st.Dir, "meta.json"), b)
}

// WriteHeader writes imposter.json: header (an object) with stubs, each
// its definition and folder, as mb lists them.
func WriteHeader(root string, port int, header json.RawMessage, stubs []*Stub) error {
	var b bytes.Buffer
	b.Write(header[:len(header)-1])
	if len(header) > 2 {
		b.WriteByte(',')
	}
	b.WriteString(`"stubs":[`)
	for i, st := range stubs {
		if i > 0 {
			b.WriteByte(',')
		}
		dir, _ := json.Marshal(st.Dir)
		b.WriteString(`{"meta":{"dir":`)
		b.Write(dir)
		b.WriteByte('}')
		if len(st.Def) > 2 {
			b.WriteByte(',')
			b.Write(st.Def[1 : len(st.Def)-1])
		}
		b.WriteByte('}')
	}
	b.WriteString("]}")
	return writeJSON(filepath.Join(Folder(root, port), "imposter.json"), b.Bytes())
}

// RemoveStub removes a stub's folder.
func RemoveStub(root string, port int, st *Stub) error {
	return os.RemoveAll(filepath.Join(Folder(root, port), st.Dir))
}

// StubDirs lists the stub folders under the imposter's ("stubs/<name>"),
// listed in its imposter.json or not.
func StubDirs(root string, port int) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(Folder(root, port), "stubs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, "stubs/"+e.Name())
		}
	}
	return dirs, err
}

// Remove takes the imposter's folder away, and nothing else, as mb's
// DELETE does, and returns where what was in it now is, for the caller to
// remove at leisure (RemoveAll), or "" when there was none. A folder of
// 100,000 recorded stubs takes seconds to remove: its imposter.json goes
// first (mb, and riftgate's start, then skip what is left), and the
// folder is renamed out of the way, named after the port and trashPrefix.
func Remove(root string, port int) (string, error) {
	dir := Folder(root, port)
	if err := os.Remove(filepath.Join(dir, "imposter.json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	trash := filepath.Join(root, fmt.Sprintf("%s%d-%d", trashPrefix, port, time.Now().UnixNano()))
	switch err := os.Rename(dir, trash); {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case err != nil:
		return "", err
	}
	return trash, nil
}

// trashPrefix names the folders Remove took away.
const trashPrefix = ".removed-"

// Trash lists the folders Remove took away that are still there (a stop
// came before they were removed).
func Trash(root string) []string {
	entries, _ := os.ReadDir(root)
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), trashPrefix) {
			out = append(out, filepath.Join(root, e.Name()))
		}
	}
	return out
}

// RemoveAll removes path and what it holds, one entry at a time, until
// stop is closed: what is left is removed by a later call.
func RemoveAll(path string, stop <-chan struct{}) error {
	select {
	case <-stop:
		return errStopped
	default:
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		// Not a folder (or gone): remove it as it is.
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	for _, e := range entries {
		if err := RemoveAll(filepath.Join(path, e.Name()), stop); err != nil {
			return err
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

var errStopped = errors.New("mbdatadir: stopped")

// writeJSON writes raw indented as mb's JSON.stringify(obj, null, 2) does,
// to a temporary file renamed into place (as mb's atomicWriteFile), so a
// reader never sees half a file. Not synced: the configuration log is
// what is durable; the folder is written again from it when it lags.
func writeJSON(path string, raw []byte) error {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	tmp := path + ".tmp"
	err := writeFile(tmp, b.Bytes())
	if errors.Is(err, fs.ErrNotExist) {
		// A new stub's folder: made once, not asked after at every file.
		if err = makeDir(filepath.Dir(path)); err == nil {
			err = writeFile(tmp, b.Bytes())
		}
	}
	if err != nil {
		return err
	}
	return renameFile(tmp, path)
}

// makeDir is os.MkdirAll for a folder that is usually one level below one
// that exists: it makes it, and its parents only when told they are
// missing, where MkdirAll first asks after each.
func makeDir(dir string) error {
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrNotExist) && filepath.Dir(dir) != dir {
		if err = makeDir(filepath.Dir(dir)); err == nil {
			err = os.Mkdir(dir, 0o755)
		}
	}
	if errors.Is(err, fs.ErrExist) {
		// Made meanwhile, or there already: a file there fails the write.
		return nil
	}
	return err
}

// marshal encodes an object with sorted keys, compacted, without HTML
// escapes (mb writes "<" as it is).
func marshal(m map[string]json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(m) // values are valid JSON: they were decoded
	return bytes.TrimRight(b.Bytes(), "\n")
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func isObject(raw []byte) bool { return len(raw) > 1 && raw[0] == '{' }

// Entry is one file of a folder of mb-named JSON files: a recorded request
// (<port>/requests) or a stub's match under --debug (<stub>/matches), named
// after when it was written.
type Entry struct {
	Name string          // the file's name, without .json
	Time time.Time       // its timestamp (zero when it has none)
	JSON json.RawMessage // the object as mb shows it, compacted
}

// nameParts are a file name's epoch, pid and counter, as mb sorts them.
func nameParts(name string) ([3]int64, bool) {
	var p [3]int64
	parts := strings.Split(name, "-")
	if len(parts) != 3 {
		return p, false
	}
	for i, s := range parts {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
			return p, false
		}
		p[i] = n
	}
	return p, true
}

// NameLess orders two names of mb's form as mb does: by epoch, then pid,
// then counter.
func NameLess(a, b string) bool {
	pa, _ := nameParts(a)
	pb, _ := nameParts(b)
	for i := range pa {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return false
}

// Requests reads the imposter's recorded requests named after since (all
// when since is ""), oldest first. A file that cannot be read is returned
// in bad, with why, and skipped.
func Requests(root string, port int, since string) (reqs []Entry, bad map[string]error, err error) {
	dir := filepath.Join(Folder(root, port), "requests")
	names, err := entryNames(dir, since)
	if err != nil {
		return nil, nil, err
	}
	reqs, bad = readNamed(dir, names)
	return reqs, bad, nil
}

// WriteRequest writes a recorded request as mb does, named after its time
// (now when it has none); it returns the name.
func WriteRequest(root string, port int, ts time.Time, js []byte) (string, error) {
	return writeEntry(filepath.Join(Folder(root, port), "requests"), ts, js)
}

// Matches lists the names of what st matched under mb's --debug
// (<stub>/matches/*.json), oldest first.
func Matches(root string, port int, st *Stub) ([]string, error) {
	return entryNames(matchesDir(root, port, st), "")
}

// ReadMatches reads st's matches named in names; bad as in Requests.
func ReadMatches(root string, port int, st *Stub, names []string) ([]Entry, map[string]error) {
	return readNamed(matchesDir(root, port, st), names)
}

// WriteMatch writes one of st's matches as mb's --debug does, named after
// its time; it returns the name.
func WriteMatch(root string, port int, st *Stub, ts time.Time, js []byte) (string, error) {
	return writeEntry(matchesDir(root, port, st), ts, js)
}

// RemoveMatch removes the match named name; RemoveMatches all of st's.
func RemoveMatch(root string, port int, st *Stub, name string) error {
	err := os.Remove(filepath.Join(matchesDir(root, port, st), name+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// RemoveMatches removes all of st's matches.
func RemoveMatches(root string, port int, st *Stub) error {
	return os.RemoveAll(matchesDir(root, port, st))
}

func matchesDir(root string, port int, st *Stub) string {
	return filepath.Join(Folder(root, port), st.Dir, "matches")
}

// entryNames lists dir's files of mb's form named after since (all when
// since is ""), oldest first; a missing dir has none.
func entryNames(dir, since string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if _, mbs := nameParts(name); ok && mbs && !e.IsDir() && (since == "" || NameLess(since, name)) {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool { return NameLess(names[i], names[j]) })
	return names, nil
}

// readNamed reads dir's files named in names, each a JSON object with an
// optional timestamp.
func readNamed(dir string, names []string) (es []Entry, bad map[string]error) {
	for _, name := range names {
		path := filepath.Join(dir, name+".json")
		b, err := os.ReadFile(path)
		var buf bytes.Buffer
		if err == nil {
			err = json.Compact(&buf, b)
		}
		var r struct {
			Timestamp string `json:"timestamp"`
		}
		if err == nil && (!isObject(buf.Bytes()) || json.Unmarshal(buf.Bytes(), &r) != nil) {
			err = errors.New("not a JSON object")
		}
		if err != nil {
			if bad == nil {
				bad = map[string]error{}
			}
			bad[path] = err
			continue
		}
		ts, _ := time.Parse(time.RFC3339Nano, r.Timestamp)
		es = append(es, Entry{Name: name, Time: ts, JSON: buf.Bytes()})
	}
	return es, bad
}

// writeEntry writes js into dir named after ts (now when zero), as mb
// names its files; it returns the name.
func writeEntry(dir string, ts time.Time, js []byte) (string, error) {
	if ts.IsZero() {
		ts = time.Now()
	}
	name := nameAt(ts)
	return name, writeJSON(filepath.Join(dir, name+".json"), js)
}

// RemoveRequests removes the imposter's recorded requests, as mb's DELETE
// /imposters/:id/savedRequests does.
func RemoveRequests(root string, port int) error {
	return os.RemoveAll(filepath.Join(Folder(root, port), "requests"))
}
