package selector

import (
	"encoding/xml"
	"math"
	"sort"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/antchfx/xmlquery"
)

// parseXMLLikeMB reads text the way Mountebank 2.9.1 reads a body for an
// xpath: with @xmldom/xmldom 0.8.10's DOMParser, whose errors mb only logs.
// That parser never refuses a text. It recovers from malformed XML in its
// own ways, and xpath sees what it made of it:
//   - an element whose end tag appears nowhere later (no "</name>", nor
//     even "</name") is closed at once, so what follows is its sibling;
//   - an end tag that is not the open element's is ignored, and an end
//     tag is read up to the '>' found from its third character on, so
//     "</>" swallows the next tag;
//   - a tag that cannot be read (a bad name, a broken attribute) is text,
//     from its '<';
//   - once the root element closes, another element cannot join the
//     document and becomes text, while text, comments and processing
//     instructions join it; text before the root is dropped unless blank;
//   - an entity other than the five predefined ones stays as written, and
//     a character reference means what JavaScript's parseInt makes of it.
//
// ok is false when that parser would throw (a CDATA section at the
// document's level, after a failed one): mb's xpath then fails, and here
// nothing is selected. The tree is xmlquery's, as parseXMLQuick and
// xmlquery.Parse build it: element names split into Prefix and Data, a
// stand-in declaration before the root when the text has none, and
// processing instructions and document types as declarations, which no
// xpath step selects, as none selects mb's.
func parseXMLLikeMB(text string) (doc *xmlquery.Node, ok bool) {
	r := domReader{src: normalizeNewlines(text), doc: &xmlquery.Node{Type: xmlquery.DocumentNode}}
	r.ns = map[string][]string{"xml": {nsXML}}
	if !r.read() {
		return nil, false
	}
	mergeText(r.doc)
	return r.doc, true
}

const (
	nsXML   = "http://www.w3.org/XML/1998/namespace"
	nsXMLNS = "http://www.w3.org/2000/xmlns/"
	nsHTML  = "http://www.w3.org/1999/xhtml"
)

// normalizeNewlines turns \r\n, \r\u0085, \r, \u0085 and \u2028 into \n, as
// the parser does before it reads.
func normalizeNewlines(s string) string {
	if !strings.ContainsAny(s, "\r\u0085\u2028") {
		return s
	}
	s = strings.NewReplacer("\r\n", "\n", "\r\u0085", "\n").Replace(s)
	return strings.NewReplacer("\r", "\n", "\u0085", "\n", "\u2028", "\n").Replace(s)
}

// domReader is one parse: the parser's reading position and the DOM
// builder's state.
type domReader struct {
	src   string
	start int // where the text not yet read begins
	doc   *xmlquery.Node
	// cur is where nodes go: nil before the root element (text is then
	// dropped unless blank), the document once the root closed.
	cur *xmlquery.Node
	// open holds the elements not yet closed, innermost last, and ns the
	// namespace bindings in force, the innermost of each prefix last; an
	// element unbinds what it bound when it closes. (A map of the bindings
	// for each element would cost a deep text its depth squared.)
	open []openElement
	ns   map[string][]string
	// cdata is set while a CDATA section is read, and stays set when one
	// fails, as the builder's flag does.
	cdata               bool
	hasRoot, hasDoctype bool
	hasDecl             bool // a processing instruction preceded the root
	closes              map[string]int
	ends                *endTags
	finds               map[string]*finder
	// The searches' answers kept for the next tag (xmldomindex.go).
	stl, eol, trim search
	units          u16Index
	head           *instructionHead
	// A start tag's readings: the states it met (readStartTag), those
	// of readings that failed, and the quotes' positions.
	path   []int
	failed []uint64
	quotes [2][]int32
	// doctypeEnds is where the markup ends from where its tokens were
	// searched for (doctypeEnd).
	doctypeEnds map[int]int
}

type openElement struct {
	name  string
	node  *xmlquery.Node
	bound []string // the prefixes it bound
}

// errHierarchy is a node the document cannot take: a second element, a
// second document type or one after the root, a CDATA section.
type hierarchyError struct{}

func (hierarchyError) Error() string { return "hierarchy request error" }

var errHierarchy error = hierarchyError{}

// read runs the parser's loop; false means it threw.
func (r *domReader) read() bool {
	for {
		lt := r.index("<", r.start)
		if lt < 0 {
			if rest := r.src[min(r.start, len(r.src)):]; !jsBlank(rest) {
				// Raw, entities and all, and always the document's.
				r.appendToDoc(&xmlquery.Node{Type: xmlquery.TextNode, Data: rest})
			}
			return true
		}
		var end int
		err := r.text(lt)
		if err == nil {
			end, err = r.tag(lt)
		}
		if err != nil {
			end = -1
		}
		if end > r.start {
			r.start = end
		} else if r.text(max(lt, r.start)+1) != nil {
			return false // thrown outside the parser's own recovery
		}
	}
}

