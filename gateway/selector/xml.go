package selector

import (
	"encoding/xml"
	"strings"
	"unicode/utf8"

	"github.com/antchfx/xmlquery"
)

// parseXMLQuick parses the XML that request bodies are made of (one root
// element, ASCII names without namespaces, attributes, text, CDATA,
// comments and the five predefined entities and character references)
// straight into the tree parseXMLLikeMB makes of it, several times faster.
// ok is false for anything else (a declaration or DOCTYPE, a namespace,
// another entity, a carriage return, malformed text), which
// parseXMLLikeMB then reads; TestQuickXMLIsLikeMB and FuzzQuickXML hold
// the two to the same trees, and the trees are xmlquery.Parse's.
func parseXMLQuick(s string) (*xmlquery.Node, bool) {
	if !utf8.ValidString(s) || strings.ContainsAny(s, "\r\uFFFE\uFFFF") {
		return nil, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 && s[i] != '\t' && s[i] != '\n' {
			return nil, false // encoding/xml refuses it
		}
	}
	p := xmlParser{s: s, doc: &xmlquery.Node{Type: xmlquery.DocumentNode}}
	cur := p.doc
	rootSeen := false
	for p.i < len(p.s) {
		if p.s[p.i] != '<' {
			text, ok := p.text()
			if !ok {
				return nil, false
			}
			if cur == p.doc && (!rootSeen || strings.Trim(text, " \t\n") != "") {
				return nil, false // xmlquery hangs text before the root beside the document
			}
			if len(text) >= 8 && strings.EqualFold(text[:8], "![CDATA[") {
				return nil, false // which xmlquery takes for CDATA
			}
			if cur == p.doc && p.i == len(p.s) {
				continue // mb's parser drops blank text that ends the document
			}
			if last := cur.LastChild; last != nil && last.Type == xmlquery.TextNode {
				last.Data += text // after an empty CDATA section, which makes no node
				continue
			}
			xmlquery.AddChild(cur, &xmlquery.Node{Type: xmlquery.TextNode, Data: text})
			continue
		}
		rest := p.s[p.i:]
		switch {
		case strings.HasPrefix(rest, "<!--"):
			end := strings.Index(rest[4:], "-->")
			if end < 0 || strings.Contains(rest[4:4+end], "--") || cur == p.doc && !rootSeen {
				return nil, false
			}
			xmlquery.AddChild(cur, &xmlquery.Node{Type: xmlquery.CommentNode, Data: rest[4 : 4+end]})
			p.i += 4 + end + 3
		case strings.HasPrefix(rest, "<![CDATA["):
			end := strings.Index(rest[9:], "]]>")
			if end < 0 || cur == p.doc {
				return nil, false
			}
			if end > 0 { // mb's parser makes no node of an empty section
				xmlquery.AddChild(cur, &xmlquery.Node{Type: xmlquery.CharDataNode, Data: rest[9 : 9+end]})
			}
			p.i += 9 + end + 3
		case strings.HasPrefix(rest, "</"):
			p.i += 2
			name, ok := p.name()
			if !ok || cur == p.doc || name != cur.Data {
				return nil, false
			}
			p.ws()
			if !p.eat('>') {
				return nil, false
			}
			cur = cur.Parent
		default:
			if strings.HasPrefix(rest, "<!") || strings.HasPrefix(rest, "<?") {
				return nil, false
			}
			p.i++
			name, ok := p.name()
			if !ok || cur == p.doc && rootSeen {
				return nil, false
			}
			n := &xmlquery.Node{Type: xmlquery.ElementNode, Data: name}
			if cur == p.doc {
				// xmlquery stands in the declaration a document without
				// one lacks, before its root element.
				xmlquery.AddChild(p.doc, &xmlquery.Node{Type: xmlquery.DeclarationNode, Data: "xml",
					Attr: []xmlquery.Attr{{Name: xml.Name{Local: "version"}, Value: "1.0"}}})
				rootSeen = true
			}
			empty, ok := p.attrs(n)
			if !ok {
				return nil, false
			}
			xmlquery.AddChild(cur, n)
			if !empty {
				cur = n
			}
		}
	}
	if cur != p.doc || !rootSeen {
		return nil, false
	}
	return p.doc, true
}

