package selector

import (
	"fmt"
	"strings"
	"testing"

	"github.com/antchfx/xmlquery"
	"pgregory.net/rapid"
)

// treeText renders a tree with everything XPath can see of it.
func treeText(n *xmlquery.Node) string {
	var b strings.Builder
	var walk func(n *xmlquery.Node, depth int)
	walk = func(n *xmlquery.Node, depth int) {
		fmt.Fprintf(&b, "%s%d %q %q %q %v\n", strings.Repeat(" ", depth), n.Type, n.Data, n.Prefix, n.NamespaceURI, n.Attr)
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Parent != n {
				b.WriteString("(bad parent)\n")
			}
			walk(c, depth+1)
		}
	}
	walk(n, 0)
	return b.String()
}

// quickAgrees fails unless, whenever the quick parser reads s, it reads
// it into the tree parseXMLLikeMB makes.
func quickAgrees(t interface{ Fatalf(string, ...any) }, s string) bool {
	quick, ok := parseXMLQuick(s)
	if !ok {
		return false
	}
	like, ok := parseXMLLikeMB(s)
	if !ok {
		t.Fatalf("%q: read quickly, but mb's parser would throw", s)
	}
	if got, w := treeText(quick), treeText(like); got != w {
		t.Fatalf("%q:\nquick\n%s\nas mb reads it\n%s", s, got, w)
	}
	return true
}

var xmlSeeds = []string{
	`<order><user><name>user9</name><role>admin</role></user><id>12345</id></order>`,
	`<a x="1" y='&lt;&amp;&#65;&#x42;'>t&gt;<!-- c --><![CDATA[<raw>]]>u<b/><c  z = "q" /></a>`,
	"<a>\n  <b>x</b>\n</a>\n", `<a></a>`, `<a/>`, `<_a-b.c>x</_a-b.c>`,
	`<a>&unknown;</a>`, `<a><b></a>`, `x<a/>`, `<a/><b/>`, `<?xml version="1.0"?><a/>`, `<a xmlns="u"/>`,
	`<p:a/>`, "<a>\r\n</a>", "<a>\x01</a>", `<a b/>`, `<a b="1" b="2"/>`, `<a>![CDATA[x</a>`, `<a>]]></a>`, `<a>x<![CDATA[]]>x</a>`,
	`<!-- pre --><a/>`, " <a/>", `<a>&#0;</a>`, `<a>&#xD800;</a>`, `<a b="x	y"/>`, `<a><></><b></b></a>`,
}

func TestQuickXMLIsLikeMB(t *testing.T) {
	read := 0
	for _, s := range xmlSeeds {
		if quickAgrees(t, s) {
			read++
		}
	}
	if read < 6 {
		t.Fatalf("the quick parser read only %d of the seeds", read)
	}
	// Random documents of the kind bodies are.
	names := rapid.SampledFrom([]string{"a", "b", "user", "name", "_x", "k-1", "v.2"})
	texts := rapid.SampledFrom([]string{"", "x", " ", "\n  ", "a&amp;b", "&lt;", "&#233;", "é", "]", "1 > 0"})
	rapid.Check(t, func(t *rapid.T) {
		var b strings.Builder
		var elem func(depth int)
		elem = func(depth int) {
			n := names.Draw(t, "name")
			b.WriteString("<" + n)
			for i, a := range rapid.SliceOfNDistinct(names, 0, 2, rapid.ID).Draw(t, "attrs") {
				fmt.Fprintf(&b, " %s=%q", a, texts.Draw(t, fmt.Sprint("attr", i)))
			}
			if depth > 3 || rapid.Bool().Draw(t, "empty") {
				b.WriteString("/>")
				return
			}
			b.WriteString(">")
			for range rapid.IntRange(0, 3).Draw(t, "children") {
				switch rapid.IntRange(0, 3).Draw(t, "kind") {
				case 0:
					elem(depth + 1)
				case 1:
					b.WriteString(texts.Draw(t, "text"))
				case 2:
					b.WriteString("<!--" + texts.Draw(t, "comment") + "-->")
				case 3:
					b.WriteString("<![CDATA[" + texts.Draw(t, "cdata") + "]]>")
				}
			}
			b.WriteString("</" + n + ">")
		}
		elem(0)
		if rapid.Bool().Draw(t, "trailing") {
			b.WriteString("\n")
		}
		if !quickAgrees(t, b.String()) {
			t.Fatalf("%q not read quickly", b.String())
		}
	})
}

func FuzzQuickXML(f *testing.F) {
	for _, s := range xmlSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { quickAgrees(t, s) })
}

func BenchmarkParseXML(b *testing.B) {
	doc := `<order><user><name>user9</name><role>admin</role><email>u9@example.com</email></user><id>12345</id></order>`
	b.Run("quick", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			parseXMLQuick(doc)
		}
	})
	b.Run("likeMB", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			parseXMLLikeMB(doc)
		}
	})
	b.Run("xmlquery", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = xmlquery.Parse(strings.NewReader(doc))
		}
	})
}