// text hands the source up to end to the builder as characters, with
// entities replaced.
func (r *domReader) text(end int) error {
	if end <= r.start {
		return nil
	}
	s := replaceEntities(r.src[r.start:end])
	if err := r.characters(s); err != nil {
		return err
	}
	r.start = end
	return nil
}

// characters is the builder's: text (or CDATA) goes to cur, or, before
// the root, to the document when it is blank.
func (r *domReader) characters(s string) error {
	if s == "" {
		return nil
	}
	n := &xmlquery.Node{Type: xmlquery.TextNode, Data: s}
	if r.cdata {
		n.Type = xmlquery.CharDataNode
	}
	switch {
	case r.cur != nil:
		return r.append(n)
	case jsBlank(s):
		return r.appendToDoc(n)
	}
	return nil
}

// append adds n where nodes go now.
func (r *domReader) append(n *xmlquery.Node) error {
	if r.cur == nil || r.cur == r.doc {
		return r.appendToDoc(n)
	}
	xmlquery.AddChild(r.cur, n)
	return nil
}

// appendToDoc adds n to the document, if the document may take it.
func (r *domReader) appendToDoc(n *xmlquery.Node) error {
	switch n.Type {
	case xmlquery.ElementNode:
		if r.hasRoot {
			return errHierarchy
		}
		if !r.hasDecl {
			xmlquery.AddChild(r.doc, &xmlquery.Node{Type: xmlquery.DeclarationNode, Data: "xml",
				Attr: []xmlquery.Attr{{Name: xml.Name{Local: "version"}, Value: "1.0"}}})
		}
		r.hasRoot = true
	case xmlquery.CharDataNode:
		return errHierarchy
	case xmlquery.DeclarationNode:
		r.hasDecl = true
	}
	xmlquery.AddChild(r.doc, n)
	return nil
}

// tag reads the markup at lt and returns where reading goes on: after it,
// or -1 (with no error) when the parser takes its '<' for text.
func (r *domReader) tag(lt int) (int, error) {
	switch byteAt(r.src, lt+1) {
	case '/':
		return r.endTag(lt), nil
	case '?':
		return r.instruction(lt), nil
	case '!':
		return r.declaration(lt)
	}
	return r.startTag(lt)
}

// endTag closes the open element when the tag names it (ignoring case),
// and otherwise reads past the tag and ignores it. It returns where
// reading goes on.
//
// The tag is read up to the next '>', which many end tags may share, and
// where the parser cuts its name short (the tag has no '>', or its name
// runs into another tag) the name is all that follows the cut's line, up
// to that '>' or the text's end: so nothing here is read twice for two
// tags, but found with the reader's searches and counted with its index
// of UTF-16 offsets.
func (r *domReader) endTag(lt int) int {
	from := min(lt+2, len(r.src))
	end := r.index(">", lt+3)
	nameEnd := len(r.src)
	if end >= 0 {
		nameEnd = r.trimEnd(from, end)
		if r.spaceThenLT(from) >= nameEnd {
			r.closeTop(r.src[from:nameEnd], "")
			return end + 1
		}
	}
	// The name is src[from:cut] and, when the cut's line ends before
	// nameEnd, src[line:nameEnd] after it.
	cut, size := r.spaceOrLT(from, nameEnd)
	head, tail := r.src[from:cut], ""
	if cut < nameEnd {
		if line := r.lineEnd(cut + size); line < nameEnd {
			tail = r.src[line:nameEnd]
		}
	}
	r.closeTop(head, tail)
	return r.advance16(lt+1, r.utf16(from, cut)+r.utf16(nameEnd-len(tail), nameEnd)+1)
}

// closeTop closes the open element if head+tail names it.
func (r *domReader) closeTop(head, tail string) {
	n := len(r.open)
	if n == 0 {
		return
	}
	top := r.open[n-1]
	// A rune lowers to one rune, of one to four bytes: a name more than
	// four times as long cannot be the element's.
	if len(head)+len(tail) > 4*len(top.name) {
		return
	}
	name := head + tail
	if top.name == name || jsLower(top.name) == jsLower(name) {
		r.open = r.open[:n-1]
		r.unbind(top.bound)
		r.endElement(top.node)
	}
}

// endElement makes the closed element's parent where nodes go.
func (r *domReader) endElement(n *xmlquery.Node) {
	r.cur = n.Parent
	if r.cur == nil { // not joined to the document: cannot happen
		r.cur = r.doc
	}
}

