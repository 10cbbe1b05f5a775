package gateway

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/mberr"
)

// flowRoutes serves an imposter's flows and scenarios:
//
//	GET    /imposters/:port/flows                  flow ids, paged (?after=&limit=)
//	GET    /imposters/:port/flows/:flowId          every key with its value and version
//	DELETE /imposters/:port/flows/:flowId          clear the flow
//	GET    /imposters/:port/flows/:flowId/:key     one key
//	PUT    /imposters/:port/flows/:flowId/:key     set one key (the body is the value)
//	DELETE /imposters/:port/flows/:flowId/:key     delete one key
//	GET    /imposters/:port/scenarios              scenarios and their states (?flowId=)
//	PUT    /imposters/:port/scenarios/:name/state  {"state": "..."} (?flowId=)
//	POST   /imposters/:port/scenarios/reset        every scenario back to Started, in every flow
//
// Flow ids are shown and taken without the imposter's scope prefix.
func (e *engine) flowRoutes(mux *http.ServeMux) {
	g := e.g
	mux.HandleFunc("GET /imposters/{id}/flows", g.withImposter(e.listFlows))
	mux.HandleFunc("GET /imposters/{id}/flows/{flow}", g.withImposter(e.getFlow))
	mux.HandleFunc("DELETE /imposters/{id}/flows/{flow}", g.withImposter(e.clearFlow))
	mux.HandleFunc("GET /imposters/{id}/flows/{flow}/{key}", g.withImposter(e.getFlowKey))
	mux.HandleFunc("PUT /imposters/{id}/flows/{flow}/{key}", g.withImposter(e.putFlowKey))
	mux.HandleFunc("DELETE /imposters/{id}/flows/{flow}/{key}", g.withImposter(e.deleteFlowKey))
	mux.HandleFunc("GET /imposters/{id}/scenarios", g.withImposter(e.listScenarios))
	mux.HandleFunc("PUT /imposters/{id}/scenarios/{name}/state", g.withImposter(e.setScenario))
	mux.HandleFunc("POST /imposters/{id}/scenarios/reset", g.withImposter(e.resetScenarios))
}

// scope is the prefix of the imposter's flow ids in the store.
func scope(imp *imposter.Imposter) string { return flow.Scope(imp.Port(), imp.Spec().Flow.Fleet) }

// flowParam returns the scoped flow id named by the path, or by ?flowId=,
// defaulting to the imposter's own flow.
func flowParam(r *http.Request, imp *imposter.Imposter) string {
	id := r.PathValue("flow")
	if id == "" {
		id = r.URL.Query().Get("flowId")
	}
	if id == "" {
		id = strconv.Itoa(imp.Port())
	}
	return scope(imp) + id
}

func flowError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, flow.ErrNotFound):
		writeErr(w, mberr.New(mberr.NoSuchResource, "no such flow key"))
	case errors.Is(err, flow.ErrTooLarge):
		writeErr(w, mberr.New(mberr.PayloadTooLarge, err.Error()))
	case errors.Is(err, flow.ErrBadKey):
		writeErr(w, mberr.New(mberr.BadData, err.Error()))
	default:
		writeErr(w, mberr.New(mberr.FlowUnavailable, err.Error()))
	}
}

func (e *engine) listFlows(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	limit := 100
	if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && n > 0 && n <= 10000 {
		limit = n
	}
	prefix := scope(imp)
	after := r.URL.Query().Get("after")
	if after != "" {
		after = prefix + after
	}
	ids, more, err := e.flows.List(r.Context(), prefix, after, limit)
	if err != nil {
		flowError(w, err)
		return
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strings.TrimPrefix(id, prefix)
	}
	body := map[string]any{"flows": out}
	if more && len(out) > 0 {
		body["next"] = out[len(out)-1]
	}
	writeJSON(w, http.StatusOK, body)
}

type flowValue struct {
	Value   string `json:"value"`
	Version uint64 `json:"version"`
}

func (e *engine) getFlow(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	snap, err := e.flows.Load(r.Context(), flowParam(r, imp))
	if err != nil {
		flowError(w, err)
		return
	}
	entries := make(map[string]flowValue, len(snap))
	for _, en := range snap {
		entries[en.Key] = flowValue{string(en.Value), en.Version.V}
	}
	writeJSON(w, http.StatusOK, map[string]any{"flowId": r.PathValue("flow"), "entries": entries})
}

