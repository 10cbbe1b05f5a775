package imposter

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/riftgate/riftgate/gateway/message"
)

// View selects what JSON shows, as GET /imposters and GET /imposters/:id
// take it.
type View struct {
	BaseURL       string // "http://host:port" of the admin API, for _links
	List          bool   // the summary GET /imposters gives
	Replayable    bool   // only what recreates the imposter
	RemoveProxies bool   // drop proxy responses, and stubs left empty
	// Elsewhere adds what the other members of a cluster recorded: their
	// count to numberOfRequests, their requests merged with this
	// imposter's by time.
	Elsewhere *Recorded
}

// Recorded is an imposter's request count and saved requests.
type Recorded struct {
	Count    int64
	Requests []*message.Request
}

// JSON renders the imposter as mb does, fields in mb's order; riftgate's
// own settings (host, allowCORS, _rift) follow mb's header fields.
func (imp *Imposter) JSON(v View) json.RawMessage {
	s := imp.spec
	self := v.BaseURL + "/imposters/" + strconv.Itoa(s.Port)
	o := object{{Key: "protocol", Value: raw(s.Protocol)}, {Key: "port", Value: raw(s.Port)}}
	if s.Name != "" {
		o = append(o, field{Key: "name", Value: raw(s.Name)})
	}
	if s.DefaultResponse != nil {
		o = append(o, field{Key: "defaultResponse", Value: s.DefaultResponse})
	}
	if !v.Replayable {
		n := imp.numReqs.Load()
		if v.Elsewhere != nil {
			n += v.Elsewhere.Count
		}
		o = append(o, field{Key: "numberOfRequests", Value: raw(n)})
	}
	if !v.List {
		o = append(o, field{Key: "recordRequests", Value: raw(s.RecordRequests)})
		if s.Protocol == "https" {
			o = append(o, field{Key: "key", Value: raw(s.Key)}, field{Key: "cert", Value: raw(s.Cert)}, field{Key: "mutualAuth", Value: raw(s.MutualAuth)})
		}
		o = append(o, protocolMetadata(s)...)
	}
	for _, k := range []string{"endOfRequestResolver", "host", "allowCORS", "_rift"} {
		if r := s.header.get(k); r != nil {
			o = append(o, field{Key: k, Value: r})
		}
	}
	links := func(o object) object {
		return append(o, field{Key: "_links", Value: raw(map[string]any{
			"self":  map[string]string{"href": self},
			"stubs": map[string]string{"href": self + "/stubs"},
		})})
	}
	if v.List {
		return mustJSON(links(o))
	}
	if !v.Replayable {
		reqs := imp.Requests()
		if v.Elsewhere != nil && len(v.Elsewhere.Requests) > 0 {
			reqs = append(reqs, v.Elsewhere.Requests...)
			slices.SortStableFunc(reqs, func(a, b *message.Request) int { return a.Timestamp.Compare(b.Timestamp) })
		}
		list := make([]json.RawMessage, len(reqs))
		for i, r := range reqs {
			list[i], _ = r.MarshalJSON()
		}
		o = append(o, field{Key: "requests", Value: raw(list)})
	}
	stubs := []json.RawMessage{}
	for i, st := range imp.Stubs() {
		so := st.Spec.obj
		if v.RemoveProxies {
			var ok bool
			if so, ok = withoutProxies(so); !ok {
				continue
			}
		}
		if !v.Replayable {
			if m := st.Matches(); imp.opts.RecordMatches && len(m) > 0 {
				so = so.with("matches", raw(m)) // mb shows none until a stub matches
			}
			so = so.with("_links", raw(map[string]any{"self": map[string]string{"href": self + "/stubs/" + strconv.Itoa(i)}}))
		}
		stubs = append(stubs, mustJSON(so))
	}
	o = append(o, field{Key: "stubs", Value: raw(stubs)})
	if !v.Replayable {
		o = links(o)
	}
	return mustJSON(o)
}

// withoutProxies drops proxy responses from a stub; ok is false when none
// is left.
func withoutProxies(stub object) (object, bool) {
	var responses []json.RawMessage
	_ = json.Unmarshal(stub.get("responses"), &responses)
	kept := responses[:0]
	for _, r := range responses {
		ro, err := decodeObject(r)
		if err == nil && ro.get("proxy") != nil {
			continue
		}
		kept = append(kept, r)
	}
	if len(kept) == 0 {
		return nil, false
	}
	return stub.with("responses", raw(kept)), true
}

func mustJSON(o object) json.RawMessage {
	b, err := o.MarshalJSON()
	if err != nil {
		panic(err) // every value in o was decoded from or encoded as JSON
	}
	return b
}

// protocolMetadata is what mb's protocol server adds to an imposter's JSON
// after recordRequests: tcp's mode (smtp adds nothing).
func protocolMetadata(s *Spec) object {
	if s.Protocol == "tcp" {
		return object{{Key: "mode", Value: raw(s.Mode)}}
	}
	return nil
}