// instruction reads a processing instruction, with the parser's reading of
// one that never ends: the text before it, when that starts with "<?".
func (r *domReader) instruction(lt int) int {
	end := r.index("?>", lt)
	var target, data string
	var attrs []xmlquery.Attr
	if end >= 0 {
		if end < lt+2 { // "<?>": the text before the "?>" is not "<?"
			return -1
		}
		target, data = splitInstruction(r.src[lt+2 : end])
		if target == "xml" {
			attrs = declarationAttrs(data)
		}
	} else {
		// JavaScript's substring(lt, -1): every such instruction reads
		// the text from its start, so its target, and its pseudo-
		// attributes, are found once.
		if !strings.HasPrefix(r.src[:lt], "<?") {
			return -1
		}
		if r.head == nil {
			r.head = newInstructionHead(r.src)
		}
		target, data = r.head.split(r.src, lt)
		if target == "xml" && data != "" {
			attrs = r.headDeclarationAttrs(r.head.dataStart, r.head.dataStart+len(data))
		}
	}
	n := &xmlquery.Node{Type: xmlquery.DeclarationNode, Data: target, ProcInst: &xmlquery.ProcInstData{Target: target, Inst: data}, Attr: attrs}
	if r.cur == nil || r.cur == r.doc {
		_ = r.appendToDoc(n)
	} else {
		xmlquery.AddChild(r.cur, n)
	}
	return end + 2
}

// instructionHead is where the target of an instruction read from the
// text's start ends, and its data starts.
type instructionHead struct{ targetEnd, dataStart int }

func newInstructionHead(s string) *instructionHead {
	i := 2
	for i < len(s) {
		c, size := utf8.DecodeRuneInString(s[i:])
		if jsSpace(c) {
			break
		}
		i += size
	}
	j := i
	for j < len(s) {
		c, size := utf8.DecodeRuneInString(s[j:])
		if !jsSpace(c) {
			break
		}
		j += size
	}
	return &instructionHead{i, j}
}

// split is splitInstruction(s[2:end]).
func (h *instructionHead) split(s string, end int) (target, data string) {
	if h.targetEnd >= end {
		return s[2:end], ""
	}
	if h.dataStart >= end {
		return s[2:h.targetEnd], ""
	}
	return s[2:h.targetEnd], strings.TrimRightFunc(s[h.dataStart:end], jsSpace)
}

// splitInstruction splits what follows "<?" as the parser's
// /^<\?(\S*)\s*([\s\S]*?)\s*$/ does.
func splitInstruction(s string) (target, data string) {
	i := 0
	for i < len(s) {
		c, size := utf8.DecodeRuneInString(s[i:])
		if jsSpace(c) {
			break
		}
		i += size
	}
	return s[:i], strings.TrimFunc(s[i:], jsSpace)
}

// declarationAttrs reads an xml declaration's pseudo-attributes, as
// xmlquery keeps them.
func declarationAttrs(data string) []xmlquery.Attr {
	var out []xmlquery.Attr
	for _, f := range []string{"version", "encoding", "standalone"} {
		i := strings.Index(data, f+"=")
		if i < 0 || len(data) < i+len(f)+2 {
			continue
		}
		v := data[i+len(f)+1:]
		q := v[0]
		if q != '"' && q != '\'' {
			continue
		}
		if j := strings.IndexByte(v[1:], q); j >= 0 {
			out = append(out, xmlquery.Attr{Name: xml.Name{Local: f}, Value: v[1 : 1+j]})
		}
	}
	return out
}

// headDeclarationAttrs is declarationAttrs(src[from:to]), for the data
// of instructions that all start at from.
func (r *domReader) headDeclarationAttrs(from, to int) []xmlquery.Attr {
	var out []xmlquery.Attr
	for _, f := range [...]string{"version=", "encoding=", "standalone="} {
		i := r.index(f, from)
		if i < 0 || i+len(f) >= to {
			continue
		}
		q := rune(r.src[i+len(f)])
		if q != '"' && q != '\'' {
			continue
		}
		if j := r.nextQuote(q, i+len(f)+1); j >= 0 && j < to {
			out = append(out, xmlquery.Attr{Name: xml.Name{Local: f[:len(f)-1]}, Value: r.src[i+len(f)+1 : j]})
		}
	}
	return out
}

// declaration reads what starts "<!": a comment, a CDATA section, or a
// document type.
func (r *domReader) declaration(lt int) (int, error) {
	if byteAt(r.src, lt+2) == '-' {
		if byteAt(r.src, lt+3) != '-' {
			return -1, nil
		}
		end := r.index("-->", lt+4)
		if end < 0 {
			return -1, nil
		}
		n := &xmlquery.Node{Type: xmlquery.CommentNode, Data: r.src[lt+4 : end]}
		if err := r.append(n); err != nil {
			return 0, err
		}
		return end + 3, nil
	}
	if strings.HasPrefix(r.src[min(lt+3, len(r.src)):], "CDATA[") { // whatever is at lt+2
		end := r.index("]]>", lt+9)
		r.cdata = true
		if end >= 0 {
			if err := r.characters(r.src[lt+9 : end]); err != nil {
				return 0, err // the flag stays set
			}
		}
		r.cdata = false
		return end + 3, nil
	}
	return r.doctype(lt)
}

