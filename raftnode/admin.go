package raftnode

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// adminOp is a membership change as forwarded to the leader.
type adminOp uint8

const (
	opAddLearner adminOp = iota + 1
	opPromote
	opRemove
)

type adminRequest struct {
	Op   adminOp `cbor:"1,keyasint"`
	ID   uint64  `cbor:"2,keyasint,omitempty"`
	Name string  `cbor:"3,keyasint,omitempty"`
	URL  string  `cbor:"4,keyasint,omitempty"`
}

type adminResponse struct {
	Membership Membership `cbor:"1,keyasint"`
	Code       uint8      `cbor:"2,keyasint,omitempty"`
	Err        string     `cbor:"3,keyasint,omitempty"`
}

// maxPromoteLag is how far (in entries) a learner may trail the leader's
// commit index and still be promoted; a voter that far behind would cost
// the group availability while it catches up.
const maxPromoteLag = 1000

// AddLearner admits the node named name, reachable at url (its Raft router),
// as a non-voting learner. Its id is NodeIDFromName(name).
func (g *Group[S, C, R]) AddLearner(ctx context.Context, name, url string) (Membership, error) {
	return g.admin(ctx, adminRequest{Op: opAddLearner, ID: NodeIDFromName(name), Name: name, URL: url})
}

// Promote turns learner id into a voter.
func (g *Group[S, C, R]) Promote(ctx context.Context, id uint64) (Membership, error) {
	return g.admin(ctx, adminRequest{Op: opPromote, ID: id})
}

// Remove takes id out of the group for good: ids are never reused.
func (g *Group[S, C, R]) Remove(ctx context.Context, id uint64) (Membership, error) {
	return g.admin(ctx, adminRequest{Op: opRemove, ID: id})
}

// admin runs a membership change on the leader, forwarding if needed.
func (g *Group[S, C, R]) admin(ctx context.Context, req adminRequest) (Membership, error) {
	if g.closed.Load() {
		return Membership{}, ErrClosed
	}
	if g.leading.Load() {
		return g.changeMembership(ctx, req)
	}
	lead := g.lead.Load()
	if lead == 0 || lead == g.id {
		return Membership{}, ErrNoLeader
	}
	body, err := encMode.Marshal(req)
	if err != nil {
		return Membership{}, err
	}
	rb, err := g.tr.call(ctx, lead, pathAdmin, body, g.cfg.MaxMessageBytes)
	if err != nil {
		return Membership{}, fmt.Errorf("raftnode: forward membership change: %w", err)
	}
	var resp adminResponse
	if err := decMode.Unmarshal(rb, &resp); err != nil {
		return Membership{}, fmt.Errorf("raftnode: decode membership response: %w", err)
	}
	if resp.Code != 0 {
		return Membership{}, errFromWire(resp.Code, resp.Err)
	}
	return resp.Membership, nil
}

