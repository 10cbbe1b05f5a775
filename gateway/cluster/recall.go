package cluster

import (
	"strings"
	"sync"

	"github.com/riftgate/riftgate/gateway/flow"
)

// recallCache is what this node last heard other owners say its callers'
// keys hold (flow.Speculator's Recall): a guess that saves a scenario's
// read, never an answer, since every decision on it is a Swap that the
// owner checks. So it needs no invalidation, only bounds: small values
// only, and forgotten whole when full.
type recallCache struct {
	mu    sync.Mutex
	m     map[recallKey]*recalled
	bytes int
}

type recallKey struct{ flow, key string }

type recalled struct {
	value   []byte
	present bool
}

// Bounds of the recall cache: a scenario's state is a short string.
const (
	maxRecallValue = 256
	maxRecallBytes = 8 << 20
)

func (c *recallCache) get(flowID, key string) (flow.Entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[recallKey{flowID, key}]
	if !ok {
		return flow.Entry{}, false
	}
	if !e.present {
		return flow.Entry{}, true
	}
	// V 1 says present: Swap compares values, never this version.
	return flow.Entry{Value: append([]byte(nil), e.value...), Version: flow.Version{V: 1}}, true
}

func (c *recallCache) put(flowID, key string, value []byte, present bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := recallKey{flowID, key}
	e, ok := c.m[k]
	if len(value) > maxRecallValue {
		if ok {
			c.bytes -= len(e.value) + len(k.flow) + len(k.key)
			delete(c.m, k)
		}
		return
	}
	if !ok {
		if c.m == nil || c.bytes > maxRecallBytes {
			c.m, c.bytes = map[recallKey]*recalled{}, 0
		}
		// The caller's strings may alias its buffers.
		k = recallKey{strings.Clone(flowID), strings.Clone(key)}
		e = &recalled{}
		c.m[k] = e
		c.bytes += len(k.flow) + len(k.key)
	}
	c.bytes += len(value) - len(e.value)
	e.value, e.present = append(e.value[:0], value...), present
}