// doctype reads a document type as the parser splits it into tokens. The
// document can hold only one, and only before its root.
func (r *domReader) doctype(lt int) (int, error) {
	docLevel := r.cur == nil || r.cur == r.doc
	if docLevel && (r.hasDoctype || r.hasRoot) {
		return 0, errHierarchy // whatever the tokens are
	}
	// The first token is a name from the '!'; the parser goes on
	// only if it says doctype, however the markup ends.
	first := lt + 1
	for first < len(r.src) {
		c, size := utf8.DecodeRuneInString(r.src[first:])
		if jsSpace(c) || c == '<' || c == '>' || c == '/' || c == '=' {
			break
		}
		first += size
	}
	if !containsFoldASCII(r.src[lt+1:first], "!doctype") {
		return -1, nil
	}
	end := r.doctypeEnd(lt + 1)
	if end < 0 {
		return 0, errHierarchy // the parser fails on its missing tokens
	}
	// A node no xpath step selects, which keeps the texts either side of
	// it apart, as the document type node does.
	n := &xmlquery.Node{Type: xmlquery.DeclarationNode, Data: "!DOCTYPE"}
	if docLevel {
		r.hasDoctype = true
		xmlquery.AddChild(r.doc, n)
	} else {
		xmlquery.AddChild(r.cur, n)
	}
	return end, nil
}

// doctypeEnd is where the markup whose tokens are searched for from i
// ends, after the token that ends it, or -1 when none does. The parser
// splits the text from every "<!doctype" it meets, also those inside
// another's quotes, and its splits meet: where one met a token that
// another met, the two end alike (r.doctypeEnds).
func (r *domReader) doctypeEnd(i int) int {
	r.path = r.path[:0]
	end := -1
	for {
		if e, ok := r.doctypeEnds[i]; ok {
			end = e
			break
		}
		r.path = append(r.path, i)
		j, n, ends := nextDoctypeToken(r.src, i)
		if j < 0 {
			break
		}
		if e, ok := r.doctypeEnds[j]; ok && j != i { // met after the spaces
			end = e
			break
		}
		r.path = append(r.path, j)
		if ends {
			end = j + n
			break
		}
		i = j + n
	}
	if r.doctypeEnds == nil {
		r.doctypeEnds = map[int]int{}
	}
	for _, k := range r.path {
		r.doctypeEnds[k] = end
	}
	return end
}

// nextDoctypeToken finds the token at or after i: its start and length,
// and whether it ends the markup; j is -1 when there is none.
func nextDoctypeToken(s string, i int) (j, n int, ends bool) {
	for j = i; j < len(s); j++ {
		switch c := s[j]; c {
		case '\'', '"':
			if k := strings.IndexByte(s[j+1:], c); k > 0 {
				return j, k + 2, false
			}
			// A lone quote starts a name.
		case '<':
			return j, 1, true
		case '>':
			return j, 1, true
		case '/':
			k := j + 1
			for k < len(s) {
				c, size := utf8.DecodeRuneInString(s[k:])
				if !jsSpace(c) {
					break
				}
				k += size
			}
			if k < len(s) && s[k] == '>' {
				return j, k + 1 - j, true
			}
			continue
		case '=':
			continue
		}
		c, _ := utf8.DecodeRuneInString(s[j:])
		if jsSpace(c) {
			continue
		}
		// A name: up to a space or one of <>/=, then perhaps one '='.
		k := j
		for k < len(s) {
			c, size := utf8.DecodeRuneInString(s[k:])
			if jsSpace(c) || c == '<' || c == '>' || c == '/' || c == '=' {
				break
			}
			k += size
		}
		if k < len(s) && s[k] == '=' {
			k++
		}
		return j, k - j, false
	}
	return -1, 0, false
}

// startTag reads a start tag and its attributes, and opens (or, when it is
// closed, adds) the element.
func (r *domReader) startTag(lt int) (int, error) {
	if r.hasRoot && r.cur == r.doc {
		// The document cannot take another element: whatever the tag
		// is, its '<' is text.
		return -1, nil
	}
	t, end, err := r.readStartTag(lt)
	if err != nil {
		return 0, err
	}
	for i := range t.attrs { // made once the tag is read, not at every reading
		t.attrs[i].value = replaceEntities(spacesForBreaks(t.attrs[i].value))
	}
	if !t.closed && r.unclosed(end, t.name) {
		t.closed = true
	}
	n, bound := r.element(t)
	if err := r.append(n); err != nil {
		r.unbind(bound)
		return 0, err
	}
	r.cur = n
	if t.closed {
		r.unbind(bound)
		r.endElement(n)
		return end + 1, nil
	}
	r.open = append(r.open, openElement{t.name, n, bound})
	if n.NamespaceURI == nsHTML {
		return r.htmlContent(end, t.name)
	}
	return end + 1, nil
}

