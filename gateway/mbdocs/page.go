// Package mbdocs runs Mountebank's documentation as a test suite. The pages
// that the mountebank npm package ships (src/views/docs/**/*.ejs) hold
// executable examples: <testScenario> elements whose <step> elements carry a
// request (an HTTP request, a shell command, a file to write, an email) and,
// in <assertResponse>, the answer mb gives. This package reads the pages,
// runs the steps against a server, and compares the answers by mb's own
// rules: values marked <volatile> are not compared, <change to='…'> replaces
// a shown value, JSON is compared with its keys sorted, and a partial
// assertion needs only its lines, in order.
package mbdocs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/net/html"
)

// Page is one documentation page and its scenarios.
type Page struct {
	Name      string // path under the docs directory, without .ejs
	Scenarios []*Scenario
}

// Scenario is one <testScenario>: steps run in order against one server.
type Scenario struct {
	Page, Name string
	Steps      []*Step
}

// ID names the scenario in test output: page/name.
func (s *Scenario) ID() string { return s.Page + "/" + s.Name }

// Step is one <step>: a request of Type (http, exec, file, smtp, tcp) and,
// when the page asserts one, the answer expected.
type Step struct {
	Type   string
	Attrs  map[string]string // the step element's other attributes (filename, port, delete)
	Text   string            // the request, <change> applied, trimmed
	Expect *Expectation      // nil when the page asserts nothing
}

// Expectation is an <assertResponse>.
type Expectation struct {
	Text     string   // the expected answer, <change> applied, trimmed
	Volatile []string // the text of each <volatile> element, in page order
	Partial  bool     // partial='true': the expected lines need only appear, in order
}

// Vars are the values a page's EJS tags render to, as mb's web server
// renders them for the server that serves the page.
type Vars struct {
	Port    int    // <%= port %>: the admin port
	CWD     string // <%= process.cwd() %>: the server's working directory
	Version string // <%= version %>
}

// Load reads every page under dir (the npm package's src/views/docs) that
// holds a scenario, in path order.
func Load(dir string, v Vars) ([]*Page, error) {
	var pages []*Page
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".ejs") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Contains(src, []byte("<testScenario")) {
			return nil // a page without examples may use EJS the renderer lacks
		}
		rel, _ := filepath.Rel(dir, path)
		p, err := Parse(strings.TrimSuffix(filepath.ToSlash(rel), ".ejs"), src, v)
		if err != nil {
			return err
		}
		pages = append(pages, p)
		return nil
	})
	sort.Slice(pages, func(i, j int) bool { return pages[i].Name < pages[j].Name })
	return pages, err
}

// ejsTag is any EJS tag: <% code %>, <%= value %>, <%- raw %>, with -%> trimming.
var ejsTag = regexp.MustCompile(`(?s)<%([=-]?)(.*?)-?%>`)

var (
	indentCall = regexp.MustCompile(`^indent\((\d+)\)$`)
	envIf      = regexp.MustCompile(`^if \(process\.env\.(\w+) === '(\w*)'\) \{$`)
)

