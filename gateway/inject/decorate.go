package inject

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/dop251/goja"
	"github.com/riftgate/riftgate/gateway/behavior"
	"github.com/riftgate/riftgate/gateway/message"
)

// responseText renders a response as mb's behaviors see it: the object mb
// holds when the response has it (an is as given, an injection's answer,
// a proxy's, each as earlier behaviors left it), else statusCode (a
// string when the stub wrote one), headers, body (the object itself when
// the body is JSON, base64 when binary) and _mode, absent fields left
// out, as they are absent from the stub mb decorates.
func responseText(r *behavior.Response) string {
	if r.TCP {
		return tcpResponseText(r)
	}
	if r.Object {
		if r.Response == nil || len(r.Body) == 0 {
			return "{}"
		}
		return string(r.Body)
	}
	if r.Response != nil && r.MB != nil {
		return string(r.MB) // the object mb holds, as the script must see it
	}
	var b bytes.Buffer
	b.WriteByte('{')
	sep := func() {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
	}
	switch {
	case r.Unset&behavior.StatusField != 0:
	case r.StatusText != "":
		sep()
		b.WriteString(`"statusCode":`)
		writeString(&b, r.StatusText)
	case r.Response != nil && r.StatusCode != 0:
		sep()
		fmt.Fprintf(&b, `"statusCode":%d`, r.StatusCode)
	}
	if r.Response != nil && r.Unset&behavior.HeadersField == 0 {
		sep()
		b.WriteString(`"headers":`)
		message.WriteMultiMap(&b, r.Headers)
	}
	if r.Response != nil && r.Unset&behavior.BodyField == 0 {
		sep()
		b.WriteString(`"body":`)
		switch {
		case r.Binary: // the text mb holds: as given, or as a copy left it
			writeString(&b, r.BinaryString())
		case r.JSONBody && json.Valid(r.Body):
			b.Write(r.Body)
		default:
			writeString(&b, string(r.Body))
		}
	}
	if r.Response != nil && r.Binary {
		sep()
		b.WriteString(`"_mode":"binary"`)
	}
	b.WriteByte('}')
	return b.String()
}

func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	b.Truncate(b.Len() - 1)
}

// apply writes a response object (the JSON of a decorated or shell-
// transformed response, which r keeps as its MB: text must be apply's own)
// onto r. A body that is not a string is rendered as mb renders it,
// JSON.stringify(body, null, 4), and marked JSONBody. A
// field that JavaScript counts as false is unset, as mb's `||` makes it:
// the imposter's defaultResponse gives it.
func apply(text []byte, r *behavior.Response, indent func(json.RawMessage) ([]byte, error)) error {
	if r.TCP {
		return applyTCP(text, r)
	}
	if r.Object {
		if _, err := message.ObjectFields(text); err != nil {
			return fmt.Errorf("not a response object: %w", err)
		}
		if r.Response == nil {
			r.Response = &message.Response{}
		}
		r.Body = bytes.Clone(text)
		return nil
	}
	m, err := message.Members(text, "statusCode", "headers", "body", "_mode")
	if err != nil {
		return fmt.Errorf("not a response object: %w", err)
	}
	status, headers, body := m[0], m[1], m[2]
	var mode string
	_ = json.Unmarshal(m[3], &mode) // anything but a string is no mode
	if r.Response == nil {
		r.Response = &message.Response{}
	}
	r.StatusCode, r.StatusText = 0, ""
	r.Unset = 0
	switch sc := bytes.TrimSpace(status); {
	case message.Falsy(sc):
		r.Unset |= behavior.StatusField
	case sc[0] == '"':
		_ = json.Unmarshal(sc, &r.StatusText)
	default:
		var f float64
		if err := json.Unmarshal(sc, &f); err != nil {
			return fmt.Errorf("statusCode %s is not a number or a string", sc)
		}
		r.StatusCode = int(f)
	}
	r.Headers = nil
	if h := bytes.TrimSpace(headers); message.Falsy(h) {
		r.Unset |= behavior.HeadersField
	} else {
		kvs, err := message.ReadMultiMap(h)
		if err != nil {
			return fmt.Errorf("headers: %w", err)
		}
		r.Headers = kvs
	}
	r.Body, r.JSONBody, r.Binary = nil, false, false
	switch body := bytes.TrimSpace(body); {
	case message.Falsy(body):
		r.Unset |= behavior.BodyField
	case body[0] == '"':
		var str string
		_ = json.Unmarshal(body, &str)
		r.Body = []byte(str)
	default:
		out, err := indent(body)
		if err != nil {
			return err
		}
		r.Body, r.JSONBody = out, true
	}
	r.BinaryText = ""
	if mode == "binary" {
		r.BinaryText = string(r.Body)
		r.Body, r.Binary, r.JSONBody = message.DecodeHTTPBinary(r.BinaryText), true, false
	}
	// The object is what mb holds, and what --debug's match shows: the
	// fields as the function left them (a _mode it set or removed, a
	// field equal to the default), before the defaults fill the rest.
	r.MB = text
	return nil
}

// goIndent renders JSON as JSON.stringify(x, null, 4) does, for callers
// without a runtime.
func goIndent(raw json.RawMessage) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "    "); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// decorator is a compiled "decorate" behavior.
type decorator struct {
	e      *Engine
	prog   *goja.Program
	source string
	flowOf FlowOf
}

