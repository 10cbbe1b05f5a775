package imposter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
)

// WSLimits are a WebSocket imposter's limits (its `limits` object), each
// closing a connection that passes it with its own close code.
type WSLimits struct {
	// MaxMessageBytes bounds a message read, fragments together (close
	// 1009, message too big).
	MaxMessageBytes int
	// MessagesPerSecond bounds the messages (and pings) one connection
	// may send in a second (close 1008, policy violation).
	MessagesPerSecond int
	// MaxConnections bounds the connections open at once on the imposter;
	// one more is accepted and closed at once (close 1013, try again
	// later).
	MaxConnections int
	// WriteTimeout bounds each write to a client: a client that stops
	// reading is closed when its socket buffer stays full that long, and
	// nothing is queued for it meanwhile.
	WriteTimeout time.Duration
}

// DefaultWSLimits are the limits of an imposter that gives none.
var DefaultWSLimits = WSLimits{
	MaxMessageBytes:   1 << 20,
	MessagesPerSecond: 100000,
	MaxConnections:    10000,
	WriteTimeout:      10 * time.Second,
}

// wsFields are the imposter fields a ws imposter reads besides mb's.
var wsFields = set("limits")

// wsIsFields are the fields of a ws response object (ws_answer.go), which
// mb's `is` has not: a stub's warning about them is dropped on a ws
// imposter.
var wsIsFields = set("data", "type", "messages", "close", "every", "times", "statusCode", "headers", "subprotocol", "body")

// IsWS reports whether the imposter speaks WebSocket (ws or wss).
func (s *Spec) IsWS() bool { return s.Protocol == "ws" || s.Protocol == "wss" }

// parseWS reads a ws imposter's `limits`: riftgate's own, so checked
// strictly.
func parseWS(s *Spec, obj object) error {
	s.WS = DefaultWSLimits
	raw := obj.get("limits")
	if raw == nil || isNull(raw) {
		return nil
	}
	var l struct {
		MaxMessageBytes   *int64 `json:"maxMessageBytes"`
		MessagesPerSecond *int64 `json:"messagesPerSecond"`
		MaxConnections    *int64 `json:"maxConnections"`
		WriteTimeoutMs    *int64 `json:"writeTimeoutMs"`
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&l); err != nil {
		return mberr.New(mberr.BadData, "invalid limits (maxMessageBytes, messagesPerSecond, maxConnections, writeTimeoutMs): "+err.Error()).WithSource(raw)
	}
	for _, f := range []struct {
		name string
		v    *int64
		dst  *int
	}{{"maxMessageBytes", l.MaxMessageBytes, &s.WS.MaxMessageBytes},
		{"messagesPerSecond", l.MessagesPerSecond, &s.WS.MessagesPerSecond},
		{"maxConnections", l.MaxConnections, &s.WS.MaxConnections}} {
		if f.v == nil {
			continue
		}
		if *f.v <= 0 || *f.v > math.MaxInt32 {
			return mberr.New(mberr.BadData, fmt.Sprintf("limits.%s must be a positive whole number", f.name)).WithSource(raw)
		}
		*f.dst = int(*f.v)
	}
	if l.WriteTimeoutMs != nil {
		if *l.WriteTimeoutMs <= 0 || *l.WriteTimeoutMs > 3600_000 {
			return mberr.New(mberr.BadData, "limits.writeTimeoutMs must be 1 to 3600000 milliseconds").WithSource(raw)
		}
		s.WS.WriteTimeout = time.Duration(*l.WriteTimeoutMs) * time.Millisecond
	}
	return nil
}

// wsOnlyIsFields are the fields of a ws response object an http `is` may
// have for an upgrade (ws_upgrade.go).
var wsOnlyIsFields = set("type", "messages", "close", "every", "times", "subprotocol")

// wsIgnored drops the warnings about the fields of ws response objects,
// which mb's `is` has not: on a ws imposter, and in an http imposter's
// `is` (an upgrade's).
func (imp *Imposter) wsIgnored(fields []string) []string {
	if imp.spec.Custom != nil {
		// A custom protocol's responses are its process's objects: none
		// of their fields is ignored (a stub added or recorded later
		// comes here without customIgnored).
		return slices.DeleteFunc(slices.Clone(fields), func(f string) bool { return strings.Contains(f, ".is.") })
	}
	if imp.spec.IsGRPC() {
		return grpcIgnored(fields)
	}
	is := wsIsFields
	if !imp.spec.IsWS() {
		is = wsOnlyIsFields
	}
	var out []string
	for _, f := range fields {
		if i := strings.LastIndex(f, ".is."); i >= 0 && is[f[i+len(".is."):]] {
			continue
		}
		if !imp.spec.IsWS() {
			out = append(out, f)
			continue
		}
		if strings.HasPrefix(f, "defaultResponse.") && wsIsFields[f[len("defaultResponse."):]] {
			continue
		}
		if wsFields[f] {
			continue
		}
		out = append(out, f)
	}
	return out
}

// onOpen reports whether a stub's predicates name the handshake, `type`
// "open": only such stubs answer it (a catch-all stub answers messages,
// not the handshake).
func onOpen(preds []json.RawMessage) bool {
	for _, p := range preds {
		if namesOpen(p, 0) {
			return true
		}
	}
	return false
}

func namesOpen(raw json.RawMessage, depth int) bool {
	if depth > 32 {
		return false
	}
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return false
	}
	switch t[0] {
	case '[':
		var list []json.RawMessage
		if json.Unmarshal(t, &list) != nil {
			return false
		}
		for _, e := range list {
			if namesOpen(e, depth+1) {
				return true
			}
		}
	case '{':
		fields, err := message.ObjectFields(t)
		if err != nil {
			return false
		}
		for _, f := range fields {
			if strings.EqualFold(f.Key, "type") {
				var s string
				if json.Unmarshal(f.Value, &s) == nil && strings.EqualFold(s, message.WSOpen) {
					return true
				}
			}
			if namesOpen(f.Value, depth+1) {
				return true
			}
		}
	}
	return false
}
