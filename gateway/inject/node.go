package inject

// The part of Node that mb's scripts expect: `require` for the built-in
// modules inject scripts, decorators and EJS config files use, `process`
// and `Buffer`. goja_nodejs gives require, Buffer, url and util; the rest
// is here, kept to what such scripts call. Nothing lets a script hang or
// end the process: process.exit throws, and an http request is bounded by
// the run's deadline.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja_nodejs/buffer"
	"github.com/dop251/goja_nodejs/require"
	_ "github.com/dop251/goja_nodejs/url"  // registers "url"
	_ "github.com/dop251/goja_nodejs/util" // registers "util"
)

// maxReadFile caps what fs.readFileSync and an http answer may hold.
const maxReadFile = 64 << 20

var (
	nodeOnce     sync.Once
	nodeRegistry *require.Registry
	nodePrelude  *goja.Program
)

// installNode installs the Node environment on one runtime; v supplies the
// run's context and the timer queue that http callbacks ride on.
func installNode(v *vm) {
	nodeOnce.Do(func() {
		nodeRegistry = require.NewRegistry()
		for name, loader := range map[string]require.ModuleLoader{
			"path": pathModule, "fs": fsModule, "os": osModule, "crypto": cryptoModule,
		} {
			nodeRegistry.RegisterNativeModule(name, loader)
			nodeRegistry.RegisterNativeModule("node:"+name, loader)
		}
		nodePrelude = goja.MustCompile("riftgate:node.js", preludeJS, true)
	})
	rt := v.rt
	nodeRegistry.Enable(rt)
	buffer.Enable(rt)
	_ = rt.Set("process", processObject(rt))
	_ = rt.Set("__riftgateHTTP", func(c goja.FunctionCall) goja.Value { return v.httpCall(c) })
	installNet(v)
	if _, err := rt.RunProgram(nodePrelude); err != nil {
		panic(err) // the prelude is ours and runs on every runtime
	}
}

func processObject(rt *goja.Runtime) *goja.Object {
	p := rt.NewObject()
	env := rt.NewObject()
	for _, kv := range os.Environ() {
		k, val, _ := strings.Cut(kv, "=")
		_ = env.Set(k, val)
	}
	_ = p.Set("env", env)
	_ = p.Set("platform", runtime.GOOS)
	arch := runtime.GOARCH
	if arch == "amd64" {
		arch = "x64"
	}
	_ = p.Set("arch", arch)
	_ = p.Set("argv", []string{"node", "mb"})
	_ = p.Set("pid", os.Getpid())
	_ = p.Set("version", "v20.0.0")
	_ = p.Set("versions", map[string]string{"node": "20.0.0"})
	_ = p.Set("cwd", func() string { wd, _ := os.Getwd(); return wd })
	start := time.Now()
	_ = p.Set("uptime", func() float64 { return time.Since(start).Seconds() })
	_ = p.Set("hrtime", func(c goja.FunctionCall) goja.Value {
		n := time.Now().UnixNano()
		return rt.ToValue([]int64{n / 1e9, n % 1e9})
	})
	_ = p.Set("memoryUsage", func() map[string]uint64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return map[string]uint64{"rss": ms.Sys, "heapTotal": ms.HeapSys, "heapUsed": ms.HeapAlloc}
	})
	_ = p.Set("exit", func(goja.FunctionCall) goja.Value {
		panic(rt.NewGoError(errors.New("process.exit is not available to scripts: it would end riftgate")))
	})
	return p
}

func exportsOf(module *goja.Object) *goja.Object { return module.Get("exports").(*goja.Object) }

func pathModule(rt *goja.Runtime, module *goja.Object) {
	o := exportsOf(module)
	strs := func(c goja.FunctionCall) []string {
		out := make([]string, len(c.Arguments))
		for i, a := range c.Arguments {
			out[i] = a.String()
		}
		return out
	}
	_ = o.Set("sep", "/")
	_ = o.Set("delimiter", ":")
	_ = o.Set("join", func(c goja.FunctionCall) goja.Value {
		j := filepath.Join(strs(c)...)
		if j == "" {
			j = "."
		}
		return rt.ToValue(j)
	})
	_ = o.Set("resolve", func(c goja.FunctionCall) goja.Value {
		wd, _ := os.Getwd()
		p := wd
		for _, s := range strs(c) {
			if filepath.IsAbs(s) {
				p = s
			} else {
				p = filepath.Join(p, s)
			}
		}
		return rt.ToValue(filepath.Clean(p))
	})
	_ = o.Set("normalize", func(s string) string { return filepath.Clean(s) })
	_ = o.Set("isAbsolute", filepath.IsAbs)
	_ = o.Set("dirname", filepath.Dir)
	_ = o.Set("extname", filepath.Ext)
	_ = o.Set("relative", func(a, b string) string { r, _ := filepath.Rel(a, b); return r })
	_ = o.Set("basename", func(p string, ext goja.Value) string {
		b := filepath.Base(p)
		if e := ext.String(); ext != nil && !goja.IsUndefined(ext) && strings.HasSuffix(b, e) && b != e {
			b = strings.TrimSuffix(b, e)
		}
		return b
	})
	_ = o.Set("posix", o)
}

