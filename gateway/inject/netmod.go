package inject

// Node's `net` module, as far as mb's asynchronous tcp injections use it:
// net.connect / createConnection, a socket's write, end and destroy, and
// its connect, data, end, close and error events. The socket's I/O
// blocks the script (riftgate runs no event loop beyond its timer queue),
// each call bounded by the run's deadline, and every connection a run
// opened is closed when the run ends.

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"syscall"

	"github.com/dop251/goja"
	"github.com/dop251/goja_nodejs/buffer"
)

// maxNetRead is the most one 'data' event carries.
const maxNetRead = 64 << 10

// runCtx is the run's context, ended also when the watchdog fires on the
// run, for a call that blocks outside the runtime.
func (v *vm) runCtx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(v.ctx)
	expired := v.w.expired
	go func() {
		select {
		case <-expired:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// netError throws err as Node would: an Error with its code (ECONNREFUSED,
// ...) so that a script's error handler can tell.
func (v *vm) netError(err error) goja.Value {
	code := "EIO"
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		code = "ECONNREFUSED"
	case errors.Is(err, syscall.ECONNRESET):
		code = "ECONNRESET"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		code = "ETIMEDOUT"
	default:
		var dns *net.DNSError
		if errors.As(err, &dns) {
			code = "ENOTFOUND"
		}
	}
	e := v.rt.NewGoError(err)
	_ = e.Set("code", code)
	return e
}

// installNet gives the runtime __riftgateNet, the Go half of the net
// module in preludeJS.
func installNet(v *vm) {
	o := v.rt.NewObject()
	_ = o.Set("dial", func(host string, port int) goja.Value {
		ctx, cancel := v.runCtx()
		defer cancel()
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			panic(v.netError(err))
		}
		v.conns = append(v.conns, c)
		return v.rt.ToValue(len(v.conns) - 1)
	})
	conn := func(id int) net.Conn {
		if id < 0 || id >= len(v.conns) || v.conns[id] == nil {
			panic(v.rt.NewTypeError("the socket is closed"))
		}
		return v.conns[id]
	}
	_ = o.Set("write", func(id int, data goja.Value) {
		c := conn(id)
		ctx, cancel := v.runCtx()
		defer cancel()
		stop := context.AfterFunc(ctx, func() { _ = c.Close() })
		defer stop()
		if _, err := c.Write(toBytes(v.rt, data)); err != nil {
			panic(v.netError(err))
		}
	})
	// read answers the next bytes the peer sends, or null at its end.
	_ = o.Set("read", func(id int) goja.Value {
		c := conn(id)
		ctx, cancel := v.runCtx()
		defer cancel()
		stop := context.AfterFunc(ctx, func() { _ = c.Close() })
		defer stop()
		buf := make([]byte, maxNetRead)
		n, err := c.Read(buf)
		if n > 0 {
			return buffer.WrapBytes(v.rt, buf[:n])
		}
		if err == nil || errors.Is(err, io.EOF) {
			return goja.Null()
		}
		if ctx.Err() != nil {
			panic(v.netError(ctx.Err()))
		}
		panic(v.netError(err))
	})
	_ = o.Set("end", func(id int) {
		if tc, ok := conn(id).(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	})
	_ = o.Set("close", func(id int) {
		if id >= 0 && id < len(v.conns) && v.conns[id] != nil {
			_ = v.conns[id].Close()
			v.conns[id] = nil
		}
	})
	_ = v.rt.Set("__riftgateNet", o)
}

// closeConns closes what the run left open.
func (v *vm) closeConns() {
	for i, c := range v.conns {
		if c != nil {
			_ = c.Close()
		}
		v.conns[i] = nil
	}
	v.conns = v.conns[:0]
}

// netJS is the JavaScript half of the net module, evaluated by the
// prelude with EventEmitter in scope.
const netJS = `
	function Socket() { EventEmitter.call(this); this._id = -1; this._encoding = null; this._pumping = false; this._done = false; }
	Socket.prototype = Object.create(EventEmitter.prototype);
	Socket.prototype.setEncoding = function (enc) { this._encoding = enc; return this; };
	Socket.prototype.setKeepAlive = Socket.prototype.setNoDelay = Socket.prototype.setTimeout = Socket.prototype.ref = Socket.prototype.unref = function () { return this; };
	Socket.prototype.write = function (chunk, enc, cb) {
		if (typeof enc === 'function') { cb = enc; enc = undefined; }
		if (this._id < 0) { var self = this; this.once('connect', function () { self.write(chunk, enc, cb); }); return true; }
		__riftgateNet.write(this._id, typeof chunk === 'string' ? Buffer.from(chunk, enc || 'utf8') : chunk);
		if (cb) { setTimeout(cb, 0); }
		return true;
	};
	Socket.prototype.end = function (chunk, enc, cb) {
		var self = this;
		if (chunk !== undefined && chunk !== null && typeof chunk !== 'function') { this.write(chunk, enc); }
		if (this._id >= 0 && !this._done) { __riftgateNet.end(this._id); } else if (this._id < 0) { this.once('connect', function () { __riftgateNet.end(self._id); }); }
		return this;
	};
	Socket.prototype.destroy = function () {
		if (this._done) { return this; }
		this._done = true;
		if (this._id >= 0) { __riftgateNet.close(this._id); }
		var self = this;
		setTimeout(function () { self.emit('close', false); }, 0);
		return this;
	};
	// Data flows once something listens for it, as a Node stream's does.
	Socket.prototype._pump = function () {
		var self = this;
		if (this._pumping || this._done || this._id < 0 || this.listenerCount('data') === 0) { return; }
		this._pumping = true;
		setTimeout(function () {
			self._pumping = false;
			if (self._done || self.listenerCount('data') === 0) { return; }
			var chunk;
			try { chunk = __riftgateNet.read(self._id); }
			catch (e) { self._done = true; __riftgateNet.close(self._id); self.emit('error', e); self.emit('close', true); return; }
			if (chunk === null) {
				self._done = true; __riftgateNet.close(self._id);
				self.emit('end'); self.emit('close', false);
				return;
			}
			self.emit('data', self._encoding ? chunk.toString(self._encoding) : chunk);
			self._pump();
		}, 0);
	};
	Socket.prototype.on = function (name, fn) { EventEmitter.prototype.on.call(this, name, fn); if (name === 'data') { this._pump(); } return this; };
	Socket.prototype.addListener = Socket.prototype.on;
	Socket.prototype.once = function (name, fn) { EventEmitter.prototype.once.call(this, name, fn); if (name === 'data') { this._pump(); } return this; };
	Socket.prototype.connect = function (options, cb) {
		var self = this;
		if (cb) { this.once('connect', cb); }
		setTimeout(function () {
			try { self._id = __riftgateNet.dial(String(options.host || 'localhost'), Number(options.port)); }
			catch (e) { self._done = true; self.emit('error', e); self.emit('close', true); return; }
			self.emit('connect'); self.emit('ready');
			self._pump();
		}, 0);
		return this;
	};
	function connect(a, b, c) {
		var options = a, cb = b;
		if (typeof a !== 'object' || a === null) { options = { port: a, host: typeof b === 'string' ? b : undefined }; cb = typeof b === 'function' ? b : c; }
		return new Socket().connect(options, cb);
	}
	var netModule = { connect: connect, createConnection: connect, Socket: Socket,
		isIP: function (s) { return /^\d+\.\d+\.\d+\.\d+$/.test(s) ? 4 : (String(s).indexOf(':') >= 0 ? 6 : 0); } };
	netModule.isIPv4 = function (s) { return netModule.isIP(s) === 4; };
	netModule.isIPv6 = function (s) { return netModule.isIP(s) === 6; };
`
