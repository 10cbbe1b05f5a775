package raftnode

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// authLabel starts every signed input. v1 signed no time and no nonce, so a
// captured request could be sent again; v2 refuses that. A v1 peer's
// requests fail authentication (they carry no X-Rift-Time), so moving a
// cluster from v1 takes a full stop, as changing the ring's hash does.
const authLabel = "riftgate-raft-v2"

// Headers that make a signed request unique.
const (
	hdrTime  = "X-Rift-Time"  // the sender's clock, Unix milliseconds
	hdrNonce = "X-Rift-Nonce" // 16 random bytes, hex
)

// authWindow is how far a request's time may be from the receiver's clock
// when the request arrives: room for clock skew between members. A
// receiver remembers every nonce it accepted for that long, so a request
// is accepted at most once.
const authWindow = time.Minute

// stamp is what makes one signed request unique: when it was sent, and a
// random nonce. A response is signed with its request's nonce and no time,
// which binds it to that request.
type stamp struct {
	ms    int64
	nonce string
}

func newStamp(now time.Time) stamp {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return stamp{ms: now.UnixMilli(), nonce: hex.EncodeToString(b[:])}
}

func (s stamp) set(h http.Header) {
	h.Set(hdrTime, strconv.FormatInt(s.ms, 10))
	h.Set(hdrNonce, s.nonce)
}

// errStamp reports a request without a usable time or nonce: an old peer,
// or not a peer at all.
var errStamp = errors.New("raftnode: request without X-Rift-Time and X-Rift-Nonce (a peer from before auth v2?)")

func readStamp(h http.Header) (stamp, error) {
	ms, err := strconv.ParseInt(h.Get(hdrTime), 10, 64)
	nonce := h.Get(hdrNonce)
	if err != nil || len(nonce) != 32 {
		return stamp{}, errStamp
	}
	if _, err := hex.DecodeString(nonce); err != nil {
		return stamp{}, errStamp
	}
	return stamp{ms: ms, nonce: nonce}, nil
}

// authTag is HMAC-SHA256 over everything a receiver acts on: the group, the
// path (so a body cannot be replayed to another endpoint), the sender's id
// and URL, the stamp (so it cannot be replayed at all) and the body. Fields
// are length-prefixed so no two inputs share an encoding.
func authTag(secret []byte, group, path string, from uint64, url string, st stamp, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	var n [8]byte
	for _, f := range [][]byte{[]byte(authLabel), []byte(group), []byte(path), []byte(strconv.FormatUint(from, 16)), []byte(url),
		[]byte(strconv.FormatInt(st.ms, 10)), []byte(st.nonce), body} {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		mac.Write(n[:])
		mac.Write(f)
	}
	return hex.EncodeToString(mac.Sum(nil))
}

// maxNonces bounds what a replayGuard remembers: a window's worth of
// requests at about 16k a second. Past it, requests are refused until old
// nonces age out, rather than forgetting nonces whose requests could then
// be replayed.
const maxNonces = 1 << 20

// errReplay and errClock are why an authentic request is refused.
var (
	errReplay = errors.New("raftnode: request already accepted once (replayed)")
	errClock  = fmt.Errorf("raftnode: request time more than %s from this member's clock", authWindow)
	errBusy   = errors.New("raftnode: too many recent requests to remember")
)

// replayGuard accepts each stamp once within the window. Call admit only
// after the request's tag has verified, so that forged requests cannot fill
// it.
type replayGuard struct {
	mu   sync.Mutex
	seen map[string]int64 // nonce -> when it may be forgotten, Unix ms
	next int64            // when to sweep expired nonces next
}

// admit accepts st, which arrived at arrived, unless its time is outside
// the window or its nonce was accepted before.
func (g *replayGuard) admit(st stamp, arrived time.Time) error {
	now := arrived.UnixMilli()
	w := authWindow.Milliseconds()
	if st.ms < now-w || st.ms > now+w {
		return errClock
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = map[string]int64{}
	}
	if now >= g.next || len(g.seen) >= maxNonces {
		for n, until := range g.seen {
			if until < now {
				delete(g.seen, n)
			}
		}
		g.next = now + w
	}
	if _, ok := g.seen[st.nonce]; ok {
		return errReplay
	}
	if len(g.seen) >= maxNonces {
		return errBusy
	}
	// Past st.ms+w the window check refuses the request by itself.
	g.seen[st.nonce] = st.ms + w
	return nil
}

