package loadtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/theory/jsonpath"
	"github.com/valyala/fasthttp"
)

// A check is an assertion on an answered request's response, written as
//
//	SUBJECT OP [VALUE]
//
// where SUBJECT is `status`, `header NAME`, `body` or `jsonpath PATH` (RFC
// 9535, written without spaces), and OP is one of == != < <= > >= contains
// matches exists, the last three negated by a leading "!". VALUE is the rest
// of the line: a number for status, text for header and body, and JSON for
// jsonpath (anything that is not JSON is taken as a string). A header
// exists when it has a value; a body that is
// not JSON fails every jsonpath check. Checks count
// apart from errors: a request whose transport failed is an error, not a
// failed check; one that was answered and failed a check is both answered
// and a failed check.

type checkSubject uint8

const (
	subjStatus checkSubject = iota
	subjHeader
	subjBody
	subjJSONPath
)

type checkOp uint8

const (
	opEq checkOp = iota
	opNe
	opLt
	opLe
	opGt
	opGe
	opContains
	opMatches
	opExists
)

var checkOps = map[string]checkOp{"==": opEq, "!=": opNe, "<": opLt, "<=": opLe, ">": opGt, ">=": opGe,
	"contains": opContains, "matches": opMatches, "exists": opExists}

// maxChecksPerStep bounds a step's checks: a request's failures travel as
// one 64-bit mask.
const maxChecksPerStep = 64

type check struct {
	text    string
	subject checkSubject
	name    []byte         // header
	path    *jsonpath.Path // jsonpath
	op      checkOp
	neg     bool // !contains, !matches, !exists
	num     float64
	str     []byte
	re      *regexp.Regexp
	val     any // jsonpath ==, !=: the value decoded as JSON
}

// parseCheck compiles one check expression.
func parseCheck(text string) (*check, error) {
	c := &check{text: strings.TrimSpace(text)}
	fail := func(format string, a ...any) (*check, error) {
		return nil, fmt.Errorf("check %q: %s", c.text, fmt.Sprintf(format, a...))
	}
	subj, rest := cutWord(c.text)
	switch subj {
	case "status":
		c.subject = subjStatus
	case "body":
		c.subject = subjBody
	case "header":
		c.subject = subjHeader
		var name string
		name, rest = cutWord(rest)
		if !isToken(name) {
			return fail("header %q is not a header name", name)
		}
		c.name = []byte(name)
	case "jsonpath":
		c.subject = subjJSONPath
		var p string
		p, rest = cutWord(rest)
		path, err := jsonpath.Parse(p)
		if err != nil {
			return fail("%v", err)
		}
		c.path = path
	default:
		return fail("want status, header NAME, body or jsonpath PATH first, not %q", subj)
	}
	opText, value := cutWord(rest)
	op, ok := checkOps[opText]
	if !ok && strings.HasPrefix(opText, "!") {
		op, ok = checkOps[opText[1:]]
		c.neg = true
	}
	if !ok || (c.neg && op < opContains) {
		return fail("unknown operator %q (want == != < <= > >= contains matches exists, or !contains !matches !exists)", opText)
	}
	c.op = op
	switch {
	case c.subject == subjStatus && op >= opContains:
		return fail("status takes == != < <= > >=")
	case op == opExists:
		if value != "" {
			return fail("exists takes no value")
		}
		if c.subject == subjStatus || c.subject == subjBody {
			return fail("exists applies to a header or a jsonpath")
		}
	case value == "":
		return fail("%s needs a value", opText)
	case op == opMatches:
		re, err := regexp.Compile(value)
		if err != nil {
			return fail("%v", err)
		}
		c.re = re
	case op == opContains:
		c.str = []byte(value)
	case c.subject == subjStatus:
		n, err := strconv.Atoi(value)
		if err != nil || n < 100 || n > 999 {
			return fail("%q is not a status code", value)
		}
		c.num = float64(n)
	case op >= opLt && op <= opGe:
		if c.subject != subjJSONPath {
			return fail("%s compares numbers: status or jsonpath", opText)
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fail("%q is not a number", value)
		}
		c.num = n
	case c.subject == subjJSONPath:
		if err := json.Unmarshal([]byte(value), &c.val); err != nil {
			c.val = value // not JSON: a bare string
		}
	default:
		c.str = []byte(value)
	}
	return c, nil
}

