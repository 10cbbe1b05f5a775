package imposter

import (
	"context"
	"time"

	"github.com/riftgate/riftgate/gateway/flow"
)

// DefaultBudget is how long a request may spend on its flows in all, when
// Options.Budget is not set: every owner call, lock wait and retry of one
// request shares it, so that it answers, 200 or 503, within it.
const DefaultBudget = 2 * time.Second

// budget is a request's context: the imposter's, carrying the request's
// flow budget (flow.Budget), which ends its budget away from the
// request's arrival. It is a value in the pooled exchange, so that the
// static path makes it without an allocation, and it is not a deadline of
// the context's own: a proxy's upstream, a `wait` or a script's timeout
// are not the flow store's to cut short.
type budget struct {
	context.Context
	deadline time.Time
}

// newBudget is the budget of a request that arrived at start.
func (imp *Imposter) newBudget(start time.Time) budget {
	b := imp.opts.Budget
	if b <= 0 {
		b = DefaultBudget
	}
	return budget{Context: imp.ctx, deadline: start.Add(b)}
}

// Value answers flow.BudgetKey with the budget's end.
func (b *budget) Value(key any) any {
	if key == flow.BudgetKey {
		return &b.deadline
	}
	return b.Context.Value(key)
}