// render expands the EJS tags the docs use. include() pulls in the site's
// header and footer or another page, which Load reads on its own, so it
// renders to nothing; `if (process.env.X === 'v') {` blocks are kept when
// the variable has that value in the test's own environment (mb's build
// sets MB_PERSISTENT when it runs the pages with --datadir). A value or a
// statement the renderer does not know is an error, so that a new page
// cannot silently lose a step.
func render(src []byte, v Vars) ([]byte, error) {
	var out bytes.Buffer
	skip := []bool{false} // per open if-block: is its content dropped
	last := 0
	for _, loc := range ejsTag.FindAllSubmatchIndex(src, -1) {
		if !skip[len(skip)-1] {
			out.Write(src[last:loc[0]])
		}
		last = loc[1]
		kind, code := string(src[loc[2]:loc[3]]), strings.TrimSpace(string(src[loc[4]:loc[5]]))
		if kind == "" {
			switch m := envIf.FindStringSubmatch(code); {
			case m != nil:
				skip = append(skip, skip[len(skip)-1] || os.Getenv(m[1]) != m[2])
			case code == "}":
				if len(skip) == 1 {
					return nil, fmt.Errorf("unbalanced EJS block")
				}
				skip = skip[:len(skip)-1]
			case strings.Contains(code, "{") || strings.Contains(code, "}"):
				return nil, fmt.Errorf("unknown EJS statement %q", code)
			}
			continue // assignments: the page's title and description
		}
		if skip[len(skip)-1] {
			continue
		}
		switch {
		case strings.HasPrefix(code, "include("):
		case code == "port":
			fmt.Fprint(&out, v.Port)
		case code == "process.cwd()":
			out.WriteString(v.CWD)
		case code == "version":
			out.WriteString(v.Version)
		case indentCall.MatchString(code):
			n, _ := strconv.Atoi(indentCall.FindStringSubmatch(code)[1])
			out.WriteString(strings.Repeat(" ", n))
		default:
			return nil, fmt.Errorf("unknown EJS value %q", code)
		}
	}
	if len(skip) != 1 {
		return nil, fmt.Errorf("unclosed EJS block")
	}
	out.Write(src[last:])
	return out.Bytes(), nil
}

// Parse reads one page. name is how the page is reported.
func Parse(name string, src []byte, v Vars) (*Page, error) {
	rendered, err := render(src, v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	doc, err := html.Parse(bytes.NewReader(rendered))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &Page{Name: name}
	for _, ts := range elements(doc, "testscenario") {
		s := &Scenario{Page: name, Name: attr(ts, "name")}
		for _, st := range elements(ts, "step") {
			step, err := parseStep(st)
			if err != nil {
				return nil, fmt.Errorf("%s: scenario %s: %w", name, s.Name, err)
			}
			s.Steps = append(s.Steps, step)
		}
		p.Scenarios = append(p.Scenarios, s)
	}
	return p, nil
}

func parseStep(n *html.Node) (*Step, error) {
	st := &Step{Attrs: map[string]string{}}
	for _, a := range n.Attr {
		if a.Key == "type" {
			st.Type = a.Val
		} else {
			st.Attrs[a.Key] = a.Val
		}
	}
	codes := elements(n, "code")
	if len(codes) == 0 {
		return nil, fmt.Errorf("a %s step without <code>", st.Type)
	}
	st.Text = changedText(codes[0])
	if asserts := elements(n, "assertresponse"); len(asserts) > 0 {
		a := asserts[0]
		codes := elements(a, "code")
		if len(codes) == 0 {
			return nil, fmt.Errorf("an <assertResponse> without <code>")
		}
		e := &Expectation{Text: changedText(codes[0]), Partial: attr(a, "partial") == "true"}
		for _, vol := range elements(a, "volatile") {
			e.Volatile = append(e.Volatile, strings.TrimSpace(text(vol)))
		}
		st.Expect = e
	}
	return st, nil
}

// changedText is the element's text with each <change to='x'> shown as x.
func changedText(n *html.Node) string {
	for _, c := range elements(n, "change") {
		for k := c.FirstChild; k != nil; {
			next := k.NextSibling
			c.RemoveChild(k)
			k = next
		}
		c.AppendChild(&html.Node{Type: html.TextNode, Data: attr(c, "to")})
	}
	return strings.TrimSpace(text(n))
}

// elements lists the descendants of n named tag, in document order.
func elements(n *html.Node, tag string) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode && c.Data == tag {
				out = append(out, c)
			}
			walk(c)
		}
	}
	walk(n)
	return out
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// text is the DOM's textContent: every descendant text node, concatenated.
func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode {
				b.WriteString(c.Data)
			}
			walk(c)
		}
	}
	walk(n)
	return b.String()
}
