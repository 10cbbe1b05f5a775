package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/reqlog"
)

// sliceStream streams records made of requests.
type sliceStream struct {
	recs [][]byte
	fail error
}

func (s *sliceStream) next(context.Context) ([]byte, bool) {
	if len(s.recs) == 0 {
		return nil, false
	}
	r := s.recs[0]
	s.recs = s.recs[1:]
	return r, true
}
func (s *sliceStream) err() error { return s.fail }
func (s *sliceStream) close()     {}

func testRequest(i int, at time.Time, body string) *message.Request {
	r := &message.Request{Method: "POST", Path: "/p/" + strconv.Itoa(i), Timestamp: at,
		Query:   []message.KV{{Name: "q", Value: "<&>"}},
		Headers: []message.KV{{Name: "Content-Type", Value: "application/x-www-form-urlencoded"}},
		Body:    []byte(body)}
	r.SetRemote("127.0.0.1:1", "127.0.0.1")
	return r
}

// A streamed answer is byte for byte what indenting the whole JSON gives,
// small (sent with its length) or large (streamed), with no request, one
// or many, and at any depth.
func TestStreamedAnswerIsTheIndentedJSON(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, n := range []int{0, 1, 3, 4000} {
		for _, wrapped := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d requests, wrapped %v", n, wrapped), func(t *testing.T) {
				var recs [][]byte
				var whole []json.RawMessage
				for i := range n {
					r := testRequest(i, t0.Add(time.Duration(i)*time.Millisecond), "a=1&b="+strings.Repeat("x", i%500))
					recs = append(recs, reqlog.AppendRecord(nil, r))
					js, _ := r.MarshalJSON()
					whole = append(whole, js)
				}
				g := &gateway{log: slog.New(slog.DiscardHandler)}
				a := &answer{g: g}
				mark := markPrefix + "0"
				a.parts = append(a.parts, streamedImposter{mark, &sliceStream{recs: recs}})
				doc := `{"protocol":"http","requests":"` + mark + `","stubs":[{"responses":[]}]}`
				var wholeList []byte
				for i, js := range whole {
					if i > 0 {
						wholeList = append(wholeList, ',')
					}
					wholeList = append(wholeList, js...)
				}
				want := `{"protocol":"http","requests":[` + string(wholeList) + `],"stubs":[{"responses":[]}]}`
				if wrapped {
					doc = `{"imposters":[` + doc + `,{"port":1}]}`
					want = `{"imposters":[` + want + `,{"port":1}]}`
				}
				var ind bytes.Buffer
				if err := json.Indent(&ind, []byte(want), "", "  "); err != nil {
					t.Fatal(err)
				}
				rec := httptest.NewRecorder()
				a.write(context.Background(), rec, http.StatusOK, json.RawMessage(doc))
				if got := rec.Body.String(); got != ind.String() {
					t.Fatalf("got\n%.600s\nwant\n%.600s", got, ind.String())
				}
				cl := rec.Header().Get("Content-Length")
				if big := ind.Len() > spillBytes; big != (cl == "") {
					t.Fatalf("%d bytes answered with Content-Length %q", ind.Len(), cl)
				}
			})
		}
	}
}

// Merged streams come out by time; equal times keep the streams' order.
func TestMergeStreamsByTime(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mk := func(ids ...int) *sliceStream {
		s := &sliceStream{}
		for _, id := range ids {
			s.recs = append(s.recs, reqlog.AppendRecord(nil, testRequest(id, t0.Add(time.Duration(id/10)*time.Millisecond), "")))
		}
		return s
	}
	// id/10 is the time: 10 and 11 are equal, and so on.
	m := mergeStreams(slog.New(slog.DiscardHandler), []recordStream{mk(0, 10, 30, 50), mk(11, 20), mk(), mk(1, 40, 60)})
	var got []string
	var r reqlog.Record
	for {
		b, ok := m.next(context.Background())
		if !ok {
			break
		}
		if err := r.Decode(b); err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.TrimPrefix(r.Request.Path, "/p/"))
	}
	if want := "0 1 10 11 20 30 40 50 60"; strings.Join(got, " ") != want {
		t.Fatalf("merged %v, want %s", got, want)
	}
}

func TestRequestContains(t *testing.T) {
	r := &message.Request{Method: "GET", Path: "/Users/Éva", Body: []byte("Hello World"),
		Query: []message.KV{{Name: "page", Value: "a=b"}}, Headers: []message.KV{{Name: "X-Trace", Value: "ABC"}}}
	for _, c := range []struct {
		q    string
		want bool
	}{
		{"get", true}, {"/users", true}, {"éva", true}, {"world", true},
		{"page=a", true}, {"age=a=b", true}, {"x-trace=abc", true}, {"trace=ab", true},
		{"page=b", false}, {"x-trace=abcd", false}, {"nothing", false}, {"", true},
	} {
		if got := requestContains(r, []byte(strings.ToLower(c.q))); got != c.want {
			t.Errorf("%q: %v, want %v", c.q, got, c.want)
		}
	}
}

