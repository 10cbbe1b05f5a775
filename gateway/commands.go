package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"slices"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/flow"
	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
)

// Commands are made here, from the admin API's JSON, --configfile, a
// --datadir written by an older build, and proxy recordings. What needs IO
// happens now, once, so that applying the command needs none: an imposter
// asking for port 0 gets a free port (bound now and held for the
// reconciler), and a wasm module named by path, or carried inline, is read
// and kept by the hash of its content.

// maker collects what one command needs besides its documents.
type maker struct {
	g        *gateway
	modules  map[string][]byte // module bytes, by hash
	reserved []int             // ports bound for port-0 imposters
}

func (g *gateway) maker() *maker { return &maker{g: g, modules: map[string][]byte{}} }

// done releases the ports the command did not take.
func (m *maker) done() { m.g.rec.release(m.reserved...) }

// imposter turns one imposter's JSON into a command's document.
func (m *maker) imposter(raw []byte) (config.ImposterDoc, error) {
	spec, err := imposter.ParseSpec(raw)
	if err != nil {
		return config.ImposterDoc{}, err
	}
	if spec.Port == 0 {
		port, err := m.g.rec.reserve(spec)
		if err != nil {
			return config.ImposterDoc{}, err
		}
		m.reserved = append(m.reserved, port)
		spec.Port = port
	}
	doc := config.ImposterDoc{Port: spec.Port, Header: spec.HeaderJSON()}
	for _, ss := range spec.Stubs {
		sd, err := m.stub(ss)
		if err != nil {
			return config.ImposterDoc{}, err
		}
		doc.Stubs = append(doc.Stubs, sd)
	}
	return doc, nil
}

// stubs parses a list of stubs for an imposter of protocol.
func (m *maker) stubs(raws []json.RawMessage, protocol string) ([]config.StubDoc, error) {
	out := make([]config.StubDoc, 0, len(raws))
	for _, raw := range raws {
		ss, err := imposter.ParseStubFor(raw, protocol)
		if err != nil {
			return nil, err
		}
		sd, err := m.stub(ss)
		if err != nil {
			return nil, err
		}
		out = append(out, sd)
	}
	return out, nil
}

func (m *maker) stub(ss *imposter.StubSpec) (config.StubDoc, error) {
	refs, err := m.refs(ss)
	if err != nil {
		return config.StubDoc{}, err
	}
	// Parsed: the reconciler compiles ss as it is, not parsed again.
	return config.StubDoc{JSON: ss.JSON(), Refs: refs, Signature: config.Signature(ss.Predicates), Parsed: ss}, nil
}

// refs reads the modules a stub's wasm predicates, responses and
// decorators bring (a file, or base64), and lists the registered plugins
// they name.
func (m *maker) refs(ss *imposter.StubSpec) (config.Refs, error) {
	var refs config.Refs
	err := eachWasm(ss, func(raw json.RawMessage) error {
		s, err := parseWasm(raw)
		if err != nil {
			return err
		}
		if !s.inline() {
			if !slices.Contains(refs.Plugins, s.Module) {
				refs.Plugins = append(refs.Plugins, s.Module)
			}
			return nil
		}
		var wasm []byte
		if s.Base64 != "" {
			if wasm, err = base64.StdEncoding.DecodeString(s.Base64); err != nil {
				return mberr.New(mberr.BadData, "wasm.base64 is not valid base64").WithSource(raw)
			}
		} else if wasm, err = os.ReadFile(s.Module); err != nil {
			return mberr.New(mberr.BadData, "cannot read wasm module: "+err.Error()).WithSource(raw)
		}
		var lim config.Limits
		if s.Limits != nil {
			lim = *s.Limits
		}
		if _, ok := refs.Module(s.Module, lim); !ok {
			hash := contentHash(wasm)
			m.modules[hash] = wasm
			refs.Modules = append(refs.Modules, config.ModuleRef{Module: s.Module, Hash: hash, Limits: lim})
		}
		return nil
	})
	slices.Sort(refs.Plugins)
	return refs, err
}