// unclosed reports whether the element whose start tag ends at end has no
// end tag after it: the parser looks for the last "</name>" in the whole
// text, else the last "</name" (once per name), and closes the element at
// once when that lies before its tag's end.
func (r *domReader) unclosed(end int, name string) bool {
	if objectPrototype[name] {
		// The parser's cache is a plain object, where these names find a
		// function, which is never below a number.
		return false
	}
	pos, ok := r.closes[name]
	if !ok {
		if r.ends == nil {
			r.ends = indexEndTags(r.src)
		}
		pos = r.ends.last(name, true)
		if pos < end {
			pos = r.ends.last(name, false)
		}
		if r.closes == nil {
			r.closes = map[string]int{}
		}
		r.closes[name] = pos
	}
	return pos < end
}

// objectPrototype holds the names of Object.prototype's properties.
var objectPrototype = map[string]bool{
	"__proto__": true, "constructor": true, "hasOwnProperty": true, "isPrototypeOf": true,
	"propertyIsEnumerable": true, "toLocaleString": true, "toString": true, "valueOf": true,
	"__defineGetter__": true, "__defineSetter__": true, "__lookupGetter__": true, "__lookupSetter__": true,
}

// element makes the element node of t, resolving its namespaces, and
// returns the prefixes it bound, for unbind when it closes.
func (r *domReader) element(t *startTag) (*xmlquery.Node, []string) {
	var bound []string
	// Bound last to first, so that the first of a prefix's bindings in
	// a tag is the one in force, as the parser binds them.
	for i := len(t.attrs) - 1; i >= 0; i-- {
		a := &t.attrs[i]
		if prefix, local, isDecl := a.split(); isDecl {
			decl := local // xmlns:p binds p
			if prefix == "" {
				decl = "" // xmlns binds the default namespace
			}
			r.ns[decl] = append(r.ns[decl], a.value)
			bound = append(bound, decl)
		}
	}
	n := &xmlquery.Node{Type: xmlquery.ElementNode}
	var index map[xml.Name]int // for a tag of many attributes
	if len(t.attrs) > 8 {
		index = map[xml.Name]int{} // sized by the names it meets: a hostile tag repeats one
	}
	for i := range t.attrs {
		a := &t.attrs[i]
		// Read once the tag's own bindings are in force, as the parser
		// resolves them.
		prefix, local, isDecl := a.split()
		uri := ""
		switch {
		case isDecl:
			uri = nsXMLNS
		case prefix != "":
			uri = r.uri(prefix)
		}
		attr := xmlquery.Attr{Name: xml.Name{Space: prefix, Local: local}, Value: a.value, NamespaceURI: uri}
		// A repeated name keeps its place and takes the later value.
		j := -1
		if index != nil {
			if k, ok := index[attr.Name]; ok {
				j = k
			}
		} else {
			for k := range n.Attr {
				if n.Attr[k].Name == attr.Name {
					j = k
				}
			}
		}
		if j >= 0 {
			n.Attr[j] = attr
			continue
		}
		if index != nil {
			index[attr.Name] = len(n.Attr)
		}
		n.Attr = append(n.Attr, attr)
	}
	if prefix, local, ok := strings.Cut(t.name, ":"); ok {
		n.Prefix, n.Data, n.NamespaceURI = prefix, local, r.uri(prefix)
	} else {
		n.Data, n.NamespaceURI = t.name, r.uri("")
	}
	return n, bound
}

// uri is the namespace bound to prefix, or "".
func (r *domReader) uri(prefix string) string {
	if b := r.ns[prefix]; len(b) > 0 {
		return b[len(b)-1]
	}
	return ""
}

// unbind undoes an element's bindings.
func (r *domReader) unbind(bound []string) {
	for _, p := range bound {
		b := r.ns[p]
		r.ns[p] = b[:len(b)-1]
	}
}

// htmlContent reads the text of an XHTML script or textarea element as
// the parser does: raw up to its end tag when it holds '&' or '<'.
func (r *domReader) htmlContent(end int, name string) (int, error) {
	lower := strings.ToLower(name)
	if lower != "script" && lower != "textarea" {
		return end + 1, nil
	}
	close := r.index("</"+name+">", end)
	var text string
	if close < 0 {
		text = r.src[:min(end+1, len(r.src))] // JavaScript's substring(end+1, -1)
	} else {
		text = r.src[min(end+1, close):close]
	}
	if !strings.ContainsAny(text, "&<") {
		return end + 1, nil
	}
	if lower == "textarea" {
		text = replaceEntities(text)
	}
	if err := r.characters(text); err != nil {
		return 0, err
	}
	return close, nil
}

// index is strings.Index(r.src[from:], s)+from, or -1, remembering failed
// searches: text that keeps failing to find what ends its markup would
// otherwise be searched to its end again and again.
func (r *domReader) index(s string, from int) int {
	if r.finds == nil {
		r.finds = map[string]*finder{}
	}
	f := r.finds[s]
	if f == nil {
		f = &finder{from: -1}
		r.finds[s] = f
	}
	return f.index(r.src, s, max(from, 0))
}

