package examples_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riftgate/riftgate/plugins"
)

// call runs one handle call and fails the test unless the plugin wrote a
// response and returned 0.
func call(t testing.TB, h *plugins.Host, module string, in *plugins.Input) plugins.Response {
	t.Helper()
	out, err := h.Call(context.Background(), module, "handle", in)
	if err != nil {
		t.Fatalf("%s: %v", module, err)
	}
	if out.Result != 0 || !out.Wrote {
		t.Fatalf("%s: result %d, wrote %v", module, out.Result, out.Wrote)
	}
	return out.Response
}

func header(r plugins.Response, name string) string {
	for _, p := range r.Headers {
		if strings.EqualFold(p.Name, name) {
			return p.Value
		}
	}
	return ""
}

func request(method, path string, f plugins.Flow, config string) *plugins.Input {
	return &plugins.Input{
		Method: method, Path: path, FlowID: "i4600:test", RequestFrom: plugins.Str("127.0.0.1:40000"),
		Config: []byte(config), Flow: f,
	}
}

// concurrentCounts fires n calls at one flow from several goroutines and
// returns the counts the plugin answered, sorted.
func concurrentCounts(t *testing.T, h *plugins.Host, module, config string, f *storeFlow, n int, parse func([]byte) (int, error)) []int {
	t.Helper()
	var (
		mu   sync.Mutex
		got  []int
		wg   sync.WaitGroup
		errs = make(chan error, n)
	)
	const workers = 8
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				out, err := h.Call(context.Background(), module, "handle", request("GET", "/", f, config))
				if err != nil || !out.Wrote {
					errs <- fmt.Errorf("call: %v (wrote %v)", err, out.Wrote)
					return
				}
				c, err := parse(out.Response.Body)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				got = append(got, c)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	slices.Sort(got)
	return got
}

func oneToN(n int) []int {
	want := make([]int, n)
	for i := range want {
		want[i] = i + 1
	}
	return want
}

func TestCounterWATCountsPerFlow(t *testing.T) {
	h := register(t, "counter-wat")
	s := newStore(t)
	a, b := newFlow(s, "i4606:a"), newFlow(s, "i4606:b")
	for i := 1; i <= 12; i++ { // past 9, so the digits loop carries
		r := call(t, h, "counter-wat", request("GET", "/", a, "null"))
		if string(r.Body) != strconv.Itoa(i) || header(r, "Content-Type") != "text/plain" || r.Status != 200 {
			t.Fatalf("call %d: %d %v %q", i, r.Status, r.Headers, r.Body)
		}
	}
	if r := call(t, h, "counter-wat", request("GET", "/", b, "null")); string(r.Body) != "1" {
		t.Fatalf("flow b: %q", r.Body)
	}
	if v, _ := a.value(t, "n"); v != "12" {
		t.Fatalf("stored %q", v)
	}
	if a.opCount("put") != 0 || a.opCount("cas") != 12 || a.opCount("get") != 12 {
		t.Fatalf("want one get and one CAS per call, got %v", a.ops)
	}
}

func TestCounterWATConcurrentCASRetry(t *testing.T) {
	h := register(t, "counter-wat")
	f := newFlow(newStore(t), "i4606:hot")
	const n = 200
	got := concurrentCounts(t, h, "counter-wat", "null", f, n, func(b []byte) (int, error) { return strconv.Atoi(string(b)) })
	if !slices.Equal(got, oneToN(n)) {
		t.Fatalf("counts %v, want 1..%d each once", got, n)
	}
}

// The host's yardstick does what its name says, and only that: one get and
// one put per call, the fixed answer, and the value stored.
func TestFlowbenchWAT(t *testing.T) {
	h := register(t, "flowbench-wat")
	f := newFlow(newStore(t), "i4608:f")
	for range 3 {
		r := call(t, h, "flowbench-wat", request("GET", "/", f, "null"))
		if r.Status != 200 || string(r.Body) != "ok" || header(r, "Content-Type") != "text/plain" {
			t.Fatalf("%d %v %q", r.Status, r.Headers, r.Body)
		}
	}
	if v, _ := f.value(t, "bench"); v != "01234567" {
		t.Fatalf("stored %q", v)
	}
	if f.opCount("get") != 3 || f.opCount("put") != 3 || len(f.ops) != 2 {
		t.Fatalf("want one get and one put per call, got %v", f.ops)
	}
	f.mu.Lock()
	f.down = true
	f.mu.Unlock()
	if out, err := h.Call(context.Background(), "flowbench-wat", "handle", request("GET", "/", f, "null")); err != nil || out.Wrote || !out.Unavailable {
		t.Fatalf("store down: %v %+v, want no response and Unavailable", err, out)
	}
}

