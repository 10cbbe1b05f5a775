package imposter

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/meter"
)

// smtpServer serves an smtp imposter: it accepts every message, as mb's
// smtp-server does, and makes each one a request (the envelope and the
// parsed message, see mail.go) that is recorded and matched like any
// other. Stubs' responses do not change what the client is told.
type smtpServer struct {
	imp   *Imposter
	name  string // the greeting's host name
	conns conns
}

func newSMTPServer(imp *Imposter) *smtpServer {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "localhost"
	}
	return &smtpServer{imp: imp, name: name}
}

func (s *smtpServer) serve(ln net.Listener) error { return s.conns.serve(ln, s.handle) }

func (s *smtpServer) shutdown(ctx context.Context) error { return s.conns.shutdown(ctx) }

// smtpMaxLine bounds a command line; smtpMaxCommands bounds the commands
// of one connection that are not a message, as mb's
// maxAllowedUnauthenticatedCommands does.
const (
	smtpMaxLine     = 64 << 10
	smtpMaxCommands = 1000
	smtpMaxUnknown  = 10
)

// smtpSession is one connection's state.
type smtpSession struct {
	conn    net.Conn
	r       *bufio.Reader
	w       *bufio.Writer
	tls     bool
	from    *string
	to      []string
	helo    bool
	unknown int
}

func (s *smtpSession) reply(code int, lines ...string) {
	for i, l := range lines {
		sep := " "
		if i < len(lines)-1 {
			sep = "-"
		}
		fmt.Fprintf(s.w, "%d%s%s\r\n", code, sep, l)
	}
	_ = s.w.Flush()
}

func (s *smtpServer) handle(conn net.Conn) {
	ss := &smtpSession{conn: conn, r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}
	ss.reply(220, s.name+" ESMTP")
	for commands := 0; ; commands++ {
		if commands > smtpMaxCommands {
			ss.reply(421, "Error: too many unauthenticated commands")
			return
		}
		line, err := readLine(ss.r)
		if err != nil {
			if errors.Is(err, errLineTooLong) {
				ss.reply(500, "Error: line too long")
			}
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		switch strings.ToUpper(verb) {
		case "EHLO":
			ss.from, ss.to, ss.helo = nil, nil, true
			features := []string{s.name + " Nice to meet you, " + clientName(conn), "PIPELINING", "8BITMIME", "SMTPUTF8", "AUTH LOGIN PLAIN"}
			if !ss.tls {
				features = append(features, "STARTTLS")
			}
			ss.reply(250, features...)
		case "HELO":
			if len(strings.Fields(arg)) != 1 {
				ss.reply(501, "Error: Syntax: HELO hostname")
				continue
			}
			ss.from, ss.to, ss.helo = nil, nil, true
			ss.reply(250, s.name+" Nice to meet you, "+clientName(conn))
		case "STARTTLS":
			if ss.tls {
				ss.reply(503, "Error: TLS already active")
				continue
			}
			cfg, err := s.tlsConfig()
			if err != nil {
				ss.reply(454, "Error: TLS not available")
				continue
			}
			ss.reply(220, "Ready to start TLS")
			tc := tls.Server(conn, cfg)
			if err := tc.Handshake(); err != nil {
				return
			}
			ss.conn, ss.r, ss.w, ss.tls = tc, bufio.NewReader(tc), bufio.NewWriter(tc), true
			ss.from, ss.to, ss.helo = nil, nil, false
		case "AUTH":
			if !ss.tls {
				ss.reply(538, "Error: Must issue a STARTTLS command first")
			} else {
				ss.reply(535, "Error: Authentication not implemented")
			}
		case "MAIL":
			addr, ok := pathArg(arg, "FROM:")
			switch {
			case !ok:
				ss.reply(501, "Error: Bad sender address syntax")
			case ss.from != nil:
				ss.reply(503, "Error: nested MAIL command")
			default:
				ss.from = &addr
				ss.reply(250, "Accepted")
			}
		case "RCPT":
			addr, ok := pathArg(arg, "TO:")
			switch {
			case !ok:
				ss.reply(501, "Error: Bad recipient address syntax")
			case ss.from == nil:
				ss.reply(503, "Error: need MAIL command")
			default:
				ss.to = append(ss.to, addr)
				ss.reply(250, "Accepted")
			}
		case "DATA":
			if len(ss.to) == 0 {
				ss.reply(503, "Error: need RCPT command")
				continue
			}
			ss.reply(354, "End data with <CR><LF>.<CR><LF>")
			if !s.data(ss) {
				return
			}
			ss.from, ss.to = nil, nil
		case "RSET":
			ss.from, ss.to = nil, nil
			ss.reply(250, "Flushed")
		case "NOOP":
			ss.reply(250, "OK")
		case "VRFY":
			ss.reply(252, "Try to send something. No promises though")
		case "HELP":
			ss.reply(214, "See https://tools.ietf.org/html/rfc5321 for details")
		case "QUIT":
			ss.reply(221, "Bye")
			return
		default:
			if ss.unknown++; ss.unknown > smtpMaxUnknown {
				ss.reply(421, "Error: too many unrecognized commands")
				return
			}
			ss.reply(500, "Error: command not recognized")
		}
	}
}

// data reads one message after DATA, makes it a request and answers;
// false means the connection is done.
func (s *smtpServer) data(ss *smtpSession) bool {
	max := s.imp.opts.MaxBodyBytes
	if max <= 0 {
		max = 16 << 20
	}
	raw, err := readData(ss.r, max)
	if errors.Is(err, errMessageTooBig) {
		ss.reply(552, fmt.Sprintf("Error: message exceeds fixed maximum message size %d", max))
		return true
	}
	if err != nil {
		return false
	}
	mail := parseMail(raw)
	mail.EnvelopeFrom, mail.EnvelopeTo = *ss.from, ss.to
	req := &message.Request{Kind: message.SMTP, Mail: mail, Timestamp: time.Now()}
	ip := remoteIP(ss.conn)
	req.SetRemote(ip, ip) // mb's smtp requestFrom is the address alone
	s.imp.log.Info(fmt.Sprintf("%s => Envelope from: %q to: %q", ip, mail.From.Address, addressList(mail.To)))
	start := time.Now()
	bctx := s.imp.newBudget(start)
	st, r, err := s.imp.choose(&bctx, req)
	defer s.imp.observe(st, err, start, meter.Now())
	if err != nil {
		s.imp.log.Error("error generating response", "err", err)
	} else if st != nil && s.imp.opts.RecordMatches {
		resp := r.static
		if resp == nil || r.behaviors != nil {
			resp, err = s.imp.compute(&bctx, &Call{Imposter: s.imp, Request: req, Stub: st}, r)
		}
		if err == nil && resp != nil {
			st.recordMatch(s.imp, req, r, resp)
		}
	}
	ss.reply(250, "OK: message queued")
	return true
}

func addressList(as []message.Address) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Address
	}
	return out
}