// finder answers searches for one string, reusing the last answer when a
// search starts between the last one's start and what it found.
type finder struct{ from, found int }

func (f *finder) index(src, s string, from int) int {
	if from > len(src) {
		return -1
	}
	if f.from >= 0 && from >= f.from && (f.found < 0 || from <= f.found) {
		return f.found
	}
	f.from, f.found = from, strings.Index(src[from:], s)
	if f.found >= 0 {
		f.found += from
	}
	return f.found
}

// startTag is a start tag as read: its name, attributes in order, and
// whether it closed itself.
type startTag struct {
	name   string
	attrs  []tagAttr
	closed bool
}

type tagAttr struct{ qname, value string }

// split is a's prefix and local name; isDecl reports an xmlns binding.
func (a *tagAttr) split() (prefix, local string, isDecl bool) {
	prefix, local, hasPrefix := strings.Cut(a.qname, ":")
	if !hasPrefix {
		return "", a.qname, a.qname == "xmlns"
	}
	return prefix, local, prefix == "xmlns"
}

// The states of readStartTag, the parser's.
const (
	stName      = iota // reading the tag's name
	stAttr             // reading an attribute's name
	stAttrSpace        // after an attribute's name and a space
	stEq               // after '='
	stBareValue        // reading an unquoted value
	stAttrEnd          // after a quoted value
	stSpace            // after the name or a value, and a space
	stClosed           // after '/'
)

// readStartTag reads the start tag at lt as the parser's state machine
// does, and returns where it ends (its '>', or the text's end); an error is
// a tag the parser cannot read, whose '<' is then text.
//
// The parser reads the next '<' on as a tag then, and its reading can
// meet this one's: from a state in which nothing read before matters
// (after a space, a quoted value or a '/'), at a character that is not a
// space, it fails where this one failed. Those meetings are marked
// (r.failed), and a name is given up on at its first character that no
// name has, so that no text is read as tags more than a few times over.
func (r *domReader) readStartTag(lt int) (*startTag, int, error) {
	s := r.src
	t := &startTag{}
	start := lt + 1
	st := stName
	var attrName string
	r.path = r.path[:0]
	fail := func() (*startTag, int, error) {
		r.markFailed()
		return nil, 0, errBadTag
	}
	add := func(qname, value string) bool {
		if !isXMLName(qname) {
			return false
		}
		t.attrs = append(t.attrs, tagAttr{qname: qname, value: value})
		return true
	}
	setName := func(name string) bool {
		if !isXMLName(name) {
			return false
		}
		t.name = name
		return true
	}
	for p := start; ; {
		if p >= len(s) {
			if st == stName && !setName(s[start:p]) {
				return fail()
			}
			return t, p, nil
		}
		c, size := utf8.DecodeRuneInString(s[p:])
		space := c == '\u0080' || c <= ' '
		if !space && (st == stSpace || st == stAttrEnd || st == stClosed) && r.meets(p, st) {
			return fail()
		}
		switch c {
		case '=':
			switch st {
			case stAttr:
				attrName, st = s[start:p], stEq
			case stAttrSpace:
				st = stEq
			default:
				return fail()
			}
		case '\'', '"':
			switch st {
			case stEq, stAttr:
				if st == stAttr {
					attrName = s[start:p]
				}
				start = p + 1
				q := r.nextQuote(c, start)
				if q < 0 || !add(attrName, s[start:q]) {
					return fail()
				}
				p, st = q, stAttrEnd
			case stBareValue:
				if !add(attrName, s[start:p]) {
					return fail()
				}
				start, st = p+1, stAttrEnd
			default:
				return fail()
			}
		case '/':
			switch st {
			case stName:
				if !setName(s[start:p]) {
					return fail()
				}
				st, t.closed = stClosed, true
			case stAttrEnd, stSpace, stClosed:
				st, t.closed = stClosed, true
			case stBareValue, stAttr: // part of the name or value
			case stAttrSpace:
				t.closed = true
			default:
				return fail()
			}
		case '>':
			switch st {
			case stName:
				if !setName(s[start:p]) {
					return fail()
				}
			case stBareValue, stAttr, stAttrSpace:
				value := s[start:p]
				if st != stAttrSpace && strings.HasSuffix(value, "/") {
					t.closed, value = true, value[:len(value)-1]
				}
				var ok bool
				switch st {
				case stBareValue:
					ok = add(attrName, value)
				case stAttrSpace:
					ok = add(attrName, attrName)
				default:
					ok = add(value, value)
				}
				if !ok {
					return fail()
				}
			case stEq:
				return fail()
			}
			return t, p, nil
		default:
			switch {
			case space:
				switch st {
				case stName:
					if !setName(s[start:p]) {
						return fail()
					}
					st = stSpace
				case stAttr:
					attrName, st = s[start:p], stAttrSpace
				case stBareValue:
					if !add(attrName, s[start:p]) {
						return fail()
					}
					st = stSpace
				case stAttrEnd:
					st = stSpace
				}
			case st == stName:
				if c != ':' && !isNameChar(c) {
					return fail() // no name has it
				}
			default:
				switch st {
				case stAttrSpace:
					if !add(attrName, attrName) {
						return fail()
					}
					start, st = p, stAttr
				case stAttrEnd, stSpace:
					start, st = p, stAttr
				case stEq:
					start, st = p, stBareValue
				case stClosed:
					return fail()
				}
			}
		}
		p += size
	}
}