func TestTokenBucketRust(t *testing.T) {
	h := register(t, "tokenbucket-rust")
	s := newStore(t)
	// No refill: exactly capacity calls pass, then 429.
	cfg := `{"key":"bucket","capacity":3,"refillPerSecond":0}`
	a := newFlow(s, "i4603:a")
	for i := 1; i <= 3; i++ {
		r := call(t, h, "tokenbucket-rust", request("GET", "/", a, cfg))
		if want := fmt.Sprintf(`{"allowed":true,"remaining":%d}`, 3-i); r.Status != 200 || string(r.Body) != want {
			t.Fatalf("call %d: %d %s, want 200 %s", i, r.Status, r.Body, want)
		}
	}
	for range 2 {
		r := call(t, h, "tokenbucket-rust", request("GET", "/", a, cfg))
		if r.Status != 429 || string(r.Body) != `{"allowed":false,"remaining":0}` {
			t.Fatalf("over the limit: %d %s", r.Status, r.Body)
		}
	}
	// Another flow has its own bucket.
	if r := call(t, h, "tokenbucket-rust", request("GET", "/", newFlow(s, "i4603:b"), cfg)); r.Status != 200 {
		t.Fatalf("flow b: %d", r.Status)
	}

	// Refill from now_ms: a bucket emptied two seconds ago at 1 token/s
	// holds two tokens now. The test writes the state as an inject script
	// would, so it need not sleep.
	cfg = `{"key":"bucket","capacity":5,"refillPerSecond":1}`
	c := newFlow(s, "i4603:c")
	past := time.Now().Add(-2*time.Second - 100*time.Millisecond).UnixMilli()
	if err := c.Put(context.Background(), []byte("bucket"), fmt.Appendf(nil, `{"milliTokens":0,"at":%d}`, past)); err != nil {
		t.Fatal(err)
	}
	var statuses []int
	for range 3 {
		statuses = append(statuses, call(t, h, "tokenbucket-rust", request("GET", "/", c, cfg)).Status)
	}
	if !slices.Equal(statuses, []int{200, 200, 429}) {
		t.Fatalf("after 2.1 s of refill: %v, want [200 200 429]", statuses)
	}
	r := call(t, h, "tokenbucket-rust", request("GET", "/", c, cfg))
	if ra := header(r, "Retry-After"); ra != "1" {
		t.Fatalf("Retry-After %q, want 1", ra)
	}
}