// cutWord splits s at its first run of spaces.
func cutWord(s string) (word, rest string) {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		return s[:i], strings.TrimSpace(s[i+1:])
	}
	return s, ""
}

// parseChecks compiles a list of check expressions.
func parseChecks(texts []string) ([]*check, error) {
	out := make([]*check, 0, len(texts))
	for _, t := range texts {
		c, err := parseCheck(t)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// jsonDoc is a response body decoded at most once, and only when a
// jsonpath check asks for it.
type jsonDoc struct {
	decoded bool
	v       any
	err     error
}

func (d *jsonDoc) get(body []byte) (any, error) {
	if !d.decoded {
		d.decoded = true
		d.v = nil
		d.err = json.Unmarshal(body, &d.v)
	}
	return d.v, d.err
}

// eval reports whether resp passes c.
func (c *check) eval(resp *fasthttp.Response, doc *jsonDoc) bool {
	switch c.subject {
	case subjStatus:
		return compareNum(c.op, float64(resp.StatusCode()), c.num)
	case subjHeader:
		// fasthttp cannot tell an empty Content-Type from a missing one:
		// a header exists when it has a value.
		v := resp.Header.PeekBytes(c.name)
		return c.matchText(v, len(v) > 0)
	case subjBody:
		return c.matchText(resp.Body(), true)
	}
	v, err := doc.get(resp.Body())
	if err != nil {
		return false
	}
	nodes := c.path.Select(v)
	if c.op == opExists {
		return (len(nodes) > 0) != c.neg
	}
	if len(nodes) == 0 {
		return c.op == opNe || (c.neg && c.op >= opContains)
	}
	first := nodes[0]
	switch c.op {
	case opEq, opNe:
		return reflect.DeepEqual(first, c.val) == (c.op == opEq)
	case opLt, opLe, opGt, opGe:
		n, isNum := first.(float64)
		return isNum && compareNum(c.op, n, c.num)
	}
	if s, isStr := first.(string); isStr {
		return c.matchText([]byte(s), true)
	}
	text, _ := json.Marshal(first)
	return c.matchText(text, true)
}

// seen describes what resp showed c, for the report's example of a failure.
func (c *check) seen(resp *fasthttp.Response, doc *jsonDoc) string {
	switch c.subject {
	case subjStatus:
		return "status " + strconv.Itoa(resp.StatusCode())
	case subjHeader:
		v := resp.Header.PeekBytes(c.name)
		if len(v) == 0 {
			return "no " + string(c.name) + " header"
		}
		return string(c.name) + ": " + clip(v)
	case subjBody:
		return "body " + clip(resp.Body())
	}
	v, err := doc.get(resp.Body())
	if err != nil {
		return "body is not JSON: " + clip(resp.Body())
	}
	nodes := c.path.Select(v)
	if len(nodes) == 0 {
		return "nothing at " + c.path.String()
	}
	b, _ := json.Marshal(nodes[0])
	return c.path.String() + " = " + clip(b)
}

// matchText applies a text operator to v (present tells a missing header from
// an empty one).
func (c *check) matchText(v []byte, present bool) bool {
	switch c.op {
	case opExists:
		return present != c.neg
	case opEq:
		return present && bytes.Equal(v, c.str)
	case opNe:
		return !present || !bytes.Equal(v, c.str)
	case opContains:
		return (present && bytes.Contains(v, c.str)) != c.neg
	case opMatches:
		return (present && c.re.Match(v)) != c.neg
	}
	return false
}

func compareNum(op checkOp, a, b float64) bool {
	switch op {
	case opEq:
		return a == b
	case opNe:
		return a != b
	case opLt:
		return a < b
	case opLe:
		return a <= b
	case opGt:
		return a > b
	case opGe:
		return a >= b
	}
	return false
}

// clip keeps an example short enough for a report line.
func clip(b []byte) string {
	const n = 120
	if len(b) > n {
		return strconv.Quote(string(b[:n])) + "…"
	}
	return strconv.Quote(string(b))
}
