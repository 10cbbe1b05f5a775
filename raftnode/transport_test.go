package raftnode

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

func TestTransportRefusesUnauthenticatedAndOversized(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, func(cfg *Config) {
		cfg.MaxMessageBytes = 64 << 10
		cfg.MaxCommandBytes = 16 << 10
	})
	n1 := c.start("n1", true)
	c.leader(10 * time.Second)
	base := "http://" + n1.addr + "/raft"
	frame, err := encodeFrame([]*pb.Message{{Type: pb.MsgHeartbeat.Enum(), To: new(n1.g.ID()), From: new(uint64(77))}})
	if err != nil {
		t.Fatal(err)
	}
	spoofed, _ := encodeFrame([]*pb.Message{{Type: pb.MsgHeartbeat.Enum(), To: new(n1.g.ID()), From: new(uint64(78))}})
	misaddressed, _ := encodeFrame([]*pb.Message{{Type: pb.MsgHeartbeat.Enum(), To: new(uint64(5)), From: new(uint64(77))}})
	injected, _ := encodeFrame([]*pb.Message{{Type: pb.MsgProp.Enum(), To: new(n1.g.ID()), From: new(uint64(77)),
		Entries: []*pb.Entry{{Data: []byte("x")}}}})
	post := func(path string, body []byte, secret []byte, group string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
		req.Header.Set(hdrGroup, group)
		req.Header.Set(hdrFrom, strconv.FormatUint(77, 16))
		req.Header.Set(hdrURL, "http://127.0.0.1:1/raft")
		if secret != nil {
			st := newStamp(time.Now())
			st.set(req.Header)
			req.Header.Set(hdrAuth, authTag(secret, group, path, 77, "http://127.0.0.1:1/raft", st, body))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name   string
		path   string
		body   []byte
		secret []byte
		group  string
		want   int
	}{
		{"no signature", pathMessage, frame, nil, "counter", http.StatusUnauthorized},
		{"wrong secret", pathMessage, frame, []byte("another-secret-of-16"), "counter", http.StatusUnauthorized},
		{"wrong group", pathMessage, frame, testSecret, "other", http.StatusUnauthorized},
		{"signed for another path", pathPropose, frame, testSecret, "counter", http.StatusUnauthorized},
		{"over the body cap", pathMessage, make([]byte, 65<<10), testSecret, "counter", http.StatusRequestEntityTooLarge},
		{"forwarded proposal over its cap", pathPropose, make([]byte, 32<<10), testSecret, "counter", http.StatusRequestEntityTooLarge},
		{"garbage frame", pathMessage, []byte{9, 9}, testSecret, "counter", http.StatusBadRequest},
		{"speaks for another node", pathMessage, spoofed, testSecret, "counter", http.StatusBadRequest},
		{"addressed to another node", pathMessage, misaddressed, testSecret, "counter", http.StatusBadRequest},
		{"proposal smuggled as a message", pathMessage, injected, testSecret, "counter", http.StatusBadRequest},
		{"authenticated", pathMessage, frame, testSecret, "counter", http.StatusOK},
	} {
		path := tc.path
		if tc.name == "signed for another path" {
			// Sign for /propose, send to /message.
			req, _ := http.NewRequest(http.MethodPost, base+pathMessage, bytes.NewReader(tc.body))
			req.Header.Set(hdrGroup, tc.group)
			req.Header.Set(hdrFrom, "4d")
			st := newStamp(time.Now())
			st.set(req.Header)
			req.Header.Set(hdrAuth, authTag(tc.secret, tc.group, pathPropose, 77, "", st, tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
			}
			continue
		}
		if got := post(path, tc.body, tc.secret, tc.group); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	// The admin API is authenticated too.
	resp, err := http.Get("http://" + n1.addr + "/cluster/members")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unsigned admin call: %d", resp.StatusCode)
	}
	bad := &AdminClient{BaseURL: "http://" + n1.addr + "/cluster", Group: "counter", Secret: []byte("wrong-secret-wrong!")}
	if err := bad.Do(context.Background(), http.MethodGet, "/members", nil, nil); err == nil {
		t.Error("admin call with the wrong secret succeeded")
	}
	// Proposals over MaxCommandBytes are refused before they reach the log.
	if _, err := n1.g.ProposeAndWait(context.Background(), counterCmd{Add: 1, Pad: make([]byte, 17<<10)}); !errors.Is(err, ErrCommandTooLarge) {
		t.Errorf("oversized proposal: %v", err)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestCatchUpSizing(t *testing.T) {
	for _, tc := range []struct {
		name       string
		msg        int64
		perMsg     uint64
		command    int
		wantErr    bool
		wantPerMsg uint64
	}{
		{"defaults fit", 16 << 20, 1 << 20, 1 << 20, false, 1 << 20},
		{"per-message capped to the body cap", 1 << 20, 4 << 20, 64 << 10, false, 1<<20 - frameOverhead},
		{"command cannot fit", 1 << 20, 64 << 10, 1 << 20, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{NodeName: "n", GroupID: "g", DataDir: t.TempDir(), AdvertiseURL: "http://x", Secret: testSecret,
				MaxMessageBytes: tc.msg, MaxSizePerMsg: tc.perMsg, MaxCommandBytes: tc.command, Logger: testLogger(t)}
			err := cfg.normalize()
			if (err != nil) != tc.wantErr {
				t.Fatalf("normalize: %v", err)
			}
			if err == nil && cfg.MaxSizePerMsg != tc.wantPerMsg {
				t.Fatalf("MaxSizePerMsg %d, want %d", cfg.MaxSizePerMsg, tc.wantPerMsg)
			}
			if tc.wantErr {
				if _, err := Bootstrap(context.Background(), cfg, counterApp{}, nil); !errors.Is(err, ErrConfig) {
					t.Fatalf("Bootstrap accepted an impossible config: %v", err)
				}
			}
		})
	}
}

// TestLaggingFollowerCatchesUpWithLargeCommands: with a small body cap and
// commands near MaxCommandBytes, a follower that missed many of them still
// rejoins, because bootstrap capped MaxSizePerMsg to the cap.
func TestLaggingFollowerCatchesUpWithLargeCommands(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.MaxMessageBytes = 256 << 10
		cfg.MaxCommandBytes = 100 << 10
		cfg.MaxSizePerMsg = 8 << 20 // would be refused with 413 forever if not capped
	})
	c.start("n1", true)
	c.leader(10 * time.Second)
	c.start("n2", false)
	c.start("n3", false)
	c.grow("n1", "n2")
	c.grow("n1", "n3")
	c.stop("n3")
	l := c.leader(10 * time.Second)
	for range 10 {
		propose(t, l, 1)
	}
	for range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := l.g.ProposeAndWait(ctx, counterCmd{Add: 1, Pad: make([]byte, 90<<10)}); err != nil {
			cancel()
			t.Fatal(err)
		}
		cancel()
	}
	c.start("n3", false)
	c.waitValue(20, "n1", "n2", "n3")
}

