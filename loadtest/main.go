// Package loadtest is riftgate's bundled load generator (riftload, and
// `riftgate loadtest`): closed- and open-loop HTTP load, plain or over TLS
// (session resumption, mutual TLS), with fasthttp's request codec,
// coordinated-omission-corrected HDR latencies, per-virtual-user scenarios
// with flow ids, text/JSON/HTML reports, a raw fasthttp "hello" server for
// reference, and the side-by-side benchmark harness behind `make bench`.
// It knows nothing of the server's internals: it only speaks HTTP.
package loadtest

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Main runs the command line: `run` (the default), `hello` or `bench`.
// It returns the process exit code: 0 ok, 1 failure, 2 usage error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") && !strings.Contains(args[0], "://") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "run":
		err = mainRun(ctx, args, stdout, stderr)
	case "hello":
		err = mainHello(ctx, args, stdout, stderr)
	case "bench":
		err = mainBench(ctx, args, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		err = usageError{fmt.Errorf("unknown command %q", cmd)}
	}
	var ue usageError
	var te thresholdsFailed
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &te):
		fmt.Fprintf(stderr, "riftload: %v\n", err)
		return thresholdExitCode
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "riftload: %v\n\n%s", err, usage)
		return 2
	default:
		fmt.Fprintf(stderr, "riftload: %v\n", err)
		return 1
	}
}

const usage = `usage:
  riftload [run] [flags] URL [URL...]   load one or more nodes (round-robin)
  riftload hello [-host H] [-port P] [-tcp-port T] [-tls-port S] [-ws-port W] [-grpc-port G]
                 [-proxy-port X [-proxy-to URL]]
                                        serve the raw fasthttp "hello" server
                                        (and a raw tcp one answering PONG,
                                        the hello server over https, a raw
                                        Go WebSocket echo server, and a raw
                                        fasthttp reverse proxy to it)
  riftload bench [flags]                side-by-side benchmarks (make bench)
  riftload help
riftgate loadtest ... is the same program. Run "riftload <command> -h" for
its flags. See loadtest/README.md.
exit codes: 0 done (every threshold held), 1 failed to run, 2 usage error,
3 a threshold did not hold.
`

type usageError struct{ error }

// thresholdsFailed ends a run whose thresholds did not all hold.
type thresholdsFailed struct{ failed, of int }

func (e thresholdsFailed) Error() string {
	return fmt.Sprintf("%d of %d thresholds failed", e.failed, e.of)
}

func (e usageError) Unwrap() error { return e.error }

// listFlag is a repeatable flag.
type listFlag []string

func (h *listFlag) String() string     { return strings.Join(*h, ", ") }
func (h *listFlag) Set(v string) error { *h = append(*h, v); return nil }