func (e *engine) clearFlow(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	if err := e.flows.Clear(r.Context(), flowParam(r, imp)); err != nil {
		flowError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

func (e *engine) getFlowKey(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	en, err := e.flows.Get(r.Context(), flowParam(r, imp), r.PathValue("key"), nil)
	if err != nil {
		flowError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, flowValue{string(en.Value), en.Version.V})
}

func (e *engine) putFlowKey(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	val, err := io.ReadAll(http.MaxBytesReader(w, r.Body, flow.MaxValueBytes))
	if err != nil {
		writeErr(w, mberr.New(mberr.PayloadTooLarge, "flow values are at most "+strconv.Itoa(flow.MaxValueBytes)+" bytes"))
		return
	}
	v, err := e.flows.Put(r.Context(), flowParam(r, imp), r.PathValue("key"), val, imp.Spec().Flow.Policy)
	if err != nil {
		flowError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, flowValue{string(val), v.V})
}

func (e *engine) deleteFlowKey(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	err := e.flows.Delete(r.Context(), flowParam(r, imp), r.PathValue("key"), imp.Spec().Flow.Policy)
	if err != nil && !errors.Is(err, flow.ErrNotFound) {
		flowError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

// scenarioNames lists the imposter's scenarios, in stub order.
func scenarioNames(imp *imposter.Imposter) []string {
	var names []string
	seen := map[string]bool{}
	for _, s := range imp.Stubs() {
		if n := s.Spec.ScenarioName; n != "" && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	return names
}

func (e *engine) listScenarios(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	id := flowParam(r, imp)
	type scenario struct {
		Name          string   `json:"name"`
		State         string   `json:"state"`
		PossibleState []string `json:"possibleStates"`
	}
	out := []scenario{}
	for _, n := range scenarioNames(imp) {
		st := imposter.ScenarioStarted
		en, err := e.flows.Get(r.Context(), id, imposter.ScenarioKey(n), nil)
		switch {
		case err == nil:
			st = string(en.Value)
		case !errors.Is(err, flow.ErrNotFound):
			flowError(w, err)
			return
		}
		possible := []string{imposter.ScenarioStarted}
		for _, s := range imp.Stubs() {
			if s.Spec.ScenarioName == n {
				for _, p := range []string{s.Spec.RequiredScenarioState, s.Spec.NewScenarioState} {
					if p != "" && !contains(possible, p) {
						possible = append(possible, p)
					}
				}
			}
		}
		out = append(out, scenario{n, st, possible})
	}
	writeJSON(w, http.StatusOK, map[string]any{"scenarios": out})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (e *engine) setScenario(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req struct {
		State string `json:"state"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.State == "" {
		writeErr(w, mberr.New(mberr.BadData, `the body must be {"state": "<state>"}`))
		return
	}
	name := r.PathValue("name")
	if !contains(scenarioNames(imp), name) {
		writeErr(w, mberr.New(mberr.NoSuchResource, "no scenario named "+name))
		return
	}
	if _, err := e.flows.Put(r.Context(), flowParam(r, imp), imposter.ScenarioKey(name), []byte(req.State), imp.Spec().Flow.Policy); err != nil {
		flowError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "state": req.State})
}

// resetScenarios moves every scenario of every one of the imposter's flows
// back to Started, by deleting the state keys.
func (e *engine) resetScenarios(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) {
	names := scenarioNames(imp)
	prefix, after := scope(imp), ""
	for {
		ids, more, err := e.flows.List(r.Context(), prefix, after, 1000)
		if err != nil {
			flowError(w, err)
			return
		}
		for _, id := range ids {
			for _, n := range names {
				err := e.flows.Delete(r.Context(), id, imposter.ScenarioKey(n), imp.Spec().Flow.Policy)
				if err != nil && !errors.Is(err, flow.ErrNotFound) {
					flowError(w, err)
					return
				}
			}
		}
		if !more || len(ids) == 0 {
			break
		}
		after = ids[len(ids)-1]
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}
