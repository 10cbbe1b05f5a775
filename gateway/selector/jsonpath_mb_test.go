package selector_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/selector"
	"pgregory.net/rapid"
)

// oracleJS selects as mb's models/jsonpath.js does, with the jsonpath-plus
// mb 2.9.1 installed: a line {expr, text} in, the selection's JSON (or
// "undefined") out.
const oracleJS = `
const { JSONPath } = require(process.argv[1]);
const rl = require('readline').createInterface({ input: process.stdin });
rl.on('line', line => {
	const q = JSON.parse(line);
	let out = 'undefined';
	try {
		const r = JSONPath(q.expr, JSON.parse(q.text));
		if (r.length > 0) { out = JSON.stringify(r); }
	} catch (e) { /* mb answers undefined */ }
	process.stdout.write(out + '\n');
});`

// oracle is a node process running jsonpath-plus.
type oracle struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startOracle(t testing.TB) *oracle {
	t.Helper()
	mods := filepath.Dir(filepath.Dir(gatewaytest.Mountebank(t))) // node_modules
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node runs mb, and is missing: %v", err)
	}
	cmd := exec.Command(node, "-e", oracleJS, filepath.Join(mods, "jsonpath-plus"))
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := &oracle{cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		_ = in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return o
}

// ask answers mb's selection, normalized by canon.
func (o *oracle) ask(t testing.TB, expr, text string) string {
	t.Helper()
	q, _ := json.Marshal(map[string]string{"expr": expr, "text": text})
	if _, err := o.in.Write(append(q, '\n')); err != nil {
		t.Fatal(err)
	}
	line, err := o.out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return canon(strings.TrimSpace(line))
}

// canon renders a JSON selection with sorted keys, so that the two sides
// compare by value and result order only.
func canon(s string) string {
	if s == "undefined" {
		return s
	}
	v, err := message.DecodeJS([]byte(s))
	if err != nil {
		return "unparsable " + s
	}
	return string(message.EncodeJS(v, "", true))
}

func ours(expr, text string) string {
	p, err := selector.CompileJSONPath(expr)
	if err != nil {
		return "compile error " + err.Error()
	}
	got := p.SelectText(text)
	if got == nil {
		return "undefined"
	}
	b, err := json.Marshal(got)
	if err != nil {
		return "unmarshalable"
	}
	return canon(string(b))
}

const mbBook = `{"identities":[{"name":"a","career":"actor"},{"name":"b","career":"banker"},{"name":"c","career":"clown"}],
"store":{"book":[{"category":"ref","author":"Rees","title":"Sayings","price":8.95},
{"category":"fiction","author":"Waugh","title":"Sword","price":12.99,"isbn":"0-553"},
{"category":"fiction","author":"Tolkien","title":"Rings","price":22.99,"isbn":"0-395","tags":["x","y"]}],
"bicycle":{"color":"red","price":19.95},"2":"two","10":"ten","b":null,"z":0,"t":true},"name":"héllo😀"}`

