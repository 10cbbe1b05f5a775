package imposter

import (
	"errors"

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
	if h := imp.spec.Flow.Header; h != "" {
		if id, _ := r.Header(h); id != "" {
			return imp.flowScope + id
		}
	}
	return imp.portFlow
}

// matchScenario matches r against a table whose stubs take part in
// scenarios. A stub that names requiredScenarioState matches only in that
// state; choosing a stub with newScenarioState moves the scenario by a
// compare-and-set on the version that was read, so of two concurrent
// requests that saw the same state only one transitions it; the other
// matches again against the new state.
func (imp *Imposter) matchScenario(t *table, r *message.Request) (*Stub, error) {
	store := imp.opts.Store
	if store == nil {
		return nil, mberr.New(mberr.FlowUnavailable, "scenarios need a flow store")
	}
	flowID := imp.FlowID(r)
	policy := imp.spec.Flow.Policy
	for attempt := 0; attempt < maxScenarioRetries; attempt++ {
		states := map[string]flow.Entry{}
		var readErr error
		state := func(name string) (flow.Entry, bool) {
			if e, ok := states[name]; ok {
				return e, true
			}
			e, err := store.Get(imp.ctx, flowID, ScenarioKey(name))
			switch {
			case errors.Is(err, flow.ErrNotFound):
				e = flow.Entry{Value: []byte(ScenarioStarted)}
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
			return ok && string(e.Value) == s.Spec.RequiredScenarioState
		})
		if readErr != nil {
			return nil, unavailable(readErr)
		}
		if st == nil || st.Spec.NewScenarioState == "" {
			return st, nil
		}
		e, ok := state(st.Spec.ScenarioName)
		if !ok {
			return nil, unavailable(readErr)
		}
		_, err := store.CAS(imp.ctx, flowID, ScenarioKey(st.Spec.ScenarioName), e.Version.V,
			[]byte(st.Spec.NewScenarioState), policy)
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

func unavailable(err error) error {
	if errors.Is(err, flow.ErrUnavailable) || err == nil {
		return mberr.New(mberr.FlowUnavailable, "the flow's owner is unavailable")
	}
	return mberr.New(mberr.FlowUnavailable, "flow store: "+err.Error())
}
