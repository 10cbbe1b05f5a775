package selector

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/antchfx/xmlquery"
	"github.com/riftgate/riftgate/gateway/predicate/mbtest"
	"pgregory.net/rapid"
)

// domText renders a tree as testdata/xmldom-tree.js renders xmldom's: every
// node xpath can tell apart, with names as written and namespace URIs.
// The declaration riftgate stands in before a root is not xmldom's, and
// not rendered.
func domText(doc *xmlquery.Node) string {
	var out []string
	var walk func(n *xmlquery.Node, depth int)
	walk = func(n *xmlquery.Node, depth int) {
		var line string
		switch n.Type {
		case xmlquery.DocumentNode:
			line = "document"
		case xmlquery.ElementNode:
			line = fmt.Sprintf("element %s ns=%s", jsonText(qname(n.Prefix, n.Data)), jsonText(n.NamespaceURI))
			for _, a := range n.Attr {
				line += fmt.Sprintf(" %s=%s ns=%s", jsonText(qname(a.Name.Space, a.Name.Local)), jsonText(a.Value), jsonText(a.NamespaceURI))
			}
		case xmlquery.TextNode:
			line = "text " + jsonText(n.Data)
		case xmlquery.CharDataNode:
			line = "cdata " + jsonText(n.Data)
		case xmlquery.CommentNode:
			line = "comment " + jsonText(n.Data)
		case xmlquery.DeclarationNode:
			if n.ProcInst == nil {
				return
			}
			line = "pi " + jsonText(n.ProcInst.Target) + " " + jsonText(n.ProcInst.Inst)
		default:
			line = fmt.Sprintf("type %d", n.Type)
		}
		out = append(out, strings.Repeat(" ", depth)+line)
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Parent != n {
				out = append(out, "(bad parent)")
			}
			walk(c, depth+1)
		}
	}
	walk(doc, 0)
	return strings.Join(out, "\n")
}

func qname(prefix, local string) string {
	if prefix == "" {
		return local
	}
	return prefix + ":" + local
}

// jsonText is JSON.stringify of a string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	// JSON.stringify does not escape these; encoding/json does.
	r := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&", `\u2028`, "\u2028", `\u2029`, "\u2029")
	return r.Replace(string(b))
}

// xmldomScript is the node command that runs testdata/xmldom-tree.js on
// Mountebank's own DOM parser, with args after the package directory.
func xmldomScript(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	mb := os.Getenv("RIFTGATE_MB")
	if mb == "" {
		mb = filepath.Join("..", "..", "build", "node", "node_modules", ".bin", "mb")
	}
	pkg := filepath.Join(filepath.Dir(filepath.Dir(mb)), "mountebank")
	if _, err := os.Stat(pkg); err != nil {
		t.Fatalf("%v: Mountebank is not installed under build/node: run `make node`", mbtest.ErrNotInstalled)
	}
	pkg, _ = filepath.Abs(pkg)
	return exec.Command("node", append([]string{filepath.Join("testdata", "xmldom-tree.js"), pkg}, args...)...)
}

// xmldomTrees asks Mountebank's own DOM parser, run by node, for its trees
// of texts.
func xmldomTrees(t testing.TB, texts []string) []string {
	t.Helper()
	in, err := json.Marshal(texts)
	if err != nil {
		t.Fatal(err)
	}
	cmd := xmldomScript(t)
	cmd.Stdin = strings.NewReader(string(in))
	cmd.WaitDelay = time.Second
	timer := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("node: %v: %s", err, ee.Stderr)
	}
	if err != nil {
		t.Fatal(err)
	}
	var trees []string
	if err := json.Unmarshal(out, &trees); err != nil || len(trees) != len(texts) {
		t.Fatalf("node answered %d trees for %d texts: %v", len(trees), len(texts), err)
	}
	return trees
}

// xmldomProcess is Mountebank's DOM parser run by node for one text after
// another, as a fuzz target asks.
type xmldomProcess struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startXMLDOM(t testing.TB) *xmldomProcess {
	t.Helper()
	cmd := xmldomScript(t, "--lines")
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = time.Second
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("node: %v", err)
	}
	p := &xmldomProcess{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<16)}
	t.Cleanup(func() {
		_ = in.Close() // node exits at the end of its input
		timer := time.AfterFunc(10*time.Second, func() { _ = cmd.Process.Kill() })
		defer timer.Stop()
		_ = cmd.Wait()
	})
	return p
}

// tree is xmldom's tree of s.
func (p *xmldomProcess) tree(t testing.TB, s string) string {
	t.Helper()
	line, _ := json.Marshal(s)
	if _, err := p.in.Write(append(line, '\n')); err != nil {
		t.Fatalf("node: %v", err)
	}
	answer, err := p.out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var tree string
	if err := json.Unmarshal(answer, &tree); err != nil {
		t.Fatalf("node answered %q: %v", answer, err)
	}
	return tree
}

// likeMBTree is parseXMLLikeMB's tree of s, rendered as xmldom's.
func likeMBTree(s string) string {
	doc, ok := parseXMLLikeMB(s)
	if !ok {
		return "throws"
	}
	return domText(doc)
}

