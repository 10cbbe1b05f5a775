package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
//	frame := length u32 (of what follows) ‖ version u8 ‖ id u32 ‖ [clock u64] ‖ body ‖ tag [16]
//	tag   := AES-256-GMAC(session key, nonce: direction u8 ‖ 0 [3] ‖ position u64, data: version ‖ id ‖ [clock] ‖ body)
//
// The Upgrade token names the frames. riftgate-flows/3: version 2 frames,
// which carry a clock, GMAC-tagged (AES-GCM over no plaintext, NIST SP
// 800-38D). riftgate-flows/2: version 1 frames, no clock, GMAC.
// riftgate-flows/1, what the first builds speak: version 1 frames tagged
// with HMAC-SHA256(session key, direction ‖ position ‖ version ‖ id ‖
// body)[:16]. A node answers all three and dials the newest first, then
// the one an answerer that refuses it names, so that a rolling upgrade
// keeps its members talking. GMAC costs a frame about a third of HMAC's
// CPU (AES-NI and carry-less multiply); the position makes every nonce of
// a session key unique, and the key is new for every session.
//
// The clock: a request's is its deadline on the answerer's clock (unix
// ns; 0 for none), and an answerer refuses a request read after it, so
// that one that waited in a stalled socket or a paused process is never
// applied after its caller gave up (and told its client 503). An answer's
// clock is the answerer's time as it answered: each answer gives the
// caller a reading of the offset between the two clocks, good to half the
// call's round trip, and the caller keeps the best recent one to convert
// its deadlines (callerClock). The 101 that opens a riftgate-flows/3
// session carries the first reading (X-Rift-Clock, signed with the nonce).
const (
	sessionPath       = "/flows/session" // signed; where Handler is mounted does not change it
	sessionProtocol   = "riftgate-flows/3"
	sessionProtocolV2 = "riftgate-flows/2"
	sessionProtocolV1 = "riftgate-flows/1"
	hdrSession        = "X-Rift-Session" // the answerer's nonce, hex
	hdrClock          = "X-Rift-Clock"   // riftgate-flows/3: the answerer's clock, unix ns
	// frameClock is the frame version that carries a clock
	// (riftgate-flows/3); wireVersion's frames carry none.
	frameClock byte = 2
	authGroup       = "riftgate-flows"
	tagBytes        = 16
	// maxFrame bounds one frame: a page of adoption or anti-entropy, a few
	// MiB, or one 64 KiB value with room to spare.
	maxFrame = 8 << 20
	// directions, so that an answer can never be taken for a request.
	dirCall   byte = 1
	dirAnswer byte = 2
)

var errSessionClosed = errors.New("cluster: session closed")

// sessionProtocols are the protocols this build speaks, newest first.
var sessionProtocols = []string{sessionProtocol, sessionProtocolV2, sessionProtocolV1}

// frameVersion is the version of proto's frames.
func frameVersion(proto string) byte {
	if proto == sessionProtocol {
		return frameClock
	}
	return wireVersion
}

// frameTag tags the frames of one direction of one session, in order. It
// is used by one goroutine at a time (the writer under its lock, or the
// reader).
type frameTag interface {
	// next writes the next frame's tag into out; frame is version ‖ id ‖
	// body.
	next(frame, out []byte)
}

// newFrameTag returns the tagger of the session protocol proto.
func newFrameTag(proto string, key []byte, dir byte) frameTag {
	if proto == sessionProtocolV1 {
		return newFrameMAC(key, dir)
	}
	return newFrameGMAC(key, dir)
}

// frameGMAC tags frames with AES-256-GMAC (riftgate-flows/2).
type frameGMAC struct {
	aead  cipher.AEAD
	nonce [12]byte // direction ‖ 0 [3] ‖ position
	pos   uint64
	sum   [tagBytes]byte
}

