package inject

import (
	"bytes"
	"context"
	"fmt"

	"github.com/dop251/goja"
	"github.com/riftgate/riftgate/gateway/behavior"
	"github.com/riftgate/riftgate/gateway/message"
)

// EndOfRequest compiles a tcp imposter's endOfRequestResolver: mb calls
// fn(requestData, logger) with everything the connection has sent since
// its last request, as a string in text mode and a node Buffer in binary
// mode, and a truthy answer makes it a request. A script that throws (or
// runs past the engine's timeout) is logged and answers false, as mb's
// does.
func (e *Engine) EndOfRequest(src string, binary bool) (func([]byte) bool, error) {
	source := "(" + src + ")(requestData, logger)"
	p, err := e.compile(src)
	if err != nil {
		return nil, refuse("invalid endOfRequestResolver injection", source, err)
	}
	return func(data []byte) bool {
		var done bool
		err := e.run(context.Background(), func(v *vm) error {
			fn, err := v.function(p)
			if err != nil {
				return script(err)
			}
			arg := v.rt.ToValue(message.DecodeUTF8(data))
			if binary {
				if arg, err = v.buffer(data); err != nil {
					return err
				}
			}
			ret, err := fn(goja.Undefined(), arg, v.logger)
			if err != nil {
				return script(err)
			}
			done = ret.ToBoolean()
			return nil
		})
		if err != nil {
			e.log.Error("injection X=> "+err.Error(), "source", source)
			return false
		}
		return done
	}, nil
}

// bufferShim gives a Uint8Array the read methods of node's Buffer that
// endOfRequestResolver scripts use to find a message's length.
const bufferShim = `(function (u8) {
	var dv = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
	var m = {
		readUInt8: function (o) { return dv.getUint8(o || 0); },
		readInt8: function (o) { return dv.getInt8(o || 0); },
		readUInt16BE: function (o) { return dv.getUint16(o || 0, false); },
		readUInt16LE: function (o) { return dv.getUint16(o || 0, true); },
		readInt16BE: function (o) { return dv.getInt16(o || 0, false); },
		readInt16LE: function (o) { return dv.getInt16(o || 0, true); },
		readUInt32BE: function (o) { return dv.getUint32(o || 0, false); },
		readUInt32LE: function (o) { return dv.getUint32(o || 0, true); },
		readInt32BE: function (o) { return dv.getInt32(o || 0, false); },
		readInt32LE: function (o) { return dv.getInt32(o || 0, true); }
	};
	m.readUint8 = m.readUInt8; m.readUint16BE = m.readUInt16BE; m.readUint16LE = m.readUInt16LE;
	m.readUint32BE = m.readUInt32BE; m.readUint32LE = m.readUInt32LE;
	Object.keys(m).forEach(function (k) { Object.defineProperty(u8, k, { value: m[k] }); });
	Object.defineProperty(u8, 'toString', { value: function (enc) { return __rgBufferText(u8, enc || 'utf8'); } });
	return u8;
})`

var bufferProgram = goja.MustCompile("buffer-shim", bufferShim, true)

// buffer returns data as a Buffer-like Uint8Array.
func (v *vm) buffer(data []byte) (goja.Value, error) {
	if v.bufferFn == nil {
		fn, err := v.rt.RunProgram(bufferProgram)
		if err != nil {
			return nil, err
		}
		call, ok := goja.AssertFunction(fn)
		if !ok {
			return nil, fmt.Errorf("inject: buffer shim is not a function")
		}
		_ = v.rt.Set("__rgBufferText", func(c goja.FunctionCall) goja.Value {
			var b []byte
			if u8, ok := c.Argument(0).Export().([]byte); ok {
				b = u8
			}
			switch c.Argument(1).String() {
			case "base64":
				return v.rt.ToValue(message.EncodeData(b, true))
			case "hex":
				return v.rt.ToValue(fmt.Sprintf("%x", b))
			}
			return v.rt.ToValue(message.DecodeUTF8(b))
		})
		v.bufferFn = call
	}
	u8, err := v.rt.New(v.rt.Get("Uint8Array"), v.rt.ToValue(v.rt.NewArrayBuffer(bytes.Clone(data))))
	if err != nil {
		return nil, err
	}
	return v.bufferFn(goja.Undefined(), u8)
}

// otherRequest builds mb's request object for a tcp or smtp request, from
// the JSON mb saves it as.
func (v *vm) otherRequest(r *message.Request) *goja.Object {
	c := r.Clone()
	c.Timestamp = r.Timestamp
	text, _ := c.MarshalJSON()
	o, err := v.fromJSON(string(text))
	if err != nil {
		return v.rt.NewObject()
	}
	return o.ToObject(v.rt)
}

// tcpResponseText renders a tcp response as mb's behaviors see it: the
// object as mb holds it, {data: ”} when there is none yet.
func tcpResponseText(r *behavior.Response) string {
	if r.Response == nil {
		return `{"data":""}`
	}
	return string(r.TCPObject())
}

// applyTCP writes a decorated tcp response object's data onto r.
func applyTCP(text []byte, r *behavior.Response) error {
	if _, err := message.Members(text, "data"); err != nil {
		return fmt.Errorf("not a response object: %w", err)
	}
	if r.Response == nil {
		r.Response = &message.Response{}
	}
	message.SetTCPData(r.Response, text)
	return nil
}
