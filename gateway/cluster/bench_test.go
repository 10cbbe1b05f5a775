package cluster_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/cluster/clustertest"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// writer replaces one imposter's stubs on n back to back and remembers
// when each write started and was acknowledged.
type writer struct {
	mu   sync.Mutex
	acks [][2]time.Time // started, acknowledged
	stop chan struct{}
	done chan struct{}
}

func startWriter(n *clustertest.Node, port int) *writer {
	w := &writer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		c := &http.Client{Timeout: 40 * time.Second}
		path := n.URL + "/imposters/" + strconv.Itoa(port) + "/stubs"
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			started := time.Now()
			resp, err := gatewayRequest(c, path, fmt.Sprintf(`{"stubs":[{"responses":[{"is":{"body":"%d"}}]}]}`, i))
			if err == nil && resp == http.StatusOK {
				w.mu.Lock()
				w.acks = append(w.acks, [2]time.Time{started, time.Now()})
				w.mu.Unlock()
			} else {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
	return w
}

func gatewayRequest(c *http.Client, url, body string) (int, error) {
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// pauseAfter is how long after t0 the first write that started after t0
// was acknowledged.
func (w *writer) pauseAfter(t0 time.Time) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.acks {
		if a[0].After(t0) {
			return a[1].Sub(t0), true
		}
	}
	return 0, false
}

func (w *writer) close() {
	close(w.stop)
	<-w.done
}

// BenchmarkAdminWritePause measures how long admin writes pause when the
// leader of a 3-node cluster of real processes goes: killed with kill -9
// (the others wait out an election timeout), or stopped with SIGTERM (it
// hands leadership to a caught-up voter first, as a rolling restart does).
// Each iteration starts a cluster, runs a writer on a follower, stops the
// leader and measures from the stop to the first write acknowledged after
// it. Run it with -benchtime=Nx; it reports the median and the worst.
func BenchmarkAdminWritePause(b *testing.B) {
	for _, how := range []string{"kill", "sigterm"} {
		b.Run(how, func(b *testing.B) {
			var pauses []time.Duration
			for range b.N {
				c := clustertest.Start(b, clustertest.Options{})
				l := c.Leader()
				var f *clustertest.Node
				for _, n := range c.Nodes {
					if n != l {
						f = n
						break
					}
				}
				port := gatewaytest.FreePort(b)
				if code, body := f.Do("POST", "/imposters", map[string]any{"protocol": "http", "port": port}); code != http.StatusCreated {
					b.Fatalf("POST /imposters: %d %s", code, body)
				}
				w := startWriter(f, port)
				time.Sleep(500 * time.Millisecond) // writes flowing
				t0 := time.Now()
				if how == "kill" {
					l.Kill()
				} else {
					l.Stop()
				}
				clustertest.Eventually(b, 30*time.Second, "a write after the leader left", func() bool {
					_, ok := w.pauseAfter(t0)
					return ok
				})
				w.close()
				p, _ := w.pauseAfter(t0)
				pauses = append(pauses, p)
				for _, n := range c.Nodes {
					n.Kill()
				}
			}
			slices.Sort(pauses)
			b.ReportMetric(float64(pauses[len(pauses)/2].Microseconds())/1000, "median-pause-ms")
			b.ReportMetric(float64(pauses[len(pauses)-1].Microseconds())/1000, "max-pause-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