// changeMembership validates req against the applied membership, proposes
// one ConfChangeV2 and waits for it to apply. confMu keeps this node's
// changes one at a time; raft refuses a second pending change anyway.
func (g *Group[S, C, R]) changeMembership(ctx context.Context, req adminRequest) (Membership, error) {
	g.confMu.Lock()
	defer g.confMu.Unlock()
	cur := g.Membership()
	mb, isMember := cur.Member(req.ID)
	var typ pb.ConfChangeType
	switch {
	case req.ID == 0:
		return cur, fmt.Errorf("%w: node id 0", ErrMembershipChange)
	case req.Op == opAddLearner:
		if cur.WasRemoved(req.ID) {
			return cur, fmt.Errorf("%w: node %s was removed and its id is never reused", ErrMembershipChange, FormatNodeID(req.ID))
		}
		if isMember {
			return cur, fmt.Errorf("%w: node %s is already a %s", ErrMembershipChange, FormatNodeID(req.ID), mb.Role)
		}
		if req.URL == "" {
			return cur, fmt.Errorf("%w: a learner needs a URL", ErrMembershipChange)
		}
		typ = pb.ConfChangeAddLearnerNode
	case req.Op == opPromote:
		if !isMember || mb.Role != RoleLearner {
			return cur, fmt.Errorf("%w: node %s is not a learner", ErrMembershipChange, FormatNodeID(req.ID))
		}
		st := g.node.Status()
		if pr, ok := st.Progress[req.ID]; !ok || pr.Match+maxPromoteLag < st.HardState.GetCommit() {
			return cur, fmt.Errorf("%w: learner %s has not caught up (match %d, commit %d)", ErrMembershipChange, FormatNodeID(req.ID), pr.Match, st.HardState.GetCommit())
		}
		typ = pb.ConfChangeAddNode
	case req.Op == opRemove:
		if !isMember {
			return cur, fmt.Errorf("%w: node %s is not a member", ErrMembershipChange, FormatNodeID(req.ID))
		}
		if mb.Role == RoleVoter && len(cur.Voters()) == 1 {
			return cur, fmt.Errorf("%w: cannot remove the last voter", ErrMembershipChange)
		}
		typ = pb.ConfChangeRemoveNode
	default:
		return cur, fmt.Errorf("%w: unknown operation %d", ErrMembershipChange, req.Op)
	}
	// Raft silently turns a conf change into an empty entry while it thinks
	// an earlier one is unapplied, and it learns of our applies only when
	// the Ready loop advances, just after the previous change answered.
	if err := g.waitRaftApplied(ctx, cur.Index); err != nil {
		return cur, err
	}
	seq := g.seq.Add(1)
	cctx, err := encMode.Marshal(confContext{Name: req.Name, URL: req.URL, Origin: g.id, Seq: seq})
	if err != nil {
		return cur, err
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
	if err := g.node.ProposeConfChange(ctx, confChangeV2(typ, req.ID, cctx)); err != nil {
		return cur, proposeErr(err)
	}
	select {
	case res := <-ch:
		if res.Err != nil {
			return cur, res.Err
		}
		if err := g.WaitApplied(ctx, res.Index); err != nil {
			return cur, err
		}
		return g.Membership(), nil
	case <-ctx.Done():
		return cur, fmt.Errorf("raftnode: membership change (another may be pending): %w", ctx.Err())
	case <-g.ctx.Done():
		return cur, ErrClosed
	}
}

// waitRaftApplied waits until raft itself counts index as applied.
func (g *Group[S, C, R]) waitRaftApplied(ctx context.Context, index uint64) error {
	for g.node.Status().Applied < index {
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("raftnode: waiting for raft to apply %d: %w", index, ctx.Err())
		case <-g.ctx.Done():
			return ErrClosed
		}
	}
	return nil
}

func (g *Group[S, C, R]) handleAdmin(w http.ResponseWriter, r *http.Request) {
	in, ok := g.tr.authenticated(w, r, pathAdmin, 64<<10)
	if !ok {
		return
	}
	var req adminRequest
	if err := decMode.Unmarshal(in.body, &req); err != nil {
		http.Error(w, "bad admin request", http.StatusBadRequest)
		return
	}
	var resp adminResponse
	if !g.leading.Load() {
		resp.Code, resp.Err = errToWire(ErrNotLeader)
	} else if m, err := g.changeMembership(r.Context(), req); err != nil {
		resp.Code, resp.Err = errToWire(err)
	} else {
		resp.Membership = m
	}
	out, err := encMode.Marshal(resp)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	g.tr.reply(w, in, pathAdmin, out)
}

// MemberJSON is a member as the admin API shows it. Ids are hex strings:
// JSON numbers lose precision above 2^53.
type MemberJSON struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	URL  string `json:"url"`
	Role string `json:"role"`
}

// MembershipJSON is the admin API's membership document.
type MembershipJSON struct {
	Group   string       `json:"group"`
	Index   uint64       `json:"index"`
	Leader  string       `json:"leader,omitempty"`
	Members []MemberJSON `json:"members"`
	Removed []string     `json:"removed,omitempty"`
}

func (g *Group[S, C, R]) membershipJSON(m Membership) MembershipJSON {
	out := MembershipJSON{Group: g.cfg.GroupID, Index: m.Index, Members: []MemberJSON{}}
	if l := g.lead.Load(); l != 0 {
		out.Leader = FormatNodeID(l)
	}
	for _, mb := range m.Members {
		out.Members = append(out.Members, MemberJSON{ID: FormatNodeID(mb.ID), Name: mb.Name, URL: mb.URL, Role: mb.Role.String()})
	}
	for _, id := range m.Removed {
		out.Removed = append(out.Removed, FormatNodeID(id))
	}
	return out
}

// adminAuthTag authenticates an admin API call: the method and path
// relative to the router are signed with the stamp and the body.
func adminAuthTag(secret []byte, group, method, path string, st stamp, body []byte) string {
	return authTag(secret, group, "cluster:"+method+" "+path, 0, "", st, body)
}