// eachWasm calls fn with every `{"wasm": ...}` value of a stub: in its
// predicates (through and, or and not), its responses and their decorate
// behaviors.
func eachWasm(ss *imposter.StubSpec, fn func(json.RawMessage) error) error {
	for _, p := range ss.Predicates {
		if err := predicateWasm(p, fn); err != nil {
			return err
		}
	}
	for _, rs := range ss.Responses {
		if rs.Kind == "wasm" {
			if err := fn(rs.Value); err != nil {
				return err
			}
		}
		if err := behaviorWasm(rs.Behaviors, fn); err != nil {
			return err
		}
	}
	return nil
}

func predicateWasm(raw json.RawMessage, fn func(json.RawMessage) error) error {
	_, obj, err := message.ObjectMap(raw)
	if err != nil {
		return nil // the compiler refuses it with mb's words
	}
	if w, ok := obj["wasm"]; ok {
		return fn(w)
	}
	if n, ok := obj["not"]; ok {
		return predicateWasm(n, fn)
	}
	for _, op := range []string{"and", "or"} {
		var subs []json.RawMessage
		if json.Unmarshal(obj[op], &subs) == nil {
			for _, sub := range subs {
				if err := predicateWasm(sub, fn); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// behaviorWasm finds decorate's wasm in a `behaviors` array or the legacy
// `_behaviors` object.
func behaviorWasm(raw json.RawMessage, fn func(json.RawMessage) error) error {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		list = []json.RawMessage{raw}
	}
	for _, b := range list {
		var d struct {
			Decorate json.RawMessage `json:"decorate"`
		}
		if json.Unmarshal(b, &d) != nil || d.Decorate == nil {
			continue
		}
		var w struct {
			Wasm json.RawMessage `json:"wasm"`
		}
		if json.Unmarshal(d.Decorate, &w) == nil && w.Wasm != nil {
			if err := fn(w.Wasm); err != nil {
				return err
			}
		}
	}
	return nil
}

// command finishes cmd with the modules the maker read.
func (m *maker) command(cmd *config.Command) *config.Command {
	if len(m.modules) > 0 {
		cmd.Modules = m.modules
	}
	return cmd
}

// submit sends cmd through the configuration log and, once it is applied,
// drops the flows of the imposters it removed or replaced. A refusal comes
// back as mb's error.
func (g *gateway) submit(ctx context.Context, cmd *config.Command) (config.Result, error) {
	res, err := g.config.Submit(ctx, cmd)
	if err != nil {
		return res, err
	}
	if res.Err != nil {
		if cmd.Op == config.OpCreateImposter && res.Err.Code == mberr.ResourceConflict {
			return res, g.addressInUse(cmd.Imposters[0])
		}
		return res, res.Err.MB()
	}
	for _, port := range res.Dropped {
		if _, err := g.engine.flows.DeletePrefix(ctx, flow.Scope(port, false)); err != nil {
			g.log.Error("deleting an imposter's flows", "port", port, "err", err)
		}
	}
	return res, nil
}

// addressInUse is mb's answer to an imposter on a port another one holds:
// Node's listen error, naming the address the imposter would listen on.
func (g *gateway) addressInUse(doc config.ImposterDoc) error {
	// mb validates a definition before it binds its port: a bad one is
	// refused for what is wrong with it. (Stubs naming modules are not
	// tried: the command's modules are not in the state.)
	var stubs []config.Stub
	dry := true
	for _, st := range doc.Stubs {
		if len(st.Refs.Modules)+len(st.Refs.Plugins) > 0 {
			dry = false
			break
		}
		stubs = append(stubs, config.Stub{ID: uint64(len(stubs) + 1), JSON: st.JSON})
	}
	if dry {
		dry := config.NewImposter(doc.Port, doc.Header, stubs)
		if _, err := g.rec.build(dry, g.config.State()); err != nil {
			return err
		}
	}
	var h struct {
		Host string `json:"host"`
	}
	_ = json.Unmarshal(doc.Header, &h)
	if h.Host == "" {
		h.Host = g.opts.Host
	}
	return mberr.AddressInUse(h.Host, doc.Port)
}
