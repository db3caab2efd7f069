package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/moby/moby/client"
)

// engineHealth is the health check of a single-Engine Manager: a fleet
// checks each of its Engines itself (fleet.check). The Engine counts as up
// until a check fails.
type engineHealth struct {
	mu      sync.Mutex
	healthy bool
	err     error
	since   time.Time

	cancel context.CancelFunc
	done   chan struct{}
}

// engineCheckTimeout bounds one health check: an Engine that takes longer
// to answer a ping (a stalled dockerd) counts as down.
const engineCheckTimeout = 2 * time.Second

// sshEngineCheckTimeout bounds one health check of an ssh:// Engine. Its
// ping may have to open a connection first (an ssh process running
// `docker system dial-stdio` on the Engine's host), which can itself take
// about 2 s, more under load; a ping cut short kills that connection, so
// the next one starts over, and with the short bound the Engine would
// count as down for good while every check spawned another ssh.
const sshEngineCheckTimeout = 15 * time.Second

// checkTimeout is the bound of one health check of m's Engine.
func (m *DockerEngine) checkTimeout() time.Duration {
	if m.engine.Scheme == "ssh" {
		return sshEngineCheckTimeout
	}
	return engineCheckTimeout
}

// startHealth pings the Engine every interval until Close. While a ping
// fails, Start fails at once with ErrEngineDown (naming the Engine and the
// reason) instead of waiting on an Engine that does not answer, and
// Engines reports it down; the next answer clears it.
func (m *DockerEngine) startHealth(interval time.Duration) {
	if interval <= 0 {
		interval = DefaultEngineHealthInterval
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &engineHealth{healthy: true, since: time.Now(), cancel: cancel, done: make(chan struct{})}
	m.health = h
	go func() {
		defer close(h.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			m.checkHealth(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

func (m *DockerEngine) stopHealth() {
	if h := m.health; h != nil {
		h.cancel()
		<-h.done
	}
}

// checkHealth pings the Engine once and records the outcome.
func (m *DockerEngine) checkHealth(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, m.checkTimeout())
	_, err := m.cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true})
	cancel()
	if ctx.Err() != nil {
		return
	}
	h := m.health
	h.mu.Lock()
	was := h.healthy
	h.healthy, h.err = err == nil, err
	if was != h.healthy {
		h.since = time.Now()
	}
	h.mu.Unlock()
	if err == nil {
		m.stall.markUp()
	} else if errors.Is(err, context.DeadlineExceeded) {
		// Stalled: what waits on it ends now (refused connections end by
		// themselves).
		m.stall.markDown(m.engineDownErr(err))
	}
	switch {
	case was && err != nil:
		m.logf("sandbox: %v; commands that need it fail at once until it answers", m.engineDownErr(err))
	case !was && err == nil:
		m.logf("sandbox: Engine %q answers again", m.engine.Name)
	}
}

// engineDown is ErrEngineDown naming the Engine while its last health
// check timed out (a stalled Engine, whose calls would block), else nil.
// An Engine that refuses connections answers every call at once with
// ErrDockerUnreachable and how to start it, so it is left to that.
func (m *DockerEngine) engineDown() error {
	h := m.health
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.healthy || !errors.Is(h.err, context.DeadlineExceeded) {
		return nil
	}
	return m.engineDownErr(h.err)
}

func (m *DockerEngine) engineDownErr(err error) error {
	if err == nil {
		err = fmt.Errorf("no answer within %v", m.checkTimeout())
	}
	return &engineDownError{name: m.engine.Name, host: m.cli.DaemonHost(), err: err}
}

// healthStatus is the single Engine's entry of Engines.
func (m *DockerEngine) healthStatus() EngineStatus {
	st := EngineStatus{Name: m.engine.Name, Host: m.cli.DaemonHost(), Healthy: true}
	if h := m.health; h != nil {
		h.mu.Lock()
		st.Healthy, st.Since = h.healthy, h.since
		if h.err != nil {
			st.Error = h.err.Error()
		}
		h.mu.Unlock()
	}
	return st
}
