package imposter

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

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

// JSON renders the imposter as mb does, fields in mb's order, and
// riftgate's own `_rift` after them.
func (imp *Imposter) JSON(v View) json.RawMessage {
	s := imp.spec
	self := v.BaseURL + "/imposters/" + strconv.Itoa(s.Port)
	o := object{{Key: "protocol", Value: raw(s.Protocol)}, {Key: "port", Value: raw(s.Port)}}
	if r := s.header.get("name"); truthy(r) {
		o = append(o, field{Key: "name", Value: r})
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
		if s.Protocol == "https" || s.Protocol == "wss" {
			o = append(o, imp.tlsMetadata()...)
		}
		o = append(o, protocolMetadata(s)...)
	}
	if r := s.header.get("endOfRequestResolver"); truthy(r) {
		o = append(o, field{Key: "endOfRequestResolver", Value: r})
	}
	if r := s.header.get("_rift"); r != nil {
		o = append(o, field{Key: "_rift", Value: r})
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
		if v.Replayable {
			so = withoutResponseTimes(so)
		} else {
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

// tlsMetadata is what mb's https server prints of its options.
func (imp *Imposter) tlsMetadata() object {
	s := imp.spec
	o := object{{Key: "key", Value: raw(s.Key)}, {Key: "cert", Value: raw(s.Cert)}, {Key: "mutualAuth", Value: raw(s.MutualAuth)}}
	ru := s.header.get("rejectUnauthorized")
	if !truthy(ru) {
		ru = raw(false)
	}
	ca := s.header.get("ca")
	if !truthy(ca) {
		ca = json.RawMessage("null")
	}
	o = append(o, field{Key: "rejectUnauthorized", Value: ru}, field{Key: "ca", Value: ca})
	if c := s.header.get("ciphers"); truthy(c) {
		o = append(o, field{Key: "ciphers", Value: raw(strings.ToUpper(jsString(c)))})
	}
	return o
}

// withoutResponseTimes drops _proxyResponseTime from recorded `is`
// responses, as mb's replayable form does.
func withoutResponseTimes(stub object) object {
	var responses []json.RawMessage
	if json.Unmarshal(stub.get("responses"), &responses) != nil {
		return stub
	}
	changed := false
	for i, r := range responses {
		ro, err := decodeObject(r)
		if err != nil {
			continue
		}
		is, err := decodeObject(ro.get("is"))
		if err != nil || is.get("_proxyResponseTime") == nil {
			continue
		}
		responses[i] = mustJSON(ro.with("is", mustJSON(is.without("_proxyResponseTime"))))
		changed = true
	}
	if !changed {
		return stub
	}
	return stub.with("responses", raw(responses))
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
	switch {
	case s.Protocol == "tcp":
		return object{{Key: "mode", Value: raw(s.Mode)}}
	case s.IsWS():
		// The limits in force, so that a saved imposter keeps them.
		l := s.WS
		return object{{Key: "limits", Value: raw(map[string]int64{
			"maxMessageBytes": int64(l.MaxMessageBytes), "messagesPerSecond": int64(l.MessagesPerSecond),
			"maxConnections": int64(l.MaxConnections), "writeTimeoutMs": l.WriteTimeout.Milliseconds()})}}
	}
	return nil
}
