package imposter

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/meter"
)

// EndOfRequest reports whether the bytes a tcp connection has sent so far
// make a whole request: mb's endOfRequestResolver. Without one, every read
// (mb: every packet) is a request.
type EndOfRequest func(data []byte) bool

// tcpServer serves a tcp imposter: each read from a connection, or each
// run of reads the endOfRequestResolver accepts, is one request whose
// `data` is the bytes as text (mode text) or base64 (mode binary); the
// response's data is written back and the connection stays open, as mb's
// does.
type tcpServer struct {
	imp    *Imposter
	binary bool
	conns  conns
}

func newTCPServer(imp *Imposter) *tcpServer {
	return &tcpServer{imp: imp, binary: imp.spec.Mode == "binary"}
}

func (s *tcpServer) serve(ln net.Listener) error { return s.conns.serve(ln, s.handle) }

func (s *tcpServer) shutdown(ctx context.Context) error { return s.conns.shutdown(ctx) }

// tcpReadSize is one read's buffer, about what node hands a socket's data
// event on loopback.
const tcpReadSize = 64 << 10

var tcpBufs = sync.Pool{New: func() any { b := make([]byte, tcpReadSize); return &b }}

func (s *tcpServer) handle(conn net.Conn) {
	bp := tcpBufs.Get().(*[]byte)
	defer tcpBufs.Put(bp)
	buf := *bp
	var pending []byte // reads the endOfRequestResolver has not yet accepted
	var text []byte    // the request's data string, reused
	req := newTCPRequest()
	bctx := new(budget) // the connection's, renewed for each request
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			payload := buf[:n]
			if len(pending) > 0 {
				pending = append(pending, payload...)
				payload = pending
			}
			if s.imp.endOfRequest != nil && !s.imp.endOfRequest(payload) {
				if max := s.imp.opts.MaxBodyBytes; max > 0 && len(payload) > max {
					s.imp.log.Warn("tcp request over the size cap; closing", "bytes", len(payload))
					return
				}
				if len(pending) == 0 {
					pending = append(pending, payload...)
				}
			} else {
				text = s.dataText(text[:0], payload)
				fillTCP(req, text, conn)
				if !s.respond(conn, req, bctx) {
					return
				}
				pending = pending[:0]
				// A connection lives as long as its client keeps it: one
				// large request must not pin its size for all that time.
				if cap(pending) > maxKeptBody {
					pending = nil
				}
				if cap(text) > maxKeptBody {
					text = nil
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func newTCPRequest() *message.Request { return new(message.Request) }

// fillTCP makes req the request whose data is text, from conn.
func fillTCP(req *message.Request, text []byte, conn net.Conn) {
	req.Reset()
	req.Kind = message.TCP
	req.Body = text
	req.Timestamp = time.Now()
	req.SetAddr(conn.RemoteAddr())
}

// dataText renders payload as mb's data string into dst.
func (s *tcpServer) dataText(dst, payload []byte) []byte {
	if s.binary {
		n := base64.StdEncoding.EncodedLen(len(payload))
		if cap(dst) < n {
			dst = make([]byte, n)
		}
		dst = dst[:n]
		base64.StdEncoding.Encode(dst, payload)
		return dst
	}
	if utf8.Valid(payload) {
		return append(dst, payload...)
	}
	return append(dst, message.DecodeUTF8(payload)...)
}

// respond answers one request under the budget bctx, renewed; false means
// the connection is done.
func (s *tcpServer) respond(conn net.Conn, req *message.Request, bctx *budget) bool {
	imp := s.imp
	start := time.Now()
	*bctx = imp.newBudget(start)
	st, r, err := imp.choose(bctx, req)
	defer imp.observe(st, err, start, meter.Now())
	if err != nil {
		return s.writeError(conn, err)
	}
	if r.fault != "" {
		if r.fault == "RANDOM_DATA_THEN_CLOSE" {
			_, _ = conn.Write(randomThenClose)
		}
		// mb destroys the socket for either fault, which closes it with a
		// FIN, not a reset.
		return false
	}
	resp := r.static
	if resp == nil || r.behaviors != nil {
		if resp, err = imp.compute(bctx, &Call{Imposter: imp, Request: req, Stub: st}, r); err != nil {
			return s.writeError(conn, err)
		}
		if resp == nil {
			return true
		}
	}
	data := resp.Body
	if len(data) == 0 && !resp.NoDefault {
		data = imp.dflt.static.Body // mb: `mbResponse.data || defaultResponse.data`
	}
	if len(data) > 0 {
		if _, err := conn.Write(data); err != nil {
			return false
		}
	}
	if st != nil && imp.opts.RecordMatches {
		st.recordMatch(imp, req, r, resp)
	}
	return true
}

// writeError writes mb's error body on the connection, which stays open.
func (s *tcpServer) writeError(conn net.Conn, err error) bool {
	s.imp.log.Error("error generating response", "err", err)
	_, werr := conn.Write(mberr.Body(mberr.As(err)))
	return werr == nil
}

// compileEndOfRequest compiles a tcp imposter's endOfRequestResolver.
func (imp *Imposter) compileEndOfRequest() error {
	raw := imp.spec.EndOfRequestResolver
	if imp.spec.Protocol != "tcp" || raw == nil || isNull(raw) {
		return nil
	}
	var r struct {
		Inject *string `json:"inject"`
	}
	if json.Unmarshal(raw, &r) != nil || r.Inject == nil {
		return nil // mb falls back to a packet a request
	}
	c := imp.opts.Compiler
	if c == nil || c.EndOfRequest == nil {
		return mberr.New(mberr.InvalidInjection,
			"JavaScript injection is not allowed unless mb is run with the --allowInjection flag").WithSource(raw)
	}
	eor, err := c.EndOfRequest(*r.Inject, imp.spec.Mode == "binary", imp)
	if err != nil {
		return err
	}
	imp.endOfRequest = eor
	return nil
}

// EndOfRequest returns the imposter's endOfRequestResolver, or nil: a tcp
// proxy reads its upstream's answer with it, as mb's does.
func (imp *Imposter) EndOfRequest() EndOfRequest { return imp.endOfRequest }