// malformedXML is the kinds of broken text the parser recovers from, each
// of which Mountebank reads in a way of its own.
var malformedXML = []string{
	// unclosed and mismatched tags
	`<r><b>x`, `<r><b>x</b>`, `<r>x</r`, `<r>x</rr`, `<r><b></r>`, `<r><b>1</b><b>2</r>`, `<a><b><c></a>`,
	`<r><b>1</b><b>2</b>`, `<r></b></r>`, `</r>`, `<r></R>`, `<r>x</r >`, `<r>x</r\n>`, `<r></r x>`,
	// stray '<' and empty or bad names
	`<r><></><b></b><b></b></r>`, `<r>a < b</r>`, `<r><</r>`, `<r><1/></r>`, `<r>< b/></r>`, `<r><b </r>`,
	`<r><:b/></r>`, `<r><a:b:c/></r>`, `<r><é/><ü>x</ü></r>`, `<`, `<r`, `<r/`, `<r x`, `<r x=`, `<r x="1`, `x<`, `a<b`,
	// broken entities and character references
	`<r>&bogus;</r>`, `<r>&amp</r>`, `<r>&;</r>`, `<r>&#;</r>`, `<r>&#x;</r>`, `<r>&#xZZ;</r>`, `<r>&#65;&#x42;&#0;</r>`,
	`<r>&#1114112;&#55296;&#x1F600;</r>`, `<r>&#4x1;&#x4x1;&#_1;</r>`, `<r a="&bogus;&lt;&#10;"/>`, `<r>&lt;b&gt;</r>`,
	// text after the root, a second root, a missing root
	`<r/>tail`, `<r/> `, `<r/><r2/>`, `<r>1</r><r>2</r>`, `<r/>a<b/>c`, `text only`, ` `, `a<r/>`, ` <r/>`,
	`<!-- c -->`, `<!-- c --><r/>`, `<r/><!-- c -->`, `<?pi x?>`, `<r/><?pi x?>`,
	// attributes
	`<r a=1 b='2' c="3" d e/>`, `<r a="1" a="2"/>`, `<r a="1"b="2"/>`, `<r a = "1" />`, `<r a=b/>`, `<r a/>`, `<r a />`,
	`<r a="x` + "\t\n" + `y"/>`, `<r a=x=y/>`, `<r =a/>`, `<r a="1"/b/>`, `<r/ >`, `<r / >`, `<r//>`,
	// CDATA, comments, instructions, doctypes
	`<r><![CDATA[x]]></r>`, `<r><![CDATA[x</r>`, `<r><!xCDATA[x]]></r>`, `<![CDATA[ ]]><r>x</r>`, `<r/><![CDATA[x]]>`,
	`<r><!- x --></r>`, `<r><!-- x</r>`, `<r><?pi</r>`, `<r/><?a?><?b`, `<?xml version="1.0"?><r/>`, `<?xml?><?xml?><r/>`,
	`<!DOCTYPE r><r/>`, `<!DOCTYPE r><!DOCTYPE r><r/>`, `<r/><!DOCTYPE r>`, `<r><!DOCTYPE r></r>`, `<!DOCTYPE r`, `<!doctype>`,
	`<!DOCTYPE r [<!ENTITY e "x">]><r>&e;</r>`,
	// namespaces
	`<r xmlns="u" xmlns:p="v"><p:b p:c="1" d="2"/><q:b/></r>`, `<p:r xmlns:p="u" xmlns:p="v"/>`, `<r xml:lang="en"/>`,
	`<h:r xmlns:h="http://www.w3.org/1999/xhtml"><h:script>a<b</h:script></h:r>`,
	`<r xmlns="http://www.w3.org/1999/xhtml"><script>a&amp;<b></script><textarea>&lt;</textarea><script>x</r>`,
	// names Object.prototype has, line endings
	`<r><constructor>x</r>`, `<r><__proto__><b/></r>`, "<r>a\r\nb\rc\u2028d</r>", "<r>\n</r\n>",
}

// xmlPieces are what random texts are cut from: tags, broken ones, text,
// entities, markup openers and closers, the odd quote.
var xmlPieces = []string{"<", ">", "/", "</", "<r>", "</r>", "<b>", "</b>", "<a x='1'>", "</a>", "<b/>", "<b y=2 z>",
	"x", " ", "\n", "&amp;", "&x;", "&#65;", "=", `"`, "'", "<!--", "-->", "<![CDATA[", "]]>", "<?", "?>", "<?p d?>",
	"<!DOCTYPE r>", ":", "<p:c xmlns:p='u'>", "</p:c>", "<R>", "</R >", "\t", "<>", "</>", "\r\n", "\r", "é", "<é>",
	"&#x1F600;", "&lt;", `<r a="1" a='2'>`, " xmlns='u'", "<q:r>", "&#0;", "<script>", "</script>",
	"<h xmlns='http://www.w3.org/1999/xhtml'>", "<constructor>", "</constructor>", "<a", " b", "/>", "<r\n>", "</r\n>"}

