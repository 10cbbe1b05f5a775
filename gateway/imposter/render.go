package imposter

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/riftgate/riftgate/gateway/reqlog"
)

// View selects what JSON shows, as GET /imposters and GET /imposters/:id
// take it.
type View struct {
	BaseURL       string // "http://host:port" of the admin API, for _links
	List          bool   // the summary GET /imposters gives
	Replayable    bool   // only what recreates the imposter
	RemoveProxies bool   // drop proxy responses, and stubs left empty
	// Elsewhere adds what the other members of a cluster counted to
	// numberOfRequests (their requests are the caller's to stream).
	Elsewhere *Recorded
	// RequestsMark, when set, is written as a JSON string in place of the
	// requests array, which the caller streams there (they may be far too
	// many to hold); otherwise JSON renders them all.
	RequestsMark string
	// Stubs, when set, renders only that window of the stubs (riftgate's
	// stubOffset and stubLimit), with their count: an imposter that
	// recorded 100,000 stubs is shown a page at a time.
	Stubs *Window
}

// Window is a range of a list: Limit items from Offset.
type Window struct{ Offset, Limit int }

// Recorded is what the other members of a cluster counted of an imposter.
type Recorded struct {
	Count int64
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
		if s.Custom != nil {
			o = imp.withMetadata(o)
		}
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
		if v.RequestsMark != "" {
			o = append(o, field{Key: "requests", Value: raw(v.RequestsMark)})
		} else {
			o = append(o, field{Key: "requests", Value: raw(imp.requestList())})
		}
	}
	stubs := []json.RawMessage{}
	// Each stub's self link is this quoted prefix and its index: the
	// prefix encoded once, as encoding/json encodes it (digits need no
	// escape).
	linkPre := raw(self + "/stubs/")
	linkPre = linkPre[:len(linkPre)-1]
	all := imp.Stubs()
	from, to := 0, len(all)
	if v.Stubs != nil {
		from = min(max(v.Stubs.Offset, 0), len(all))
		to = min(from+max(v.Stubs.Limit, 0), len(all))
	}
	for i := from; i < to; i++ {
		st := all[i]
		so := st.object()
		if v.RemoveProxies {
			var ok bool
			if so, ok = withoutProxies(so); !ok {
				continue
			}
		}
		if v.Replayable {
			so = withoutResponseTimes(so)
		} else {
			if imp.opts.RecordMatches {
				if m := imp.matchesOf(st); len(m) > 0 {
					so = so.with("matches", raw(m)) // mb shows none until a stub matches
				}
			}
			link := append([]byte(`{"self":{"href":`), linkPre...)
			link = append(strconv.AppendInt(link, int64(i), 10), `"}}`...)
			so = so.with("_links", link)
		}
		stubs = append(stubs, mustJSON(so))
	}
	var after object
	if v.Stubs != nil {
		after = append(after, field{Key: "_stubWindow", Value: raw(map[string]int{"offset": from, "limit": to - from, "total": len(all)})})
	}
	if !v.Replayable {
		after = links(after)
	}
	return withStubs(mustJSON(o), stubs, mustJSON(after))
}

// withStubs is the object head with "stubs" (each already compact JSON)
// and then the fields of tail added: a large recording's stubs are copied
// once, not encoded and compacted again as one huge value.
func withStubs(head json.RawMessage, stubs []json.RawMessage, tail json.RawMessage) json.RawMessage {
	size := len(head) + len(tail) + len(`,"stubs":[]`)
	for _, st := range stubs {
		size += len(st) + 1
	}
	out := make([]byte, 0, size)
	out = append(out, head[:len(head)-1]...) // head is {...}, with protocol and port at least
	out = append(out, `,"stubs":[`...)
	for i, st := range stubs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, st...)
	}
	out = append(out, ']')
	if len(tail) > 2 { // {} when there is nothing after the stubs
		out = append(out, ',')
		out = append(out, tail[1:]...)
	} else {
		out = append(out, '}')
	}
	return out
}

// requestList renders every recorded request, for a caller that holds the
// whole answer anyway (the admin API streams them instead).
func (imp *Imposter) requestList() []json.RawMessage {
	list := []json.RawMessage{}
	s := imp.RecordedRequests()
	if s == nil {
		return list
	}
	defer s.Close()
	var rec reqlog.Record
	err := s.Each(0, func(b []byte) bool {
		if rec.Decode(b) != nil {
			return true
		}
		var out bytes.Buffer
		rec.AppendJSON(&out)
		list = append(list, out.Bytes())
		return true
	})
	if err != nil {
		imp.logger().Error("reading recorded requests", "err", err)
	}
	return list
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
	case s.IsGRPC():
		// Where the services come from, so that a saved imposter is
		// made again from the same files (or set).
		var o object
		for _, k := range []string{"services", "options", "protoset"} {
			if v := s.header.get(k); v != nil {
				o = append(o, field{Key: k, Value: v})
			}
		}
		return o
	case s.IsWS():
		// The limits in force, so that a saved imposter keeps them.
		l := s.WS
		return object{{Key: "limits", Value: raw(map[string]int64{
			"maxMessageBytes": int64(l.MaxMessageBytes), "messagesPerSecond": int64(l.MessagesPerSecond),
			"maxConnections": int64(l.MaxConnections), "writeTimeoutMs": l.WriteTimeout.Milliseconds()})}}
	}
	return nil
}
