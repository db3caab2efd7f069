package sandbox

import (
	"context"
	"fmt"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// ErrSandboxQuota: making one more sandbox would pass sandbox.maxPerAgent
// or sandbox.max. errdefs resource-exhausted (HTTP 429); nothing was made.
var ErrSandboxQuota = fmt.Errorf("%w: sandbox quota reached", cerrdefs.ErrResourceExhausted)

// sandboxQuota admits the creation of new sandboxes: the sandboxes of this
// daemon on the Engine plus those being made now stay within the caps.
// Admission is serialized (one List of the Engine per new sandbox) so that
// concurrent creations for one agent cannot both pass the last free slot.
type sandboxQuota struct {
	perAgent, total int

	mu     sync.Mutex        // held across count and reserve
	resMu  sync.Mutex        // guards making
	making map[string]string // container name -> agent id, being made
}

func newSandboxQuota(cfg Config) *sandboxQuota {
	var mem uint64
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err == nil {
		mem = uint64(si.Totalram) * uint64(si.Unit)
	}
	return &sandboxQuota{perAgent: cfg.EffectiveMaxPerAgent(), total: cfg.EffectiveMax(mem), making: map[string]string{}}
}

// admit reserves a slot for the new sandbox name of scope s, or returns an
// error wrapping ErrSandboxQuota naming the cap. Call release once the
// sandbox exists (or its creation failed).
func (m *DockerEngine) admit(ctx context.Context, s Scope, name string) (release func(), err error) {
	q := m.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	list, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	mine, all := 0, 0
	count := func(n, agent string) {
		if seen[n] || n == name {
			return
		}
		seen[n] = true
		all++
		if agent == s.AgentID {
			mine++
		}
	}
	for _, in := range list {
		if in.Pool == PoolReady {
			continue // a warm sandbox nobody holds yet
		}
		count(in.Name, in.AgentID)
	}
	q.resMu.Lock()
	for n, agent := range q.making {
		count(n, agent)
	}
	q.resMu.Unlock()
	if mine >= q.perAgent {
		return nil, fmt.Errorf("sandbox: agent %q holds %d sandboxes, the limit (sandbox.maxPerAgent) is %d; remove one (sandboxctl sandbox rm) first: %w", s.AgentID, mine, q.perAgent, ErrSandboxQuota)
	}
	if all >= q.total {
		return nil, fmt.Errorf("sandbox: this daemon holds %d sandboxes, the limit (sandbox.max) is %d: %w", all, q.total, ErrSandboxQuota)
	}
	q.resMu.Lock()
	q.making[name] = s.AgentID
	q.resMu.Unlock()
	return func() {
		q.resMu.Lock()
		delete(q.making, name)
		q.resMu.Unlock()
	}, nil
}
