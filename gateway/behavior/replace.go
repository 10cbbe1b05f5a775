package behavior

import (
	"bytes"
	"strings"

	"github.com/riftgate/riftgate/gateway/message"
)

// replaceTokens replaces each pair's token with its value, in order, in
// every string of the response, as mb's globalObjectReplace does with
// split/join.
func replaceTokens(resp *Response, pairs [][2]string) {
	if len(pairs) == 0 {
		return
	}
	rep := func(s string) string {
		for _, p := range pairs {
			if p[0] != p[1] && strings.Contains(s, p[0]) {
				s = strings.ReplaceAll(s, p[0], p[1])
			}
		}
		return s
	}
	resp.StatusText = rep(resp.StatusText)
	if resp.Response == nil {
		return
	}
	if resp.MB != nil && !resp.TCP && holdsToken(resp.MB, pairs) {
		// mb replaces in the object it holds, which decorators and
		// matches see.
		if v, err := parseBody(resp.MB); err == nil {
			var b bytes.Buffer
			writeBody(&b, replaceIn(v, rep), "")
			resp.MB = b.Bytes()
		}
	}
	for i := range resp.Headers {
		resp.Headers[i].Name = rep(resp.Headers[i].Name)
		resp.Headers[i].Value = rep(resp.Headers[i].Value)
	}
	if resp.Binary {
		replaceBinary(resp, rep)
		return
	}
	if len(resp.Body) == 0 {
		return
	}
	if !resp.JSONBody {
		resp.Body = []byte(rep(string(resp.Body)))
		return
	}
	// In JSON text, a token appears escaped; only a body that holds one
	// is rewritten.
	if !holdsToken(resp.Body, pairs) {
		return
	}
	v, err := parseBody(resp.Body)
	if err != nil {
		// Not the engine's JSON: fall back to plain text.
		resp.Body = []byte(rep(string(resp.Body)))
		return
	}
	var b bytes.Buffer
	writeBody(&b, replaceIn(v, rep), "")
	resp.Body = b.Bytes()
}

// replaceBinary replaces tokens in the base64 text a binary body came
// from, as mb replaces them in the string before it decodes it, and decodes
// what that gives.
func replaceBinary(resp *Response, rep func(string) string) {
	text := resp.BinaryString()
	out := rep(text)
	if out == text {
		return
	}
	resp.BinaryText = out
	if resp.TCP {
		resp.Body = message.DecodeBase64(out)
		resp.NoDefault = out != "" && len(resp.Body) == 0 // truthy, and no bytes
	} else {
		resp.Body = message.DecodeHTTPBinary(out)
	}
}

// holdsToken reports whether JSON text holds one of the tokens, escaped as
// JSON writes it, that a pair replaces.
func holdsToken(text []byte, pairs [][2]string) bool {
	for _, p := range pairs {
		if p[0] != p[1] && bytes.Contains(text, jsonContent(p[0])) {
			return true
		}
	}
	return false
}

// jsonContent escapes s as JSON.stringify does inside a string literal,
// without the quotes.
func jsonContent(s string) []byte {
	q := message.AppendJSONString(nil, s)
	return q[1 : len(q)-1]
}