type xmlParser struct {
	s   string
	i   int
	doc *xmlquery.Node
}

func (p *xmlParser) ws() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n') {
		p.i++
	}
}

func (p *xmlParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// name reads an ASCII name without a colon.
func (p *xmlParser) name() (string, bool) {
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' ||
			p.i > start && ('0' <= c && c <= '9' || c == '-' || c == '.') {
			p.i++
			continue
		}
		break
	}
	return p.s[start:p.i], p.i > start
}

// attrs reads an element's attributes up to its tag's end; empty reports
// a self-closed tag.
func (p *xmlParser) attrs(n *xmlquery.Node) (empty, ok bool) {
	for {
		hadSpace := p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n')
		p.ws()
		switch {
		case p.eat('>'):
			return false, true
		case strings.HasPrefix(p.s[p.i:], "/>"):
			p.i += 2
			return true, true
		case !hadSpace:
			return false, false
		}
		name, ok := p.name()
		if !ok || strings.HasPrefix(name, "xml") {
			return false, false
		}
		for _, a := range n.Attr {
			if a.Name.Local == name {
				return false, false
			}
		}
		p.ws()
		if !p.eat('=') {
			return false, false
		}
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != '"' && p.s[p.i] != '\'' {
			return false, false
		}
		q := p.s[p.i]
		p.i++
		end := strings.IndexByte(p.s[p.i:], q)
		if end < 0 {
			return false, false
		}
		raw := p.s[p.i : p.i+end]
		p.i += end + 1
		if strings.ContainsAny(raw, "<\t\n") {
			return false, false
		}
		v, ok := unentity(raw)
		if !ok {
			return false, false
		}
		n.Attr = append(n.Attr, xmlquery.Attr{Name: xml.Name{Local: name}, Value: v})
	}
}

// text reads character data up to the next tag.
func (p *xmlParser) text() (string, bool) {
	end := strings.IndexByte(p.s[p.i:], '<')
	if end < 0 {
		end = len(p.s) - p.i
	}
	raw := p.s[p.i : p.i+end]
	p.i += end
	if strings.Contains(raw, "]]>") {
		return "", false
	}
	return unentity(raw)
}

var entities = map[string]string{"lt": "<", "gt": ">", "amp": "&", "apos": "'", "quot": `"`}

// unentity decodes the predefined entities and character references of a
// text or an attribute value; another entity is not ours to read.
func unentity(s string) (string, bool) {
	if !strings.ContainsRune(s, '&') {
		return s, true
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '&')
		if i < 0 {
			b.WriteString(s)
			return b.String(), true
		}
		b.WriteString(s[:i])
		s = s[i+1:]
		j := strings.IndexByte(s, ';')
		if j <= 0 {
			return "", false
		}
		ref := s[:j]
		s = s[j+1:]
		if v, ok := entities[ref]; ok {
			b.WriteString(v)
			continue
		}
		r, ok := charRef(ref)
		if !ok {
			return "", false
		}
		b.WriteRune(r)
	}
}

// charRef reads the number of a character reference (#65, #x41), refusing
// one encoding/xml would not take (0, a surrogate, past U+10FFFF, a
// control character).
func charRef(ref string) (rune, bool) {
	if len(ref) < 2 || ref[0] != '#' {
		return 0, false
	}
	base, digits := 10, ref[1:]
	if digits[0] == 'x' {
		base, digits = 16, digits[1:]
	}
	if digits == "" || len(digits) > 6 {
		return 0, false
	}
	var r rune
	for i := 0; i < len(digits); i++ {
		d := digitValue(digits[i], base)
		if d < 0 {
			return 0, false
		}
		r = r*rune(base) + rune(d)
	}
	if r < 0x20 || r >= 0xD800 && r <= 0xDFFF || r > 0x10FFFF || r == 0xFFFE || r == 0xFFFF {
		return 0, false
	}
	return r, true
}

// digitValue is the value of c as a digit in base 10 or 16, or -1.
func digitValue(c byte, base int) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case base == 16 && 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case base == 16 && 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
