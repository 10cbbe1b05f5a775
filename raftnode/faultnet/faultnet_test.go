package faultnet

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFaults(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	// The same seed draws the same drops.
	pattern := func(seed uint64) []bool {
		n := New(seed)
		defer n.Close()
		n.Register("b", host)
		n.SetDrop(0.3)
		c := n.Client("a")
		var out []bool
		for range 40 {
			resp, err := c.Get(srv.URL)
			if err == nil {
				resp.Body.Close()
			} else if !errors.Is(err, ErrInjected) {
				t.Fatal(err)
			}
			out = append(out, err != nil)
		}
		return out
	}
	p1, p2 := pattern(7), pattern(7)
	if !slices.Equal(p1, p2) || !slices.Contains(p1, true) || !slices.Contains(p1, false) {
		t.Fatalf("seeded drops not reproducible or degenerate: %v %v", p1, p2)
	}

	n := New(1)
	defer n.Close()
	n.Register("b", host)
	a := n.Client("a")
	n.Partition([]string{"a"}, []string{"b"})
	if _, err := a.Get(srv.URL); !errors.Is(err, ErrInjected) {
		t.Fatalf("partitioned request: %v", err)
	}
	n.Heal()
	n.SetDelay(30*time.Millisecond, 30*time.Millisecond)
	start := time.Now()
	resp, err := a.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("delay not applied: %v", d)
	}
	if st := n.Stats(); st.Cut != 1 || st.Delayed != 1 {
		t.Fatalf("stats %+v", st)
	}
}
