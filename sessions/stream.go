package sessions

import (
	"context"
	"fmt"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/sessions/output"
	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
)

// StreamChunkBytes is the most output one stream frame carries.
const StreamChunkBytes = 32 * 1024

// Follower reads one session's output by absolute byte offset, for a
// streaming client. It keeps only the reader's position: the output stays
// in the session's bounded log, so a slow reader costs the daemon no memory
// beyond the session's output cap (it is told what it lost instead). A
// Follower keeps working after the session was forgotten. Not safe for
// concurrent use; each reader has its own.
type Follower struct {
	m       *Manager
	s       *session
	waiting bool // the last status reported: waiting for input
	raw     bool // a raw follower (FollowRaw): frames carry Bytes
	closed  bool
}

// Follow returns a Follower of session id in the scope (agentID,
// sessionKey): a *Follower. Like the process tool it sees only backgrounded sessions of
// that scope; anything else is an error wrapping ErrNoSession.
func (m *Manager) Follow(agentID, sessionKey, id string) (toolapi.Follower, error) {
	if m.isClosed() {
		return nil, ErrClosed
	}
	s := m.lookup(id, scopeKey(agentID, sessionKey))
	if s == nil {
		//lint:ignore ST1005 the tool's exact text
		return nil, fmt.Errorf("No session found for %s: %w", id, api.ErrNoSession)
	}
	return &Follower{m: m, s: s}, nil
}

// ExecStream is Exec that calls started with a Follower of the session as
// soon as it exists (before the yield window), so that the caller can
// stream its output while Exec waits. started is not called when nothing
// starts (bad input, a refusal); it must not block.
func (m *Manager) ExecStream(ctx context.Context, p api.ExecParams, started func(toolapi.Follower)) (api.Result, error) {
	return m.observedExec(ctx, p, started)
}

// SessionID is the followed session's id.
func (f *Follower) SessionID() string { return f.s.id }

// Start is the stream's first frame: the session id and pid.
func (f *Follower) Start() api.StreamFrame {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return api.StreamFrame{Type: api.FrameStart, SessionID: f.s.id, PID: f.s.pid}
}

// Next waits until there is something to tell at or after offset from and
// returns it with the offset to ask for next: output (at most maxBytes of
// one stream), a "dropped" frame when output before it was dropped from the
// session's cap, a "status" frame when the session starts or stops waiting
// for input, or — once all output was read and the session ended — the
// "exit" frame with done true. It returns ctx's error when ctx ends first.
func (f *Follower) Next(ctx context.Context, from int64, maxBytes int) (frame api.StreamFrame, next int64, done bool, err error) {
	s := f.s
	for {
		s.mu.Lock()
		if f.raw {
			if fr, nx, done, ok := f.nextRawLocked(from, maxBytes); ok {
				s.mu.Unlock()
				return fr, nx, done, nil
			}
			watch := s.watchLocked()
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return api.StreamFrame{}, from, false, ctx.Err()
			case <-watch:
			}
			continue
		}
		release := f.m.inflateLocked(s)
		c, ok := s.agg.Next(from, maxBytes)
		release()
		switch {
		case c.Lost > 0:
			s.mu.Unlock()
			return api.StreamFrame{Type: api.FrameDropped, Offset: ptr(from), Lost: c.Lost}, from + c.Lost, false, nil
		case ok:
			s.mu.Unlock()
			typ := api.FrameStdout
			if c.Stream == output.StreamStderr {
				typ = api.FrameStderr
			}
			return api.StreamFrame{Type: typ, Offset: ptr(c.Offset), Data: c.Text}, c.Offset + int64(len(c.Text)), false, nil
		case s.finished:
			fr := exitFrameLocked(s)
			s.mu.Unlock()
			return fr, from, true, nil
		}
		if w := s.waitingForInputLocked(); w != f.waiting {
			f.waiting = w
			s.mu.Unlock()
			st := api.StatusRunning
			if w {
				st = "waiting-for-input"
			}
			return api.StreamFrame{Type: api.FrameStatus, Status: st}, from, false, nil
		}
		watch := s.watchLocked()
		s.mu.Unlock()
		var inputChanged <-chan struct{}
		if iw := s.inputWait; iw != nil {
			inputChanged = iw.InputWaitChanged()
		}
		select {
		case <-ctx.Done():
			return api.StreamFrame{}, from, false, ctx.Err()
		case <-watch:
		case <-inputChanged:
		}
	}
}

// exitFrameLocked is the "exit" frame of a finished session.
func exitFrameLocked(s *session) api.StreamFrame {
	fr := api.StreamFrame{Type: api.FrameExit, SessionID: s.id, Status: s.status}
	if s.status == api.StatusCompleted {
		fr.ExitCode = ptr(s.exitCode)
	} else {
		fr.Signal, fr.Reason = s.signal, s.reason
	}
	return fr
}

func ptr[T any](v T) *T { return &v }