// spacesForBreaks is value.replace(/[\t\n\r]/g, ' ').
func spacesForBreaks(s string) string {
	if !strings.ContainsAny(s, "\t\n\r") {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if c == '\t' || c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}

// meets reports whether a reading in state st at p meets one that
// failed, and marks the meeting for when this reading fails.
func (r *domReader) meets(p, st int) bool {
	k := 3*p + st - stAttrEnd
	if r.failed != nil && r.failed[k/64]&(1<<(k%64)) != 0 {
		return true
	}
	r.path = append(r.path, k)
	return false
}

// markFailed marks the meetings of a reading that failed.
func (r *domReader) markFailed() {
	if len(r.path) == 0 {
		return
	}
	if r.failed == nil {
		r.failed = make([]uint64, (3*len(r.src)+3)/64+1)
	}
	for _, k := range r.path {
		r.failed[k/64] |= 1 << (k % 64)
	}
}

// nextQuote is the first q at or after from, or -1.
func (r *domReader) nextQuote(q rune, from int) int {
	i := 0
	if q == '"' {
		i = 1
	}
	at := r.quotes[i]
	if at == nil {
		at = []int32{}
		for j := 0; ; {
			k := strings.IndexByte(r.src[j:], byte(q))
			if k < 0 {
				break
			}
			at = append(at, int32(j+k))
			j += k + 1
		}
		r.quotes[i] = at
	}
	n := sort.Search(len(at), func(n int) bool { return int(at[n]) >= from })
	if n == len(at) {
		return -1
	}
	return int(at[n])
}

type badTagError struct{}

func (badTagError) Error() string { return "unreadable tag" }

var errBadTag error = badTagError{}

// endTags indexes every "</" of a text by the name after it (the longest
// run of name characters, colons included), so that the last "</name>"
// and the last "</name" of any name are found without searching the whole
// text for each: a malformed body with many names would otherwise cost
// its length squared.
type endTags struct {
	exact map[string]int // name -> last "</name>"
	names []string       // every name, sorted
	tree  []int          // a max segment tree over the names' last positions
}

func indexEndTags(s string) *endTags {
	e := &endTags{exact: map[string]int{}}
	last := map[string]int{}
	for i := 0; ; {
		j := strings.Index(s[i:], "</")
		if j < 0 {
			break
		}
		at := i + j
		k := at + 2
		for k < len(s) {
			c, size := utf8.DecodeRuneInString(s[k:])
			if c != ':' && !isNameChar(c) {
				break
			}
			k += size
		}
		name := s[at+2 : k]
		last[name] = at
		if k < len(s) && s[k] == '>' {
			e.exact[name] = at
		}
		i = at + 2
	}
	for n := range last {
		e.names = append(e.names, n)
	}
	sort.Strings(e.names)
	size := len(e.names)
	e.tree = make([]int, 2*size)
	for i, n := range e.names {
		e.tree[size+i] = last[n]
	}
	for i := size - 1; i > 0; i-- {
		e.tree[i] = max(e.tree[2*i], e.tree[2*i+1])
	}
	return e
}

// last is the last "</name>" (exact) or "</name" followed by anything
// (every indexed name that starts with name), or -1.
func (e *endTags) last(name string, exact bool) int {
	if exact {
		if p, ok := e.exact[name]; ok {
			return p
		}
		return -1
	}
	lo := sort.SearchStrings(e.names, name)
	hi := lo + sort.Search(len(e.names)-lo, func(i int) bool { return !strings.HasPrefix(e.names[lo+i], name) })
	best := -1
	size := len(e.names)
	for l, h := lo+size, hi+size; l < h; l, h = l/2, h/2 {
		if l&1 == 1 {
			best = max(best, e.tree[l])
			l++
		}
		if h&1 == 1 {
			h--
			best = max(best, e.tree[h])
		}
	}
	return best
}

// isXMLName is the parser's test of a tag or attribute name: a name, with
// at most one colon between two names.
func isXMLName(s string) bool {
	a, b, colon := strings.Cut(s, ":")
	return isPlainName(a) && (!colon || isPlainName(b))
}

func isPlainName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if i == 0 && !isNameStart(c) || !isNameChar(c) {
			return false
		}
	}
	return true
}

