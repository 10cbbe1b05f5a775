package loadtest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// testPKI is a CA made for one test, a server certificate it signed for
// 127.0.0.1, localhost and sni.test, and a client certificate it signed,
// with the files the command line reads.
type testPKI struct {
	pool                            *x509.CertPool
	server, client                  tls.Certificate
	caFile, clientCert, clientKey   string
	serverCertFile, serverKeyFile   string
	otherClientCert, otherClientKey string // a client certificate the CA did not sign
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := int64(0)
	issue := func(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, signer *ecdsa.PrivateKey) (*x509.Certificate, tls.Certificate, []byte, []byte) {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return cert, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, der, keyDER
	}
	caKey := newKey()
	ca, _, caDER, _ := issue(&x509.Certificate{
		Subject: pkix.Name{CommonName: "riftload test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil, caKey, caKey)
	p := &testPKI{pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.caFile = write("ca.pem", "CERTIFICATE", caDER)

	var der, keyDER []byte
	srvKey := newKey()
	_, p.server, der, keyDER = issue(&x509.Certificate{
		Subject: pkix.Name{CommonName: "server"}, DNSNames: []string{"localhost", "sni.test"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, srvKey, caKey)
	p.serverCertFile, p.serverKeyFile = write("server.pem", "CERTIFICATE", der), write("server-key.pem", "PRIVATE KEY", keyDER)

	cliKey := newKey()
	_, p.client, der, keyDER = issue(&x509.Certificate{
		Subject: pkix.Name{CommonName: "client"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, cliKey, caKey)
	p.clientCert, p.clientKey = write("client.pem", "CERTIFICATE", der), write("client-key.pem", "PRIVATE KEY", keyDER)

	otherKey := newKey()
	_, _, der, keyDER = issue(&x509.Certificate{
		Subject: pkix.Name{CommonName: "stranger"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, nil, otherKey, otherKey)
	p.otherClientCert, p.otherClientKey = write("other.pem", "CERTIFICATE", der), write("other-key.pem", "PRIVATE KEY", keyDER)
	return p
}

// tlsServer is an https server started by a test, counting what it saw.
type tlsServer struct {
	url                string
	full, resumed      atomic.Int64 // handshakes, by the first request of each connection
	requests           atomic.Int64
	mu                 sync.Mutex
	serverNames        []string // tls.ClientHelloInfo.ServerName of each handshake
	hosts              []string // Host headers
	connectionCloseAsk atomic.Int64
}

// startTLSServer serves h over TLS with cfg (its certificate chosen by
// GetCertificate, which records the server name each client asked for)
// until the test ends. closeEach makes it close every connection after
// its response.
func startTLSServer(t testing.TB, cfg *tls.Config, closeEach bool) *tlsServer {
	t.Helper()
	s := &tlsServer{}
	cert := cfg.Certificates[0]
	cfg = cfg.Clone()
	cfg.Certificates = nil
	cfg.GetCertificate = func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
		s.mu.Lock()
		s.serverNames = append(s.serverNames, hi.ServerName)
		s.mu.Unlock()
		return &cert, nil
	}
	h := func(ctx *fasthttp.RequestCtx) {
		s.requests.Add(1)
		if ctx.ConnRequestNum() == 1 {
			if tc, ok := ctx.Conn().(*tls.Conn); ok && tc.ConnectionState().DidResume {
				s.resumed.Add(1)
			} else {
				s.full.Add(1)
			}
		}
		if ctx.Request.Header.ConnectionClose() {
			s.connectionCloseAsk.Add(1)
		}
		s.mu.Lock()
		s.hosts = append(s.hosts, string(ctx.Host()))
		s.mu.Unlock()
		if closeEach {
			ctx.SetConnectionClose()
		}
		ctx.SetBodyString("ok")
	}
	s.url = serveTLS(t, cfg, h)
	return s
}

// serveTLS serves h over TLS with cfg on a fresh 127.0.0.1 port until the
// test ends and returns its base URL.
func serveTLS(t testing.TB, cfg *tls.Config, h fasthttp.RequestHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Refused handshakes are what some tests are about: not worth a log line.
	srv := &fasthttp.Server{Handler: h, CloseOnShutdown: true, MaxIdleWorkerDuration: 50 * time.Millisecond,
		Logger: log.New(io.Discard, "", 0)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(tls.NewListener(ln, cfg))
	}()
	t.Cleanup(func() {
		_ = srv.Shutdown()
		<-done
	})
	return "https://" + ln.Addr().String()
}

// runJSON runs the command line with -format json and returns its exit
// code, the summary (nil unless exit 0) and stderr.
func runJSON(t *testing.T, args ...string) (int, *Result, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args = append(args, "-format", "json", "-progress", "never")
	code := Main(context.Background(), args, &stdout, &stderr)
	if code != 0 {
		return code, nil, stderr.String()
	}
	var res Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not the JSON summary: %v\n%s", err, stdout.String())
	}
	return code, &res, stderr.String()
}

// Server verification, through the command line: a server whose CA the
// client was given, was not given, or was told not to check; a request
// that fails verification is an error of kind tls with the reason, and
// the run goes on to its end.
func TestHTTPSServerVerification(t *testing.T) {
	pki := newTestPKI(t)
	srv := startTLSServer(t, &tls.Config{Certificates: []tls.Certificate{pki.server}}, false)
	dir := t.TempDir()
	sc := filepath.Join(dir, "s.json")
	if err := os.WriteFile(sc, []byte(`{"name":"two","steps":[{"path":"/a","expectStatus":200},{"method":"POST","path":"/b","body":"x","expectStatus":200}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		tlsErrs bool
		example string
	}{
		{"ca given", []string{"-cacert", pki.caFile}, false, ""},
		{"ca given, scenario", []string{"-cacert", pki.caFile, "-scenario", sc}, false, ""},
		{"system roots only", nil, true, "certificate signed by unknown authority"},
		{"insecure", []string{"-insecure"}, false, ""},
		{"ca given, name not in the certificate", []string{"-cacert", pki.caFile, "-sni", "other.test"}, true, "other.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{srv.url + "/x", "-n", "12", "-c", "2"}, tc.args...)
			code, res, stderr := runJSON(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if res.Requests != 12 {
				t.Errorf("%d requests, want 12", res.Requests)
			}
			if !tc.tlsErrs {
				if res.Errors != 0 || res.Statuses["200"] != 12 {
					t.Errorf("errors %v %v, statuses %v", res.ErrorKinds, res.ErrorExamples, res.Statuses)
				}
				if res.TLS == nil || res.TLS.Handshakes != 2 || !res.TLS.Resumption {
					t.Errorf("tls summary %+v, want the 2 users' handshakes, resumption on", res.TLS)
				}
				return
			}
			if res.ErrorKinds["tls"] != 12 || res.Errors != 12 {
				t.Errorf("error kinds %v, want 12 of kind tls", res.ErrorKinds)
			}
			if ex := res.ErrorExamples["tls"]; !strings.Contains(ex, "tls handshake with 127.0.0.1:") || !strings.Contains(ex, tc.example) {
				t.Errorf("tls error example %q, want the handshake and %q", ex, tc.example)
			}
			if res.TLS == nil || res.TLS.Handshakes != 0 {
				t.Errorf("tls summary %+v, want no handshake", res.TLS)
			}
		})
	}
}

// Mutual TLS: a server that requires a client certificate signed by its
// CA. In TLS 1.2 it refuses the client in the handshake; in TLS 1.3 the
// client's handshake is over before the server has checked the
// certificate, and the refusal is an alert on the first read. Both are
// errors of kind tls.
func TestMutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		srv := startTLSServer(t, &tls.Config{
			Certificates: []tls.Certificate{pki.server}, MaxVersion: version,
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.pool,
		}, false)
		for _, tc := range []struct {
			name string
			args []string
			ok   bool
		}{
			{"client certificate", []string{"-cert", pki.clientCert, "-key", pki.clientKey}, true},
			{"no client certificate", nil, false},
			{"certificate of another CA", []string{"-cert", pki.otherClientCert, "-key", pki.otherClientKey}, false},
		} {
			t.Run(fmt.Sprintf("%s/%s", tls.VersionName(version), tc.name), func(t *testing.T) {
				before := srv.requests.Load()
				args := append([]string{srv.url + "/x", "-n", "10", "-c", "2", "-cacert", pki.caFile}, tc.args...)
				code, res, stderr := runJSON(t, args...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				served := srv.requests.Load() - before
				if tc.ok {
					if res.Errors != 0 || res.Statuses["200"] != 10 || served != 10 {
						t.Errorf("errors %v %v, statuses %v, server answered %d", res.ErrorKinds, res.ErrorExamples, res.Statuses, served)
					}
					return
				}
				if res.ErrorKinds["tls"] != 10 || res.Errors != 10 || served != 0 {
					t.Errorf("error kinds %v (%v), server answered %d: want 10 of kind tls, none answered", res.ErrorKinds, res.ErrorExamples, served)
				}
			})
		}
	}
}

// The server name: the URL's host name (an IP address sends none, as RFC
// 6066 wants), or the one Options.TLS (-sni) names, which the certificate
// is then verified against. The Host header stays the URL's unless a
// header says otherwise.
func TestSNI(t *testing.T) {
	pki := newTestPKI(t)
	srv := startTLSServer(t, &tls.Config{Certificates: []tls.Certificate{pki.server}}, false)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.url, "https://"))
	for _, tc := range []struct {
		name, host, sni, hostHeader string
		wantSNI                     string
	}{
		{"ip address", "127.0.0.1", "", "", ""},
		{"host name", "localhost", "", "", "localhost"},
		{"override", "127.0.0.1", "sni.test", "", "sni.test"},
		{"override and Host header", "127.0.0.1", "sni.test", "sni.test", "sni.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.mu.Lock()
			srv.serverNames, srv.hosts = nil, nil
			srv.mu.Unlock()
			target := "https://" + net.JoinHostPort(tc.host, port)
			sc, wantHost := simple("/"), net.JoinHostPort(tc.host, port)
			if tc.hostHeader != "" {
				sc.Steps[0].Headers = map[string]string{"Host": tc.hostHeader}
				wantHost = tc.hostHeader
			}
			res := run(t, Options{Targets: []string{target}, Scenario: sc, Connections: 2, Requests: 6,
				TLS: &tls.Config{RootCAs: pki.pool, ServerName: tc.sni}})
			if res.Errors != 0 {
				t.Fatalf("errors %v %v", res.ErrorKinds, res.ErrorExamples)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if len(srv.serverNames) != 2 {
				t.Errorf("%d handshakes, want 2", len(srv.serverNames))
			}
			for _, n := range srv.serverNames {
				if n != tc.wantSNI {
					t.Errorf("server saw server name %q, want %q", n, tc.wantSNI)
				}
			}
			if len(srv.hosts) != 6 {
				t.Errorf("%d requests served, want 6", len(srv.hosts))
			}
			for _, h := range srv.hosts {
				if h != wantHost {
					t.Errorf("Host header %q, want %q", h, wantHost)
				}
			}
		})
	}
}

// Session resumption: every reconnect (the server closing each
// connection, or -no-keepalive) resumes through the cache the users share,
// so only the users' first connections, made before any ticket exists,
// are full handshakes; with TLSFullHandshake none resumes.
func TestTLSSessionResumption(t *testing.T) {
	pki := newTestPKI(t)
	const users, requests = 2, 20
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		for _, closing := range []string{"server closes", "no keep-alive"} {
			srv := startTLSServer(t, &tls.Config{Certificates: []tls.Certificate{pki.server}, MaxVersion: version},
				closing == "server closes")
			for _, full := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/full=%v", tls.VersionName(version), closing, full), func(t *testing.T) {
					srv.full.Store(0)
					srv.resumed.Store(0)
					res := run(t, Options{Targets: []string{srv.url}, Scenario: simple("/"), Connections: users,
						Requests: requests, NoKeepAlive: closing == "no keep-alive",
						TLS: &tls.Config{RootCAs: pki.pool}, TLSFullHandshake: full})
					if res.Errors != 0 || res.Requests != requests {
						t.Fatalf("%d requests, errors %v %v", res.Requests, res.ErrorKinds, res.ErrorExamples)
					}
					// The users' first connections are made at once, before
					// any ticket exists (in TLS 1.2 one may come from a
					// handshake that ended before another began); every
					// later one resumes.
					f, r := srv.full.Load(), srv.resumed.Load()
					okCounts := f >= 1 && f <= users && f+r == requests
					if full {
						okCounts = f == requests && r == 0
					}
					if !okCounts {
						t.Errorf("server saw %d full handshakes and %d resumed (full handshakes only: %v)", f, r, full)
					}
					want := TLSSummary{Handshakes: requests, Resumed: r, Resumption: !full}
					if res.TLS == nil || *res.TLS != want {
						t.Errorf("tls summary %+v, want %+v", res.TLS, want)
					}
				})
			}
		}
	}
}

// -no-keepalive over plain http: a connection per request, each asking the
// server to close it.
func TestNoKeepAlive(t *testing.T) {
	var conns, asked atomic.Int64
	url := startServer(t, func(ctx *fasthttp.RequestCtx) {
		if ctx.ConnRequestNum() == 1 {
			conns.Add(1)
		}
		if ctx.Request.Header.ConnectionClose() {
			asked.Add(1)
		}
	})
	code, res, stderr := runJSON(t, url+"/", "-n", "30", "-c", "3", "-no-keepalive")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if res.Errors != 0 || res.Requests != 30 || conns.Load() != 30 || asked.Load() != 30 {
		t.Errorf("%d requests (errors %v), server saw %d connections, %d asking to close; want 30 each",
			res.Requests, res.ErrorKinds, conns.Load(), asked.Load())
	}
	if res.TLS != nil {
		t.Errorf("tls summary %+v for an http run", res.TLS)
	}
}

func TestMainTLSUsageErrors(t *testing.T) {
	pki := newTestPKI(t)
	dir := t.TempDir()
	noPEM := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(noPEM, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const u = "https://127.0.0.1:1/"
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-cert", pki.clientCert, u}, 2, "-cert needs -key"},
		{[]string{"-key", pki.clientKey, u}, 2, "-key needs -cert"},
		{[]string{"-insecure", "-cacert", pki.caFile, u}, 2, "-insecure"},
		{[]string{"-cacert", filepath.Join(dir, "missing.pem"), u}, 1, "no such file"},
		{[]string{"-cacert", noPEM, u}, 1, "no PEM certificate"},
		{[]string{"-cert", pki.clientCert, "-key", pki.serverKeyFile, u}, 1, "-cert/-key"},
		{[]string{"-cert", noPEM, "-key", noPEM, u}, 1, "-cert/-key"},
		{[]string{"tls://127.0.0.1:1/"}, 2, "https://host:port/path"},
		{[]string{"hello", "-tls-port", "0", "-tls-cert", pki.serverCertFile}, 2, "-tls-cert and -tls-key"},
		{[]string{"hello", "-tls-cert", pki.serverCertFile, "-tls-key", pki.serverKeyFile}, 2, "without -tls-port"},
	} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("%q: exit %d, want %d with %q: %s", tc.args, code, tc.code, tc.msg, errb.String())
		}
	}
}

// The raw server over https: with a certificate it makes itself (clients
// skip verification), or with one it is given (clients verify it).
func TestMainHelloTLS(t *testing.T) {
	pki := newTestPKI(t)
	for _, tc := range []struct {
		name   string
		args   []string
		client *tls.Config
	}{
		{"self-signed", nil, &tls.Config{InsecureSkipVerify: true}},
		{"given certificate", []string{"-tls-cert", pki.serverCertFile, "-tls-key", pki.serverKeyFile}, &tls.Config{RootCAs: pki.pool}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			var out, errb syncBuffer
			done := make(chan int)
			go func() {
				done <- Main(ctx, append([]string{"hello", "-port", "0", "-tls-port", "0"}, tc.args...), &out, &errb)
			}()
			var url string
			for deadline := time.Now().Add(5 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if s := out.String(); strings.Contains(s, "https://") {
					url = strings.Fields(s[strings.Index(s, "https://"):])[0]
				}
			}
			if url == "" {
				cancel()
				<-done
				t.Fatalf("hello server did not report an https address: %s %s", out.String(), errb.String())
			}
			res := run(t, Options{Targets: []string{url}, Scenario: simple("/x"), Connections: 2, Requests: 20, TLS: tc.client})
			if res.Statuses["200"] != 20 || res.Errors != 0 {
				t.Errorf("statuses %v, errors %v %v", res.Statuses, res.ErrorKinds, res.ErrorExamples)
			}
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("hello exited %d: %s", code, errb.String())
			}
		})
	}
}

// classify: a handshake that fails for TLS's reasons is kind tls; one cut
// short by the transport keeps the transport's kind.
func TestClassifyTLSErrors(t *testing.T) {
	hs := func(err error) error { return &tlsHandshakeError{addr: "h:1", err: err} }
	for _, tc := range []struct {
		err  error
		want errKind
	}{
		{hs(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), errTLS},
		{hs(tls.RecordHeaderError{Msg: "tls: first record does not look like a TLS handshake"}), errTLS},
		{hs(errors.New("tls: no cipher suite supported by both client and server")), errTLS},
		{&net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}, errTLS},
		{fmt.Errorf("read: %w", &net.OpError{Op: "local error", Err: errors.New("tls: bad record MAC")}), errTLS},
		{hs(os.ErrDeadlineExceeded), errTimeout},
		{hs(&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), errReset},
		{hs(io.EOF), errClosed},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, errConnect},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