func newFrameGMAC(key []byte, dir byte) *frameGMAC {
	block, err := aes.NewCipher(key) // a session key is 32 bytes: AES-256
	if err != nil {
		panic(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	m := &frameGMAC{aead: aead}
	m.nonce[0] = dir
	return m
}

func (m *frameGMAC) next(frame, out []byte) {
	m.pos++
	binary.BigEndian.PutUint64(m.nonce[4:], m.pos)
	copy(out, m.aead.Seal(m.sum[:0], m.nonce[:], nil, frame))
}

// frameMAC tags frames in one direction of one session with HMAC-SHA256
// (RFC 2104; riftgate-flows/1), written out so that a tag costs no allocation (crypto/hmac's
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

func (m *frameMAC) next(frame, out []byte) {
	m.pos++
	m.at[0] = m.dir
	binary.BigEndian.PutUint64(m.at[1:], m.pos)
	copy(out, m.tag(m.at[:], frame)[:tagBytes])
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
	ver  byte   // the version of its frames: frameClock or wireVersion
	// lastRead is when a frame last arrived (unix ns): the peer was alive
	// then. A caller's heartbeat reads it.
	lastRead atomic.Int64
	// clock is what the 101 of a riftgate-flows/3 session told of the
	// answerer's clock (dialled sessions only).
	clock clockReading

	wmu      sync.Mutex
	out      frameTag
	wbuf     []byte
	spare    []byte
	flushing bool
	frames   uint64 // frames queued so far
	err      error  // the first write or read failure; the session is dead

	in    frameTag
	br    *bufio.Reader
	lb    [4]byte // the length of the frame being read
	rbuf  []byte
	dead  chan struct{}
	close sync.Once
}

func newSession(nc net.Conn, br *bufio.Reader, proto string, key []byte, outDir, inDir byte) *session {
	s := &session{nc: nc, br: br, ver: frameVersion(proto), out: newFrameTag(proto, key, outDir), in: newFrameTag(proto, key, inDir), dead: make(chan struct{})}
	s.lastRead.Store(time.Now().UnixNano())
	return s
}

// clockReading is one reading of the offset between this node's clock and
// a peer's: the peer's clock minus this one's, in ns, within err either
// way, taken at (this node's unix ns).
type clockReading struct {
	off, err, at int64
}

// clockDrift is how fast a reading's error grows as it ages: 100 ppm, far
// beyond what NTP leaves between two servers.
const clockDrift = 10_000 // ns of age per ns of error

// errAt is r's error bound at now.
func (r clockReading) errAt(now int64) int64 { return r.err + max(now-r.at, 0)/clockDrift }

// readingOf is the reading a call that left at sent and was answered at
// back, with the peer's clock theirs in the answer, gives.
func readingOf(sent, back, theirs int64) clockReading {
	return clockReading{off: theirs - (sent + (back-sent)/2), err: (back - sent + 1) / 2, at: back}
}

// writeTimeout bounds a write to a peer that stopped reading.
const writeTimeout = 5 * time.Second

// send queues one frame and, unless another goroutine is writing, writes
// everything queued. It returns once the frame is queued or written; a
// write failure kills the session, which fails whatever waits on it.
// clock goes in the frame on a session whose frames carry one.
func (s *session) send(id uint32, clock int64, body []byte) error {
	if err := s.queue(id, clock, body); err != nil {
		return err
	}
	return s.flush()
}

// headerBytes is the length of the frame's fields before its body, after
// its length.
func (s *session) headerBytes() int {
	if s.ver == frameClock {
		return 1 + 4 + 8
	}
	return 1 + 4
}

// queue adds one frame to what the next flush writes.
func (s *session) queue(id uint32, clock int64, body []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.err != nil {
		return s.err
	}
	start := len(s.wbuf)
	s.wbuf = binary.BigEndian.AppendUint32(s.wbuf, uint32(s.headerBytes()+len(body)+tagBytes))
	s.wbuf = append(s.wbuf, s.ver)
	s.wbuf = binary.BigEndian.AppendUint32(s.wbuf, id)
	if s.ver == frameClock {
		s.wbuf = binary.BigEndian.AppendUint64(s.wbuf, uint64(max(clock, 0)))
	}
	s.wbuf = append(s.wbuf, body...)
	var zero [tagBytes]byte
	s.wbuf = append(s.wbuf, zero[:]...)
	end := len(s.wbuf)
	s.out.next(s.wbuf[start+4:end-tagBytes], s.wbuf[end-tagBytes:])
	s.frames++
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

// kill ends the session with err. The connection is reset, not closed:
// whatever it had not sent yet is dropped, so that a request given up on
// is not delivered when a partition heals.
func (s *session) kill(err error) {
	s.close.Do(func() {
		s.wmu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.wmu.Unlock()
		_ = raftnode.AbortPeerConn(s.nc)
		close(s.dead)
	})
}

// frame is one frame read, verified. Its body aliases the session's
// buffer until the next read.
type frame struct {
	id    uint32
	clock int64 // 0 when the frame has none
	body  []byte
}

// read returns the next frame.
func (s *session) read() (frame, error) {
	if _, err := io.ReadFull(s.br, s.lb[:]); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(s.lb[:])
	hdr := s.headerBytes()
	if n < uint32(hdr+tagBytes) || n > maxFrame {
		return frame{}, fmt.Errorf("cluster: frame of %d bytes", n)
	}
	if cap(s.rbuf) < int(n) {
		s.rbuf = make([]byte, n)
	}
	f := s.rbuf[:n]
	if _, err := io.ReadFull(s.br, f); err != nil {
		return frame{}, err
	}
	if f[0] != s.ver {
		return frame{}, fmt.Errorf("cluster: frame version %d on a session of version %d frames", f[0], s.ver)
	}
	tag := f[len(f)-tagBytes:]
	var want [tagBytes]byte
	s.in.next(f[:len(f)-tagBytes], want[:])
	if !hmac.Equal(want[:], tag) {
		return frame{}, errors.New("cluster: frame not authenticated")
	}
	s.lastRead.Store(time.Now().UnixNano())
	fr := frame{id: binary.BigEndian.Uint32(f[1:5]), body: f[hdr : len(f)-tagBytes]}
	if s.ver == frameClock {
		fr.clock = int64(binary.BigEndian.Uint64(f[5:13]))
	}
	return fr, nil
}

// sessionKey derives the key both ends of a session of protocol proto use.
func sessionKey(auth *raftnode.PeerAuth, proto, callerNonce, answerNonce string, caller, answerer uint64) []byte {
	var ids [16]byte
	binary.BigEndian.PutUint64(ids[:8], caller)
	binary.BigEndian.PutUint64(ids[8:], answerer)
	return auth.SessionKey(proto, []byte(callerNonce), []byte(answerNonce), ids[:])
}

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// errOldProtocol is an answerer's refusal of the session protocol: a build
// before it, which the dialer asks again with the one before.
var errOldProtocol = errors.New("cluster: the peer does not speak " + sessionProtocol)

// dialSession opens a session to the member answering at rawURL: the
// signed Upgrade request, the signed 101, the key. It asks for
// sessionProtocol, then for an older protocol that a member of an older
// build names when it refuses.
func dialSession(ctx context.Context, dial dialFunc, auth *raftnode.PeerAuth, self uint64, selfURL string, peer uint64, rawURL string) (*session, error) {
	var err error
	for _, proto := range sessionProtocols {
		var s *session
		s, err = dialSessionAs(ctx, dial, auth, proto, self, selfURL, peer, rawURL)
		if !errors.Is(err, errOldProtocol) {
			return s, err
		}
	}
	return nil, err
}

func dialSessionAs(ctx context.Context, dial dialFunc, auth *raftnode.PeerAuth, proto string, self uint64, selfURL string, peer uint64, rawURL string) (*session, error) {
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
	req.Header.Set("Upgrade", proto)
	req.Header.Set("Connection", "Upgrade")
	nonce := auth.Sign(req.Header, sessionPath, self, selfURL, nil)
	br := bufio.NewReaderSize(nc, 64<<10)
	sent := time.Now().UnixNano()
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
		err := fmt.Errorf("cluster: %s refused a session: %s %s", u.Host, resp.Status, b)
		if resp.StatusCode == http.StatusBadRequest && namesOlderProtocol(proto, b) {
			err = fmt.Errorf("%w: %w", errOldProtocol, err)
		}
		return nil, err
	}
	back := time.Now().UnixNano()
	theirs := resp.Header.Get(hdrSession)
	signed := theirs
	var clock clockReading
	if proto == sessionProtocol {
		c := resp.Header.Get(hdrClock)
		at, err := strconv.ParseInt(c, 10, 64)
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("cluster: %s opened a session without its clock", u.Host)
		}
		signed += "|" + c
		clock = readingOf(sent, back, at)
	}
	if !auth.VerifyAnswer(resp.Header, sessionPath, peer, nonce, []byte(signed)) {
		nc.Close()
		return nil, fmt.Errorf("cluster: %s answered a session unauthenticated (not node %s?)", u.Host, raftnode.FormatNodeID(peer))
	}
	_ = nc.SetDeadline(time.Time{})
	if got := resp.Header.Get("Upgrade"); got != proto {
		nc.Close()
		return nil, fmt.Errorf("cluster: %s switched to %q, not %q", u.Host, got, proto)
	}
	s := newSession(nc, br, proto, sessionKey(auth, proto, nonce, theirs, self, peer), dirCall, dirAnswer)
	s.clock = clock
	return s, nil
}

// namesOlderProtocol reports whether a refusal names a protocol older than
// proto that this build speaks: the dialer then asks for the next older one.
func namesOlderProtocol(proto string, refusal []byte) bool {
	i := slices.Index(sessionProtocols, proto)
	for _, older := range sessionProtocols[i+1:] {
		if bytes.Contains(refusal, []byte("Upgrade: "+older)) {
			return true
		}
	}
	return false
}

// acceptSession answers a signed Upgrade request on an HTTP handler: it
// verifies it, hijacks the connection and returns the session and who
// opened it.
func acceptSession(w http.ResponseWriter, r *http.Request, auth *raftnode.PeerAuth, self uint64) (*session, uint64, error) {
	arrived := time.Now()
	proto := r.Header.Get("Upgrade")
	if r.Method != http.MethodPost || !slices.Contains(sessionProtocols, proto) {
		http.Error(w, "want POST with Upgrade: "+strings.Join(sessionProtocols, ", or Upgrade: "), http.StatusBadRequest)
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
	h.Set("Upgrade", proto)
	h.Set("Connection", "Upgrade")
	h.Set(hdrSession, ours)
	signed := ours
	if proto == sessionProtocol {
		c := strconv.FormatInt(time.Now().UnixNano(), 10)
		h.Set(hdrClock, c)
		signed += "|" + c
	}
	auth.SignAnswer(h, sessionPath, self, p.Nonce, []byte(signed))
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
	return newSession(nc, brw.Reader, proto, sessionKey(auth, proto, p.Nonce, ours, p.ID, self), dirAnswer, dirCall), p.ID, nil
}

// formatID is a node id as logs and metrics show it.
func formatID(id uint64) string { return strconv.FormatUint(id, 16) }
