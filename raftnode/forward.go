package raftnode

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/fxamacker/cbor/v2"
	"go.etcd.io/raft/v3"
)

// forwardRequest is a follower's proposal sent to the leader.
type forwardRequest struct {
	Cmd  cbor.RawMessage `cbor:"1,keyasint,omitempty"`
	Wait bool            `cbor:"2,keyasint,omitempty"`
}

// forwardResponse is the leader's answer: where the command applied and
// the application's response, or why it was not proposed.
type forwardResponse struct {
	Index uint64          `cbor:"1,keyasint,omitempty"`
	Resp  cbor.RawMessage `cbor:"2,keyasint,omitempty"`
	Err   string          `cbor:"3,keyasint,omitempty"`
	Code  uint8           `cbor:"4,keyasint,omitempty"` // errCode
}

// errCode carries sentinel errors across the forwarding hop.
const (
	codeOther uint8 = iota + 1
	codeNotLeader
	codeTooLarge
	codeOutcomeUnknown
	codeMembership
)

var codeErrs = map[uint8]error{
	codeNotLeader:      ErrNotLeader,
	codeTooLarge:       ErrCommandTooLarge,
	codeOutcomeUnknown: ErrOutcomeUnknown,
	codeMembership:     ErrMembershipChange,
}

func errToWire(err error) (uint8, string) {
	for c, e := range codeErrs {
		if errors.Is(err, e) {
			return c, err.Error()
		}
	}
	return codeOther, err.Error()
}

func errFromWire(code uint8, msg string) error {
	if e, ok := codeErrs[code]; ok {
		return fmt.Errorf("%w (at leader: %s)", e, msg)
	}
	return fmt.Errorf("raftnode: leader: %s", msg)
}

func (g *Group[S, C, R]) encodeCommand(cmd C) ([]byte, error) {
	b, err := encMode.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("raftnode: encode command: %w", err)
	}
	if len(b) > g.cfg.MaxCommandBytes {
		return nil, fmt.Errorf("%w: %d > %d bytes", ErrCommandTooLarge, len(b), g.cfg.MaxCommandBytes)
	}
	return b, nil
}

// Propose submits cmd without waiting for it to apply. On a follower it is
// forwarded to the leader, which accepts it into its log before answering.
func (g *Group[S, C, R]) Propose(ctx context.Context, cmd C) error {
	b, err := g.encodeCommand(cmd)
	if err != nil {
		return err
	}
	_, _, err = g.proposeRaw(ctx, b, false)
	return err
}

// ProposeAndWait submits cmd and returns the application's response once
// it has applied. A follower forwards it to the leader and, once the leader
// answers, waits (within ctx) until it has applied the entry itself, so a
// local read afterwards sees the write. If ctx ends during that last wait
// the response is still returned: the command has committed.
func (g *Group[S, C, R]) ProposeAndWait(ctx context.Context, cmd C) (R, error) {
	var zero R
	b, err := g.encodeCommand(cmd)
	if err != nil {
		return zero, err
	}
	index, raw, err := g.proposeRaw(ctx, b, true)
	if err != nil {
		return zero, err
	}
	var r R
	if err := decMode.Unmarshal(raw, &r); err != nil {
		return zero, fmt.Errorf("raftnode: decode response: %w", err)
	}
	_ = g.WaitApplied(ctx, index)
	return r, nil
}

// proposeRaw proposes an encoded command locally when leading, otherwise
// through the leader. It returns the applied index and encoded response
// when wait is set.
func (g *Group[S, C, R]) proposeRaw(ctx context.Context, cmd []byte, wait bool) (uint64, []byte, error) {
	if g.closed.Load() {
		return 0, nil, ErrClosed
	}
	if g.leading.Load() {
		return g.proposeLocal(ctx, cmd, wait)
	}
	lead := g.lead.Load()
	if lead == 0 || lead == g.id {
		return 0, nil, ErrNoLeader
	}
	req, err := encMode.Marshal(forwardRequest{Cmd: cmd, Wait: wait})
	if err != nil {
		return 0, nil, err
	}
	rb, err := g.tr.call(ctx, lead, pathPropose, req, int64(g.cfg.MaxMessageBytes))
	if err != nil {
		return 0, nil, fmt.Errorf("raftnode: forward to leader %s: %w", FormatNodeID(lead), err)
	}
	var fr forwardResponse
	if err := decMode.Unmarshal(rb, &fr); err != nil {
		return 0, nil, fmt.Errorf("raftnode: decode forward response: %w", err)
	}
	if fr.Code != 0 {
		return 0, nil, errFromWire(fr.Code, fr.Err)
	}
	return fr.Index, fr.Resp, nil
}

