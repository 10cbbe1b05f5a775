package imposter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/wsproto"
)

// A WebSocket imposter's response object (an `is`, what an inject returns,
// what a proxy records) is JSON, held whole in message.Response.Body, so
// that behaviors replace tokens in every string of it and decorators see
// it as it is. Its fields (docs/websocket.md):
//
//	data      one message: a string (base64 when type is binary), or any
//	          other JSON value, sent as its JSON text
//	type      "text" (the default) or "binary"
//	messages  more messages, each {data, type, wait} or a string
//	close     true, a code, or {code, reason}: close after the messages
//	every     milliseconds: send the messages again at this period ...
//	times     ... this many times in all (0 or none: until the connection
//	          closes)
//
// and, answering the handshake (a stub on type "open"):
//
//	statusCode   101 (the default) accepts; anything else refuses
//	headers      header fields of the answer
//	subprotocol  the Sec-WebSocket-Protocol chosen
//	body         a refusal's body
//
// The messages of a handshake response are sent once the connection is
// open.
type wsAnswer struct {
	msgs  []wsMessage
	close *wsClose
	every time.Duration
	times int
	// wire is every message rendered as server frames, when none waits:
	// a static answer is one write of bytes made once.
	wire []byte

	status      int // 0 or 101: accept
	headers     []wsproto.Header
	subprotocol string
	body        []byte
}

// wsMessage is one message of an answer.
type wsMessage struct {
	data   []byte
	binary bool
	wait   time.Duration // before it is sent
}

type wsClose struct {
	code   int
	reason string
}

// Bounds on what an answer may ask for.
const (
	maxWSMessages = 10000
	maxWSWait     = time.Hour
	minWSEvery    = time.Millisecond
)

// wsAnswerOf compiles a response object. An empty one sends nothing.
func wsAnswerOf(obj []byte) (*wsAnswer, error) {
	a := &wsAnswer{}
	if len(bytes.TrimSpace(obj)) == 0 {
		return a, nil
	}
	fields, err := message.ObjectFields(obj)
	if err != nil {
		return nil, fmt.Errorf("a websocket response must be an object: %w", err)
	}
	var typ json.RawMessage
	for _, f := range fields {
		if f.Key == "type" {
			typ = f.Value
		}
	}
	for _, f := range fields {
		v := f.Value
		switch f.Key {
		case "data":
			if isNull(v) {
				continue
			}
			m, err := wsMessageOf(v, typ, nil)
			if err != nil {
				return nil, err
			}
			a.msgs = append([]wsMessage{m}, a.msgs...)
		case "type":
			if _, err := wsBinary(v); err != nil {
				return nil, err
			}
		case "messages":
			if isNull(v) {
				continue
			}
			var list []json.RawMessage
			if err := json.Unmarshal(v, &list); err != nil {
				return nil, fmt.Errorf("'messages' must be an array")
			}
			if len(list) > maxWSMessages {
				return nil, fmt.Errorf("'messages' holds more than %d messages", maxWSMessages)
			}
			for _, raw := range list {
				m, err := wsListMessage(raw)
				if err != nil {
					return nil, err
				}
				a.msgs = append(a.msgs, m)
			}
		case "close":
			if a.close, err = wsCloseOf(v); err != nil {
				return nil, err
			}
		case "every":
			ms, err := wsMillis(v, "every")
			if err != nil {
				return nil, err
			}
			a.every = ms
			if ms > 0 && ms < minWSEvery {
				a.every = minWSEvery
			}
		case "times":
			n, ok := message.WholeNumber(v)
			if !ok || n < 0 || n > math.MaxInt32 {
				return nil, fmt.Errorf("'times' must be a whole number, 0 or more")
			}
			a.times = int(n)
		case "statusCode":
			if isNull(v) {
				continue
			}
			code, ok := message.StatusCode(v)
			if !ok {
				return nil, fmt.Errorf("'statusCode' must be an HTTP status")
			}
			a.status = code
		case "headers":
			kvs, err := message.ResponseHeaders(v)
			if err != nil {
				return nil, fmt.Errorf("'headers' must be an object: %w", err)
			}
			for _, kv := range kvs {
				a.headers = append(a.headers, wsproto.Header{Name: kv.Name, Value: kv.Value})
			}
		case "subprotocol":
			if isNull(v) {
				continue
			}
			if err := json.Unmarshal(v, &a.subprotocol); err != nil || strings.ContainsAny(a.subprotocol, "\r\n,") {
				return nil, fmt.Errorf("'subprotocol' must be a token")
			}
		case "body":
			if isNull(v) {
				continue
			}
			a.body = []byte(jsonText(v))
		}
	}
	if a.status != 0 && a.status != 101 && (a.status < 200 || a.status > 599) {
		return nil, fmt.Errorf("'statusCode' %d can neither accept (101) nor refuse (200-599) a handshake", a.status)
	}
	wire := []byte{}
	for _, m := range a.msgs {
		if m.wait > 0 {
			return a, nil
		}
		wire = m.appendFrame(wire)
	}
	a.wire = wire
	return a, nil
}