// TestJSONPathAsMountebank compares riftgate's selections with
// jsonpath-plus's, as mb 2.9.1 runs it, on the expressions of its
// documentation, the Mountebank book, and the corners of its dialect.
func TestJSONPathAsMountebank(t *testing.T) {
	o := startOracle(t)
	exprs := []string{
		"$.identities[(@.length-1)].career", "$.identities[(@.length-2)]", "$.identities[?(@.name == 'b')].career",
		"$..book[?(@.price < 10)].title", "$..book[?(@.isbn)].author", "$..book[?(@.price > 10 && @.category === 'fiction')]",
		"$.store.book[*].author", "$..author", "$.store.*", "$.store..price", "$..book[2]", "$..book[-1:]", "$..book[-1]",
		"$..book[0,1].title", "$..book[:2]", "$..book[::2].title", "$..book[1:0]", "$..book[0:0]", "$..book[-5:]",
		"$..*", "$..[0]", "$.store", "$", "store.bicycle.color", "identities[0].name", "$['store']['bicycle']",
		"$[store][bicycle][color]", "$.store['2']", "$.store[2]", "$.store.10", "$.store.b", "$.store.z", "$.store.t",
		"$.name.length", "$.name[1]", "$.name[6]", "$.identities.length", "$.store.*~", "$.store.book[*]~",
		"$..book[0]^", "$..color^", "$..price^^", "$..*@string()", "$..*@number()", "$..*@integer()", "$..*@boolean()",
		"$..*@null()", "$..*@object()", "$..*@array()", "$..*@scalar()", "$.store.*@other()", "$..book[?(@property === 1)]",
		"$..book[?(@parentProperty === 'store')].title", "$..book[?(@path === \"$['store']['book'][0]\")].title",
		"$..[?(@root.name && @.color)]", "$..book[?(@.tags)].tags[*]", "$..book[(@.x.y)]", "$..book[(5)]",
		"$..book[(1)].title", "$..book[('1')].title", "$.identities[(true)]", "$.store.`2`", "$..`price`",
		"$.nope", "$..nope", "$.store.bicycle.color.nope", "$['store','name']", "$[store,name]", "$.store[bicycle,b,z]",
		"$..book[?(@.price > 20)]^", "$[?(@.color)]", "$.store[?(@ === 'two')]", "$..[?(typeof require === 'undefined')].color",
		"$.identities[?(@.name.startsWith('a'))].career", "$..book[?(@.title.match(/S/))].title",
		"", "$.", "$..", ".store", "store..price", "$.store.bicycle['color']", "$.store.bicycle[\"color\"]",
		"$..book.length", "$..identities[*].name.length", "$.*.*", "$.*[0]", "$..[1:]", "$[*]", "$.identities[*][name,career]",
	}
	// The oracle answers, and riftgate's answer is the book's.
	if got := o.ask(t, "$.identities[(@.length-1)].career", mbBook); got != `["clown"]` {
		t.Fatalf("the oracle answers %s", got)
	}
	texts := []string{mbBook, `[1,[2,[3]],{"a":{"a":1}}]`, `"text"`, `0`, `null`, `{"a":[]}`, `not json`,
		`{"a":{"b":{"a":{"b":1}}},"b":[{"a":2}]}`}
	for _, text := range texts {
		for _, e := range exprs {
			if want, got := o.ask(t, e, text), ours(e, text); got != want {
				t.Errorf("%q on %.40q: riftgate %s, mb %s", e, text, got, want)
			}
		}
	}
}

// TestJSONPathAsMountebankProperty draws selectors from jsonpath-plus's
// pieces and documents of every kind, and compares with jsonpath-plus.
func TestJSONPathAsMountebankProperty(t *testing.T) {
	o := startOracle(t)
	piece := rapid.SampledFrom([]string{".a", ".b", "[0]", "[1]", "[-1:]", "[*]", ".*", "..", "..a", "[a,b]", "['a']",
		"[?(@.a)]", "[?(@ > 1)]", "[(@.length-1)]", "^", "~", ".length", "@string()", "@object()", "[1:3]", "[::2]", ".`a`",
		"[?(@property == 'b')]", "['a.b']", ".a.b", "[0,1]"})
	value := rapid.Deferred(func() *rapid.Generator[string] { return jsonValue(3) })
	rapid.Check(t, func(rt *rapid.T) {
		expr := "$" + strings.Join(rapid.SliceOfN(piece, 0, 4).Draw(rt, "pieces"), "")
		text := value.Draw(rt, "doc")
		if want, got := o.ask(t, expr, text), ours(expr, text); got != want {
			rt.Fatalf("%q on %s: riftgate %s, mb %s", expr, text, got, want)
		}
	})
}

// jsonValue draws JSON text nested up to depth.
func jsonValue(depth int) *rapid.Generator[string] {
	scalar := rapid.SampledFrom([]string{`0`, `1`, `2.5`, `-3`, `"x"`, `""`, `"ab"`, `true`, `false`, `null`})
	if depth == 0 {
		return scalar
	}
	key := rapid.SampledFrom([]string{"a", "b", "0", "1", "a.b", "length"})
	return rapid.Custom(func(t *rapid.T) string {
		switch rapid.IntRange(0, 2).Draw(t, "kind") {
		case 0:
			return scalar.Draw(t, "scalar")
		case 1:
			n := rapid.IntRange(0, 3).Draw(t, "n")
			parts := make([]string, n)
			for i := range parts {
				parts[i] = jsonValue(depth-1).Draw(t, "elem")
			}
			return "[" + strings.Join(parts, ",") + "]"
		default:
			n := rapid.IntRange(0, 3).Draw(t, "n")
			parts := make([]string, n)
			for i := range parts {
				k, _ := json.Marshal(key.Draw(t, "key"))
				parts[i] = string(k) + ":" + jsonValue(depth-1).Draw(t, "member")
			}
			return "{" + strings.Join(parts, ",") + "}"
		}
	})
}
