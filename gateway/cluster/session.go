package cluster

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/riftgate/riftgate/raftnode"
)

// A session is one TCP connection between two members that carries owner
// RPC frames: the caller's requests one way, the answerer's answers the
// other, many in flight at once, matched by id. It is opened by one
// raftnode-signed HTTP request (PeerAuth: the cluster's one scheme), which
// the answerer accepts once and answers with 101 Switching Protocols and a
// nonce of its own, signed for that request. Both ends then derive a
// session key from the secret and the two nonces, and every frame carries
// a tag under it over its direction, its position on the stream, and its
// bytes: a frame is accepted once, in order, on this stream only, with no
// nonce of its own and nothing to remember. A failed tag ends the session.
// A request with id 0 wants no answer (tellID): replica pushes outside
// `sync` go so.
//
//	frame := length u32 (of what follows) ‖ version u8 ‖ id u32 ‖ body ‖ tag [16]
//	tag   := HMAC-SHA256(session key, direction u8 ‖ position u64 ‖ version ‖ id ‖ body)[:16]
const (
	sessionPath     = "/flows/session" // signed; where Handler is mounted does not change it
	sessionProtocol = "riftgate-flows/1"
	hdrSession      = "X-Rift-Session" // the answerer's nonce, hex
	authGroup       = "riftgate-flows"
	tagBytes        = 16
	frameHeader     = 4 + 1 + 4
	// maxFrame bounds one frame: a page of adoption or anti-entropy, a few
	// MiB, or one 64 KiB value with room to spare.
	maxFrame = 8 << 20
	// directions, so that an answer can never be taken for a request.
	dirCall   byte = 1
	dirAnswer byte = 2
)

var errSessionClosed = errors.New("cluster: session closed")

// frameMAC tags frames in one direction of one session with HMAC-SHA256
// (RFC 2104), written out so that a tag costs no allocation (crypto/hmac's
// Sum allocates); TestFrameMACIsHMAC holds it to crypto/hmac. It is used by
// one goroutine at a time (the writer under its lock, or the reader).
type frameMAC struct {
	inner, outer hash.Hash
	// istate, ostate: the inner and outer hashes' states once they have
	// taken the key's pads, restored for each tag instead of hashing the
	// pads again (as crypto/hmac does): two of a small frame's four
	// compressions.
	istate, ostate []byte
	dir            byte
	pos            uint64
	at             [9]byte // direction ‖ position, here so that it does not escape
	sum            [sha256.Size]byte
}

func newFrameMAC(key []byte, dir byte) *frameMAC {
	m := &frameMAC{inner: sha256.New(), outer: sha256.New(), dir: dir}
	if len(key) > sha256.BlockSize {
		k := sha256.Sum256(key)
		key = k[:]
	}
	var ipad, opad [sha256.BlockSize]byte
	copy(ipad[:], key)
	copy(opad[:], key)
	for i := range ipad {
		ipad[i] ^= 0x36
		opad[i] ^= 0x5c
	}
	m.inner.Write(ipad[:])
	m.outer.Write(opad[:])
	var err error
	if m.istate, err = m.inner.(encoding.BinaryMarshaler).MarshalBinary(); err != nil {
		panic(err) // sha256's digest always marshals
	}
	if m.ostate, err = m.outer.(encoding.BinaryMarshaler).MarshalBinary(); err != nil {
		panic(err)
	}
	return m
}

// tag is HMAC(key, parts...) into m.sum.
func (m *frameMAC) tag(parts ...[]byte) []byte {
	_ = m.inner.(encoding.BinaryUnmarshaler).UnmarshalBinary(m.istate)
	for _, p := range parts {
		m.inner.Write(p)
	}
	in := m.inner.Sum(m.sum[:0])
	_ = m.outer.(encoding.BinaryUnmarshaler).UnmarshalBinary(m.ostate)
	m.outer.Write(in)
	return m.outer.Sum(m.sum[:0])
}

// next tags the next frame (header: version ‖ id) into out.
func (m *frameMAC) next(header, body []byte, out []byte) {
	m.pos++
	m.at[0] = m.dir
	binary.BigEndian.PutUint64(m.at[1:], m.pos)
	copy(out, m.tag(m.at[:], header, body)[:tagBytes])
}