// wsBinary reads a message's type.
func wsBinary(v json.RawMessage) (bool, error) {
	if v == nil || isNull(v) {
		return false, nil
	}
	var t string
	if json.Unmarshal(v, &t) != nil || (t != message.WSText && t != message.WSBinary) {
		return false, fmt.Errorf(`'type' must be "text" or "binary"`)
	}
	return t == message.WSBinary, nil
}

// wsMessageOf makes one message of data (of type typ), waiting wait first.
func wsMessageOf(data, typ, wait json.RawMessage) (wsMessage, error) {
	bin, err := wsBinary(typ)
	if err != nil {
		return wsMessage{}, err
	}
	m := wsMessage{binary: bin}
	if wait != nil {
		if m.wait, err = wsMillis(wait, "wait"); err != nil {
			return m, err
		}
	}
	var s string
	if isString(data) {
		_ = json.Unmarshal(data, &s)
	} else {
		s = jsonText(data)
	}
	if bin {
		m.data = message.DecodeBase64(s)
	} else {
		m.data = []byte(s)
	}
	return m, nil
}

// wsListMessage is one element of `messages`: a string (a text message) or
// {data, type, wait}.
func wsListMessage(raw json.RawMessage) (wsMessage, error) {
	if isString(raw) {
		return wsMessageOf(raw, nil, nil)
	}
	m, err := message.Members(raw, "data", "type", "wait")
	if err != nil {
		return wsMessage{}, fmt.Errorf("each of 'messages' must be a string or an object")
	}
	data := m[0]
	if data == nil {
		data = json.RawMessage(`""`)
	}
	return wsMessageOf(data, m[1], m[2])
}

// wsCloseOf reads `close`: true (1000), a code, or {code, reason}.
func wsCloseOf(v json.RawMessage) (*wsClose, error) {
	if message.Falsy(v) {
		return nil, nil
	}
	c := &wsClose{code: wsproto.CloseNormal}
	t := bytes.TrimSpace(v)
	switch t[0] {
	case 't':
	case '{':
		m, err := message.Members(t, "code", "reason")
		if err != nil {
			return nil, err
		}
		if m[0] != nil && !isNull(m[0]) {
			n, ok := message.WholeNumber(m[0])
			if !ok {
				return nil, fmt.Errorf("'close.code' must be a number")
			}
			c.code = int(n)
		}
		if m[1] != nil && !isNull(m[1]) {
			c.reason = wsproto.TruncateReason(jsonText(m[1]))
		}
	default:
		n, ok := message.WholeNumber(t)
		if !ok {
			return nil, fmt.Errorf("'close' must be true, a close code, or {code, reason}")
		}
		c.code = int(n)
	}
	if !sendableClose(c.code) {
		return nil, fmt.Errorf("close code %d cannot be sent (1000-1003, 1007-1014 or 3000-4999)", c.code)
	}
	return c, nil
}

func sendableClose(c int) bool {
	return c >= 1000 && c <= 1003 || c >= 1007 && c <= 1014 || c >= 3000 && c <= 4999
}

// wsMillis reads a whole number of milliseconds.
func wsMillis(v json.RawMessage, name string) (time.Duration, error) {
	if isNull(v) {
		return 0, nil
	}
	var f float64
	if json.Unmarshal(v, &f) != nil || f < 0 || time.Duration(f)*time.Millisecond > maxWSWait {
		return 0, fmt.Errorf("'%s' must be milliseconds, 0 to %d", name, maxWSWait.Milliseconds())
	}
	return time.Duration(f * float64(time.Millisecond)), nil
}

// jsonText is a JSON value as a message carries it: a string's text, any
// other value's JSON.
func jsonText(v json.RawMessage) string {
	if isString(v) {
		var s string
		_ = json.Unmarshal(v, &s)
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return string(v)
	}
	return b.String()
}

func (m wsMessage) appendFrame(dst []byte) []byte {
	op := wsproto.OpText
	if m.binary {
		op = wsproto.OpBinary
	}
	return wsproto.AppendFrame(dst, op, m.data, nil)
}

// buildWS is buildIs for a WebSocket imposter: the response object, as
// given, checked. A missing one sends nothing.
func buildWS(stubIs json.RawMessage) (*message.Response, *wsAnswer, error) {
	r := &message.Response{}
	if stubIs == nil || isNull(stubIs) {
		return r, &wsAnswer{wire: []byte{}}, nil
	}
	if t := bytes.TrimSpace(stubIs); len(t) == 0 || t[0] != '{' {
		return nil, nil, fmt.Errorf("a websocket response must be an object")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, stubIs); err != nil {
		return nil, nil, err
	}
	r.Body = b.Bytes()
	a, err := wsAnswerOf(r.Body)
	if err != nil {
		return nil, nil, err
	}
	return r, a, nil
}

// wsAnswerFor is the answer a response gives: the compiled one of a
// static `is`, else its object compiled now.
func wsAnswerFor(r *response, resp *message.Response) (*wsAnswer, error) {
	if r != nil && resp == r.static && r.ws != nil {
		return r.ws, nil
	}
	a, err := wsAnswerOf(resp.Body)
	if err != nil {
		return nil, mberr.New(mberr.BadData, "invalid websocket response: "+err.Error())
	}
	return a, nil
}