// tlsConfig is STARTTLS's: the process's built-in self-signed pair, as mb's
// smtp-server offers its own.
func (s *smtpServer) tlsConfig() (*tls.Config, error) {
	key, cert, err := builtinPair()
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair([]byte(cert), []byte(key))
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

var (
	errLineTooLong   = errors.New("smtp command line too long")
	errMessageTooBig = errors.New("smtp message too big")
)

// readData reads a message up to the line holding a lone dot, undoing dot
// stuffing and keeping line ends as sent (mailparser keeps an attachment's
// CRLFs). Past max bytes the rest is read and dropped.
func readData(r *bufio.Reader, max int) ([]byte, error) {
	var out []byte
	for {
		line, err := r.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
		if string(line) == ".\r\n" || string(line) == ".\n" {
			if len(out) > max {
				return nil, errMessageTooBig
			}
			return out, nil
		}
		if len(line) > 0 && line[0] == '.' && err == nil {
			line = line[1:]
		}
		if len(out) <= max {
			out = append(out, line...)
		}
	}
}

// readLine reads one CRLF- (or LF-) terminated command line of bounded
// length.
func readLine(r *bufio.Reader) (string, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > smtpMaxLine {
			return "", errLineTooLong
		}
		if err == nil {
			return strings.TrimRight(string(line), "\r\n"), nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return "", err
		}
	}
}

// pathArg reads MAIL's "FROM:<addr>" or RCPT's "TO:<addr>", parameters
// after the path ignored.
func pathArg(arg, prefix string) (string, bool) {
	arg = strings.TrimSpace(arg)
	if len(arg) < len(prefix) || !strings.EqualFold(arg[:len(prefix)], prefix) {
		return "", false
	}
	p := strings.TrimSpace(arg[len(prefix):])
	if strings.HasPrefix(p, "<") {
		end := strings.IndexByte(p, '>')
		if end < 0 {
			return "", false
		}
		return strings.TrimSpace(p[1:end]), true
	}
	addr, _, _ := strings.Cut(p, " ")
	return addr, addr != ""
}

// clientName is how smtp-server greets the client: its address in brackets.
func clientName(c net.Conn) string { return "[" + remoteIP(c) + "]" }

func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap().String()
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}