// session is one end of a session. The writer side batches: the goroutine
// that finds no write in progress yields once before it writes, so that
// frames from goroutines ready to send join the same write, and frames
// queued while a write is on the wire go out with the next one. On
// loopback a write costs the receiver's side of TCP too (57% of a remote
// lookup's CPU was write syscalls); the yield halved the CPU per lookup
// under 32 concurrent callers (BenchmarkOwnerRPC) and costs a lone caller
// nothing measurable.
type session struct {
	nc   net.Conn
	peer uint64 // on the answering end: the node that opened it

	wmu      sync.Mutex
	out      *frameMAC
	wbuf     []byte
	spare    []byte
	flushing bool
	err      error // the first write or read failure; the session is dead

	in    *frameMAC
	br    *bufio.Reader
	lb    [4]byte // the length of the frame being read
	rbuf  []byte
	dead  chan struct{}
	close sync.Once
}

func newSession(nc net.Conn, br *bufio.Reader, key []byte, outDir, inDir byte) *session {
	return &session{nc: nc, br: br, out: newFrameMAC(key, outDir), in: newFrameMAC(key, inDir), dead: make(chan struct{})}
}

// writeTimeout bounds a write to a peer that stopped reading.
const writeTimeout = 5 * time.Second

// send queues one frame and, unless another goroutine is writing, writes
// everything queued. It returns once the frame is queued or written; a
// write failure kills the session, which fails whatever waits on it.
func (s *session) send(id uint32, body []byte) error {
	if err := s.queue(id, body); err != nil {
		return err
	}
	return s.flush()
}

// queue adds one frame to what the next flush writes.
func (s *session) queue(id uint32, body []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.err != nil {
		return s.err
	}
	start := len(s.wbuf)
	s.wbuf = binary.BigEndian.AppendUint32(s.wbuf, uint32(1+4+len(body)+tagBytes))
	s.wbuf = append(s.wbuf, wireVersion)
	s.wbuf = binary.BigEndian.AppendUint32(s.wbuf, id)
	s.wbuf = append(s.wbuf, body...)
	var zero [tagBytes]byte
	s.wbuf = append(s.wbuf, zero[:]...)
	end := len(s.wbuf)
	s.out.next(s.wbuf[start+4:start+frameHeader], s.wbuf[start+frameHeader:end-tagBytes], s.wbuf[end-tagBytes:])
	return nil
}

// flush writes what is queued, unless another goroutine is writing: that
// one writes it too.
func (s *session) flush() error {
	s.wmu.Lock()
	if s.flushing || len(s.wbuf) == 0 || s.err != nil {
		err := s.err
		s.wmu.Unlock()
		return err
	}
	s.flushing = true
	s.wmu.Unlock()
	runtime.Gosched() // let the goroutines that are ready to send join this write
	s.wmu.Lock()
	var err error
	for len(s.wbuf) > 0 && err == nil {
		buf := s.wbuf
		s.wbuf = s.spare[:0]
		s.wmu.Unlock()
		_ = s.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		_, err = s.nc.Write(buf)
		s.wmu.Lock()
		if cap(buf) <= 1<<20 {
			s.spare = buf[:0] // keep the buffer unless one huge frame grew it
		}
	}
	s.flushing = false
	s.wmu.Unlock()
	if err != nil {
		s.kill(fmt.Errorf("cluster: session write: %w", err))
	}
	return err
}

// buffered reports whether a whole frame has been read and waits to be
// decoded: the reader then has more to do before it blocks, and its
// answers can wait to go out with the next ones. Part of a frame does not
// count: the rest may be slow to come.
func (s *session) buffered() bool {
	n := s.br.Buffered()
	if n < 4 {
		return false
	}
	lb, err := s.br.Peek(4)
	return err == nil && n >= 4+int(binary.BigEndian.Uint32(lb))
}

// kill ends the session with err.
func (s *session) kill(err error) {
	s.close.Do(func() {
		s.wmu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.wmu.Unlock()
		_ = s.nc.Close()
		close(s.dead)
	})
}

