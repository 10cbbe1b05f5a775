// Package kvapp is the pattern for embedding kv fragments in an application
// state machine: isolated namespaces keyed by an append-only Tenant enum,
// one fragment per tenant, and a per-tenant policy registry in code.
//
// kv itself has no tenant concept. Tenants are map keys rather than struct
// fields so that adding one costs a constant and a registry entry, and a
// snapshot written before it simply lacks the key.
//
// App plugs the composition into raftnode as an AppStateMachine; Sweepers
// gives a leader-task factory one sweeper per tenant.
package kvapp

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/riftgate/riftgate/raftnode/kv"
)

// Tenant names one namespace. Its values are a wire and snapshot format:
// APPEND ONLY. Reordering or reusing a value decodes one tenant's data as
// another's without any error; TestTenantDiscriminantsArePinned guards it.
type Tenant uint8

// Tenants.
const (
	TenantLease  Tenant = 0 // leader and worker leases: small, short-lived
	TenantConfig Tenant = 1 // replicated settings: may never expire
	TenantOAuth  Tenant = 2 // cached tokens
)

// Tenants lists every tenant, in discriminant order.
func Tenants() []Tenant { return []Tenant{TenantLease, TenantConfig, TenantOAuth} }

// ErrUnknownTenant reports a discriminant this build does not know.
var ErrUnknownTenant = errors.New("kvapp: unknown tenant")

// PolicyFor is the per-tenant policy registry. It lives in code and is
// matched exhaustively (TestEveryTenantHasAPolicy): a policy that differed
// between nodes would diverge the cluster. Separate policies also keep a
// churny tenant from starving another's sweep.
func PolicyFor(t Tenant) (kv.Policy, error) {
	p := kv.DefaultPolicy()
	switch t {
	case TenantLease:
		p.MaxKeyBytes, p.MaxValueBytes = 256, 1<<10
		p.MaxTTLMs = 5 * 60 * 1000
		p.MaxEntries, p.MaxBytes = 10_000, 16<<20
		p.MaxEvictPerCommand = 500
	case TenantConfig:
		p.AllowNoExpiry = true
		p.MaxTTLMs = 30 * 24 * 60 * 60 * 1000
		p.MaxEntries, p.MaxBytes = 1_000, 64<<20
		p.MaxEvictPerCommand = 100
	case TenantOAuth:
		p.MaxValueBytes = 8 << 10
		p.MaxEntries, p.MaxBytes = 100_000, 128<<20
	default:
		return kv.Policy{}, fmt.Errorf("%w %d", ErrUnknownTenant, t)
	}
	return p, nil
}

// appEnvelopeBytes bounds what Command adds around a kv command.
const appEnvelopeBytes = 8

// MaxCommandBytes is the largest encoded Command any tenant admits: the
// value for raftnode.Config.MaxCommandBytes.
func MaxCommandBytes() int {
	n := 0
	for _, t := range Tenants() {
		p, _ := PolicyFor(t)
		n = max(n, p.MaxCommandBytes())
	}
	return n + appEnvelopeBytes
}

// State is the application state: one fragment per tenant.
type State struct {
	frags map[Tenant]*kv.Fragment
}

// NewState returns a state with an empty fragment for every tenant.
func NewState() State {
	s := State{frags: map[Tenant]*kv.Fragment{}}
	for _, t := range Tenants() {
		p, _ := PolicyFor(t)
		f, err := kv.NewFragment(p)
		if err != nil {
			panic(fmt.Sprintf("kvapp: registry policy for tenant %d: %v", t, err)) // a code bug, caught by tests
		}
		s.frags[t] = f
	}
	return s
}

// Get reads a tenant's live record as of nowMs from this node's copy.
func (s *State) Get(t Tenant, key string, nowMs uint64) (kv.Record, bool) {
	f := s.frags[t]
	if f == nil {
		return kv.Record{}, false
	}
	return f.Get(key, nowMs)
}

// AnyExpired reports whether an Evict of tenant t at cutoffMs would reclaim
// anything.
func (s *State) AnyExpired(t Tenant, cutoffMs uint64) bool {
	f := s.frags[t]
	return f != nil && f.AnyExpired(cutoffMs)
}

// Len reports how many records tenant t stores.
func (s *State) Len(t Tenant) int {
	if f := s.frags[t]; f != nil {
		return f.Len()
	}
	return 0
}

// Command is the application command: one kv command for one tenant.
type Command struct {
	Tenant Tenant
	Kv     kv.Command
}

// Response answers a Command. Kv is nil for entries that carried no
// command (Noop) and for an unknown tenant.
type Response struct {
	Kind RespKind
	Kv   kv.Response
}

// RespKind is the response discriminant: append only.
type RespKind uint8

// Response kinds.
const (
	RespNoop          RespKind = 0
	RespKv            RespKind = 1
	RespUnknownTenant RespKind = 2
)

// Apply reduces cmd at index into s: one key mutation in one tenant.
func Apply(s *State, cmd Command, index uint64) Response {
	f := s.frags[cmd.Tenant]
	if f == nil || cmd.Kv == nil {
		return Response{Kind: RespUnknownTenant}
	}
	return Response{Kind: RespKv, Kv: f.Apply(cmd.Kv, index)}
}

// Proposer is what kvapp needs of a group: *raftnode.Group[State, Command,
// Response] provides it.
type Proposer interface {
	ProposeAndWait(ctx context.Context, cmd Command) (Response, error)
}

// Reader is this node's read model: raftnode.ReadOnlyState[State]
// provides it.
type Reader interface {
	Read(fn func(s *State, applied uint64))
}

// SweepTarget adapts one tenant of a group to kv's sweep driver.
func SweepTarget(t Tenant, p Proposer, r Reader) kv.SweepTarget {
	return tenantTarget{t: t, p: p, r: r}
}

type tenantTarget struct {
	t Tenant
	p Proposer
	r Reader
}

func (tt tenantTarget) Propose(ctx context.Context, cmd kv.Command) (kv.Response, error) {
	resp, err := tt.p.ProposeAndWait(ctx, Command{Tenant: tt.t, Kv: cmd})
	if err != nil {
		return nil, err
	}
	if resp.Kind != RespKv {
		return nil, fmt.Errorf("%w %d (response kind %d)", ErrUnknownTenant, tt.t, resp.Kind)
	}
	return resp.Kv, nil
}

func (tt tenantTarget) AnyExpired(cutoffMs uint64) bool {
	var any bool
	tt.r.Read(func(s *State, _ uint64) { any = s.AnyExpired(tt.t, cutoffMs) })
	return any
}

// Sweepers returns one sweeper per tenant, each with its own tenant's
// eviction limit, for a leader-task factory to run.
func Sweepers(p Proposer, r Reader, cfg kv.SweeperConfig) []func(context.Context) error {
	var out []func(context.Context) error
	for _, t := range Tenants() {
		pol, _ := PolicyFor(t)
		c := cfg
		c.Limit = pol.MaxEvictPerCommand
		if c.Logger != nil {
			c.Logger = c.Logger.With("tenant", t)
		}
		target := SweepTarget(t, p, r)
		out = append(out, func(ctx context.Context) error { return kv.RunSweeper(ctx, target, c) })
	}
	return out
}

// sortedTenants returns the tenants present in s in discriminant order.
func (s *State) sortedTenants() []Tenant {
	ts := make([]Tenant, 0, len(s.frags))
	for t := range s.frags {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}