// parseInterleaved parses flags that may come before, between or after
// positional arguments (`riftload URL -c 10` reads naturally).
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func mainRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("riftload run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o         Options
		headers   listFlag
		checks    listFlag
		limits    listFlag
		rampRate  = fs.String("ramp-rate", "", "open-loop stages of req/s: [START,]DURATION:TARGET,... (e.g. 100,1m:5000,2m:5000,30s:0)")
		rampUsers = fs.String("ramp-users", "", "closed-loop stages of users: [START,]DURATION:TARGET,... (e.g. 1m:200,2m:200)")
		junitOut  = fs.String("junit", "", "also write the thresholds as JUnit XML to this file")
		method    = fs.String("method", "GET", "request method (without -scenario)")
		body      = fs.String("body", "", "request body (without -scenario)")
		expect    = fs.Int("expect", 0, "expected status; any other counts as an error (without -scenario)")
		scenario  = fs.String("scenario", "", "scenario file (JSON); replaces -method, -H, -body, -expect and the URL path")
		format    = fs.String("format", "text", "summary on stdout: text or json")
		htmlOut   = fs.String("html", "", "also write a self-contained HTML report to this file")
		jsonOut   = fs.String("json-out", "", "also write the JSON summary to this file")
		progress  = fs.String("progress", "auto", "progress bar on stderr: auto (only on a terminal), always, never")
		wsBinary  = fs.Bool("ws-binary", false, "ws:// targets: send -body as a binary message")
		wsExpect  = fs.String("ws-expect", "", "ws:// targets: the answer every message must get (default: any message)")
		protos    listFlag
		importDir listFlag
		grpcCode  = fs.String("grpc-expect", "OK", "grpc:// targets: the status every call must end with (a name or a number)")
	)
	fs.Var(&protos, "proto", "grpc:// targets: a .proto file defining the method (repeatable; none: server reflection)")
	fs.Var(&importDir, "import-path", "grpc:// targets: a directory -proto files and their imports are found in (repeatable)")
	fs.IntVar(&o.Connections, "c", 64, "connections (virtual users)")
	fs.DurationVar(&o.Duration, "d", 0, "measured duration (default 10s unless -n is set)")
	fs.Int64Var(&o.Requests, "n", 0, "measured request count (0: bounded by -d)")
	fs.Float64Var(&o.Rate, "rate", 0, "open loop at this many requests per second (0: closed loop)")
	fs.DurationVar(&o.Warmup, "warmup", 0, "warm-up before measuring")
	fs.DurationVar(&o.Timeout, "timeout", defaultTimeout, "per-request timeout")
	fs.DurationVar(&o.Interval, "interval", defaultInterval, "timeline resolution")
	fs.Var(&headers, "H", `request header "Name: value" (repeatable, without -scenario)`)
	fs.Var(&checks, "check", `assertion on every response, e.g. "status == 200", "body contains ok", "jsonpath $.id == 7" (repeatable)`)
	fs.Var(&limits, "threshold", `pass/fail condition, e.g. "p99<50ms", "errors<0.1%", "rps>=1000", "login:p95<20ms"; exit 3 if one fails (repeatable)`)
	var tf tlsFlags
	fs.BoolVar(&tf.insecure, "insecure", false, "https: do not verify the server's certificate")
	fs.StringVar(&tf.caFile, "cacert", "", "https: trust the CAs in this PEM file instead of the system's")
	fs.StringVar(&tf.certFile, "cert", "", "https: client certificate (PEM) for mutual TLS; needs -key")
	fs.StringVar(&tf.keyFile, "key", "", "https: the client certificate's private key (PEM)")
	fs.StringVar(&tf.sni, "sni", "", "https: server name to send (SNI) and to verify the certificate against (default: the URL's host)")
	fs.BoolVar(&o.TLSFullHandshake, "tls-full-handshake", false, "https: no session resumption, every connection makes a full handshake")
	fs.BoolVar(&o.HTTP2, "h2", false, "HTTP/2: h2c with prior knowledge to http:// targets, h2 by ALPN to https:// ones")
	fs.BoolVar(&o.NoKeepAlive, "no-keepalive", false, "a new connection for every request (Connection: close): latencies include connecting and the TLS handshake")
	targets, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if len(targets) == 0 {
		return usageError{errors.New("no target URL")}
	}
	bases, path, err := splitTargets(targets)
	if err != nil {
		return usageError{err}
	}
	o.Targets = bases
	if strings.HasPrefix(bases[0], "ws") {
		// Each request is one message and its answer, on the user's
		// WebSocket connection to the URL's path.
		if *scenario != "" {
			return usageError{errors.New("ws:// targets take -body, not -scenario")}
		}
		send := *body
		if send == "" {
			send = "ping"
		}
		o.WS = &WSExchange{Path: path, Send: []byte(send), Binary: *wsBinary}
		if *wsExpect != "" {
			o.WS.Expect = []byte(*wsExpect)
		}
		*body = ""
	}
	if strings.HasPrefix(bases[0], "grpc") {
		// Each request is one call of the URL's path, pkg.Service/Method;
		// -body is its message as JSON, -H its metadata.
		if *scenario != "" {
			return usageError{errors.New("grpc:// targets take -body, not -scenario")}
		}
		msgs, err := SplitGRPCMessages(*body)
		if err != nil {
			return usageError{err}
		}
		code, err := ParseGRPCCode(*grpcCode)
		if err != nil {
			return usageError{err}
		}
		o.GRPC = &GRPCExchange{Method: path, ProtoFiles: protos, ImportPaths: importDir, Messages: msgs, Metadata: headers, Expect: code}
		headers, *body = nil, ""
	}
	if o.TLS, err = tf.config(); err != nil {
		return err
	}
	if *scenario != "" {
		data, err := os.ReadFile(*scenario)
		if err != nil {
			return fmt.Errorf("reading scenario: %w", err)
		}
		if o.Scenario, err = ParseScenario(data); err != nil {
			return err
		}
	} else {
		st := Step{Method: *method, Path: path, ExpectStatus: *expect, Headers: map[string]string{}}
		for _, h := range headers {
			k, v, ok := strings.Cut(h, ":")
			if !ok {
				return usageError{fmt.Errorf("header %q: want \"Name: value\"", h)}
			}
			st.Headers[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
		if *body != "" {
			st.Body = []byte(strconv.Quote(*body))
		}
		o.Scenario = &Scenario{NoFlowHeader: true, Steps: []Step{st}}
	}
	o.Checks, o.Thresholds = checks, limits
	if _, err := o.Scenario.compile(o.Checks...); err != nil {
		return usageError{err}
	}
	if _, err := o.Scenario.thresholds(o.Thresholds); err != nil {
		return usageError{err}
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	for unit, text := range map[string]string{unitRate: *rampRate, unitUsers: *rampUsers} {
		if text == "" {
			continue
		}
		if o.Ramp != nil {
			return usageError{errors.New("give -ramp-rate or -ramp-users, not both")}
		}
		if o.Ramp, err = ParseRamp(unit, text); err != nil {
			return usageError{err}
		}
	}
	if ramp := o.ramp(); ramp != nil {
		if explicit["d"] || explicit["rate"] {
			return usageError{errors.New("a ramp sets the rate and the duration: give no -d or -rate")}
		}
		if ramp.Unit == unitUsers && !explicit["c"] {
			o.Connections = max(int(math.Ceil(ramp.Peak())), 1)
		}
	} else if o.Duration == 0 && o.Requests == 0 {
		o.Duration = 10 * time.Second
	}
	switch *progress {
	case "auto":
		o.Progress = progressWriter(stderr)
	case "always":
		o.Progress = stderr
	case "never":
	default:
		return usageError{fmt.Errorf("-progress %q: want auto, always or never", *progress)}
	}
	if *format != "text" && *format != "json" {
		return usageError{fmt.Errorf("-format %q: want text or json", *format)}
	}
	res, err := Run(ctx, o)
	if err != nil {
		return err
	}
	if *format == "json" {
		err = res.WriteJSON(stdout)
	} else {
		err = res.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if *jsonOut != "" {
		if err := writeFile(*jsonOut, res.WriteJSON); err != nil {
			return err
		}
	}
	if *htmlOut != "" {
		if err := writeFile(*htmlOut, res.WriteHTML); err != nil {
			return err
		}
	}
	if *junitOut != "" {
		if err := writeFile(*junitOut, res.WriteJUnit); err != nil {
			return err
		}
	}
	if !res.ThresholdsHeld() {
		failed := 0
		for _, t := range res.Thresholds {
			if !t.OK {
				failed++
			}
		}
		return thresholdsFailed{failed, len(res.Thresholds)}
	}
	return nil
}

// splitTargets turns URLs into base URLs and the one request path they
// share (a scenario brings its own paths).
func splitTargets(raw []string) (bases []string, path string, err error) {
	for i, t := range raw {
		u, err := url.Parse(t)
		if err != nil {
			return nil, "", fmt.Errorf("target %q: %w", t, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "ws" && u.Scheme != "wss" && u.Scheme != "grpc" && u.Scheme != "grpcs") || u.Host == "" {
			return nil, "", fmt.Errorf("target %q: want http://host:port/path or https://host:port/path (or ws://, wss://, grpc://host:port/pkg.Service/Method, grpcs://)", t)
		}
		if i > 0 && u.Scheme[0] != raw[0][0] {
			return nil, "", fmt.Errorf("targets mix protocols (%q, %q)", raw[0], t)
		}
		p := u.RequestURI()
		if i == 0 {
			path = p
		} else if p != path && p != "/" {
			return nil, "", fmt.Errorf("targets ask for different paths (%q, %q): give the path once, on the first", path, p)
		}
		bases = append(bases, u.Scheme+"://"+u.Host)
	}
	return bases, path, nil
}

func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	if err := write(f); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	return nil
}

func mainHello(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("riftload hello", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host := fs.String("host", "127.0.0.1", "address to listen on")
	port := fs.Int("port", 8080, "port to listen on (0: any free port)")
	tcpPort := fs.Int("tcp-port", -1, "also serve the raw tcp server (answering PONG to every read) on this port (-1: none)")
	wsPort := fs.Int("ws-port", -1, "also serve a raw Go WebSocket echo server (gorilla/websocket) on this port (-1: none)")
	grpcPort := fs.Int("grpc-port", -1, "also serve a raw grpc-go server answering the bench's bench.Bench/Unary on this port (-1: none)")
	tlsPort := fs.Int("tls-port", -1, "also serve the hello server over https on this port (-1: none)")
	certFile := fs.String("tls-cert", "", "the https server's certificate (PEM; default: a self-signed one, made at start)")
	keyFile := fs.String("tls-key", "", "the https server's private key (PEM)")
	proxyPort := fs.Int("proxy-port", -1, "also serve a raw fasthttp reverse proxy to the hello server (or -proxy-to) on this port (-1: none)")
	proxyTo := fs.String("proxy-to", "", "the proxy's upstream, http://host:port (default: this hello server)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if (*certFile == "") != (*keyFile == "") {
		return usageError{errors.New("hello: -tls-cert and -tls-key go together")}
	}
	if *proxyTo != "" && *proxyPort < 0 {
		return usageError{errors.New("hello: -proxy-to without -proxy-port")}
	}
	if *certFile != "" && *tlsPort < 0 {
		return usageError{errors.New("hello: -tls-cert without -tls-port")}
	}
	var serve []func(context.Context) error
	var lns []net.Listener
	listen := func(p int) (net.Listener, error) {
		ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(p)))
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("hello: %w", err)
		}
		lns = append(lns, ln)
		return ln, nil
	}
	ln, err := listen(*port)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "hello server listening on http://%s\n", ln.Addr())
	serve = append(serve, func(ctx context.Context) error { return ServeHello(ctx, ln) })
	if *tcpPort >= 0 {
		tln, err := listen(*tcpPort)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "tcp hello server listening on tcp://%s\n", tln.Addr())
		serve = append(serve, func(ctx context.Context) error { return ServeTCPHello(ctx, tln) })
	}
	if *proxyPort >= 0 {
		pln, err := listen(*proxyPort)
		if err != nil {
			return err
		}
		to := *proxyTo
		if to == "" {
			to = "http://" + ln.Addr().String()
		}
		fmt.Fprintf(stdout, "proxy server listening on http://%s (to %s)\n", pln.Addr(), to)
		serve = append(serve, func(ctx context.Context) error { return ServeProxy(ctx, pln, to) })
	}
	if *wsPort >= 0 {
		wln, err := listen(*wsPort)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "websocket echo server listening on ws://%s\n", wln.Addr())
		serve = append(serve, func(ctx context.Context) error { return ServeWSEcho(ctx, wln) })
	}
	if *grpcPort >= 0 {
		gln, err := listen(*grpcPort)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "grpc hello server listening on grpc://%s%s\n", gln.Addr(), benchGRPCMethod)
		serve = append(serve, func(ctx context.Context) error { return ServeGRPCHello(ctx, gln) })
	}
	if *tlsPort >= 0 {
		var cert tls.Certificate
		how := "certificate " + *certFile
		if *certFile != "" {
			cert, err = tls.LoadX509KeyPair(*certFile, *keyFile)
		} else {
			cert, err = selfSignedCert(*host, "127.0.0.1", "::1", "localhost")
			how = "a self-signed certificate: connect with -insecure"
		}
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return fmt.Errorf("hello: %w", err)
		}
		sln, err := listen(*tlsPort)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "https hello server listening on https://%s (%s)\n", sln.Addr(), how)
		tln := tls.NewListener(sln, &tls.Config{Certificates: []tls.Certificate{cert}})
		serve = append(serve, func(ctx context.Context) error { return ServeHello(ctx, tln) })
	}
	// When one server fails, the others stop too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(serve))
	for _, s := range serve {
		go func() {
			err := s(ctx)
			cancel()
			errc <- err
		}()
	}
	var errs []error
	for range serve {
		errs = append(errs, <-errc)
	}
	return errors.Join(errs...)
}