// read returns the next frame's id and body, verified. The body aliases
// the session's buffer until the next read.
func (s *session) read() (uint32, []byte, error) {
	if _, err := io.ReadFull(s.br, s.lb[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(s.lb[:])
	if n < 1+4+tagBytes || n > maxFrame {
		return 0, nil, fmt.Errorf("cluster: frame of %d bytes", n)
	}
	if cap(s.rbuf) < int(n) {
		s.rbuf = make([]byte, n)
	}
	f := s.rbuf[:n]
	if _, err := io.ReadFull(s.br, f); err != nil {
		return 0, nil, err
	}
	if f[0] != wireVersion {
		return 0, nil, fmt.Errorf("cluster: frame version %d, this build speaks %d", f[0], wireVersion)
	}
	body, tag := f[5:len(f)-tagBytes], f[len(f)-tagBytes:]
	var want [tagBytes]byte
	s.in.next(f[:5], body, want[:])
	if !hmac.Equal(want[:], tag) {
		return 0, nil, errors.New("cluster: frame not authenticated")
	}
	return binary.BigEndian.Uint32(f[1:5]), body, nil
}

// sessionKey derives the key both ends of a session use.
func sessionKey(auth *raftnode.PeerAuth, callerNonce, answerNonce string, caller, answerer uint64) []byte {
	var ids [16]byte
	binary.BigEndian.PutUint64(ids[:8], caller)
	binary.BigEndian.PutUint64(ids[8:], answerer)
	return auth.SessionKey(sessionProtocol, []byte(callerNonce), []byte(answerNonce), ids[:])
}

// dialSession opens a session to the member answering at rawURL: the
// signed Upgrade request, the signed 101, the key.
func dialSession(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error),
	auth *raftnode.PeerAuth, self uint64, selfURL string, peer uint64, rawURL string) (*session, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("cluster: peer URL %q: %v", rawURL, err)
	}
	nc, err := dial(ctx, "tcp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("cluster: dial %s: %w", u.Host, err)
	}
	if d, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(d)
	}
	req, err := http.NewRequest(http.MethodPost, rawURL, http.NoBody)
	if err != nil {
		nc.Close()
		return nil, err
	}
	req.Header.Set("Upgrade", sessionProtocol)
	req.Header.Set("Connection", "Upgrade")
	nonce := auth.Sign(req.Header, sessionPath, self, selfURL, nil)
	br := bufio.NewReaderSize(nc, 64<<10)
	if err := req.Write(nc); err != nil {
		nc.Close()
		return nil, fmt.Errorf("cluster: open session with %s: %w", u.Host, err)
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("cluster: open session with %s: %w", u.Host, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		nc.Close()
		return nil, fmt.Errorf("cluster: %s refused a session: %s %s", u.Host, resp.Status, b)
	}
	theirs := resp.Header.Get(hdrSession)
	if !auth.VerifyAnswer(resp.Header, sessionPath, peer, nonce, []byte(theirs)) {
		nc.Close()
		return nil, fmt.Errorf("cluster: %s answered a session unauthenticated (not node %s?)", u.Host, raftnode.FormatNodeID(peer))
	}
	_ = nc.SetDeadline(time.Time{})
	return newSession(nc, br, sessionKey(auth, nonce, theirs, self, peer), dirCall, dirAnswer), nil
}

// acceptSession answers a signed Upgrade request on an HTTP handler: it
// verifies it, hijacks the connection and returns the session and who
// opened it.
func acceptSession(w http.ResponseWriter, r *http.Request, auth *raftnode.PeerAuth, self uint64) (*session, uint64, error) {
	arrived := time.Now()
	if r.Method != http.MethodPost || r.Header.Get("Upgrade") != sessionProtocol {
		http.Error(w, "want POST with Upgrade: "+sessionProtocol, http.StatusBadRequest)
		return nil, 0, errors.New("not a session request")
	}
	p, err := auth.Verify(r.Header, sessionPath, nil, arrived)
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return nil, 0, err
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "sessions need HTTP/1.1", http.StatusHTTPVersionNotSupported)
		return nil, 0, errors.New("cluster: the peer listener cannot hijack connections")
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	ours := hex.EncodeToString(b[:])
	h := http.Header{}
	h.Set("Upgrade", sessionProtocol)
	h.Set("Connection", "Upgrade")
	h.Set(hdrSession, ours)
	auth.SignAnswer(h, sessionPath, self, p.Nonce, []byte(ours))
	nc, brw, err := hj.Hijack()
	if err != nil {
		return nil, 0, fmt.Errorf("cluster: hijack: %w", err)
	}
	_ = nc.SetDeadline(time.Time{}) // the HTTP server's timeouts no longer apply
	var head []byte
	head = append(head, "HTTP/1.1 101 Switching Protocols\r\n"...)
	for k, vs := range h {
		for _, v := range vs {
			head = append(head, k+": "+v+"\r\n"...)
		}
	}
	head = append(head, "\r\n"...)
	if _, err := nc.Write(head); err != nil {
		nc.Close()
		return nil, 0, fmt.Errorf("cluster: answer session: %w", err)
	}
	return newSession(nc, brw.Reader, sessionKey(auth, p.Nonce, ours, p.ID, self), dirAnswer, dirCall), p.ID, nil
}

// formatID is a node id as logs and metrics show it.
func formatID(id uint64) string { return strconv.FormatUint(id, 16) }
