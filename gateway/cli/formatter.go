package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dop251/goja"

	"github.com/riftgate/riftgate/gateway/inject"
	"github.com/riftgate/riftgate/gateway/nodehost"
)

// defaultFormatter is mb's --formatter default, built in (ejs.go).
const defaultFormatter = "mountebank-formatters"

// formatterTimeout bounds a custom formatter's load or save: the CLI ends
// within a bounded time whatever the module does.
const formatterTimeout = time.Minute

// customFormatter reports whether --formatter names a module of the user's.
func (s *settings) customFormatter() bool {
	f := s.str("formatter")
	return f != "" && f != defaultFormatter
}

// formatterOptions is the options object mb hands a formatter's load and
// save: every option of the command, typed as mb's parser types it.
func (s *settings) formatterOptions() map[string]any {
	out := map[string]any{}
	for name, raw := range s.values {
		switch lookup(name).kind {
		case kInt:
			out[name] = s.integer(name)
		case kBool:
			out[name] = s.boolean(name)
		default:
			out[name] = raw
		}
	}
	// mb hands its formatter the options it does not know too.
	for _, e := range s.extras {
		out[e[0]] = json.RawMessage(e[1])
	}
	return out
}

// runFormatter loads the --formatter module as mb does, with require, and
// calls its fn ("load" or "save") with args, awaiting a returned Promise.
// It answers the result as JSON. A path is resolved against the working
// directory, a bare name through node_modules from there (mb resolves both
// from its own install, where a relative path finds nothing).
//
// The module runs on the machine's node, as on mb, so that any package it
// requires works; without node it runs in the embedded runtime, which has
// only Node's core modules, and a failure there says that node is missing.
// SIGINT and SIGTERM end the module's process and the command.
func runFormatter(ctx context.Context, s *settings, fn string, stderr io.Writer, args ...any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, formatterTimeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	name := s.str("formatter")
	if strings.HasPrefix(name, ".") || filepath.IsAbs(name) {
		abs, err := filepath.Abs(name)
		if err != nil {
			return nil, err
		}
		name = abs
	}
	if _, err := nodehost.Path(); err == nil {
		return nodehost.Formatter(ctx, name, fn, stderr, args...)
	}
	out, err := runFormatterEmbedded(ctx, name, fn, stderr, args...)
	if err != nil {
		return nil, fmt.Errorf("%w (and %w)", err, nodehost.ErrNoNode)
	}
	return out, nil
}

// runFormatterEmbedded is runFormatter on goja, for a machine without node.
func runFormatterEmbedded(ctx context.Context, name, fn string, stderr io.Writer, args ...any) (json.RawMessage, error) {
	script := inject.NewScript(ctx, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	defer script.Close()
	rt := script.Runtime()
	req, ok := goja.AssertFunction(rt.Get("require"))
	if !ok {
		return nil, errors.New("no require in the script runtime")
	}
	mod, err := req(goja.Undefined(), rt.ToValue(name))
	if err != nil {
		return nil, fmt.Errorf("cannot find module '%s': %w", name, err)
	}
	obj := mod.ToObject(rt)
	f, ok := goja.AssertFunction(obj.Get(fn))
	if !ok {
		return nil, fmt.Errorf("formatter.%s is not a function", fn)
	}
	vals := make([]goja.Value, len(args))
	for i, a := range args {
		if raw, ok := a.(json.RawMessage); ok {
			v, err := rt.RunString("(" + string(raw) + ")")
			if err != nil {
				return nil, err
			}
			vals[i] = v
			continue
		}
		b, err := json.Marshal(a)
		if err != nil {
			return nil, err
		}
		if vals[i], err = rt.RunString("(" + string(b) + ")"); err != nil {
			return nil, err
		}
	}
	res, err := f(obj, vals...)
	if err == nil {
		res, err = script.Await(res)
	}
	if err != nil {
		return nil, err
	}
	if goja.IsUndefined(res) || goja.IsNull(res) {
		return json.RawMessage("null"), nil
	}
	stringify, _ := goja.AssertFunction(rt.Get("JSON").ToObject(rt).Get("stringify"))
	out, err := stringify(goja.Undefined(), res)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(out.String()), nil
}