func TestEffectsPublishAfterUnlock(t *testing.T) {
	store := openTestStorage(t, t.TempDir())
	defer store.Close()
	obs := &readBackObserver{}
	sm, err := NewStateMachine[counterState, counterCmd, counterResp](store, counterApp{}, obs, nil)
	if err != nil {
		t.Fatal(err)
	}
	obs.ro = sm.ReadOnly()
	var ents []*pb.Entry
	for i := uint64(1); i <= 3; i++ {
		d, _ := CommandEntryData(counterCmd{Add: 2})
		ents = append(ents, &pb.Entry{Index: new(i), Term: new(uint64(1)), Type: pb.EntryNormal.Enum(), Data: d})
	}
	if _, err := sm.ApplyEntries(ents); err != nil {
		t.Fatal(err)
	}
	if obs.hooks.Load() != 3 {
		t.Fatalf("%d hooks ran", obs.hooks.Load())
	}
	// Each effect ran after the whole batch applied and the lock was
	// released: it could read the state back, and saw the final value.
	if len(obs.seen) != 3 || obs.seen[0] != 6 || obs.seen[2] != 6 {
		t.Fatalf("effects saw %v, want the whole batch (6) three times", obs.seen)
	}
}

type readBackObserver struct {
	NopObserver[counterState, counterCmd, counterResp]
	ro    ReadOnlyState[counterState]
	hooks atomic.Int32
	mu    sync.Mutex
	seen  []int64
}