// TestLikeMBIsXMLDOM holds parseXMLLikeMB to Mountebank's own parser, run
// by node: the malformed table, the quick parser's seeds, and random texts
// cut from pieces of XML.
func TestLikeMBIsXMLDOM(t *testing.T) {
	if testing.Short() {
		t.Skip("compares with node's parser; skipped in -short mode")
	}
	texts := append(append([]string{}, malformedXML...), xmlSeeds...)
	seed := uint64(time.Now().UnixNano())
	t.Logf("random texts from seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 1))
	for range 3000 {
		var b strings.Builder
		for range 1 + rnd.IntN(20) {
			b.WriteString(xmlPieces[rnd.IntN(len(xmlPieces))])
		}
		texts = append(texts, b.String())
	}
	want := xmldomTrees(t, texts)
	for i, s := range texts {
		if got := likeMBTree(s); got != want[i] {
			t.Errorf("%q:\nriftgate\n%s\nmb's xmldom\n%s", s, got, want[i])
		}
	}
}

// FuzzXMLLikeMB: any text reads, without a panic, into a well-linked tree,
// which is the quick parser's whenever that one reads the text too, and
// xmldom's, asked of node for every text (but in -short mode); and the
// text repeated reads in time about linear in its length.
func FuzzXMLLikeMB(f *testing.F) {
	for _, s := range append(append([]string{}, malformedXML...), xmlSeeds...) {
		f.Add(s)
	}
	var dom *xmldomProcess
	if !testing.Short() {
		dom = startXMLDOM(f)
	}
	f.Fuzz(func(t *testing.T, s string) {
		doc, ok := parseXMLLikeMB(s)
		if ok && strings.Contains(treeText(doc), "(bad parent)") {
			t.Fatalf("%q: a node's parent is not the node above it:\n%s", s, treeText(doc))
		}
		quickAgrees(t, s)
		if s != "" && len(s) < 1<<12 {
			// A reader that rescans takes 64 times as long for eight times
			// the text, a linear one about eight: 32 sits far from both,
			// so that a loaded machine (CI under -race once took 12 times
			// as long for four times the text) does not pass for the one.
			text := func(n int) string { return strings.Repeat(s, n/len(s)+1) }
			short, long := parseTime(text(32<<10), 1), parseTime(text(256<<10), 1)
			slow := func() bool { return long > 100*time.Millisecond && long > 32*short }
			if slow() {
				short, long = parseTime(text(32<<10), 3), parseTime(text(256<<10), 3)
			}
			if slow() {
				t.Fatalf("%q repeated: %v for 32 KiB, %v for 256 KiB", s, short, long)
			}
		}
		// JSON, and so node, has no text that is not UTF-8; an empty body
		// is not parsed (ParseXML).
		if dom != nil && s != "" && utf8.ValidString(s) {
			if want := dom.tree(t, s); likeMBTree(s) != want {
				t.Fatalf("%q:\nriftgate\n%s\nmb's xmldom\n%s", s, likeMBTree(s), want)
			}
		}
	})
}

// genXMLTree draws well-formed XML: elements with attributes, text,
// entities, CDATA and comments. (Namespaces are left out: xmlquery gives an
// xmlns attribute the namespace "xmlns", xmldom the W3C's.)
func genXMLTree(t *rapid.T, depth int) string {
	name := rapid.SampledFrom([]string{"a", "b", "d-e", "é"}).Draw(t, "name")
	var b strings.Builder
	b.WriteString("<" + name)
	for i, v := range rapid.SliceOfN(rapid.SampledFrom([]string{"1", "x y", "&amp;", "&#65;", "'"}), 0, 3).Draw(t, "attrs") {
		fmt.Fprintf(&b, ` x%d="%s"`, i, v)
	}
	b.WriteString(">")
	for range rapid.IntRange(0, 3).Draw(t, "children") {
		switch k := rapid.IntRange(0, 4).Draw(t, "kind"); {
		case k == 0 && depth > 0:
			b.WriteString(genXMLTree(t, depth-1))
		case k == 1:
			b.WriteString("<![CDATA[" + rapid.SampledFrom([]string{"x", "<y>", " "}).Draw(t, "cdata") + "]]>")
		case k == 2:
			b.WriteString("<!--" + rapid.SampledFrom([]string{"c", " ", "a-b"}).Draw(t, "comment") + "-->")
		default:
			b.WriteString(rapid.SampledFrom([]string{"t", " ", "a&lt;b", "&#x1F600;", "\n"}).Draw(t, "text"))
		}
	}
	b.WriteString("</" + name + ">")
	return b.String()
}

// Well-formed XML, where there is nothing to recover from, reads into the
// tree a strict parser makes of it.
func TestLikeMBReadsWellFormedXMLAsXMLQuery(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genXMLTree(t, 3)
		want, err := xmlquery.Parse(strings.NewReader(s))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		got, ok := parseXMLLikeMB(s)
		if !ok {
			t.Fatalf("%q: read as mb's parser would throw", s)
		}
		if g, w := treeText(got), treeText(want); g != w {
			t.Fatalf("%q:\nas mb reads it\n%s\nxmlquery\n%s", s, g, w)
		}
	})
}