// ErrUnauthenticated is what PeerAuth.Verify reports for a request whose
// tag does not verify (a wrong secret, group, path, sender or body).
var ErrUnauthenticated = errors.New("raftnode: unauthenticated")

// PeerAuth signs and verifies the requests members of one cluster send each
// other, and their answers, with the cluster secret (auth v2 above). The
// Raft transport uses it, and so does any other peer protocol of the same
// cluster (riftgate's owner RPC opens its sessions with it), so that there
// is one scheme to audit. It is safe for concurrent use.
type PeerAuth struct {
	group   string
	secret  []byte
	replays replayGuard
}

// NewPeerAuth returns the authenticator of group under secret.
func NewPeerAuth(group string, secret []byte) *PeerAuth {
	return &PeerAuth{group: group, secret: secret}
}

// Peer is a verified request's sender and the nonce its answer is bound to.
type Peer struct {
	ID    uint64
	URL   string
	Nonce string
	Sent  time.Time // the sender's clock when it signed
}

// Sign sets the headers that authenticate a request to path from the
// member (from, url) carrying body, and returns the nonce its answer will
// be signed with.
func (a *PeerAuth) Sign(h http.Header, path string, from uint64, url string, body []byte) string {
	h.Set(hdrGroup, a.group)
	h.Set(hdrFrom, strconv.FormatUint(from, 16))
	h.Set(hdrURL, url)
	st := newStamp(time.Now())
	st.set(h)
	h.Set(hdrAuth, authTag(a.secret, a.group, path, from, url, st, body))
	return st.nonce
}

// Verify authenticates a request to path that arrived at arrived: its
// group and tag over sender, stamp and body, then that the stamp is
// recent and was never accepted before. A missing stamp is errStamp, a bad
// tag ErrUnauthenticated; replays and clock skew are refused after the tag
// verified, so that forged requests cannot fill the replay guard.
func (a *PeerAuth) Verify(h http.Header, path string, body []byte, arrived time.Time) (Peer, error) {
	st, err := readStamp(h)
	if err != nil {
		return Peer{}, err
	}
	from, ferr := strconv.ParseUint(h.Get(hdrFrom), 16, 64)
	url := h.Get(hdrURL)
	want := authTag(a.secret, a.group, path, from, url, st, body)
	if ferr != nil || from == 0 || h.Get(hdrGroup) != a.group || !hmac.Equal([]byte(want), []byte(h.Get(hdrAuth))) {
		return Peer{}, ErrUnauthenticated
	}
	if err := a.replays.admit(st, arrived); err != nil {
		return Peer{ID: from, URL: url}, err
	}
	return Peer{ID: from, URL: url, Nonce: st.nonce, Sent: time.UnixMilli(st.ms)}, nil
}

// SignAnswer sets the header that binds an answer from member self to the
// request with nonce.
func (a *PeerAuth) SignAnswer(h http.Header, path string, self uint64, nonce string, body []byte) {
	h.Set(hdrAuth, authTag(a.secret, a.group, path+"#response", self, "", stamp{nonce: nonce}, body))
}

// VerifyAnswer reports whether h and body are member from's answer to the
// request with nonce.
func (a *PeerAuth) VerifyAnswer(h http.Header, path string, from uint64, nonce string, body []byte) bool {
	want := authTag(a.secret, a.group, path+"#response", from, "", stamp{nonce: nonce}, body)
	return hmac.Equal([]byte(want), []byte(h.Get(hdrAuth)))
}

// SessionKey derives the key of a stream that one verified request opened
// (the request's nonce and the answer's are among parts): HMAC-SHA256 under
// the secret over the label and the length-prefixed parts. Both ends derive
// it; it never travels. Frames on the stream are then authenticated with
// it, counted, so each is accepted once and in order without a nonce of
// its own.
func (a *PeerAuth) SessionKey(label string, parts ...[]byte) []byte {
	mac := hmac.New(sha256.New, a.secret)
	var n [8]byte
	for _, f := range append([][]byte{[]byte(authLabel + "/session"), []byte(a.group), []byte(label)}, parts...) {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		mac.Write(n[:])
		mac.Write(f)
	}
	return mac.Sum(nil)
}
