package behavior

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"pgregory.net/rapid"
)

var genWord = rapid.SampledFrom([]string{"", "a", "A", "ab", "b1", "Ab12", "x y", `q"\\z`, "tab\tnl"})

// genReq draws a small request whose fields copy can select from.
func genReq(t *rapid.T) req {
	r := req{method: rapid.SampledFrom([]string{"GET", "POST"}).Draw(t, "method")}
	r.target = rapid.SampledFrom([]string{"/", "/ab", "/a/b12", "/Ab"}).Draw(t, "path")
	var q []string
	// No "b" here: jsonpath-plus indexes into strings ($.b[1] of "ab" is
	// "b"), which RFC 9535 does not do; see the rationale.
	for _, n := range rapid.SliceOfN(rapid.SampledFrom([]string{"a", "A", "c"}), 0, 3).Draw(t, "q") {
		q = append(q, n+"="+url.QueryEscape(genWord.Draw(t, "qv")))
	}
	if len(q) > 0 {
		r.target += "?" + strings.Join(q, "&")
	}
	for _, n := range rapid.SliceOfN(rapid.SampledFrom([]string{"X-A", "x-a", "X-B"}), 0, 2).Draw(t, "h") {
		r.headers = append(r.headers, [2]string{n, strings.ReplaceAll(genWord.Draw(t, "hv"), "\t", " ")})
	}
	switch rapid.IntRange(0, 4).Draw(t, "body") {
	case 4:
		// Keys out of sorted order, to check document order.
		w := func(l string) string { b, _ := json.Marshal(genWord.Draw(t, l)); return string(b) }
		r.body = fmt.Sprintf(`{"z":{"t":%s},"a":{"t":%s,"k":{"t":%s}},"m":[{"t":%s}],"b":[%s]}`, w("t0"), w("t1"), w("t2"), w("t3"), w("t4"))
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
		using["selector"] = rapid.SampledFrom([]string{"$.a", "$..b", "$.b[1]", "$.b", "a", "$..t", "$.*", "$.*.t", "$..*"}).Draw(t, "jp")
	case 2:
		using["method"] = "xpath"
		using["selector"] = rapid.SampledFrom([]string{"//a", "//b", "count(//b)", "//b/text()"}).Draw(t, "xp")
	}
	var body any = "${T}|${T}[0]|${T}[1]|${T}[2]"
	if rapid.Bool().Draw(t, "jsonbody") {
		// Keys in sorted order: render writes them so, as mb would.
		body = map[string]any{"a": "${T}", "b": map[string]any{"c": []any{"${T}[0]", "${T}[1]"}}, "n": 1}
	}
	resp := map[string]any{
		"is": map[string]any{
			"headers": map[string]any{"X-Out": "${T}[1]"},
			"body":    body,
		},
		"behaviors": []any{map[string]any{"copy": map[string]any{"from": from, "into": "${T}", "using": using}}},
	}
	b, _ := json.Marshal(resp)
	return string(b)
}

// genLookup draws a response with a lookup into people.csv (see writeCSV)
// keyed by a value selected from the request.
func genLookup(t *rapid.T, csvPath string) string {
	from := rapid.SampledFrom([]any{"path", "body", map[string]any{"query": "a"}, map[string]any{"headers": "X-A"}}).Draw(t, "from")
	using := map[string]any{}
	switch rapid.IntRange(0, 2).Draw(t, "method") {
	case 0:
		using["method"] = "regex"
		using["selector"] = rapid.SampledFrom([]string{`\d+`, `(\d)(\d+)`, `.*`}).Draw(t, "re")
	case 1:
		using["method"] = "jsonpath"
		using["selector"] = rapid.SampledFrom([]string{"$.a", "$.b", "$..t"}).Draw(t, "jp")
	case 2:
		using["method"] = "xpath"
		using["selector"] = rapid.SampledFrom([]string{"//a", "//b"}).Draw(t, "xp")
	}
	key := map[string]any{"from": from, "using": using}
	if rapid.Bool().Draw(t, "index") {
		key["index"] = rapid.IntRange(0, 2).Draw(t, "i")
	}
	resp := map[string]any{
		"is": map[string]any{"body": `${r}['name']|${r}["age"]|${r}[city]|${r}[id]`},
		"behaviors": []any{map[string]any{"lookup": map[string]any{
			"key":            key,
			"fromDataSource": map[string]any{"csv": map[string]any{"path": csvPath, "keyColumn": "id"}},
			"into":           "${r}",
		}}},
	}
	b, _ := json.Marshal(resp)
	return string(b)
}

// genKeyReq draws a request that often carries a key of people.csv.
func genKeyReq(t *rapid.T) req {
	id := rapid.SampledFrom([]string{"123", "456", "999", ""}).Draw(t, "id")
	r := req{method: "POST", target: "/p/" + id + "?a=" + id}
	r.headers = [][2]string{{"X-A", id}}
	switch rapid.IntRange(0, 2).Draw(t, "body") {
	case 1:
		r.body = fmt.Sprintf(`{"a":%q,"b":[%s],"z":{"t":"456"}}`, id, rapid.SampledFrom([]string{"123", `"123"`, "1"}).Draw(t, "b"))
	case 2:
		r.body = fmt.Sprintf("<r><a>%s</a><b>456</b><b>123</b></r>", id)
	}
	return r
}
