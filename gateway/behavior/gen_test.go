package behavior

import (
	"encoding/json"
	"fmt"
	"strings"

	"pgregory.net/rapid"
)

var genWord = rapid.SampledFrom([]string{"", "a", "A", "ab", "b1", "Ab12", "x y"})

// genReq draws a small request whose fields copy can select from.
func genReq(t *rapid.T) req {
	r := req{method: rapid.SampledFrom([]string{"GET", "POST"}).Draw(t, "method")}
	r.target = rapid.SampledFrom([]string{"/", "/ab", "/a/b12", "/Ab"}).Draw(t, "path")
	var q []string
	for _, n := range rapid.SliceOfN(rapid.SampledFrom([]string{"a", "A", "b"}), 0, 3).Draw(t, "q") {
		q = append(q, n+"="+strings.ReplaceAll(genWord.Draw(t, "qv"), " ", "+"))
	}
	if len(q) > 0 {
		r.target += "?" + strings.Join(q, "&")
	}
	for _, n := range rapid.SliceOfN(rapid.SampledFrom([]string{"X-A", "x-a", "X-B"}), 0, 2).Draw(t, "h") {
		r.headers = append(r.headers, [2]string{n, genWord.Draw(t, "hv")})
	}
	switch rapid.IntRange(0, 3).Draw(t, "body") {
	case 1:
		r.body = genWord.Draw(t, "text")
	case 2:
		b, _ := json.Marshal(map[string]any{"a": genWord.Draw(t, "ja"), "b": []any{genWord.Draw(t, "jb"), rapid.IntRange(0, 9).Draw(t, "jn")}})
		r.body = string(b)
	case 3:
		r.body = fmt.Sprintf("<r><a>%s</a><b>%s</b><b>%s</b></r>", genWord.Draw(t, "xa"), genWord.Draw(t, "xb0"), genWord.Draw(t, "xb1"))
	}
	return r
}

// genCopy draws a response whose body and header carry a copy's tokens.
func genCopy(t *rapid.T) string {
	from := rapid.SampledFrom([]any{"path", "PATH", "body", "method", "query", map[string]any{"query": "a"}, map[string]any{"headers": "X-A"}, map[string]any{"Headers": "x-a"}}).Draw(t, "from")
	using := map[string]any{}
	switch rapid.IntRange(0, 2).Draw(t, "method") {
	case 0:
		using["method"] = "regex"
		using["selector"] = rapid.SampledFrom([]string{`\w+`, `(a)(b)?`, `[0-9]+`, `^/(\w*)`, `.*`, `A`}).Draw(t, "re")
		if rapid.Bool().Draw(t, "ignoreCase") {
			using["options"] = map[string]any{"ignoreCase": true}
		}
	case 1:
		using["method"] = "jsonpath"
		using["selector"] = rapid.SampledFrom([]string{"$.a", "$..b", "$.b[1]", "$.b", "a"}).Draw(t, "jp")
	case 2:
		using["method"] = "xpath"
		using["selector"] = rapid.SampledFrom([]string{"//a", "//b", "count(//b)", "//b/text()"}).Draw(t, "xp")
	}
	resp := map[string]any{
		"is": map[string]any{
			"headers": map[string]any{"X-Out": "${T}[1]"},
			"body":    "${T}|${T}[0]|${T}[1]|${T}[2]",
		},
		"behaviors": []any{map[string]any{"copy": map[string]any{"from": from, "into": "${T}", "using": using}}},
	}
	b, _ := json.Marshal(resp)
	return string(b)
}
