package reqlog

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/message"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// request is the i-th request of a test: an http one with a form body
// every third, a tcp one every fifth.
func request(i int) *message.Request {
	ts := time.Date(2026, 12, 5, 1, 2, 3, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
	if i%5 == 4 {
		r := &message.Request{Kind: message.TCP, Body: []byte("data " + strconv.Itoa(i)), Timestamp: ts}
		r.SetRemote("127.0.0.1:5000", "127.0.0.1")
		return r
	}
	r := &message.Request{
		Method: "GET", Path: "/p/" + strconv.Itoa(i),
		Query:     []message.KV{{Name: "i", Value: strconv.Itoa(i)}, {Name: "i", Value: "again"}},
		Headers:   []message.KV{{Name: "Host", Value: "localhost"}, {Name: "X-N", Value: strconv.Itoa(i)}},
		Timestamp: ts,
	}
	if i%3 == 0 {
		r.Method = "POST"
		r.Headers = append(r.Headers, message.KV{Name: "Content-Type", Value: "application/x-www-form-urlencoded"})
		r.Body = []byte("a=" + strconv.Itoa(i) + "&b=%20x")
	}
	r.SetRemote("::ffff:127.0.0.1:4000", "::ffff:127.0.0.1")
	return r
}

func wantJSON(t *testing.T, i int) string {
	t.Helper()
	b, err := request(i).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func render(t *testing.T, rec []byte) string {
	t.Helper()
	var r Record
	if err := r.Decode(rec); err != nil {
		t.Fatalf("decode: %v", err)
	}
	var b bytes.Buffer
	r.AppendJSON(&b)
	return b.String()
}

// Every shape renders as the request it was made of would.
func TestRecordRendersAsTheRequest(t *testing.T) {
	smtp := &message.Request{Kind: message.SMTP, Mail: &message.Mail{EnvelopeFrom: "a@b", Subject: "hi", HasSubject: true}, Timestamp: time.Unix(1, 0)}
	smtp.SetRemote("127.0.0.1:25", "127.0.0.1")
	live := &message.Request{Method: "GET", Path: "/"}
	live.SetRemote("1.2.3.4:5", "1.2.3.4") // no timestamp: none shown
	for name, r := range map[string]*message.Request{
		"http": request(1), "form": request(3), "tcp": request(4), "smtp": smtp, "no time": live,
	} {
		t.Run(name, func(t *testing.T) {
			want, _ := r.MarshalJSON()
			if got := render(t, AppendRecord(nil, r)); got != string(want) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// The record and file encodings are version 1 of a format on disk: these
// bytes must not change (a new format gets a new version).
func TestGoldenBytes(t *testing.T) {
	r := &message.Request{Method: "GET", Path: "/a", Query: []message.KV{{Name: "q", Value: "1"}},
		Headers: []message.KV{{Name: "H", Value: "v"}}, Body: []byte("b"), Timestamp: time.Unix(0, 1000)}
	r.SetRemote("1.2.3.4:5", "1.2.3.4")
	tcp := &message.Request{Kind: message.TCP, Body: []byte("xy")}
	tcp.SetRemote("f", "i")
	for _, c := range []struct {
		name string
		got  []byte
		want string
	}{
		{"http record", AppendRecord(nil, r), "01e803000000000000" + "09312e322e332e343a3507312e322e332e340347455402" + "2f6101017101310101480176" + "0162"},
		{"tcp record", AppendRecord(nil, tcp), "02" + "0000000000000000" + "0166016902" + "7879"},
		{"json record", AppendJSONRecord(nil, time.Unix(0, 1000), []byte(`{}`)), "03" + "e803000000000000" + "02" + "7b7d"},
		{"json record without a time", AppendJSONRecord(nil, time.Time{}, []byte(`{}`)), "03" + "0000000000000000" + "02" + "7b7d"},
		{"segment header", segHeader(), "5247525101000000"},
		{"chunk header", func() []byte {
			b := append(make([]byte, chunkHdrLen), 2, 'a', 'b')
			putChunkHeader(b, 1, 7)
			return b
		}(), "52514331" + "03000000" + "01000000" + "0700000000000000" + "93afc83c" + "026162"},
	} {
		if h := hex.EncodeToString(c.got); h != c.want {
			t.Errorf("%s: got %s, want %s", c.name, h, c.want)
		}
	}
}

func open(t *testing.T, dir string, keep bool, o Options) *Manager {
	t.Helper()
	o.Dir, o.Keep = dir, keep
	m, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func all(t *testing.T, s *Snapshot, reverse bool, from int64) []string {
	t.Helper()
	var out []string
	fn := func(rec []byte) bool { out = append(out, render(t, rec)); return true }
	var err error
	if reverse {
		err = s.EachReverse(from, fn)
	} else {
		err = s.Each(from, fn)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Small chunks and a small memory budget put most requests on disk only;
// reading gives every one back, in order, from any position, both ways.
func TestReadsBackFromMemoryAndDisk(t *testing.T) {
	const n = 2000
	m := open(t, t.TempDir(), false, Options{ChunkBytes: 1 << 10, MemoryBytes: 4 << 10, SegmentBytes: 16 << 10})
	l, err := m.Open("4545", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		l.Append(request(i))
	}
	s := l.Snapshot()
	defer s.Close()
	if s.Len() != n || l.Len() != n {
		t.Fatalf("Len = %d, snapshot %d; want %d", l.Len(), s.Len(), n)
	}
	l.pending.Wait()
	inMemory := 0
	for _, c := range s.chunks {
		if c.mem.Load() != nil {
			inMemory++
		}
	}
	if inMemory == 0 || inMemory > 8 {
		t.Fatalf("%d of %d chunks in memory; the budget keeps 4 KiB of 1 KiB chunks", inMemory, len(s.chunks))
	}
	segs, _ := filepath.Glob(filepath.Join(m.opts.Dir, "4545", "*"+segSuffix))
	if len(segs) < 5 {
		t.Fatalf("%d segment files; 16 KiB segments should take many", len(segs))
	}
	for _, from := range []int64{0, 1, 517, n - 1, n} {
		got := all(t, s, false, from)
		if len(got) != int(n-from) {
			t.Fatalf("from %d: %d requests, want %d", from, len(got), n-from)
		}
		for k, g := range got {
			if w := wantJSON(t, int(from)+k); g != w {
				t.Fatalf("from %d, #%d: got %s want %s", from, k, g, w)
			}
		}
		rev := all(t, s, true, from)
		if len(rev) != int(n-from) {
			t.Fatalf("reverse from %d: %d requests, want %d", from, len(rev), n-from)
		}
		for k, g := range rev {
			if w := wantJSON(t, n-1-int(from)-k); g != w {
				t.Fatalf("reverse from %d, #%d: got %s want %s", from, k, g, w)
			}
		}
	}
}

// A cap keeps the newest max requests, counts the others as dropped, and
// deletes the segments it no longer needs: memory and disk both stay
// bounded.
func TestCapDropsTheOldest(t *testing.T) {
	for _, max := range []int64{1, 7, 300} {
		t.Run(strconv.Itoa(int(max)), func(t *testing.T) {
			m := open(t, t.TempDir(), false, Options{ChunkBytes: 1 << 10, SegmentBytes: 8 << 10})
			l, err := m.Open("p", max)
			if err != nil {
				t.Fatal(err)
			}
			const n = 3000
			for i := range n {
				l.Append(request(i))
			}
			if l.Len() != max || l.Dropped() != n-max {
				t.Fatalf("Len %d Dropped %d; want %d and %d", l.Len(), l.Dropped(), max, n-max)
			}
			s := l.Snapshot()
			defer s.Close()
			got := all(t, s, false, 0)
			if int64(len(got)) != max || got[0] != wantJSON(t, int(n-max)) || got[len(got)-1] != wantJSON(t, n-1) {
				t.Fatalf("kept %d, first %s", len(got), got[0])
			}
			l.pending.Wait()
			segs, _ := filepath.Glob(filepath.Join(m.opts.Dir, "p", "*"+segSuffix))
			// A record here is under 250 bytes; the 3000 take about 70
			// segments.
			if limit := 2 + int(max*250/(8<<10)); len(segs) > limit {
				t.Fatalf("%d segments left for %d requests; want at most %d", len(segs), max, limit)
			}
			l.SetMax(0)
			l.Append(request(n))
			if l.Len() != max+1 {
				t.Fatalf("without a cap, Len = %d, want %d", l.Len(), max+1)
			}
		})
	}
}

// Reset forgets everything; a snapshot taken before still reads its own.
func TestResetKeepsOpenSnapshots(t *testing.T) {
	m := open(t, t.TempDir(), false, Options{ChunkBytes: 512, MemoryBytes: 1})
	l, _ := m.Open("p", 0)
	for i := range 500 {
		l.Append(request(i))
	}
	s := l.Snapshot()
	defer s.Close()
	l.Reset()
	l.Append(request(1000))
	if got := all(t, s, false, 0); len(got) != 500 || got[499] != wantJSON(t, 499) {
		t.Fatalf("the snapshot lost its requests: %d", len(got))
	}
	s2 := l.Snapshot()
	defer s2.Close()
	if got := all(t, s2, false, 0); len(got) != 1 || got[0] != wantJSON(t, 1000) || l.Dropped() != 0 {
		t.Fatalf("after Reset: %v, dropped %d", got, l.Dropped())
	}
}

// With Keep (--datadir), a log closed and opened again has every request;
// a torn last chunk (a crash mid-write) is cut off and the rest kept.
// Without Keep, closing removes the files.
func TestKeepAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	o := Options{ChunkBytes: 1 << 10, SegmentBytes: 8 << 10}
	m := open(t, dir, true, o)
	l, _ := m.Open("4545-x", 0)
	for i := range 700 {
		l.Append(request(i))
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = open(t, dir, true, o)
	l, err := m.Open("4545-x", 0)
	if err != nil {
		t.Fatal(err)
	}
	s := l.Snapshot()
	got := all(t, s, false, 0)
	s.Close()
	if len(got) != 700 || got[0] != wantJSON(t, 0) || got[699] != wantJSON(t, 699) {
		t.Fatalf("after a restart: %d requests", len(got))
	}
	l.Append(request(700))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// Tear the last chunk.
	segs, _ := filepath.Glob(filepath.Join(dir, "4545-x", "*"+segSuffix))
	last := segs[len(segs)-1]
	st, _ := os.Stat(last)
	if err := os.Truncate(last, st.Size()-3); err != nil {
		t.Fatal(err)
	}
	m = open(t, dir, true, o)
	l, _ = m.Open("4545-x", 5)
	if l.Len() != 5 {
		t.Fatalf("capped at 5 on opening: %d", l.Len())
	}
	s = l.Snapshot()
	got = all(t, s, false, 0)
	s.Close()
	// The torn chunk held 700 (alone: it was flushed at close).
	if len(got) != 5 || got[4] != wantJSON(t, 699) {
		t.Fatalf("after a torn write: %v", got)
	}
	l.Close(false)
	if _, err := os.Stat(filepath.Join(dir, "4545-x")); !os.IsNotExist(err) {
		t.Fatalf("a deleted imposter's requests stay: %v", err)
	}

	tmp := filepath.Join(t.TempDir(), "tmp")
	m2 := open(t, tmp, false, o)
	l2, _ := m2.Open("p", 0)
	l2.Append(request(1))
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the temporary folder stays: %v", err)
	}
}

// With Keep, requests reach the disk within FlushEvery even when no chunk
// fills: a crash loses at most that.
func TestFlushEvery(t *testing.T) {
	dir := t.TempDir()
	m := open(t, dir, true, Options{FlushEvery: 50 * time.Millisecond})
	l, _ := m.Open("p", 0)
	l.Append(request(0))
	deadline := time.Now().Add(5 * time.Second)
	for {
		segs, _ := filepath.Glob(filepath.Join(dir, "p", "*"+segSuffix))
		if len(segs) == 1 {
			if st, _ := os.Stat(segs[0]); st.Size() > segHdrLen+chunkHdrLen {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the request never reached the disk")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Many writers and readers at once (run with -race): every request is
// counted and read back once.
func TestConcurrentAppendsAndSnapshots(t *testing.T) {
	m := open(t, t.TempDir(), false, Options{ChunkBytes: 2 << 10, MemoryBytes: 8 << 10, SegmentBytes: 32 << 10})
	l, _ := m.Open("p", 0)
	var wg sync.WaitGroup
	const writers, each = 8, 400
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				l.Append(request(w*each + i))
			}
		})
	}
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	rwg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			s := l.Snapshot()
			n := 0
			if err := s.Each(0, func([]byte) bool { n++; return true }); err != nil {
				t.Error(err)
			}
			if int64(n) != s.Len() {
				t.Errorf("snapshot of %d read %d", s.Len(), n)
			}
			s.Close()
		}
	})
	wg.Wait()
	close(stop)
	rwg.Wait()
	s := l.Snapshot()
	defer s.Close()
	seen := map[string]bool{}
	if err := s.Each(0, func(rec []byte) bool { seen[render(t, rec)] = true; return true }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != writers*each {
		t.Fatalf("%d distinct requests read, want %d", len(seen), writers*each)
	}
}

// A name that is not one folder is refused, and one log per name is open.
func TestNames(t *testing.T) {
	m := open(t, t.TempDir(), false, Options{})
	for _, bad := range []string{"", "..", "a/b", ".hidden"} {
		if _, err := m.Open(bad, 0); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := m.Open("x", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open("x", 0); err == nil {
		t.Fatal("opened twice")
	}
}

// Sweep removes what no open or named log owns.
func TestSweep(t *testing.T) {
	dir := t.TempDir()
	m := open(t, dir, true, Options{})
	if _, err := m.Open("open", 0); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"named", "stale"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Sweep([]string{"named"}); err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]bool{"open": true, "named": true, "stale": false} {
		if _, err := os.Stat(filepath.Join(dir, d)); (err == nil) != want {
			t.Errorf("%s: exists=%v, want %v", d, err == nil, want)
		}
	}
}

// Appending costs no allocation once a chunk is under way (the hot path
// of every recorded request).
func TestAppendAllocations(t *testing.T) {
	m := open(t, t.TempDir(), false, Options{})
	l, _ := m.Open("p", 0)
	r := request(1)
	r.SetRemote("127.0.0.1:1", "127.0.0.1")
	l.Append(r)
	if a := testing.AllocsPerRun(100, func() { l.Append(r) }); a > 0.1 {
		t.Fatalf("%.1f allocations per append", a)
	}
}

func BenchmarkAppend(b *testing.B) {
	m, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	l, _ := m.Open("p", 0)
	r := request(1)
	r.Headers = append(r.Headers, message.KV{Name: "User-Agent", Value: "riftload"}, message.KV{Name: "Accept", Value: "*/*"})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Append(r)
		}
	})
}

func FuzzDecode(f *testing.F) {
	for i := range 6 {
		f.Add(AppendRecord(nil, request(i)))
	}
	f.Add([]byte{kindHTTP, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Record
		if err := r.Decode(b); err != nil {
			return
		}
		var out bytes.Buffer
		r.AppendJSON(&out)
		if _, err := RecordTime(b); err != nil {
			t.Fatalf("decoded, yet its time does not: %v", err)
		}
	})
}

// FuzzRecover opens a log whose segment holds arbitrary bytes after a
// valid start: whatever it keeps reads back without error.
func FuzzRecover(f *testing.F) {
	var seed []byte
	{
		c := append(make([]byte, chunkHdrLen), appendFramed(nil, AppendRecord(nil, request(1)))...)
		putChunkHeader(c, 1, 0)
		seed = append(segHeader(), c...)
	}
	f.Add(seed)
	f.Add(append(seed, seed[segHdrLen:]...))
	f.Add(append(seed, 1, 2, 3))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "p"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "p", fmt.Sprintf("%08d%s", 1, segSuffix)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Open(Options{Dir: dir, Keep: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		l, err := m.Open("p", 0)
		if err != nil {
			return
		}
		s := l.Snapshot()
		defer s.Close()
		n := int64(0)
		if err := s.Each(0, func([]byte) bool { n++; return true }); err != nil {
			// Headers are checked on opening, payloads of the last
			// segments too: a segment this short is the last.
			t.Fatalf("kept, yet unreadable: %v", err)
		}
		if n != s.Len() {
			t.Fatalf("read %d of %d", n, s.Len())
		}
	})
}

// Paging by number (a cluster member's pages): every request comes once,
// in order, whatever the page size, with a cap dropping the oldest meanwhile.
func TestPagesByNumber(t *testing.T) {
	m := open(t, t.TempDir(), false, Options{ChunkBytes: 1 << 10, MemoryBytes: 2 << 10})
	l, _ := m.Open("p", 0)
	const n = 1500
	for i := range n {
		l.Append(request(i))
	}
	for _, page := range []int{1, 700, 5000, 1 << 20} {
		var got []string
		seq, pages := int64(0), 0
		for {
			s := l.SnapshotFrom(seq, page)
			c := s.Cursor(0)
			for {
				q, rec, ok := c.Next()
				if !ok {
					break
				}
				if q < seq {
					t.Fatalf("page %d: number %d before %d", page, q, seq)
				}
				got = append(got, render(t, rec))
				seq = q + 1
			}
			if err := c.Err(); err != nil {
				t.Fatal(err)
			}
			more := s.More()
			s.Close()
			pages++
			if !more {
				break
			}
		}
		if len(got) != n || got[0] != wantJSON(t, 0) || got[n-1] != wantJSON(t, n-1) {
			t.Fatalf("page size %d: %d requests in %d pages", page, len(got), pages)
		}
	}
	// Numbers a cap dropped are skipped; the next page starts at the oldest kept.
	l.SetMax(10)
	s := l.SnapshotFrom(3, 0)
	defer s.Close()
	if got := all(t, s, false, 0); len(got) != 10 || got[0] != wantJSON(t, n-10) {
		t.Fatalf("after the cap: %d from %v", len(got), got[:1])
	}
	// A number within the active chunk starts there.
	l.Append(request(n))
	s2 := l.SnapshotFrom(int64(n), 0)
	defer s2.Close()
	if got := all(t, s2, false, 0); len(got) != 1 || got[0] != wantJSON(t, n) {
		t.Fatalf("from the last: %v", got)
	}
}

// Requests appended a little out of time order (served at once) come
// out in time order: a later one moves forward to the one before it.
func TestAppendOrdersTime(t *testing.T) {
	m := open(t, t.TempDir(), false, Options{})
	l, _ := m.Open("p", 0)
	for _, i := range []int{0, 5, 3, 9} {
		l.Append(request(i))
	}
	s := l.Snapshot()
	defer s.Close()
	var times []time.Time
	if err := s.Each(0, func(rec []byte) bool {
		at, err := RecordTime(rec)
		if err != nil {
			t.Fatal(err)
		}
		times = append(times, at)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	want := []int{0, 5, 5, 9}
	for k, at := range times {
		if !at.Equal(request(want[k]).Timestamp) {
			t.Fatalf("request %d at %s, want %s", k, at, request(want[k]).Timestamp)
		}
	}
}
