package predicate

import (
	"encoding/json"
	"strconv"

	"github.com/riftgate/riftgate/gateway/message"
)

// schema names the top-level fields of a protocol's request, as mb's
// request object for it has them: the names a predicate's keys are
// compared with (lowered when keys are not case sensitive), and the field
// each resolves to in message.Request. A tcp request's `data` is held in
// Body, so it is matched as http's body is, as mb's predicates treat both
// as plain string fields.
type schema struct {
	names, lower, fields []string
}

var (
	httpSchema = &schema{requestFields, requestFieldsLower, requestFields}
	tcpSchema  = &schema{
		names:  []string{"requestFrom", "ip", "data"},
		lower:  []string{"requestfrom", "ip", "data"},
		fields: []string{"requestFrom", "ip", "body"},
	}
	// A WebSocket message: the handshake's path, query and headers, the
	// message's type and data (held in Body, as tcp's), and the
	// connection's id.
	wsSchema = &schema{
		names:  []string{"requestFrom", "ip", "connection", "path", "query", "headers", "type", "data"},
		lower:  []string{"requestfrom", "ip", "connection", "path", "query", "headers", "type", "data"},
		fields: []string{"requestFrom", "ip", "connection", "path", "query", "headers", "type", "body"},
	}
	// A gRPC request: the method's path, the message as JSON (held in
	// Body, matched as a JSON body is), the metadata (held in Headers) and
	// the client's address.
	grpcSchema = &schema{
		names:  []string{"path", "value", "metadata", "peer"},
		lower:  []string{"path", "value", "metadata", "peer"},
		fields: []string{"path", "body", "headers", "requestFrom"},
	}
	smtpSchema = func() *schema {
		names := message.MailFields()
		s := &schema{names: names, fields: names}
		for _, n := range names {
			s.lower = append(s.lower, lower(n))
		}
		return s
	}()
)

// customSchema is a custom protocol's (mb's --protofile): its request is
// whatever JSON object the protocol's process sends, so every key names
// a field of it (fieldOf passes keys through).
var customSchema = &schema{}

func schemaFor(protocol string, custom bool) *schema {
	if custom {
		return customSchema
	}
	switch protocol {
	case "tcp":
		return tcpSchema
	case "smtp":
		return smtpSchema
	case "ws", "wss":
		return wsSchema
	case "grpc":
		return grpcSchema
	}
	return httpSchema
}

// customField is a custom protocol's request field, normalized as mail's
// are; with keys not case sensitive, the first field whose name matches
// without regard to case.
func (l *leaf) customField(r *message.Request, f string) any {
	v, ok := r.Fields[f]
	if !ok && l.lowerKeys {
		for _, k := range keysOf(r.Fields) {
			if lower(k) == f {
				v, ok = r.Fields[k], true
				break
			}
		}
	}
	if !ok {
		return undefined
	}
	return l.deepTop(v)
}

// mailField is an smtp request field as mb's normalize leaves it: every
// string transformed as a request string is, keys transformed, arrays
// sorted.
func (l *leaf) mailField(r *message.Request, f string) any {
	if r.Mail == nil {
		return undefined
	}
	v, ok := r.Mail.Value(f)
	if !ok {
		return undefined
	}
	return l.deepTop(v)
}

func (l *leaf) deepTop(v any) any {
	switch v := v.(type) {
	case string:
		return l.top(v)
	case int:
		return json.Number(strconv.Itoa(v))
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = l.deepTop(e)
		}
		sortValues(out)
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for _, k := range keysOf(v) {
			out[l.key(k)] = l.deepTop(v[k])
		}
		return out
	}
	return v
}

// binaryRefusal is mb's refusal of what cannot run on a binary tcp
// imposter's base64 data (its dry run throws it, so the imposter is not
// created).
func (l *leaf) binaryRefusal() string {
	switch {
	case l.jsonpath != nil:
		return "the jsonpath predicate parameter is not allowed in binary mode"
	case l.xpath != nil:
		return "the xpath predicate parameter is not allowed in binary mode"
	case l.op == opMatches:
		return "the matches predicate is not allowed in binary mode"
	}
	return ""
}
