package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/moby/moby/client"
)

// Pausing idle sandboxes (sandbox.pauseAfterMinutes): a supervised sandbox
// unused that long and running no command is frozen with the Engine's
// pause (the cgroup freezer: no CPU, memory kept); Ensure resumes it, so the
// next command finds it as it was.

// pauseEvery is how often idle sandboxes are looked for, at most.
const pauseEvery = 30 * time.Second

// pauseAfter is the configured idle time (0: never pause).
func (m *DockerEngine) pauseAfter() time.Duration {
	return time.Duration(m.cfg.PauseAfterMinutes * float64(time.Minute))
}

// pauseLoop pauses idle sandboxes until ctx ends (part of the Manager's
// watch goroutines).
func (m *DockerEngine) pauseLoop(ctx context.Context) {
	after := m.pauseAfter()
	if after <= 0 {
		return
	}
	t := time.NewTicker(min(max(after/4, 50*time.Millisecond), pauseEvery))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := m.PauseIdle(ctx); err != nil {
				m.logf("sandbox pause: %v", err)
			} else if n > 0 {
				m.logf("sandbox pause: paused %d idle sandboxes", n)
			}
		}
	}
}

// PauseIdle pauses every running supervised sandbox of this Manager unused
// for sandbox.pauseAfterMinutes whose supervisor runs no command, and
// returns how many it paused.
func (m *DockerEngine) PauseIdle(ctx context.Context) (int, error) {
	after := m.pauseAfter()
	if after <= 0 {
		return 0, nil
	}
	list, err := m.List(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range list {
		if c.State != "running" || c.Pool == PoolReady || c.labels[LabelSupervisor] == "" {
			continue
		}
		if c.LastUsedAt.IsZero() || m.now().Sub(c.LastUsedAt) < after {
			continue
		}
		if err := m.pauseIfIdle(ctx, c); err != nil {
			m.logf("sandbox %s: pause: %v", c.Name, err)
			continue
		}
		n++
	}
	return n, nil
}

// pauseIfIdle pauses c when its supervisor runs no command, under the
// scope's lock (no command starts meanwhile).
func (m *DockerEngine) pauseIfIdle(ctx context.Context, c Info) error {
	lock := m.scopeLock(c.ScopeKey)
	lock.Lock()
	defer lock.Unlock()
	if m.now().Sub(m.reg.lastUsed(c.Name)) < m.pauseAfter() {
		return fmt.Errorf("used meanwhile")
	}
	cl, err := m.supervisorClient(ctx, c.ID)
	if err != nil {
		return err
	}
	sessions, err := cl.List(ctx)
	if err != nil {
		return err
	}
	for _, s := range sessions {
		if s.Running {
			return fmt.Errorf("command %s still runs", s.ID)
		}
	}
	m.warm.forgetID(c.ID)
	if _, err := m.cli.ContainerPause(ctx, c.ID, client.ContainerPauseOptions{}); err != nil {
		return m.classify("pause sandbox "+c.Name, err)
	}
	// The frozen supervisor cannot answer: drop the connection rather
	// than keep a goroutine on it; the next command connects again.
	m.clients.drop(c.ID)
	m.logf("sandbox %s: paused (idle %s)", c.Name, m.now().Sub(c.LastUsedAt).Round(time.Second))
	return nil
}

// resume unpauses a paused sandbox.
func (m *DockerEngine) resume(ctx context.Context, id, name string) error {
	if _, err := m.cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{}); err != nil {
		return m.classify("resume sandbox "+name, err)
	}
	m.logf("sandbox %s: resumed", name)
	return nil
}
