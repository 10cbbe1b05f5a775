package wsproto

import (
	"bufio"
	"bytes"
	"crypto/sha1" //nolint:gosec // RFC 6455 §4.2.2 names SHA-1
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// acceptGUID is RFC 6455's magic string (§1.3).
const acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// AcceptKey is the Sec-WebSocket-Accept value for a client's
// Sec-WebSocket-Key.
func AcceptKey(key string) string {
	h := sha1.New() //nolint:gosec // RFC 6455 §4.2.2
	h.Write([]byte(key))
	h.Write([]byte(acceptGUID))
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// Header is one header field, name spelled as sent.
type Header struct{ Name, Value string }

// Request is an opening handshake as a server reads it: the request line
// and the header fields in order, names as sent.
type Request struct {
	Method, Target, Proto string
	Headers               []Header
}

// Get returns the first value of the named header, ignoring case.
func (r *Request) Get(name string) string {
	for _, h := range r.Headers {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// Values returns every value of the named header (a list header's
// comma-separated elements each on their own), trimmed.
func (r *Request) Values(name string) []string {
	var out []string
	for _, h := range r.Headers {
		if strings.EqualFold(h.Name, name) {
			for _, v := range strings.Split(h.Value, ",") {
				if v = strings.TrimSpace(v); v != "" {
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// Handshake limits: the request head a server reads before it refuses.
const (
	MaxHeadBytes = 16 << 10
	MaxHeaders   = 128
)

// ErrHeadTooLarge is a request head over MaxHeadBytes or MaxHeaders.
var ErrHeadTooLarge = errors.New("websocket: handshake request too large")

// ReadRequest reads an HTTP/1.1 request head from br: the request line and
// header fields up to the blank line. It reads no body (a handshake has
// none) and accepts LF as well as CRLF line ends, as HTTP parsers do.
func ReadRequest(br *bufio.Reader) (*Request, error) {
	total := 0
	line := func() (string, error) {
		var buf []byte
		for {
			chunk, isPrefix, err := br.ReadLine()
			if err != nil {
				return "", err
			}
			total += len(chunk) + 2
			if total > MaxHeadBytes {
				return "", ErrHeadTooLarge
			}
			buf = append(buf, chunk...)
			if !isPrefix {
				if bytes.IndexByte(buf, '\r') >= 0 {
					return "", errors.New("websocket: a bare CR in the request head")
				}
				return string(buf), nil
			}
		}
	}
	first, err := line()
	if err != nil {
		return nil, err
	}
	parts := strings.Split(first, " ")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || !strings.HasPrefix(parts[2], "HTTP/1.") {
		return nil, fmt.Errorf("websocket: malformed request line %q", truncate(first))
	}
	r := &Request{Method: parts[0], Target: parts[1], Proto: parts[2]}
	for {
		l, err := line()
		if err != nil {
			return nil, err
		}
		if l == "" {
			return r, nil
		}
		if l[0] == ' ' || l[0] == '\t' {
			return nil, fmt.Errorf("websocket: folded header line")
		}
		name, value, ok := strings.Cut(l, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("websocket: malformed header line %q", truncate(l))
		}
		if len(r.Headers) == MaxHeaders {
			return nil, ErrHeadTooLarge
		}
		r.Headers = append(r.Headers, Header{name, strings.Trim(value, " \t")})
	}
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// HandshakeError is why a request is no WebSocket opening handshake, with
// the HTTP status to refuse it with.
type HandshakeError struct {
	Status int
	Reason string
}

func (e *HandshakeError) Error() string { return "websocket: " + e.Reason }

// CheckUpgrade checks that r is a valid opening handshake (§4.2.1) and
// returns the client's key.
func CheckUpgrade(method string, header func(string) string, values func(string) []string) (string, error) {
	if method != "GET" {
		return "", &HandshakeError{405, "the opening handshake must be a GET"}
	}
	if !hasToken(values("Connection"), "upgrade") || !hasToken(values("Upgrade"), "websocket") {
		return "", &HandshakeError{426, "not a websocket upgrade (Connection: Upgrade, Upgrade: websocket)"}
	}
	if header("Sec-WebSocket-Version") != "13" {
		return "", &HandshakeError{426, "unsupported Sec-WebSocket-Version (13 is supported)"}
	}
	key := header("Sec-WebSocket-Key")
	if k, err := base64.StdEncoding.DecodeString(key); err != nil || len(k) != 16 {
		return "", &HandshakeError{400, "Sec-WebSocket-Key must be 16 bytes in base64"}
	}
	return key, nil
}

// IsUpgrade reports whether a request asks for a WebSocket upgrade, by its
// Connection and Upgrade headers alone.
func IsUpgrade(values func(string) []string) bool {
	return hasToken(values("Connection"), "upgrade") && hasToken(values("Upgrade"), "websocket")
}

func hasToken(vals []string, token string) bool {
	for _, v := range vals {
		if strings.EqualFold(v, token) {
			return true
		}
	}
	return false
}

// AppendAccept appends the 101 answer to a handshake with key: the
// subprotocol chosen (none if empty) and extra header fields.
func AppendAccept(dst []byte, key, subprotocol string, extra []Header) []byte {
	dst = append(dst, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "...)
	dst = append(dst, AcceptKey(key)...)
	dst = append(dst, "\r\n"...)
	if subprotocol != "" {
		dst = append(dst, "Sec-WebSocket-Protocol: "...)
		dst = append(dst, subprotocol...)
		dst = append(dst, "\r\n"...)
	}
	dst = appendHeaders(dst, extra)
	return append(dst, "\r\n"...)
}

// AppendRefusal appends an HTTP answer that refuses a handshake: status,
// header fields, and body (with its Content-Length); the connection closes.
func AppendRefusal(dst []byte, status int, extra []Header, body []byte) []byte {
	dst = fmt.Appendf(dst, "HTTP/1.1 %d %s\r\n", status, StatusText(status))
	dst = appendHeaders(dst, extra)
	dst = fmt.Appendf(dst, "Content-Length: %d\r\nConnection: close\r\n\r\n", len(body))
	return append(dst, body...)
}

// appendHeaders appends header fields, skipping any whose name or value
// would break the head (CR, LF) or that the framing sets itself.
func appendHeaders(dst []byte, hs []Header) []byte {
	for _, h := range hs {
		if h.Name == "" || strings.ContainsAny(h.Name, "\r\n: ") || strings.ContainsAny(h.Value, "\r\n") {
			continue
		}
		switch strings.ToLower(h.Name) {
		case "content-length", "connection", "upgrade", "sec-websocket-accept", "transfer-encoding":
			continue
		}
		dst = append(dst, h.Name...)
		dst = append(dst, ": "...)
		dst = append(dst, h.Value...)
		dst = append(dst, "\r\n"...)
	}
	return dst
}

// StatusText is a reason phrase for an HTTP status.
func StatusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "Status " + strconv.Itoa(code)
}

// ParseTarget splits a request-target into its path and raw query.
func ParseTarget(target string) (path, rawQuery string) {
	if i := strings.IndexByte(target, '?'); i >= 0 {
		return target[:i], target[i+1:]
	}
	return target, ""
}

// headBytes renders a request head, for the client.
func headBytes(method, target, host string, hs []Header) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, target, host)
	for _, h := range hs {
		fmt.Fprintf(&b, "%s: %s\r\n", h.Name, h.Value)
	}
	b.WriteString("\r\n")
	return b.Bytes()
}
