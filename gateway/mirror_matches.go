package gateway

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/riftgate/riftgate/gateway/imposter"
	"github.com/riftgate/riftgate/gateway/mbdatadir"
)

// localMatches keeps a single node's --debug matches in mb's layout, as
// mb keeps them under --datadir (<stub>/matches/*.json): what each stub
// matched before this process, read at start, and the matches made since
// that the mirror's flusher has yet to write. Both are keyed by
// cycleName and bounded by imposter.MaxMatches a stub.
type localMatches struct {
	mu      sync.Mutex
	earlier map[string][]json.RawMessage
	pending map[string][]pendingMatch
}

type pendingMatch struct {
	at time.Time
	js json.RawMessage
}

func newLocalMatches() *localMatches {
	return &localMatches{earlier: map[string][]json.RawMessage{}, pending: map[string][]pendingMatch{}}
}

// Matched implements imposter.MatchLog.
func (l *localMatches) Matched(port int, stub uint64, at time.Time, js json.RawMessage) {
	k := cycleName(port, stub)
	l.mu.Lock()
	p := append(l.pending[k], pendingMatch{at, js})
	l.pending[k] = p[max(0, len(p)-imposter.MaxMatches):]
	l.mu.Unlock()
}

// Earlier implements imposter.MatchLog.
func (l *localMatches) Earlier(port int, stub uint64) []json.RawMessage {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.earlier[cycleName(port, stub)]
}

func (l *localMatches) forget(key string) {
	l.mu.Lock()
	delete(l.earlier, key)
	delete(l.pending, key)
	l.mu.Unlock()
}

func (l *localMatches) takePending() map[string][]pendingMatch {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.pending
	if len(p) > 0 {
		l.pending = map[string][]pendingMatch{}
	}
	return p
}

// loadMatches reads what each written stub matched before this process,
// the newest imposter.MaxMatches of them. It runs at start, before the
// flusher; a folder the start left lagging (resync) is read once the
// flusher has written it (catchUpFolders).
func (m *mirror) loadMatches() {
	for port := range m.ports {
		m.loadMatchesOf(port)
	}
}

// loadMatchesOf is loadMatches for the stubs of the folder of port.
func (m *mirror) loadMatchesOf(port int) {
	mp := m.ports[port]
	if mp == nil {
		return
	}
	for id, ms := range mp.stubs {
		names, err := mbdatadir.Matches(m.root, port, ms.Stub)
		if err != nil {
			m.log.Error("cannot list what a stub matched in the datadir", "port", port, "err", err)
			continue
		}
		ms.matches = names
		es, bad := mbdatadir.ReadMatches(m.root, port, ms.Stub, names[max(0, len(names)-imposter.MaxMatches):])
		for path, err := range bad {
			m.log.Error("a match of the datadir cannot be read; it is left as it is", "file", path, "err", err)
		}
		if len(es) == 0 {
			continue
		}
		js := make([]json.RawMessage, len(es))
		for i, e := range es {
			js[i] = e.JSON
		}
		m.matches.mu.Lock()
		m.matches.earlier[cycleName(port, id)] = js
		m.matches.mu.Unlock()
	}
}

// requeue puts back matches the flusher took but could not write yet,
// before those made since.
func (l *localMatches) requeue(key string, ps []pendingMatch) {
	l.mu.Lock()
	p := append(ps, l.pending[key]...)
	l.pending[key] = p[max(0, len(p)-imposter.MaxMatches):]
	l.mu.Unlock()
}

// flushMatches writes the matches made since the last flush, one file
// each as mb's --debug does, and removes a stub's oldest files past
// imposter.MaxMatches. Called with m.mu held, after catchUp, so that a
// new stub has its folder.
func (m *mirror) flushMatches() {
	for k, ps := range m.matches.takePending() {
		port, id, ok := parseCycleName(k)
		if _, lagging := m.resync[port]; ok && lagging && !m.skip[port] {
			m.matches.requeue(k, ps) // written once its folder is
			continue
		}
		mp := m.ports[port]
		if !ok || mp == nil || m.skip[port] {
			continue
		}
		ms := mp.stubs[id]
		if ms == nil {
			continue
		}
		for _, p := range ps {
			name, err := mbdatadir.WriteMatch(m.root, port, ms.Stub, p.at, p.js)
			if err != nil {
				m.log.Error("cannot write what a stub matched in mb's layout", "port", port, "err", err)
				break
			}
			ms.matches = append(ms.matches, name)
		}
		for len(ms.matches) > imposter.MaxMatches {
			if err := mbdatadir.RemoveMatch(m.root, port, ms.Stub, ms.matches[0]); err != nil {
				m.log.Error("cannot remove a stub's oldest match from its folder", "port", port, "err", err)
				break
			}
			ms.matches = ms.matches[1:]
		}
	}
}