// readFile reads at most maxReadFile bytes.
func readFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxReadFile+1))
	if err == nil && len(b) > maxReadFile {
		err = fmt.Errorf("%s is larger than %d bytes", name, maxReadFile)
	}
	return b, err
}

// encoding is an fs or Buffer encoding argument: a string or {encoding}.
func encoding(v goja.Value) string {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return ""
	}
	if o, ok := v.(*goja.Object); ok {
		if e := o.Get("encoding"); e != nil && !goja.IsUndefined(e) && !goja.IsNull(e) {
			return e.String()
		}
		return ""
	}
	return v.String()
}

// toBytes reads a string or Buffer argument.
func toBytes(rt *goja.Runtime, v goja.Value) []byte {
	if _, ok := v.(*goja.Object); ok {
		return buffer.Bytes(rt, v)
	}
	return []byte(v.String())
}

func fsModule(rt *goja.Runtime, module *goja.Object) {
	o := exportsOf(module)
	throw := func(err error) { panic(rt.NewGoError(err)) }
	_ = o.Set("readFileSync", func(c goja.FunctionCall) goja.Value {
		b, err := readFile(c.Argument(0).String())
		if err != nil {
			throw(err)
		}
		if enc := encoding(c.Argument(1)); enc != "" {
			return buffer.EncodeBytes(rt, b, rt.ToValue(enc))
		}
		return buffer.WrapBytes(rt, b)
	})
	_ = o.Set("existsSync", func(name string) bool { _, err := os.Stat(name); return err == nil })
	write := func(flag int) func(goja.FunctionCall) goja.Value {
		return func(c goja.FunctionCall) goja.Value {
			f, err := os.OpenFile(c.Argument(0).String(), flag|os.O_WRONLY|os.O_CREATE, 0o644)
			if err != nil {
				throw(err)
			}
			defer f.Close()
			if _, err := f.Write(toBytes(rt, c.Argument(1))); err != nil {
				throw(err)
			}
			return goja.Undefined()
		}
	}
	_ = o.Set("writeFileSync", write(os.O_TRUNC))
	_ = o.Set("appendFileSync", write(os.O_APPEND))
	_ = o.Set("readdirSync", func(name string) []string {
		es, err := os.ReadDir(name)
		if err != nil {
			throw(err)
		}
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.Name()
		}
		return out
	})
	_ = o.Set("unlinkSync", func(name string) {
		if err := os.Remove(name); err != nil {
			throw(err)
		}
	})
	_ = o.Set("mkdirSync", func(name string) {
		if err := os.MkdirAll(name, 0o755); err != nil {
			throw(err)
		}
	})
	_ = o.Set("statSync", func(name string) map[string]any {
		fi, err := os.Stat(name)
		if err != nil {
			throw(err)
		}
		return map[string]any{"size": fi.Size(), "mtimeMs": fi.ModTime().UnixMilli(),
			"isFile": func() bool { return fi.Mode().IsRegular() }, "isDirectory": fi.IsDir}
	})
}

func osModule(rt *goja.Runtime, module *goja.Object) {
	o := exportsOf(module)
	_ = o.Set("EOL", "\n")
	_ = o.Set("hostname", func() string { h, _ := os.Hostname(); return h })
	_ = o.Set("platform", func() string { return runtime.GOOS })
	_ = o.Set("type", func() string { return "Linux" })
	_ = o.Set("arch", func() string { return rt.Get("process").ToObject(rt).Get("arch").String() })
	_ = o.Set("tmpdir", os.TempDir)
	_ = o.Set("homedir", func() string { h, _ := os.UserHomeDir(); return h })
	_ = o.Set("cpus", func() []map[string]any { return make([]map[string]any, runtime.NumCPU()) })
}

