package predicate

import (
	"encoding/json"
	"fmt"
	"strings"

	"pgregory.net/rapid"
)

// Generators of small predicates and requests over a tiny alphabet, so that
// random pairs often match.

var (
	genWord   = rapid.SampledFrom([]string{"", "a", "A", "b", "ab", "aB", "1", "a1", "Ab1"})
	genMethod = rapid.SampledFrom([]string{"GET", "POST", "PUT"})
	genPath   = rapid.SampledFrom([]string{"/", "/a", "/A", "/a/b", "/ab1", "/b/A1"})
	genName   = rapid.SampledFrom([]string{"a", "b", "c"})
	genRegex  = rapid.SampledFrom([]string{"^a", "b$", "[0-9]+", "A", "^$", ".", "^/a"})
)

// genReq draws a request, with query and header names that may repeat and
// may differ only by case.
func genReq(t *rapid.T) req {
	r := req{method: genMethod.Draw(t, "method"), path: genPath.Draw(t, "path")}
	var q []string
	for _, n := range rapid.SliceOfN(genName, 0, 4).Draw(t, "qnames") {
		if rapid.IntRange(0, 3).Draw(t, "qupper") == 0 {
			n = strings.ToUpper(n)
		}
		q = append(q, n+"="+genWord.Draw(t, "qv"))
	}
	r.query = strings.Join(q, "&")
	for _, n := range rapid.SliceOfN(genName, 0, 3).Draw(t, "hnames") {
		name := "x-" + n
		if rapid.Bool().Draw(t, "hupper") {
			name = "X-" + strings.ToUpper(n)
		}
		r.headers = append(r.headers, [2]string{name, genWord.Draw(t, "hv")})
	}
	switch rapid.IntRange(0, 4).Draw(t, "bodykind") {
	case 4:
		r.headers = append(r.headers, [2]string{"Content-Type", "application/x-www-form-urlencoded"})
		r.body = "a=" + genWord.Draw(t, "fa") + "&b=" + genWord.Draw(t, "fb")
	case 1:
		r.body = genWord.Draw(t, "body")
	case 2:
		b, _ := json.Marshal(map[string]any{
			"a": genWord.Draw(t, "ja"),
			"b": []string{genWord.Draw(t, "jb0"), genWord.Draw(t, "jb1")},
			"c": map[string]any{"d": genWord.Draw(t, "jd")},
			"n": rapid.IntRange(0, 2).Draw(t, "jn"),
			"o": []any{map[string]any{"k": genWord.Draw(t, "jk0")}, map[string]any{"k": genWord.Draw(t, "jk1")}},
		})
		r.body = string(b)
	case 3:
		r.body = fmt.Sprintf("<r><a>%s</a><b>%s</b><b>%s</b></r>", genWord.Draw(t, "xa"), genWord.Draw(t, "xb0"), genWord.Draw(t, "xb1"))
	}
	return r
}

// genXMLBody draws XML cut from pieces of tags, text and markup, so that
// it is often malformed.
var genXMLBody = rapid.Custom(func(t *rapid.T) string {
	pieces := rapid.SliceOfN(rapid.SampledFrom([]string{"<r>", "</r>", "<a>", "</a>", "<b>", "</b>", "<b/>", "<a x='1'>",
		"<", ">", "/", "</", "<>", "</>", "a", "b", "A", "1", " ", "&amp;", "&x;", "<!--", "-->", "<![CDATA[", "]]>",
		"<?p?>", "</ a>", "<a", "='", "\n"}), 1, 16).Draw(t, "pieces")
	return strings.Join(pieces, "")
})

// genXPathLeaf draws a comparison of what an xpath selects from the body.
func genXPathLeaf(t *rapid.T) string {
	op := rapid.SampledFrom([]string{"equals", "contains", "startsWith", "exists"}).Draw(t, "op")
	var v any = genWord.Draw(t, "v")
	if op == "exists" {
		v = rapid.Bool().Draw(t, "v")
	}
	sel := rapid.SampledFrom([]string{"//a", "//b", "//b/text()", "count(//b)", "/r/a", "/r", "//a/@x", "//*", "count(//*)", "//comment()"}).Draw(t, "xp")
	b, _ := json.Marshal(map[string]any{op: map[string]any{"body": v}, "xpath": map[string]any{"selector": sel}})
	return string(b)
}

