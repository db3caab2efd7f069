package sessions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
	"github.com/sandboxctl/sandboxctl/workdir"
)

// SandboxHost runs commands in the caller's sandbox container.
type SandboxHost struct {
	m *sandbox.Manager
	// late carries the sessions re-adopted once an Engine that did not
	// answer at Recover answers again (HostCaps.Later); lateCtx is the
	// Manager's, from Later.
	late    chan RecoveredSession
	lateCtx context.Context
}

// NewSandboxHost returns the sandbox Host over a sandbox.Manager.
func NewSandboxHost(m *sandbox.Manager) *SandboxHost {
	return &SandboxHost{m: m, late: make(chan RecoveredSession)}
}

// recoverRetryEvery is how often Recover's background retry asks an Engine
// that did not answer at the daemon's start for its sessions again.
const recoverRetryEvery = 2 * time.Second

// Caps implements Host: supervised sandboxes see input waits, and their
// sessions outlive the daemon (an Engine that was down comes back late).
func (h *SandboxHost) Caps() HostCaps {
	return HostCaps{InputWait: h.m.Supervised(), Recover: h.Recover, Later: h.Later}
}

// Later is HostCaps.Later: the sessions of an Engine that was down
// when the daemon started come back once it answers (issue 32 item 5).
func (h *SandboxHost) Later(ctx context.Context) <-chan RecoveredSession {
	h.lateCtx = ctx
	return h.late
}

// engineDown says whether err means the Engine did not answer.
func engineDown(err error) bool {
	return errors.Is(err, sandbox.ErrDockerUnreachable) || errors.Is(err, sandbox.ErrEngineDown)
}

// retryRecover asks for the sessions again until every Engine answers,
// and delivers on h.late those not delivered before (seen: the ids Recover
// returned; with several Engines the ones up at the start gave theirs).
func (h *SandboxHost) retryRecover(ctx context.Context, seen map[string]bool) {
	t := time.NewTicker(recoverRetryEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		out, err := h.recover(ctx, seen)
		for _, r := range out {
			seen[r.ID] = true
			select {
			case h.late <- r:
			case <-ctx.Done():
				return
			}
		}
		switch {
		case err == nil:
			close(h.late) // all it holds is back
			return
		case engineDown(err):
			continue // an Engine still does not answer
		default:
			return
		}
	}
}

// ResolveWorkdir maps a requested directory (a host path inside the agent
// workspace, or a container path under /workspace) to a container path;
// escapes fall back to /workspace with a warning.
func (h *SandboxHost) ResolveWorkdir(_ context.Context, agentID, sessionKey, requested string) (string, string, error) {
	_, _, ws, access := h.m.Layout(sandbox.Scope{AgentID: agentID, SessionKey: sessionKey})
	dir, warning := workdir.ResolveSandbox(ws, access, requested)
	return dir, warning, nil
}

// sandboxRunner is how a sandbox runs a command line: the argv before it.
// Read-only.
var sandboxRunner = []string{"sh", "-c"}

// Start runs `sh -c Command` in the sandbox. The container's env (PATH,
// HOME, LANG, sandbox.docker.env) is the base; the request env goes on top
// without the host blocklist (the container is the boundary).
func (h *SandboxHost) Start(ctx context.Context, spec StartSpec) (Started, error) {
	env := make([]string, 0, len(spec.Env))
	for k, v := range spec.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	st, err := h.m.Start(ctx, sandbox.Scope{AgentID: spec.AgentID, SessionKey: spec.SessionKey}, sandbox.ExecOptions{
		Cmd:       append(slices.Clone(sandboxRunner), spec.Command),
		Env:       env,
		Dir:       spec.Dir,
		PTY:       spec.PTY,
		KeepStdin: spec.KeepStdin || spec.PTY,
		Cols:      spec.Cols,
		Rows:      spec.Rows,
		StartWait: spec.StartWait,
		// A supervised sandbox keeps these with the session, so a restarted
		// daemon re-adopts it under the same id and scope (Recover).
		Meta: map[string]string{
			supervisor.MetaSessionID: spec.SessionID, supervisor.MetaCommand: spec.Command, supervisor.MetaCwd: spec.Dir,
			supervisor.MetaAgentID: spec.AgentID, supervisor.MetaSessionKey: spec.SessionKey,
		},
	})
	if err != nil {
		return Started{}, err
	}
	out := sandboxStarted(st.Process)
	out.Warnings = st.Warnings
	if st.Ensure.Engine != "" {
		out.Place = fmt.Sprintf("Engine %q", st.Ensure.Engine)
	}
	return out, nil
}

// Recover is HostCaps.Recover: the sessions that the supervisors of the
// running sandboxes still hold (running and finished), with their output,
// re-adopted by a restarted daemon. Plain-path sandboxes keep nothing.
//
// An Engine that does not answer (down at the daemon's start) does not lose
// its sessions: they are asked for again in the background and adopted
// when it answers (Later).
func (h *SandboxHost) Recover(ctx context.Context) ([]RecoveredSession, error) {
	out, err := h.recover(ctx, nil)
	if err != nil && engineDown(err) && h.lateCtx != nil {
		// One Engine or all of them did not answer: what the others gave
		// is adopted now, the rest when their Engine answers.
		seen := make(map[string]bool, len(out))
		for _, r := range out {
			seen[r.ID] = true
		}
		go h.retryRecover(h.lateCtx, seen)
		return out, fmt.Errorf("%w; its sessions are re-adopted when it answers", err)
	}
	if err == nil && h.lateCtx != nil {
		close(h.late) // nothing comes later
	}
	return out, err
}

// recover finds the sessions the supervisors hold and attaches to them,
// but for those in adopted (already re-adopted: attaching again would take
// their streams from the sessions that have them).
func (h *SandboxHost) recover(ctx context.Context, adopted map[string]bool) ([]RecoveredSession, error) {
	found, err := h.m.Sessions(ctx)
	out := make([]RecoveredSession, 0, len(found))
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, rs := range found {
		if adopted[rs.Meta[supervisor.MetaSessionID]] {
			continue
		}
		r := RecoveredSession{
			ID: rs.Meta[supervisor.MetaSessionID], Command: rs.Meta[supervisor.MetaCommand], Dir: rs.Meta[supervisor.MetaCwd],
			AgentID: rs.AgentID, SessionKey: rs.SessionKey, PTY: rs.PTY, StdinOpen: rs.KeepStdin && rs.Running,
			PID: rs.PID, StartedAt: rs.StartedAt, Output: rs.Output,
			Covered: rs.StdoutOffset + rs.StderrOffset,
		}
		if r.Command == "" && len(rs.Argv) > 0 {
			r.Command = rs.Argv[len(rs.Argv)-1]
		}
		if !rs.Running {
			r.Finished, r.EndedAt, r.Signal = true, rs.EndedAt, rs.Signal
			if rs.ExitCode != nil {
				r.ExitCode = *rs.ExitCode
			}
			// The handle only serves Forget (clear, remove, TTL): without
			// it the session would come back after every restart.
			if p, err := h.m.Reattach(ctx, rs); err == nil {
				r.Started = sandboxStarted(p)
			}
		} else {
			p, err := h.m.Reattach(ctx, rs)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			r.Started, r.Skipped = sandboxStarted(p), p.Skipped
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

// sandboxStarted is a command in a sandbox, with what it can do
// (sandbox.Process.HostStarted).
func sandboxStarted(p sandbox.Process) Started { return p.HostStarted() }