func (g *Group[S, C, R]) proposeLocal(ctx context.Context, cmd []byte, wait bool) (uint64, []byte, error) {
	seq := g.seq.Add(1)
	data := encodeProposal(g.id, seq, cmd)
	if !wait {
		if err := g.node.Propose(ctx, data); err != nil {
			return 0, nil, proposeErr(err)
		}
		return 0, nil, nil
	}
	ch := make(chan Result[R], 1)
	g.waitMu.Lock()
	g.waiters[seq] = ch
	g.waitMu.Unlock()
	defer func() {
		g.waitMu.Lock()
		delete(g.waiters, seq)
		g.waitMu.Unlock()
	}()
	if err := g.node.Propose(ctx, data); err != nil {
		return 0, nil, proposeErr(err)
	}
	select {
	case res := <-ch:
		if res.Err != nil {
			return 0, nil, res.Err
		}
		raw, err := encMode.Marshal(res.Response)
		if err != nil {
			return 0, nil, fmt.Errorf("raftnode: encode response: %w", err)
		}
		return res.Index, raw, nil
	case <-ctx.Done():
		return 0, nil, fmt.Errorf("raftnode: waiting for apply: %w", ctx.Err())
	case <-g.ctx.Done():
		return 0, nil, ErrClosed
	}
}

func proposeErr(err error) error {
	if errors.Is(err, raft.ErrProposalDropped) {
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return fmt.Errorf("raftnode: propose: %w", err)
}

// handlePropose serves a follower's forwarded proposal on the leader.
func (g *Group[S, C, R]) handlePropose(w http.ResponseWriter, r *http.Request) {
	in, ok := g.tr.authenticated(w, r, pathPropose, int64(g.cfg.MaxCommandBytes)+frameOverhead)
	if !ok {
		return
	}
	var req forwardRequest
	var fr forwardResponse
	var cmd C
	switch {
	case decMode.Unmarshal(in.body, &req) != nil:
		http.Error(w, "bad forward request", http.StatusBadRequest)
		return
	case len(req.Cmd) > g.cfg.MaxCommandBytes:
		fr.Code, fr.Err = errToWire(ErrCommandTooLarge)
	case decMode.Unmarshal(req.Cmd, &cmd) != nil:
		// Refuse what no replica could apply rather than log it.
		http.Error(w, "command does not decode", http.StatusBadRequest)
		return
	case !g.leading.Load():
		fr.Code, fr.Err = errToWire(ErrNotLeader)
	default:
		idx, resp, err := g.proposeLocal(r.Context(), req.Cmd, req.Wait)
		if err != nil {
			fr.Code, fr.Err = errToWire(err)
		} else {
			fr.Index, fr.Resp = idx, resp
		}
	}
	out, err := encMode.Marshal(fr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	g.tr.reply(w, in, pathPropose, out)
}

// raftRouter serves the peer protocol, and the application's own peer
// routes under /app/ (HandlePeer).
func (g *Group[S, C, R]) raftRouter() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(pathMessage, g.tr.handleMessages(pathMessage, g.cfg.MaxMessageBytes))
	mux.Handle(pathSnapshot, g.tr.handleMessages(pathSnapshot, g.cfg.MaxSnapshotBytes))
	mux.HandleFunc(pathPropose, g.handlePropose)
	mux.HandleFunc(pathAdmin, g.handleAdmin)
	return mux
}