// A process's temporary folder is named for its pid; those of processes
// gone are removed, and nothing else is.
func TestTempDirSweepsTheDead(t *testing.T) {
	for _, c := range []struct {
		name string
		pid  int
		ok   bool
	}{
		{"riftgate-123-456", 123, true},
		{"riftgate-123-", 0, false},
		{"riftgate-bin-456", 0, false},
		{"riftgate-wasm-cache-1", 0, false},
		{"riftgate-12-34x", 0, false},
		{"other-12-34", 0, false},
	} {
		if pid, ok := tempDirPid(c.name); pid != c.pid || ok != c.ok {
			t.Errorf("%s: %d %v", c.name, pid, ok)
		}
	}
	t.Setenv("TMPDIR", t.TempDir())
	// Pid 2^22+1 is past Linux's pid_max: no process has it.
	dead := filepath.Join(os.TempDir(), "riftgate-4194305-1")
	alive := filepath.Join(os.TempDir(), "riftgate-"+strconv.Itoa(os.Getppid())+"-1")
	for _, d := range []string{dead, alive} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := tempDir(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("a dead process's folder stays: %v", err)
	}
	for _, d := range []string{alive, dir} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
}

// The collector's pauses come as a histogram whose buckets only grow and
// whose count is the runtime's.
func TestGCPauseHistogram(t *testing.T) {
	runtime.GC()
	runtime.GC()
	p := &promWriter{}
	gcPauses(p, time.Millisecond)
	var last uint64
	var count string
	for _, line := range strings.Split(p.b.String(), "\n") {
		if strings.HasPrefix(line, "riftgate_go_gc_pause_seconds_bucket") {
			n, err := strconv.ParseUint(line[strings.LastIndexByte(line, ' ')+1:], 10, 64)
			if err != nil || n < last {
				t.Fatalf("bucket %q after %d", line, last)
			}
			last = n
		}
		if v, ok := strings.CutPrefix(line, "riftgate_go_gc_pause_seconds_count "); ok {
			count = v
		}
	}
	if last < 2 || count != strconv.FormatUint(last, 10) || !strings.Contains(p.b.String(), "riftgate_go_gc_pause_seconds_sum 0.001\n") {
		t.Fatalf("%s", p.b.String())
	}
}

// The log ring wraps around as many times as lines come, keeping the
// newest with their absolute indexes, and cuts a long message.
func TestLogRingWraps(t *testing.T) {
	r := newLogRing(4)
	for i := range 1003 {
		r.add(LogEntry{Message: strconv.Itoa(i)})
	}
	var got []string
	for _, e := range r.slice(0, -1) {
		got = append(got, e.Message)
	}
	if strings.Join(got, ",") != "999,1000,1001,1002" {
		t.Fatalf("kept %v", got)
	}
	if s := r.slice(1000, 1001); len(s) != 2 || s[0].Message != "1000" {
		t.Fatalf("slice(1000, 1001) = %v", s)
	}
	past, _, stop := r.follow(1000, 10)
	stop()
	if len(past) != 2 || past[0].i != 1001 || past[1].e.Message != "1002" {
		t.Fatalf("follow after 1000: %+v", past)
	}
	r.add(LogEntry{Message: strings.Repeat("é", maxLogMessage)})
	last := r.slice(1003, 1003)[0].Message
	if len(last) > maxLogMessage+64 || !utf8.ValidString(last) || !strings.HasSuffix(last, "(cut; the log has it whole)") {
		t.Fatalf("a long message kept as %d bytes", len(last))
	}
}

// A line costs the same however full the ring (it copied the whole ring
// once full: 10000 entries per line).
func BenchmarkLogRingAdd(b *testing.B) {
	r := newLogRing(10000)
	e := LogEntry{Level: "error", Message: "error generating response err=connection refused"}
	for b.Loop() {
		r.add(e)
	}
}

// Marks are replaced wherever they are in the answer, in any order.
func TestStreamedAnswerMarksInAnyOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r0, r1 := testRequest(0, t0, ""), testRequest(1, t0, "")
	a := &answer{g: &gateway{log: slog.New(slog.DiscardHandler)}}
	a.parts = []streamedImposter{
		{markPrefix + "0", &sliceStream{recs: [][]byte{reqlog.AppendRecord(nil, r0)}}},
		{markPrefix + "1", &sliceStream{recs: [][]byte{reqlog.AppendRecord(nil, r1)}}},
	}
	doc := `{"imposters":[{"requests":"` + markPrefix + `1"},{"requests":"` + markPrefix + `0"}]}`
	j0, _ := r0.MarshalJSON()
	j1, _ := r1.MarshalJSON()
	var want bytes.Buffer
	if err := json.Indent(&want, []byte(`{"imposters":[{"requests":[`+string(j1)+`]},{"requests":[`+string(j0)+`]}]}`), "", "  "); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	a.write(context.Background(), rec, http.StatusOK, json.RawMessage(doc))
	if rec.Body.String() != want.String() {
		t.Fatalf("got\n%s\nwant\n%s", rec.Body.String(), want.String())
	}
}