func TestTokenBucketRustConcurrent(t *testing.T) {
	h := register(t, "tokenbucket-rust")
	f := newFlow(newStore(t), "i4603:hot")
	cfg := `{"capacity":10,"refillPerSecond":0}`
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[int]int{}
	for range 8 {
		wg.Go(func() {
			for range 5 {
				out, err := h.Call(context.Background(), "tokenbucket-rust", "handle", request("GET", "/", f, cfg))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				counts[out.Response.Status]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if counts[200] != 10 || counts[429] != 30 {
		t.Fatalf("statuses %v, want exactly 10 allowed of 40", counts)
	}
}

func TestEchoC(t *testing.T) {
	h := register(t, "echo-c")
	tests := []struct {
		name, template string
		in             plugins.Input
		want           string
	}{
		{"path and query", "hello {{path}} {{query.name}}",
			plugins.Input{Path: "/greet", Query: []plugins.Pair{{Name: "name", Value: "Ada"}}}, "hello /greet Ada"},
		{"missing query", "hello {{query.name}}!", plugins.Input{Path: "/"}, "hello !"},
		{"header any case", "{{header.x-user}}|{{header.X-USER}}",
			plugins.Input{Headers: []plugins.Pair{{Name: "X-User", Value: "bob"}}}, "bob|bob"},
		{"request parts", "{{method}} {{body}} {{flow}} {{requestFrom}}",
			plugins.Input{Method: "POST", Body: []byte("b0dy"), FlowID: "i1:f", RequestFrom: plugins.Str("1.2.3.4:5")}, "POST b0dy i1:f 1.2.3.4:5"},
		{"unknown name", "[{{nope}}]", plugins.Input{}, "[]"},
		{"unterminated", "a {{path", plugins.Input{Path: "/x"}, "a {{path"},
		{"escapes", `tab\there \u00e9 \ud83d\ude00 \"q\"`, plugins.Input{}, "tab\there é 😀 \"q\""},
		{"repeated query", "{{query.a}}",
			plugins.Input{Query: []plugins.Pair{{Name: "a", Value: "1"}, {Name: "a", Value: "2"}}}, "1,2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Config = []byte(`{"other":{"template":"no"},"template":"` + tc.template + `","contentType":"text/x-echo"}`)
			r := call(t, h, "echo-c", &in)
			if r.Status != 200 || string(r.Body) != tc.want || header(r, "Content-Type") != "text/x-echo" {
				t.Fatalf("got %d %v %q, want %q", r.Status, r.Headers, r.Body, tc.want)
			}
		})
	}
	t.Run("no template", func(t *testing.T) {
		r := call(t, h, "echo-c", &plugins.Input{Config: []byte(`null`)})
		if r.Status != 500 || !strings.Contains(string(r.Body), "template") {
			t.Fatalf("got %d %q", r.Status, r.Body)
		}
	})
}

func TestSequenceAS(t *testing.T) {
	h := register(t, "sequence-as")
	s := newStore(t)
	cfg := `{"first":"pending","second":"processing","third":"done"}`
	o1, o2 := newFlow(s, "i4605:o1"), newFlow(s, "i4605:o2")
	want := []struct {
		status int
		body   string
	}{{202, "pending"}, {202, "processing"}, {200, "done"}, {200, "done"}}
	for i, w := range want {
		r := call(t, h, "sequence-as", request("GET", "/", o1, cfg))
		if r.Status != w.status || string(r.Body) != w.body || header(r, "X-Sequence-Step") != strconv.Itoa(i+1) {
			t.Fatalf("call %d: %d %q %v, want %d %q", i+1, r.Status, r.Body, r.Headers, w.status, w.body)
		}
	}
	if r := call(t, h, "sequence-as", request("GET", "/", o2, cfg)); string(r.Body) != "pending" {
		t.Fatalf("o2's first call: %q", r.Body)
	}
	// Defaults when the config names nothing.
	if r := call(t, h, "sequence-as", request("GET", "/", newFlow(s, "i4605:o3"), "null")); string(r.Body) != "first" {
		t.Fatalf("default first body: %q", r.Body)
	}
}

// The AssemblyScript kit collects after every call: thousands of calls on
// one instance must neither fail nor get the instance discarded.
func TestSequenceASMemoryIsReclaimed(t *testing.T) {
	h := register(t, "sequence-as")
	f := newFlow(newStore(t), "i4605:long")
	big := strings.Repeat("x", 4000) // each call allocates several copies
	cfg := `{"first":"` + big + `","second":"b","third":"c"}`
	for i := range 3000 {
		out, err := h.Call(context.Background(), "sequence-as", "handle", request("GET", "/", f, cfg))
		if err != nil || !out.Wrote {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	for _, st := range h.Stats() {
		if st.Name == "sequence-as" && (st.Discarded != 0 || len(st.Errors) != 0) {
			t.Fatalf("stats %+v", st)
		}
	}
}

// When the flow's owner is unreachable every stateful example gives up
// without a response, so the engine answers 503 rather than a wrong count.
func TestUnavailableFlowWritesNoResponse(t *testing.T) {
	for _, m := range []string{"counter-wat", "tokenbucket-rust", "sequence-as"} {
		t.Run(m, func(t *testing.T) {
			h := register(t, m)
			f := newFlow(newStore(t), "i1:down")
			f.down = true
			out, err := h.Call(context.Background(), m, "handle", request("GET", "/", f, "null"))
			if err != nil {
				t.Fatal(err)
			}
			if out.Wrote || out.Result == 0 || !out.Unavailable {
				t.Fatalf("output %+v, want no response, a non-zero result and Unavailable", out)
			}
		})
	}
}

func TestEchoCMatchesAndDecorate(t *testing.T) {
	h := register(t, "echo-c")
	cfg := []byte(`{"require":"query.name","template":"{{method}} {{query.name}}","header":"X-Seen"}`)
	for _, tc := range []struct {
		query []plugins.Pair
		want  int32
	}{
		{[]plugins.Pair{{Name: "name", Value: "Ada"}}, 1},
		{[]plugins.Pair{{Name: "name", Value: ""}}, 0},
		{nil, 0},
	} {
		out, err := h.Call(context.Background(), "echo-c", "matches", &plugins.Input{Method: "GET", Path: "/", Query: tc.query, Config: cfg})
		if err != nil || out.Result != tc.want {
			t.Fatalf("matches %v: %d %v, want %d", tc.query, out.Result, err, tc.want)
		}
	}

	in := &plugins.Input{
		Method: "POST", Path: "/", Query: []plugins.Pair{{Name: "name", Value: "Ada"}}, Config: cfg,
		Response: &plugins.Response{Status: 201, Headers: []plugins.Pair{{Name: "Content-Type", Value: "a/b"}}, Body: []byte("kept")},
	}
	out, err := h.Call(context.Background(), "echo-c", "decorate", in)
	if err != nil || out.Result != 0 || !out.Wrote {
		t.Fatalf("decorate: %v %+v", err, out)
	}
	r := out.Response
	if r.Status != 201 || string(r.Body) != "kept" || header(r, "Content-Type") != "a/b" || header(r, "X-Seen") != "POST Ada" {
		t.Fatalf("decorated response %d %v %q", r.Status, r.Headers, r.Body)
	}
}

// tokenbucket-rust's decorate export applies the limit to any response.
func TestTokenBucketRustDecorate(t *testing.T) {
	h := register(t, "tokenbucket-rust")
	f := newFlow(newStore(t), "i4603:d")
	stub := &plugins.Response{Status: 201, Headers: []plugins.Pair{{Name: "Content-Type", Value: "text/plain"}}, Body: []byte("made")}
	var got []string
	for range 3 {
		in := request("GET", "/", f, `{"capacity":2,"refillPerSecond":0}`)
		in.Response = stub
		out, err := h.Call(context.Background(), "tokenbucket-rust", "decorate", in)
		if err != nil || out.Result != 0 || !out.Wrote {
			t.Fatalf("decorate: %v %+v", err, out)
		}
		r := out.Response
		got = append(got, fmt.Sprintf("%d %s %s", r.Status, r.Body, header(r, "X-RateLimit-Remaining")))
	}
	want := []string{"201 made 1", "201 made 0", `429 {"allowed":false,"remaining":0} `}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	f.down = true
	in := request("GET", "/", f, "null")
	in.Response = stub
	if out, err := h.Call(context.Background(), "tokenbucket-rust", "decorate", in); err != nil || out.Result == 0 || out.Wrote || !out.Unavailable {
		t.Fatalf("decorate with the flow down: %v %+v", err, out)
	}
}

func TestSequenceASMatchesAndDecorate(t *testing.T) {
	h := register(t, "sequence-as")
	f := newFlow(newStore(t), "i4605:md")
	matches := func() int32 {
		out, err := h.Call(context.Background(), "sequence-as", "matches", request("GET", "/", f, "null"))
		if err != nil {
			t.Fatal(err)
		}
		return out.Result
	}
	var got []string
	for range 4 {
		m := matches()
		in := request("GET", "/", f, "null")
		in.Response = &plugins.Response{Status: 204, Headers: []plugins.Pair{{Name: "A", Value: "b"}}}
		out, err := h.Call(context.Background(), "sequence-as", "decorate", in)
		if err != nil || out.Result != 0 || !out.Wrote {
			t.Fatalf("decorate: %v %+v", err, out)
		}
		r := out.Response
		got = append(got, fmt.Sprintf("%d:%d %s %s", m, r.Status, header(r, "A"), header(r, "X-Sequence-Step")))
	}
	// The predicate only reads: it matches until three calls were decorated.
	want := []string{"1:204 b 1", "1:204 b 2", "1:204 b 3", "0:204 b 4"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
