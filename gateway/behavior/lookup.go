package behavior

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/riftgate/riftgate/gateway/message"
)

// csvTable is a CSV data source as read: rows indexed by the key column,
// the first row of a key winning as in mb's scan.
type csvTable struct {
	header []string
	rows   map[string][]string
}

// csvSource reads its file for each request, as mb does, so that a file
// written or changed after the imposter was made is what answers; the
// parsed table is kept while the file's size and modification time stay
// the same, which spares re-parsing an unchanged file on every request.
type csvSource struct {
	path, delim, keyColumn string

	mu      sync.Mutex
	size    int64
	modTime time.Time
	tab     *csvTable
}

func (c *csvSource) table() (*csvTable, error) {
	fi, err := os.Stat(c.path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", c.path, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tab != nil && fi.Size() == c.size && fi.ModTime().Equal(c.modTime) {
		return c.tab, nil
	}
	tab, err := loadCSV(c.path, c.delim, c.keyColumn)
	if err != nil {
		return tab, err
	}
	c.tab, c.size, c.modTime = tab, fi.Size(), fi.ModTime()
	return tab, nil
}

type lookupStep struct {
	from  from
	sel   selection
	index int
	into  string
	src   *csvSource
}

func (b *Behaviors) compileLookup(c map[string]json.RawMessage, fail func(string, string) error) (step, error) {
	keyRaw, ok := c["key"]
	if !ok {
		return nil, fail("key", "required")
	}
	var key map[string]json.RawMessage
	if json.Unmarshal(keyRaw, &key) != nil || key == nil {
		return nil, fail("key", "must be an object")
	}
	f, err := compileFrom(key["from"], "key.from", fail)
	if err != nil {
		return nil, err
	}
	sel, err := compileUsing(key["using"], "key.using", fail)
	if err != nil {
		return nil, err
	}
	var index int
	if raw, ok := key["index"]; ok {
		var n float64
		if json.Unmarshal(raw, &n) == nil && n >= 0 {
			index = int(n)
		}
	}
	dsRaw, ok := c["fromDataSource"]
	if !ok {
		return nil, fail("fromDataSource", "required")
	}
	var ds map[string]json.RawMessage
	if json.Unmarshal(dsRaw, &ds) != nil || ds == nil {
		return nil, fail("fromDataSource", "must be an object")
	}
	if len(ds) != 1 {
		return nil, fail("fromDataSource", "must have exactly one key")
	}
	csvRaw, ok := ds["csv"]
	if !ok {
		return nil, fail("fromDataSource", "must be one of [csv]")
	}
	var cfg map[string]json.RawMessage
	if json.Unmarshal(csvRaw, &cfg) != nil || cfg == nil {
		return nil, fail("fromDataSource.csv", "must be an object")
	}
	path, err := requiredString(cfg, "path", "fromDataSource.csv.path", "must be a string, representing the path to the CSV file", fail)
	if err != nil {
		return nil, err
	}
	delim := ","
	if raw, ok := cfg["delimiter"]; ok {
		if json.Unmarshal(raw, &delim) != nil {
			return nil, fail("fromDataSource.csv.delimiter", "must be a string, representing the delimiter separator values")
		}
	}
	keyColumn, err := requiredString(cfg, "keyColumn", "fromDataSource.csv.keyColumn", `must be a string, representing the column header to select against the "key" field`, fail)
	if err != nil {
		return nil, err
	}
	into, err := compileInto(c["into"], fail)
	if err != nil {
		return nil, err
	}
	if r, n := utf8.DecodeRuneInString(delim); n != len(delim) || r == utf8.RuneError {
		b.warnings = append(b.warnings, fmt.Sprintf("lookup: CSV delimiter %q: riftgate supports one-character delimiters", delim))
	}
	return lookupStep{from: f, sel: sel, index: index, into: into,
		src: &csvSource{path: path, delim: delim, keyColumn: keyColumn}}, nil
}

func requiredString(cfg map[string]json.RawMessage, key, path, msg string, fail func(string, string) error) (string, error) {
	raw, ok := cfg[key]
	if !ok {
		return "", fail(path, "required")
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", fail(path, msg)
	}
	return s, nil
}

// loadCSV reads path (relative to the working directory, as mb reads it)
// with the first record as the header. Reading stops at the first
// malformed record, as mb's csv-parse stream does.
func loadCSV(path, delim, keyColumn string) (*csvTable, error) {
	t := &csvTable{rows: map[string][]string{}}
	r, n := utf8.DecodeRuneInString(delim)
	if n != len(delim) || r == utf8.RuneError {
		return t, fmt.Errorf("CSV delimiter %q: riftgate supports one-character delimiters", delim)
	}
	file, err := os.Open(path)
	if err != nil {
		return t, fmt.Errorf("cannot read %s: %w", path, err)
	}
	defer file.Close()
	cr := csv.NewReader(file)
	cr.Comma = r
	header, err := cr.Read()
	if err != nil {
		return t, fmt.Errorf("CSV %s: %w", path, err)
	}
	col := -1
	for i, h := range header {
		if h == keyColumn && col < 0 {
			col = i
		}
	}
	if col < 0 {
		return t, fmt.Errorf("CSV headers %q with delimiter %q do not contain keyColumn %q", header, delim, keyColumn)
	}
	t.header = header
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return t, nil
		}
		if err != nil {
			return t, fmt.Errorf("CSV %s: %w", path, err)
		}
		if _, dup := t.rows[rec[col]]; !dup {
			t.rows[rec[col]] = rec
		}
	}
}

func (l lookupStep) run(_ context.Context, req *message.Request, resp *Response, _ bool) (time.Duration, error) {
	keys := l.sel.values(requestValue(req, l.from))
	key := "undefined" // mb compares the row's key with String(undefined)
	if l.index < len(keys) {
		key = keys[l.index]
	}
	tab, err := l.src.table()
	if err != nil {
		// mb logs and answers with the tokens left in place.
		return 0, nil
	}
	rec, ok := tab.rows[key]
	if !ok {
		return 0, nil
	}
	var pairs [][2]string
	for i, col := range tab.header {
		v := ""
		if i < len(rec) {
			v = rec[i]
		}
		for _, q := range []string{`"`, `'`, ""} {
			pairs = append(pairs, [2]string{l.into + "[" + q + col + q + "]", v})
		}
	}
	replaceTokens(resp, pairs)
	return 0, nil
}