func cryptoModule(rt *goja.Runtime, module *goja.Object) {
	o := exportsOf(module)
	newHash := func(alg string) func() hash.Hash {
		switch strings.ToLower(alg) {
		case "md5":
			return md5.New
		case "sha1":
			return sha1.New
		case "sha256":
			return sha256.New
		case "sha512":
			return sha512.New
		}
		panic(rt.NewTypeError("Digest method not supported: " + alg))
	}
	hasher := func(h hash.Hash) *goja.Object {
		obj := rt.NewObject()
		_ = obj.Set("update", func(c goja.FunctionCall) goja.Value {
			h.Write(toBytes(rt, c.Argument(0)))
			return obj
		})
		_ = obj.Set("digest", func(c goja.FunctionCall) goja.Value {
			sum := h.Sum(nil)
			switch encoding(c.Argument(0)) {
			case "hex":
				return rt.ToValue(hex.EncodeToString(sum))
			case "base64":
				return rt.ToValue(base64.StdEncoding.EncodeToString(sum))
			case "":
				return buffer.WrapBytes(rt, sum)
			}
			return rt.ToValue(string(sum))
		})
		return obj
	}
	_ = o.Set("createHash", func(alg string) *goja.Object { return hasher(newHash(alg)()) })
	_ = o.Set("createHmac", func(c goja.FunctionCall) goja.Value {
		return hasher(hmac.New(newHash(c.Argument(0).String()), toBytes(rt, c.Argument(1))))
	})
	_ = o.Set("randomBytes", func(n int) goja.Value {
		if n < 0 || n > 1<<20 {
			panic(rt.NewTypeError("randomBytes: size out of range"))
		}
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return buffer.WrapBytes(rt, b)
	})
	_ = o.Set("randomUUID", func() string {
		var b [16]byte
		_, _ = rand.Read(b[:])
		b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	})
}

// httpCall performs one request for the http and https modules:
// __riftgateHTTP(method, url, headers, body) answers {statusCode,
// statusMessage, headers, rawHeaders, body} or throws. It blocks the
// script until the answer comes, bounded by the run's deadline, and the
// module hands the answer to the script's callbacks through the timer
// queue, as Node's event loop would.
func (v *vm) httpCall(c goja.FunctionCall) goja.Value {
	rt := v.rt
	method, target := c.Argument(0).String(), c.Argument(1).String()
	ctx, cancel := v.runCtx()
	defer cancel()
	var body io.Reader
	if b := c.Argument(3); !goja.IsUndefined(b) && !goja.IsNull(b) {
		body = bytes.NewReader(toBytes(rt, b))
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		panic(rt.NewGoError(err))
	}
	if h, ok := c.Argument(2).(*goja.Object); ok {
		for _, k := range h.Keys() {
			val := h.Get(k)
			if strings.EqualFold(k, "host") {
				req.Host = val.String()
				continue
			}
			if arr, ok := val.Export().([]any); ok {
				for _, e := range arr {
					req.Header.Add(k, fmt.Sprint(e))
				}
			} else {
				req.Header.Set(k, val.String())
			}
		}
	}
	resp, err := nodeHTTPClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		panic(rt.NewGoError(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReadFile))
	if err != nil {
		panic(rt.NewGoError(err))
	}
	headers := map[string]any{}
	var raw []string
	for k, vs := range resp.Header {
		lower := strings.ToLower(k)
		if lower == "set-cookie" {
			headers[lower] = vs
		} else {
			headers[lower] = strings.Join(vs, ", ")
		}
		for _, val := range vs {
			raw = append(raw, k, val)
		}
	}
	out := rt.NewObject()
	_ = out.Set("statusCode", resp.StatusCode)
	_ = out.Set("statusMessage", strings.TrimPrefix(resp.Status, fmt.Sprint(resp.StatusCode)+" "))
	_ = out.Set("headers", headers)
	_ = out.Set("rawHeaders", raw)
	_ = out.Set("body", buffer.WrapBytes(rt, data))
	return out
}

// nodeHTTPClient follows no redirects, as Node's http does not.
var nodeHTTPClient = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport:     &http.Transport{DisableKeepAlives: true, DisableCompression: true},
}

