package sessions

import (
	"cmp"
	"fmt"
	"slices"

	cerrdefs "github.com/containerd/errdefs"
)

// ErrSessionQuota: one more running session would pass
// limits.sessions.runningPerAgent or limits.sessions.running. errdefs
// resource-exhausted (HTTP 429); nothing was started.
var ErrSessionQuota = fmt.Errorf("%w: too many running sessions", cerrdefs.ErrResourceExhausted)

// checkRunning refuses a new session of agentID when it or all agents run
// as many as the limits allow (a first check before the guard, so a
// refused call leaves no approval request behind).
func (m *Manager) checkRunning(agentID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.checkRunningLocked(agentID)
}

// checkRunningLocked counts the running sessions and the ids reserved for
// sessions being started.
func (m *Manager) checkRunningLocked(agentID string) error {
	mine, all := 0, len(m.live)+len(m.reserved)
	for s := range m.live {
		if s.agentID == agentID {
			mine++
		}
	}
	for _, a := range m.reserved {
		if a == agentID {
			mine++
		}
	}
	if mine >= m.lim.RunningPerAgent {
		return fmt.Errorf("exec: agent %q has %d running sessions, the limit (limits.sessions.runningPerAgent) is %d; kill or wait for one first: %w", agentID, mine, m.lim.RunningPerAgent, ErrSessionQuota)
	}
	if all >= m.lim.Running {
		return fmt.Errorf("exec: %d sessions are running, the limit (limits.sessions.running) is %d: %w", all, m.lim.Running, ErrSessionQuota)
	}
	return nil
}

// enforceRetention forgets the oldest finished background sessions beyond
// limits.sessions.retainedPerAgent (per agent) and limits.sessions.retained
// (in all). A later poll of an evicted id says why it is gone.
func (m *Manager) enforceRetention() {
	m.mu.Lock()
	defer m.mu.Unlock()
	type kept struct {
		s     *session
		ended int64
	}
	var done []kept
	for _, s := range m.sessions {
		s.mu.Lock()
		if s.finished && s.visible {
			done = append(done, kept{s, s.endedAt.UnixNano()})
		}
		s.mu.Unlock()
	}
	if len(done) <= min(m.lim.Retained, m.lim.RetainedPerAgent) {
		return
	}
	// Newest first: what is past a limit in this order is the oldest.
	slices.SortFunc(done, func(a, b kept) int { return cmp.Compare(b.ended, a.ended) })
	perAgent := map[string]int{}
	total := 0
	for _, k := range done {
		s := k.s
		var reason string
		switch {
		case perAgent[s.agentID] >= m.lim.RetainedPerAgent:
			reason = fmt.Sprintf("evicted: agent %q kept more than %d finished sessions (limits.sessions.retainedPerAgent); the oldest finished go first", s.agentID, m.lim.RetainedPerAgent)
		case total >= m.lim.Retained:
			reason = fmt.Sprintf("evicted: more than %d finished sessions were kept (limits.sessions.retained); the oldest finished go first", m.lim.Retained)
		default:
			perAgent[s.agentID]++
			total++
			continue
		}
		delete(m.sessions, s.id)
		m.releaseHostState(s)
		m.evicted.add(s.id, s.scope, reason)
		m.logf("sessions: %s %s", s.id, reason)
	}
}

// tombstones remember, for a bounded number of evicted sessions, why they
// were forgotten (scoped like the sessions themselves).
type tombstones struct {
	order []string
	by    map[string]tombstone
}

type tombstone struct{ scope, reason string }

const maxTombstones = 1024

func (t *tombstones) add(id, scope, reason string) {
	if t.by == nil {
		t.by = map[string]tombstone{}
	}
	if len(t.order) >= maxTombstones {
		delete(t.by, t.order[0])
		t.order = t.order[1:]
	}
	t.order = append(t.order, id)
	t.by[id] = tombstone{scope, reason}
}

// evictedReason is why session id of scope was evicted, or "".
func (m *Manager) evictedReason(id, scope string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ts, ok := m.evicted.by[id]; ok && ts.scope == scope {
		return ts.reason
	}
	return ""
}
