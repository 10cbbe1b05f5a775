package inject

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Scripts find what mb's scripts use of Node: require for the built-in
// modules, process, Buffer, and an http client whose callbacks run as
// Node's event loop would run them.
func TestNodeEnvironment(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "names.txt")
	if err := os.WriteFile(file, []byte("123|Frodo\n234|Sam\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen", r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("X-In")+" "+string(b))
		fmt.Fprint(w, "from origin")
	}))
	defer origin.Close()
	e := newEngine(t, Options{})
	for _, tc := range []struct{ name, src, want string }{
		{"util.format", `function () { return { body: require('util').format('%s=%d', 'a', 42) }; }`, "a=42"},
		{"path", `function () { var p = require('path'); return { body: p.join('a', 'b', '../c') + ' ' + p.basename('/x/y.js', '.js') + ' ' + p.extname('f.txt') }; }`, "a/c y .txt"},
		{"fs", `function () { var fs = require('fs'); return { body: fs.readFileSync(` + jsString(file) + `, 'utf8').split('\n')[1] + ' ' + fs.existsSync(` + jsString(file) + `) }; }`, "234|Sam true"},
		{"node: prefix and os", `function () { return { body: typeof require('node:os').hostname() + ' ' + require('os').EOL.length }; }`, "string 1"},
		{"crypto", `function () { var c = require('crypto'); return { body: c.createHash('md5').update('abc').digest('hex') + ' ' + c.randomUUID().length }; }`, "900150983cd24fb0d6963f7d28e17f72 36"},
		{"querystring", `function () { var q = require('querystring'); return { body: JSON.stringify(q.parse('a=1&a=2&b=%20x')) + ' ' + q.stringify({k: 'v w'}) }; }`, `{"a":["1","2"],"b":" x"} k=v%20w`},
		{"process", `function () { return { body: typeof process.env.PATH + ' ' + process.platform + ' ' + typeof process.cwd() }; }`, "string linux string"},
		{"Buffer", `function () { return { body: Buffer.from('hello').toString('base64') + ' ' + Buffer.from('aGk=', 'base64').toString() }; }`, "aGVsbG8= hi"},
		{"events", `function () { var E = require('events'), e = new E(), got = ''; e.on('x', function (v) { got += v; }); e.emit('x', 'a'); e.emit('x', 'b'); return { body: got }; }`, "ab"},
		{"http", `function (config) {
			var http = require('http'), u = require('url');
			var parts = new u.URL(` + jsString(origin.URL) + `);
			var req = http.request({ method: 'POST', hostname: parts.hostname, port: parts.port, path: '/p?q=1', headers: { 'X-In': 'in' } }, function (res) {
				var body = '';
				res.setEncoding('utf8');
				res.on('data', function (c) { body += c; });
				res.on('end', function () { config.callback({ body: res.statusCode + ' ' + res.headers['x-seen'] + ' ' + body }); });
			});
			req.write('payload');
			req.end();
		}`, "200 POST /p?q=1 in payload from origin"},
		{"http errors reach the error event", `function (config) {
			var req = require('http').get('http://127.0.0.1:1/', function () {});
			req.on('error', function (e) { config.callback({ body: 'error: ' + (e.message.indexOf('refused') >= 0) }); });
		}`, "error: true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := respond(t, e, tc.src, Env{Request: testRequest()})
			if got["body"] != tc.want {
				t.Fatalf("body %q, want %q", got["body"], tc.want)
			}
		})
	}
}

// Nothing in the environment ends riftgate or outlives the deadline.
func TestNodeEnvironmentCannotEscape(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer hang.Close()
	e := newEngine(t, Options{Timeout: 300 * time.Millisecond})
	p, err := e.Response(`function () { process.exit(1); }`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Respond(t.Context(), Env{Request: testRequest()}); err == nil || !strings.Contains(err.Error(), "process.exit") {
		t.Fatalf("process.exit: %v", err)
	}
	p, err = e.Response(`function (config) { require('http').get(` + jsString(hang.URL) + `, function () { config.callback({}); }); }`)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := p.Respond(t.Context(), Env{Request: testRequest()}); err == nil {
		t.Fatal("a request that never answers answered")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the deadline took %v", d)
	}
}

func jsString(s string) string { return fmt.Sprintf("%q", s) }
