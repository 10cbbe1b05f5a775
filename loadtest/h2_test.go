package loadtest

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// h2Server is a raw Go server that speaks HTTP/1.1, h2c and (with TLS)
// h2, and counts what came over which protocol and how many connections.
type h2Server struct {
	*httptest.Server
	mu     sync.Mutex
	protos map[string]int
	conns  atomic.Int64
}

func startH2Server(t *testing.T, useTLS bool, h2 bool) *h2Server {
	t.Helper()
	s := &h2Server{protos: map[string]int{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.protos[r.Proto]++
		s.mu.Unlock()
		w.Header().Set("X-Method", r.Method)
		w.WriteHeader(201)
		_, _ = io.WriteString(w, `{"ok":true,"got":"`+string(body)+`","header":"`+r.Header.Get("X-Test")+`"}`)
	}))
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(h2)
	p.SetHTTP2(h2)
	srv.Config.Protocols = p
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	srv.EnableHTTP2 = h2
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if useTLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	s.Server = srv
	return s
}

func TestHTTP2Load(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tls    bool
		expect string
	}{{"h2c", false, "HTTP/2.0"}, {"h2 over TLS", true, "HTTP/2.0"}} {
		t.Run(tc.name, func(t *testing.T) {
			s := startH2Server(t, tc.tls, true)
			sc := &Scenario{NoFlowHeader: true, Steps: []Step{{Method: "POST", Path: "/x", Body: []byte(`"payload"`),
				Headers: map[string]string{"X-Test": "yes"}, ExpectStatus: 201}}}
			res := run(t, Options{Targets: []string{s.URL}, Connections: 4, Requests: 300, Scenario: sc, HTTP2: true,
				TLS: &tls.Config{InsecureSkipVerify: true}, Checks: []string{`body contains "got":"payload"`, `body contains "header":"yes"`}})
			if res.Errors != 0 || res.Requests != 300 || res.Statuses["201"] != 300 {
				t.Fatalf("requests %d errors %d statuses %v examples %v", res.Requests, res.Errors, res.Statuses, res.ErrorExamples)
			}
			for _, c := range res.Checks {
				if c.Fails != 0 || c.Passes != 300 {
					t.Errorf("check %q: %d passes, %d fails (%s)", c.Check, c.Passes, c.Fails, c.Example)
				}
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.protos[tc.expect] != 300 || len(s.protos) != 1 {
				t.Errorf("the server saw %v", s.protos)
			}
			if n := s.conns.Load(); n > 4 {
				t.Errorf("%d connections for 4 users", n)
			}
		})
	}
}

// A server that does not offer h2 is an error, not a silent HTTP/1.1 run.
func TestHTTP2LoadNeedsH2(t *testing.T) {
	s := startH2Server(t, true, false)
	res := run(t, Options{Targets: []string{s.URL}, Connections: 2, Requests: 10, Scenario: simple("/"), HTTP2: true,
		TLS: &tls.Config{InsecureSkipVerify: true}})
	if res.Errors == 0 {
		t.Fatalf("no errors: %+v", res.Statuses)
	}
	for _, ex := range res.ErrorExamples {
		if !strings.Contains(ex, "does not offer h2") && !strings.Contains(ex, "no application protocol") {
			t.Errorf("error %q", ex)
		}
	}
}
