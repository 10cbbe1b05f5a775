package imposter

import (
	"context"
	"errors"
	"strconv"

	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
)

// ScenarioStarted is every scenario's state until a stub moves it.
const ScenarioStarted = "Started"

// ScenarioKey is the flow key that holds a scenario's state. Keeping it in
// the flow puts it on the flow's owner, so a transition and the flow's other
// state live and die together.
func ScenarioKey(name string) string { return "_scenario:" + name }

// maxScenarioRetries bounds how often a request re-matches after losing a
// transition race; each loss means another request made progress.
const maxScenarioRetries = 64

// FlowID returns the request's scoped flow id, as seed 000 §10 says: the
// value of the imposter's flow header (its port when the header is absent
// or none is named), prefixed by "i<port>:" or, with contextScope "fleet",
// by "f:"; or "" when the imposter has no flow store.
func (imp *Imposter) FlowID(r *message.Request) string {
	if imp.opts.Store == nil {
		return ""
	}
	f := &imp.spec.Flow
	if h := f.Header; h != "" {
		if id, _ := r.Header(h); id != "" {
			return imp.flowIDs.String(imp.flowScope, id)
		}
	}
	if q := f.Query; q != "" {
		for _, kv := range r.Query {
			if kv.Name == q && kv.Value != "" {
				return imp.flowIDs.String(imp.flowScope, kv.Value)
			}
		}
	}
	if f.Connection && r.Connection != "" {
		return imp.flowIDs.String(imp.flowScope, r.Connection)
	}
	return imp.portFlow
}

// flowCycleKey is the flow key of a stub's position in its response cycle
// when the imposter cycles per flow.
func flowCycleKey(st *Stub) string { return "_cycle:" + strconv.FormatUint(st.Spec.ID, 10) }

// nextInFlow is a stub's next response in the request's flow: the
// position is a counter in the flow, moved by compare-and-set, so that
// each flow (a connection, a user) walks the cycle from its start.
func (imp *Imposter) nextInFlow(ctx context.Context, st *Stub, r *message.Request) (*response, error) {
	store := imp.opts.Store
	flowID, key, policy := imp.FlowID(r), flowCycleKey(st), imp.spec.Flow.Policy
	var buf [20]byte
	for attempt := 0; attempt < maxScenarioRetries; attempt++ {
		e, err := store.Get(ctx, flowID, key, buf[:0])
		switch {
		case errors.Is(err, flow.ErrNotFound):
			e = flow.Entry{}
		case err != nil:
			return nil, unavailable(err)
		}
		pos, _ := strconv.ParseUint(string(e.Value), 10, 64)
		_, err = store.CAS(ctx, flowID, key, e.Version.V, strconv.AppendUint(nil, pos+1, 10), policy)
		switch {
		case err == nil:
			return st.at(pos), nil
		case errors.Is(err, flow.ErrVersionMismatch):
			continue
		default:
			return nil, unavailable(err)
		}
	}
	return nil, mberr.New(mberr.FlowUnavailable, "response cycle kept moving; gave up")
}

// matchScenario matches r against a table whose stubs take part in
// scenarios. A stub that names requiredScenarioState matches only in that
// state; choosing a stub with newScenarioState moves the scenario by a
// compare-and-set on what was read, so of two concurrent requests that
// saw the same state only one transitions it; the other matches again
// against the new state.
//
// A store that speculates (a cluster's, whose reads are round trips to the
// flow's owner) first lends the state it last saw: the match on it stands
// only if it moves that very scenario, by a swap on that value, which the
// owner checks. Any other outcome on a recalled state (no transition, or
// one of another scenario) matches again on states read from the owner, so
// no answer rests on an unconfirmed state.
func (imp *Imposter) matchScenario(ctx context.Context, t *table, r *message.Request) (*Stub, error) {
	store := imp.opts.Store
	if store == nil {
		return nil, mberr.New(mberr.FlowUnavailable, "scenarios need a flow store")
	}
	flowID := imp.FlowID(r)
	policy := imp.spec.Flow.Policy
	spec, _ := store.(flow.Speculator)
	guess := spec != nil
	var known map[string]flow.Entry // read from the owner by a swap that lost
	for attempt := 0; attempt < maxScenarioRetries; attempt++ {
		states := map[string]flow.Entry{}
		var recalled map[string]bool
		var readErr error
		state := func(name string) (flow.Entry, bool) {
			if e, ok := states[name]; ok {
				return e, true
			}
			if e, ok := known[name]; ok {
				states[name] = e
				return e, true
			}
			if guess {
				if e, ok := spec.Recall(flowID, ScenarioKey(name)); ok {
					if recalled == nil {
						recalled = map[string]bool{}
					}
					recalled[name] = true
					states[name] = e
					return e, true
				}
			}
			e, err := store.Get(ctx, flowID, ScenarioKey(name), nil)
			switch {
			case errors.Is(err, flow.ErrNotFound):
				e = flow.Entry{}
			case err != nil:
				readErr = err
				return e, false
			}
			states[name] = e
			return e, true
		}
		st := t.match(r, func(s *Stub) bool {
			if s.Spec.ScenarioName == "" || s.Spec.RequiredScenarioState == "" {
				return true
			}
			e, ok := state(s.Spec.ScenarioName)
			return ok && scenarioState(e) == s.Spec.RequiredScenarioState
		})
		if readErr != nil {
			return nil, unavailable(readErr)
		}
		moves := st != nil && st.Spec.NewScenarioState != ""
		if len(recalled) > 0 && (!moves || len(recalled) > 1 || !recalled[st.Spec.ScenarioName]) {
			guess = false // a recalled state decided what no swap confirms
			continue
		}
		if !moves {
			return st, nil
		}
		e, ok := state(st.Spec.ScenarioName)
		if !ok {
			return nil, unavailable(readErr)
		}
		key, next := ScenarioKey(st.Spec.ScenarioName), []byte(st.Spec.NewScenarioState)
		var err error
		if spec != nil {
			var cur flow.Entry
			cur, err = spec.Swap(ctx, flowID, key, e, next, policy)
			if errors.Is(err, flow.ErrVersionMismatch) {
				known = map[string]flow.Entry{st.Spec.ScenarioName: cur}
			}
		} else {
			_, err = store.CAS(ctx, flowID, key, e.Version.V, next, policy)
		}
		switch {
		case err == nil:
			return st, nil
		case errors.Is(err, flow.ErrVersionMismatch):
			continue
		default:
			return nil, unavailable(err)
		}
	}
	return nil, mberr.New(mberr.FlowUnavailable, "scenario state kept changing; gave up")
}

// scenarioState is the state a scenario's entry holds: Started while the
// key is absent.
func scenarioState(e flow.Entry) string {
	if e.Version.V == 0 {
		return ScenarioStarted
	}
	return string(e.Value)
}

func unavailable(err error) error {
	if errors.Is(err, flow.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || err == nil {
		return mberr.New(mberr.FlowUnavailable, flow.Describe(err))
	}
	return mberr.New(mberr.FlowUnavailable, "flow store: "+err.Error())
}