func (o *readBackObserver) OnApply(fx *Effects, s *counterState, _ counterCmd, _ counterResp, _ uint64) {
	o.hooks.Add(1)
	fx.Defer(func() {
		var v int64 = -1
		if !o.ro.TryRead(func(s *counterState, _ uint64) { v = s.Value }) {
			v = -2 // the lock was still held
		}
		o.mu.Lock()
		o.seen = append(o.seen, v)
		o.mu.Unlock()
	})
}

// A message counts as heard when it was sent, not when it arrived: one
// that arrives long after its stamp (a segment TCP retransmitted across a
// healed partition) does not make its sender look alive now, whatever the
// skew between the two clocks.
func TestLateMessagesAreHeardWhenSent(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	for _, skew := range []time.Duration{0, 2 * time.Second, -40 * time.Second} {
		var h heard
		// Sender clock = receiver clock - skew; 1 ms on the wire.
		msg := func(sentAt, arrivesAt time.Duration) time.Time {
			h.note(t0.Add(sentAt-skew), t0.Add(arrivesAt))
			return h.at
		}
		for i := range 10 {
			at := time.Duration(i) * 100 * time.Millisecond
			if got := msg(at, at+time.Millisecond); !got.Equal(t0.Add(at + time.Millisecond)) {
				t.Fatalf("skew %v: a message on time counted at %v, want its arrival", skew, got.Sub(t0))
			}
		}
		// Sent at 1 s, delivered at 4 s: heard when sent.
		if got := msg(time.Second, 4*time.Second); got.Sub(t0) != 1001*time.Millisecond {
			t.Fatalf("skew %v: a message 3 s late counted at %v", skew, got.Sub(t0))
		}
		// Sent at 0.5 s, delivered at 4.01 s: older than what was heard.
		if got := msg(500*time.Millisecond, 4010*time.Millisecond); got.Sub(t0) != 1001*time.Millisecond {
			t.Fatalf("skew %v: an older late message moved heard to %v", skew, got.Sub(t0))
		}
		// The least delay renews itself: a lasting change of the skew is
		// learned within a minute.
		for i := range 70 {
			at := 5*time.Second + time.Duration(i)*time.Second
			msg(at, at+501*time.Millisecond)
		}
		if got := msg(80*time.Second, 80*time.Second+501*time.Millisecond); got.Sub(t0) != 80*time.Second+501*time.Millisecond {
			t.Fatalf("skew %v: after a lasting 0.5 s change, heard at %v", skew, got.Sub(t0))
		}
	}
}

// A message that waited in a peer's queue longer than staleAfter is not
// sent: its batch goes without it, and raft is told the peer is
// unreachable so that it resends what mattered.
func TestStaleQueuedMessagesAreDropped(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		msgs, err := decodeFrame(body)
		if err != nil {
			t.Error(err)
		}
		for _, m := range msgs {
			got.Add(int64(m.GetCommit()))
		}
		st, _ := readStamp(r.Header)
		NewPeerAuth("g", testSecret).SignAnswer(w.Header(), pathMessage, 2, st.nonce, nil)
	}))
	defer srv.Close()
	var unreachable atomic.Int64
	tr := &transport{auth: NewPeerAuth("g", testSecret), self: 1, client: srv.Client(), msgCap: 1 << 20,
		staleAfter: 500 * time.Millisecond, log: slog.New(slog.DiscardHandler),
		resolve:  func(uint64) string { return srv.URL },
		reportUR: func(uint64) { unreachable.Add(1) }}
	tr.start(context.Background())
	defer tr.stop()
	p := &peer{id: 2, q: make(chan queued, 4)}
	p.q <- queued{&pb.Message{Type: pb.MsgHeartbeat.Enum(), To: new(uint64(2)), Commit: new(uint64(1))}, time.Now().Add(-time.Second)}
	p.q <- queued{&pb.Message{Type: pb.MsgHeartbeat.Enum(), To: new(uint64(2)), Commit: new(uint64(10))}, time.Now()}
	tr.wg.Add(1)
	go tr.runPeer(p)
	deadline := time.Now().Add(5 * time.Second)
	for got.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got.Load() != 10 || unreachable.Load() != 1 {
		t.Fatalf("delivered commits summing to %d (want 10: the fresh one only), %d unreachable reports", got.Load(), unreachable.Load())
	}
}