// Decorate compiles a "decorate" behavior. flowOf names the flow that is
// the function's state; nil gives an empty state that is not kept.
func (e *Engine) Decorate(src string, flowOf FlowOf) (behavior.Decorator, error) {
	source := "(" + src + ")(config, response, logger);"
	p, err := e.compile(src)
	if err != nil {
		return nil, refuse("invalid decorator injection", source, err)
	}
	return &decorator{e: e, prog: p, source: source, flowOf: flowOf}, nil
}

// Decorate calls fn(config, response, logger) with config {request,
// response, logger, state}, as mb does, and takes the returned object when
// it is truthy, else the response as the function left it.
func (d *decorator) Decorate(ctx context.Context, req *message.Request, resp *behavior.Response) error {
	env := Env{Request: req}
	if d.flowOf != nil {
		env.FlowID, env.Policy = d.flowOf(req)
	}
	err := d.e.withState(ctx, env, func(v *vm, state *goja.Object) error {
		fn, err := v.function(d.prog)
		if err != nil {
			return script(err)
		}
		r, err := v.fromJSON(responseText(resp))
		if err != nil {
			return fmt.Errorf("inject: response JSON: %w", err)
		}
		config := v.config(req, state, nil, r)
		ret, err := fn(goja.Undefined(), config, r, v.logger)
		if err != nil {
			return script(err)
		}
		if ret.ToBoolean() {
			r = ret
		}
		text, err := v.stringify(goja.Undefined(), r)
		if err != nil {
			return script(err)
		}
		if goja.IsUndefined(text) {
			return script(fmt.Errorf("the decorator answered %s, not a response object", describe(r)))
		}
		indent := func(raw json.RawMessage) ([]byte, error) {
			x, err := v.fromJSON(string(raw))
			if err != nil {
				return nil, err
			}
			out, err := v.stringify(goja.Undefined(), x, goja.Null(), v.rt.ToValue(4))
			if err != nil {
				return nil, err
			}
			return []byte(out.String()), nil
		}
		return script(apply([]byte(text.String()), resp, indent))
	})
	return d.e.fail("invalid decorator injection", d.source, err)
}

// maxShellOutput caps what a shellTransform command may print.
const maxShellOutput = 1 << 20

// shell is a compiled "shellTransform" behavior.
type shell struct {
	e   *Engine
	cmd string
}

// ShellTransform returns the "shellTransform" behavior for cmd. As mb does,
// it runs cmd through /bin/sh with the request and the response as JSON in
// the MB_REQUEST and MB_RESPONSE environment variables and, while the
// command line stays under 2048 bytes, also as two shell-quoted arguments;
// the command prints the new response's JSON. The engine's timeout bounds
// it (the whole process group is killed), and its output is capped at 1 MiB.
func (e *Engine) ShellTransform(cmd string) (behavior.Decorator, error) {
	return &shell{e: e, cmd: cmd}, nil
}

// shellQuote quotes s as one POSIX shell word. mb wraps the JSON in single
// quotes without escaping the single quotes inside it, which breaks on a
// body such as "it's"; this escapes them.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// capped is a writer that fails past its limit, or with drop set, keeps
// only what fits (stderr is only logged).
type capped struct {
	b    bytes.Buffer
	max  int
	drop bool
}

var errTooMuchOutput = errors.New("shellTransform output exceeds 1 MiB")

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.b.Len(); len(p) > room {
		if !c.drop {
			return 0, errTooMuchOutput
		}
		c.b.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.b.Write(p)
}

func (s *shell) Decorate(ctx context.Context, req *message.Request, resp *behavior.Response) error {
	source := s.cmd
	if req == nil {
		req = &message.Request{}
	}
	reqJSON, err := req.MarshalJSON()
	if err != nil {
		return fmt.Errorf("inject: request JSON: %w", err)
	}
	respJSON := responseText(resp)
	full := s.cmd + " " + shellQuote(string(reqJSON)) + " " + shellQuote(respJSON)
	if len(full) >= 2048 {
		full = s.cmd
	}
	ctx, cancel := context.WithTimeout(ctx, s.e.timeout)
	defer cancel()
	c := exec.CommandContext(ctx, "/bin/sh", "-c", full)
	c.Env = append(os.Environ(), "MB_REQUEST="+string(reqJSON), "MB_RESPONSE="+respJSON)
	// A process group, so that a timeout kills the command's children too
	// and none of them keeps stdout open.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 100 * time.Millisecond
	out := &capped{max: maxShellOutput}
	stderr := &capped{max: 64 << 10, drop: true}
	c.Stdout, c.Stderr = out, stderr
	if err := c.Run(); err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", ErrTimeout, err)
		}
		if stderr.b.Len() > 0 {
			s.e.log.Error("shellTransform stderr", "command", s.cmd, "stderr", stderr.b.String())
		}
		return s.e.fail("Command failed: "+s.cmd, source, script(err))
	}
	if err := apply(out.b.Bytes(), resp, goIndent); err != nil {
		shown := out.b.String()
		if len(shown) > 200 {
			shown = shown[:200] + "..."
		}
		return s.e.fail("Shell command returned invalid JSON: '"+shown+"'", source, script(err))
	}
	return nil
}