var ops = []string{"equals", "deepEquals", "contains", "startsWith", "endsWith", "matches", "exists"}

// genLeaf draws one comparison predicate as JSON.
func genLeaf(t *rapid.T) string {
	op := rapid.SampledFrom(ops).Draw(t, "op")
	val := func(label string) any {
		switch op {
		case "exists":
			return rapid.Bool().Draw(t, label)
		case "matches":
			return genRegex.Draw(t, label)
		}
		return genWord.Draw(t, label)
	}
	fields := map[string]any{}
	for _, f := range rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"method", "path", "query", "headers", "body", "Path", "form"}), 1, 3, rapid.ID).Draw(t, "fields") {
		switch f {
		case "method":
			if op == "matches" || op == "exists" {
				fields[f] = val("v")
			} else {
				fields[f] = rapid.SampledFrom([]string{"get", "GET", "post", "G"}).Draw(t, "m")
			}
		case "path", "Path":
			if op == "matches" || op == "exists" {
				fields[f] = val("v")
			} else {
				fields[f] = genPath.Draw(t, "p")
			}
		case "query", "headers", "form":
			sub := map[string]any{}
			for _, n := range rapid.SliceOfNDistinct(genName, 0, 2, rapid.ID).Draw(t, "names") {
				if f == "headers" {
					n = rapid.SampledFrom([]string{"x-", "X-"}).Draw(t, "hp") + n
				} else if rapid.Bool().Draw(t, "upperq") {
					n = strings.ToUpper(n)
				}
				sub[n] = val("v")
			}
			fields[f] = sub
		case "body":
			switch rapid.IntRange(0, 5).Draw(t, "bodyexp") {
			case 4:
				fields[f] = map[string]any{"o": []any{map[string]any{"k": val("jk")}}}
			case 0:
				fields[f] = map[string]any{"a": val("ja")}
			case 1:
				fields[f] = map[string]any{"c": map[string]any{"d": val("jd")}}
			case 2:
				fields[f] = map[string]any{"b": []any{val("jb")}}
			case 3:
				if op == "exists" {
					fields[f] = map[string]any{"n": val("jn")}
				} else {
					fields[f] = map[string]any{"n": rapid.IntRange(0, 2).Draw(t, "jn")}
				}
			default:
				fields[f] = val("v")
			}
		}
	}
	p := map[string]any{op: fields}
	switch rapid.IntRange(0, 2).Draw(t, "cs") {
	case 1:
		p["caseSensitive"] = true
	case 2:
		p["caseSensitive"] = false
	}
	if rapid.IntRange(0, 3).Draw(t, "kcs") == 0 {
		p["keyCaseSensitive"] = rapid.Bool().Draw(t, "kcsv")
	}
	if ex := rapid.SampledFrom([]string{"", "", "", "1", "A", "^/"}).Draw(t, "except"); ex != "" {
		p["except"] = ex
	}
	switch rapid.IntRange(0, 5).Draw(t, "selector") {
	case 0:
		p["jsonpath"] = map[string]any{"selector": rapid.SampledFrom([]string{"$.a", "$.A", "$..b", "$.b[0]", "a", "$.c.d", "$.n", "$..*"}).Draw(t, "jp")}
	case 1:
		p["xpath"] = map[string]any{"selector": rapid.SampledFrom([]string{"//a", "//A", "//b", "//b/text()", "count(//b)", "/r/a"}).Draw(t, "xp")}
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// genPred draws a predicate tree of leaves under not, or and and.
func genPred(t *rapid.T, depth int) string {
	if depth <= 0 {
		return genLeaf(t)
	}
	switch rapid.IntRange(0, 5).Draw(t, "comb") {
	case 0:
		return fmt.Sprintf(`{"not":%s}`, genPred(t, depth-1))
	case 1, 2:
		op := rapid.SampledFrom([]string{"or", "and"}).Draw(t, "logic")
		n := rapid.IntRange(1, 3).Draw(t, "n")
		parts := make([]string, n)
		for i := range parts {
			parts[i] = genPred(t, depth-1)
		}
		return fmt.Sprintf(`{%q:[%s]}`, op, strings.Join(parts, ","))
	}
	return genLeaf(t)
}