// isNameStart is the parser's name start character class, which, being a
// JavaScript pattern over UTF-16, holds nothing beyond U+FFFF.
func isNameStart(c rune) bool {
	switch {
	case 'A' <= c && c <= 'Z', c == '_', 'a' <= c && c <= 'z':
		return true
	case c < 0xC0:
		return false
	}
	for _, rg := range nameStartRanges {
		if rg[0] <= c && c <= rg[1] {
			return true
		}
	}
	return false
}

var nameStartRanges = [][2]rune{
	{0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x2FF}, {0x370, 0x37D}, {0x37F, 0x1FFF}, {0x200C, 0x200D},
	{0x2070, 0x218F}, {0x2C00, 0x2FEF}, {0x3001, 0xD7FF}, {0xF900, 0xFDCF}, {0xFDF0, 0xFFFD},
}

func isNameChar(c rune) bool {
	return isNameStart(c) || c == '-' || c == '.' || '0' <= c && c <= '9' || c == 0xB7 ||
		0x300 <= c && c <= 0x36F || 0x203F <= c && c <= 0x2040
}

// replaceEntities replaces what the parser's /&#?\w+;/g finds: the five
// predefined entities and character references; any other stays.
func replaceEntities(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '&')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		j := i + 1
		if j < len(s) && s[j] == '#' {
			j++
		}
		k := j
		for k < len(s) && isWordByte(s[k]) {
			k++
		}
		if k == j || k >= len(s) || s[k] != ';' {
			b.WriteByte('&')
			s = s[i+1:]
			continue
		}
		ref := s[i+1 : k]
		if v, ok := predefined[ref]; ok {
			b.WriteString(v)
		} else if ref[0] == '#' {
			b.WriteString(fromCharCode(jsParseInt(strings.Replace(ref[1:], "x", "0x", 1))))
		} else {
			b.WriteString(s[i : k+1])
		}
		s = s[k+1:]
	}
}

var predefined = map[string]string{"amp": "&", "apos": "'", "gt": ">", "lt": "<", "quot": `"`}

func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

// jsParseInt is JavaScript's parseInt of a string of word characters:
// hexadecimal after "0x", else decimal, up to the first character that is
// not a digit; NaN when there is none.
func jsParseInt(s string) float64 {
	base := 10
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		base, s = 16, s[2:]
	}
	n, digits := 0.0, 0
	for ; digits < len(s); digits++ {
		d := digitValue(s[digits], base)
		if d < 0 {
			break
		}
		n = n*float64(base) + float64(d)
	}
	if digits == 0 {
		return math.NaN()
	}
	return n
}

// fromCharCode is the parser's character of a code: a surrogate pair
// above U+FFFF, worked out in 32-bit integers; String.fromCharCode keeps 16
// bits of each unit. A lone surrogate becomes U+FFFD.
func fromCharCode(code float64) string {
	var units []uint16
	if code > 0xffff {
		c := toInt32(code - 0x10000)
		units = []uint16{uint16(0xd800 + c>>10), uint16(0xdc00 + c&0x3ff)}
	} else {
		units = []uint16{uint16(toInt32(code))}
	}
	return string(utf16.Decode(units))
}

// toInt32 is JavaScript's ToInt32.
func toInt32(f float64) int32 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return int32(uint32(int64(math.Mod(math.Trunc(f), 1<<32))))
}

// mergeText joins adjacent text nodes, as the builder's normalize does at
// the end (CDATA sections stay apart).
func mergeText(n *xmlquery.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == xmlquery.TextNode && c.NextSibling != nil && c.NextSibling.Type == xmlquery.TextNode {
			var b strings.Builder
			b.WriteString(c.Data)
			for next := c.NextSibling; next != nil && next.Type == xmlquery.TextNode; next = c.NextSibling {
				b.WriteString(next.Data)
				xmlquery.RemoveFromTree(next)
			}
			c.Data = b.String()
		}
		mergeText(c)
	}
}

// jsSpace is JavaScript's \s.
func jsSpace(c rune) bool {
	switch c {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return 0x2000 <= c && c <= 0x200A
}

func jsBlank(s string) bool {
	for _, c := range s {
		if !jsSpace(c) {
			return false
		}
	}
	return true
}

// containsFoldASCII is /sub/i.test(s) for a lower-case ASCII sub.
func containsFoldASCII(s, sub string) bool {
	lower := func(c byte) byte {
		if 'A' <= c && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	for i := 0; i+len(sub) <= len(s); i++ {
		j := 0
		for j < len(sub) && lower(s[i+j]) == sub[j] {
			j++
		}
		if j == len(sub) {
			return true
		}
	}
	return false
}

// jsLower is JavaScript's toLowerCase, close enough for tag names.
func jsLower(s string) string { return strings.ToLower(s) }

func byteAt(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}
