package raftnode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// appPrefix is where an application's own peer routes live on the Raft
// router, apart from the substrate's.
const appPrefix = "/app/"

// PeerHandler answers one authenticated application request that member
// from sent. Its answer is signed for that request.
type PeerHandler func(ctx context.Context, from uint64, body []byte) ([]byte, error)

// HandlePeer serves the application route path (it must start with
// "/app/") on the Raft router, so that members reach it at their Raft URL
// with CallPeer. A request is authenticated and accepted at most once by
// the transport's PeerAuth, exactly as Raft's own messages are, with its
// body capped at limit (413 past it), and it does not count as hearing
// from its sender for IsIsolated. An error from h answers 500 with its
// text, unsigned, which CallPeer reports as an error. A protocol that
// needs its own connections (a hot path) uses PeerAuth directly instead.
func (g *Group[S, C, R]) HandlePeer(path string, limit int64, h PeerHandler) {
	if !strings.HasPrefix(path, appPrefix) || len(path) == len(appPrefix) {
		panic(fmt.Sprintf("raftnode: HandlePeer(%q): an application route starts with %s", path, appPrefix))
	}
	g.peerMux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		in, ok := g.tr.authenticated(w, r, path, limit)
		if !ok {
			return
		}
		out, err := h(r.Context(), in.from, in.body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		g.tr.reply(w, in, path, out)
	})
}

// CallPeer sends body to member id's application route path (see
// HandlePeer), signed, and returns the member's answer once its signature
// verifies, read up to respCap bytes. The member's URL comes from the
// applied membership.
func (g *Group[S, C, R]) CallPeer(ctx context.Context, id uint64, path string, body []byte, respCap int64) ([]byte, error) {
	if !strings.HasPrefix(path, appPrefix) {
		return nil, fmt.Errorf("raftnode: CallPeer(%q): not an application route", path)
	}
	if g.closed.Load() {
		return nil, ErrClosed
	}
	return g.tr.call(ctx, id, path, body, respCap)
}

// PeerStatus returns the HTTP status of a member's non-2xx answer to
// CallPeer, or 0 when err is no such answer. http.StatusNotFound means the
// member serves no such route: a member of an older build, during a
// rolling upgrade, that a caller may ask on an older route instead.
func PeerStatus(err error) int {
	var e *errStatus
	if errors.As(err, &e) {
		return e.code
	}
	return 0
}