// preludeJS defines, on each runtime, the modules best written in
// JavaScript: events, querystring, http and https (over __riftgateHTTP),
// net (over __riftgateNet, netmod.go) and util's extras.
const preludeJS = `(function () {
	'use strict';
	var g = (0, eval)('this');
	function EventEmitter() { this._events = {}; }
	EventEmitter.prototype.on = function (name, fn) { (this._events[name] = this._events[name] || []).push({ fn: fn }); return this; };
	EventEmitter.prototype.addListener = EventEmitter.prototype.on;
	EventEmitter.prototype.once = function (name, fn) { (this._events[name] = this._events[name] || []).push({ fn: fn, once: true }); return this; };
	EventEmitter.prototype.off = function (name, fn) { this._events[name] = (this._events[name] || []).filter(function (l) { return l.fn !== fn; }); return this; };
	EventEmitter.prototype.removeListener = EventEmitter.prototype.off;
	EventEmitter.prototype.removeAllListeners = function (name) { if (name === undefined) { this._events = {}; } else { delete this._events[name]; } return this; };
	EventEmitter.prototype.listenerCount = function (name) { return (this._events[name] || []).length; };
	EventEmitter.prototype.emit = function (name) {
		var args = Array.prototype.slice.call(arguments, 1), ls = (this._events[name] || []).slice();
		if (name === 'error' && ls.length === 0) { throw args[0]; }
		this._events[name] = (this._events[name] || []).filter(function (l) { return !l.once; });
		ls.forEach(function (l) { l.fn.apply(this, args); }, this);
		return ls.length > 0;
	};
	var events = EventEmitter;
	events.EventEmitter = EventEmitter;

	function qsEscape(s) { return encodeURIComponent(s); }
	function qsUnescape(s) { try { return decodeURIComponent(s.replace(/\+/g, ' ')); } catch (e) { return s; } }
	var querystring = {
		escape: qsEscape, unescape: qsUnescape,
		parse: function (s, sep, eq) {
			var out = {};
			if (typeof s !== 'string' || s === '') { return out; }
			s.split(sep || '&').forEach(function (part) {
				if (part === '') { return; }
				var i = part.indexOf(eq || '='), k = i < 0 ? part : part.slice(0, i), v = i < 0 ? '' : part.slice(i + 1);
				k = qsUnescape(k); v = qsUnescape(v);
				if (Object.prototype.hasOwnProperty.call(out, k)) { out[k] = [].concat(out[k], v); } else { out[k] = v; }
			});
			return out;
		},
		stringify: function (o, sep, eq) {
			return Object.keys(o || {}).map(function (k) {
				return [].concat(o[k]).map(function (v) { return qsEscape(k) + (eq || '=') + qsEscape(v === undefined || v === null ? '' : String(v)); }).join(sep || '&');
			}).join(sep || '&');
		}
	};
	querystring.decode = querystring.parse;
	querystring.encode = querystring.stringify;

	function IncomingMessage(r) {
		EventEmitter.call(this);
		this.statusCode = r.statusCode; this.statusMessage = r.statusMessage;
		this.headers = r.headers; this.rawHeaders = r.rawHeaders;
		this._body = r.body; this._encoding = null;
	}
	IncomingMessage.prototype = Object.create(EventEmitter.prototype);
	IncomingMessage.prototype.setEncoding = function (enc) { this._encoding = enc; return this; };
	IncomingMessage.prototype.resume = function () { return this; };
	IncomingMessage.prototype.pipe = function (w) { var self = this; this.on('data', function (c) { w.write(c); }); this.on('end', function () { if (w.end) { w.end(); } }); return w; };

	function httpModule(scheme) {
		function ClientRequest(options, callback) {
			EventEmitter.call(this);
			if (typeof options === 'string') { options = { _url: options }; }
			this.options = options || {}; this._chunks = []; this._ended = false;
			if (callback) { this.once('response', callback); }
		}
		ClientRequest.prototype = Object.create(EventEmitter.prototype);
		ClientRequest.prototype.setHeader = function (k, v) { (this.options.headers = this.options.headers || {})[k] = v; };
		ClientRequest.prototype.getHeader = function (k) { return (this.options.headers || {})[k]; };
		ClientRequest.prototype.setTimeout = function () { return this; };
		ClientRequest.prototype.abort = ClientRequest.prototype.destroy = function () { this._aborted = true; };
		ClientRequest.prototype.write = function (chunk) { if (chunk !== undefined && chunk !== null) { this._chunks.push(chunk); } return true; };
		ClientRequest.prototype.end = function (chunk) {
			var self = this;
			if (this._ended) { return this; }
			this.write(chunk); this._ended = true;
			setTimeout(function () {
				if (self._aborted) { return; }
				var o = self.options, target = o._url;
				if (!target) {
					var host = o.hostname || (o.host || 'localhost').split(':')[0];
					var port = o.port || (o.host && o.host.split(':')[1]);
					target = (o.protocol || scheme + ':') + '//' + host + (port ? ':' + port : '') + (o.path || '/');
				}
				var body = self._chunks.length === 0 ? undefined : self._chunks.map(function (c) { return typeof c === 'string' ? c : Buffer.from(c).toString('latin1'); }).join('');
				var r;
				try { r = __riftgateHTTP(o.method || 'GET', target, o.headers || {}, body === undefined ? undefined : Buffer.from(body, 'latin1')); }
				catch (e) { self.emit('error', e); return; }
				var res = new IncomingMessage(r);
				self.emit('response', res);
				setTimeout(function () {
					if (r.body.length > 0) { res.emit('data', res._encoding ? r.body.toString(res._encoding) : r.body); }
					res.emit('end');
				}, 0);
			}, 0);
			return this;
		};
		function request(a, b, c) {
			var options = a, callback = b;
			if (typeof a === 'string' || (a && a.href)) { options = { _url: String(a) }; if (typeof b === 'object') { Object.keys(b).forEach(function (k) { options[k] = b[k]; }); callback = c; } }
			return new ClientRequest(options, callback);
		}
		return {
			request: request,
			get: function (a, b, c) { var r = request(a, b, c); r.end(); return r; },
			ClientRequest: ClientRequest, IncomingMessage: IncomingMessage,
			Agent: function () {}, globalAgent: {},
			STATUS_CODES: {}
		};
	}

	// Node's Buffer prints as {type: 'Buffer', data: [bytes]}, which is how
	// a tcp injection's answer of a socket's Buffer reaches the wire.
	if (!Object.prototype.hasOwnProperty.call(Buffer.prototype, 'toJSON')) {
		Object.defineProperty(Buffer.prototype, 'toJSON', { value: function () { return { type: 'Buffer', data: Array.prototype.slice.call(this) }; }, writable: true, configurable: true });
	}

	var util = require('util');
	util.inspect = function (x) { try { return typeof x === 'string' ? x : JSON.stringify(x); } catch (e) { return String(x); } };
	util.promisify = function (fn) { return function () { var args = Array.prototype.slice.call(arguments); return new Promise(function (ok, fail) { fn.apply(null, args.concat(function (err, v) { if (err) { fail(err); } else { ok(v); } })); }); }; };
	util.isDeepStrictEqual = function (a, b) { return JSON.stringify(a) === JSON.stringify(b); };

` + netJS + `
	var own = { events: events, querystring: querystring, http: httpModule('http'), https: httpModule('https'), net: netModule };
	var nativeRequire = g.require;
	g.require = function (name) {
		var bare = typeof name === 'string' && name.indexOf('node:') === 0 ? name.slice(5) : name;
		if (Object.prototype.hasOwnProperty.call(own, bare)) { return own[bare]; }
		return nativeRequire(name);
	};
})();
`

// Script is a runtime with mb's Node environment for JavaScript riftgate
// runs outside any imposter: the CLI's EJS config files and --formatter
// modules. Everything it runs, its timers included, ends when ctx does.
type Script struct {
	v    *vm
	stop func() bool
}

// NewScript makes a Script whose console and logger write to log.
func NewScript(ctx context.Context, log *slog.Logger) *Script {
	v := newVM(log)
	v.ctx = ctx
	// No deadline of its own: ctx bounds it.
	v.w.begin(ctx, time.Now().Add(100*365*24*time.Hour))
	stop := context.AfterFunc(ctx, func() { v.w.check(time.Now(), ctx.Err()) })
	return &Script{v: v, stop: stop}
}

// Runtime is the script's goja runtime.
func (s *Script) Runtime() *goja.Runtime { return s.v.rt }

// Await is x, or what x settles to when it is a Promise, running the
// script's timers while it waits.
func (s *Script) Await(x goja.Value) (goja.Value, error) { return s.v.settle(x) }

// Close releases the script's hold on its context and closes the sockets
// it left open.
func (s *Script) Close() {
	s.stop()
	s.v.closeConns()
}
