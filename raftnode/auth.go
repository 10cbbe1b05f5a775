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