// clusterRouter is the membership admin API:
//
//	GET  /members                          the applied membership
//	POST /learners {"name":..,"url":..}   add a learner
//	POST /promote  {"id":"<hex>"}         promote a learner to voter
//	POST /remove   {"id":"<hex>"}         remove a member for good
//
// Every call carries X-Rift-Auth, an HMAC of method, path, stamp and body
// with the cluster secret, and a stamp (X-Rift-Time, X-Rift-Nonce) that is
// accepted once (see AdminClient). Changes are forwarded to the leader.
func (g *Group[S, C, R]) clusterRouter() http.Handler {
	mux := http.NewServeMux()
	// reply writes one JSON answer, signed for the call it answers.
	type reply func(code int, v any)
	auth := func(next func(reply, *http.Request, []byte)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			arrived := time.Now()
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
			if err != nil {
				http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
				return
			}
			st, err := readStamp(r.Header)
			if err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			want := adminAuthTag(g.cfg.Secret, g.cfg.GroupID, r.Method, r.URL.Path, st, body)
			if !hmac.Equal([]byte(want), []byte(r.Header.Get(hdrAuth))) {
				http.Error(w, "unauthenticated", http.StatusUnauthorized)
				return
			}
			if err := g.tr.auth.replays.admit(st, arrived); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			next(func(code int, v any) {
				out, _ := json.Marshal(v) // maps of strings and MemberJSON
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set(hdrAuth, adminAuthTag(g.cfg.Secret, g.cfg.GroupID, r.Method, r.URL.Path+"#response", stamp{nonce: st.nonce}, out))
				w.WriteHeader(code)
				_, _ = w.Write(out)
			}, r, body)
		}
	}
	result := func(reply reply, m Membership, err error) {
		switch {
		case err == nil:
			reply(http.StatusOK, g.membershipJSON(m))
		case errors.Is(err, ErrMembershipChange):
			reply(http.StatusConflict, map[string]string{"error": err.Error()})
		default:
			reply(http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		}
	}
	idOf := func(body []byte) (uint64, error) {
		var req struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return 0, err
		}
		return strconv.ParseUint(req.ID, 16, 64)
	}
	mux.HandleFunc("GET /members", auth(func(reply reply, _ *http.Request, _ []byte) {
		reply(http.StatusOK, g.membershipJSON(g.Membership()))
	}))
	mux.HandleFunc("POST /learners", auth(func(reply reply, r *http.Request, body []byte) {
		var req struct{ Name, URL string }
		if err := json.Unmarshal(body, &req); err != nil || req.Name == "" {
			reply(http.StatusBadRequest, map[string]string{"error": "want {\"name\":..,\"url\":..}"})
			return
		}
		m, err := g.AddLearner(r.Context(), req.Name, req.URL)
		result(reply, m, err)
	}))
	for path, op := range map[string]func(context.Context, uint64) (Membership, error){
		"POST /promote": g.Promote,
		"POST /remove":  g.Remove,
	} {
		mux.HandleFunc(path, auth(func(reply reply, r *http.Request, body []byte) {
			id, err := idOf(body)
			if err != nil {
				reply(http.StatusBadRequest, map[string]string{"error": "want {\"id\":\"<hex>\"}"})
				return
			}
			m, err := op(r.Context(), id)
			result(reply, m, err)
		}))
	}
	return mux
}

// AdminClient calls a member's membership admin API.
type AdminClient struct {
	BaseURL string // where the Cluster router is mounted, e.g. http://host:port/cluster
	Group   string
	Secret  []byte
	HTTP    *http.Client
}

// Do sends one signed admin call and decodes the JSON answer into out.
func (c *AdminClient) Do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	st := newStamp(time.Now())
	st.set(req.Header)
	req.Header.Set(hdrAuth, adminAuthTag(c.Secret, c.Group, method, path, st, body))
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("raftnode: admin %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	// An answer from past authentication is signed for this call; one that
	// is not (a 401, or a forgery) is reported by status alone.
	want := adminAuthTag(c.Secret, c.Group, method, path+"#response", stamp{nonce: st.nonce}, rb)
	signed := hmac.Equal([]byte(want), []byte(resp.Header.Get(hdrAuth)))
	switch {
	case resp.StatusCode != http.StatusOK && signed:
		return fmt.Errorf("raftnode: admin %s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(rb))
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("raftnode: admin %s %s: %d, unauthenticated answer: %s", method, path, resp.StatusCode, bytes.TrimSpace(rb))
	case !signed:
		return fmt.Errorf("raftnode: admin %s %s: answer not authenticated", method, path)
	}
	if out != nil {
		return json.Unmarshal(rb, out)
	}
	return nil
}
