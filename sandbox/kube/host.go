package kube

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
	"github.com/sandboxctl/sandboxctl/sessions"
)

// Host is the sandbox host (sessions.Host, Recoverer, InputWaitHost) over
// an Engine.
type Host struct{ e *Engine }

// NewHost returns the sandbox host of Kubernetes sandboxes.
func NewHost(e *Engine) *Host { return &Host{e: e} }

// Close closes the Engine (its watches, warm pool and supervisor
// connections; the Pods go on).
func (h *Host) Close() error { return h.e.Close() }

// ResolveWorkdir maps a requested directory to a path in the sandbox:
// "" is /workspace, a relative path lies under it, an absolute path
// outside it falls back to /workspace with a warning.
func (h *Host) ResolveWorkdir(_ context.Context, _, _ string, requested string) (string, string, error) {
	if requested == "" {
		return Workspace, "", nil
	}
	p := requested
	if !path.IsAbs(p) {
		p = path.Join(Workspace, p)
	}
	p = path.Clean(p)
	if p != Workspace && !strings.HasPrefix(p, Workspace+"/") {
		return Workspace, fmt.Sprintf("workdir %q is outside %s; using %s", requested, Workspace, Workspace), nil
	}
	return p, "", nil
}

// Caps says what the Kubernetes host does beyond running commands: its
// supervisor reports input waits, and its sessions outlive the daemon.
func (h *Host) Caps() sessions.HostCaps {
	return sessions.HostCaps{InputWait: true, Recover: h.Recover}
}

// Start runs `sh -c Command` in the caller's sandbox Pod.
func (h *Host) Start(ctx context.Context, spec sessions.StartSpec) (sessions.Started, error) {
	// The Pod's environment is the base (PATH, HOME, sandbox.docker.env);
	// the request's goes on top.
	env := make([]string, 0, len(spec.Env))
	for k, v := range spec.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	st, err := h.e.Start(ctx, StartSpec{
		Scope: Scope{AgentID: spec.AgentID, SessionKey: spec.SessionKey},
		OpenSpec: supervisor.OpenSpec{
			ID: spec.Tag, Argv: []string{"sh", "-c", spec.Command}, Env: env, Dir: spec.Dir,
			PTY: spec.PTY, Cols: spec.Cols, Rows: spec.Rows, KeepStdin: spec.KeepStdin || spec.PTY,
			Meta: map[string]string{
				supervisor.MetaSessionID: spec.SessionID, supervisor.MetaCommand: spec.Command, supervisor.MetaCwd: spec.Dir,
				supervisor.MetaAgentID: spec.AgentID, supervisor.MetaSessionKey: spec.SessionKey,
			},
		},
		StartWait: spec.StartWait,
	})
	if err != nil {
		return sessions.Started{}, err
	}
	out := h.started(st.Proc, st.Pod)
	if st.Warning != "" {
		out.Warnings = []string{st.Warning}
	}
	return out, nil
}

func (h *Host) started(p *supervisor.Proc, pod string) sessions.Started {
	return sessions.Started{
		Process:   p,
		InputWait: p,
		Signal:    p.Signal, // to the command's process tree
		Place:     fmt.Sprintf("pod %q", pod),
		Forget:    func(ctx context.Context) error { return h.e.Forget(ctx, pod, p.ID()) },
	}
}

// Recover is HostCaps.Recover: the sessions the supervisors of
// the running sandbox Pods still hold, re-adopted by a restarted daemon.
// The owner comes from the Pod's annotations, never from the session's
// own metadata.
func (h *Host) Recover(ctx context.Context) ([]sessions.RecoveredSession, error) {
	found, err := h.e.Sessions(ctx)
	errs := []error{err}
	out := make([]sessions.RecoveredSession, 0, len(found))
	for _, s := range found {
		in := s.Info
		agentID, sessionKey, err := h.owner(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("sandbox pod %s: session %s not adopted: %w", s.Pod, in.ID, err))
			continue
		}
		r := sessions.RecoveredSession{
			ID: in.Meta[supervisor.MetaSessionID], Command: in.Meta[supervisor.MetaCommand], Dir: in.Meta[supervisor.MetaCwd],
			AgentID: agentID, SessionKey: sessionKey, PTY: in.PTY, StdinOpen: in.KeepStdin && in.Running,
			PID: in.PID, StartedAt: time.UnixMilli(in.StartedAt), Output: s.Output, Covered: s.StdoutOff + s.StderrOff,
		}
		if r.Command == "" && len(in.Argv) > 0 {
			r.Command = in.Argv[len(in.Argv)-1]
		}
		p, _, aerr := h.e.Reattach(ctx, s)
		if !in.Running {
			r.Finished = true
			if in.Exit != nil {
				r.ExitCode, r.Signal, r.EndedAt = in.Exit.Code, in.Exit.Signal, time.UnixMilli(in.Exit.EndedAt)
			}
		} else if aerr != nil {
			errs = append(errs, aerr)
			continue
		}
		if aerr == nil {
			r.Started = h.started(p, s.Pod)
		}
		out = append(out, r)
	}
	return slices.Clip(out), errors.Join(errs...)
}

// ErrOwnerMismatch: a session's metadata names another owner than its Pod.
var ErrOwnerMismatch = errors.New("the session's owner does not match its sandbox pod's")

// owner is the owner of a recovered session: the Pod's annotations say
// whose the sandbox is (all of it under scope session, the agent under
// scope agent, where the session key is the session's own); under scope
// shared the sandbox is everyone's and the session's metadata says.
func (h *Host) owner(s Session) (agentID, sessionKey string, err error) {
	meta := s.Info.Meta
	metaAgent, claimed := meta[supervisor.MetaAgentID]
	metaKey, keyClaimed := meta[supervisor.MetaSessionKey]
	switch h.e.scope {
	case "shared":
		return metaAgent, metaKey, nil
	case "session":
		agentID, sessionKey = s.AgentID, s.SessionKey
		if keyClaimed && metaKey != sessionKey {
			return "", "", fmt.Errorf("%w: it names session key %q", ErrOwnerMismatch, metaKey)
		}
	default:
		agentID, sessionKey = s.AgentID, metaKey
	}
	if claimed && metaAgent != agentID {
		return "", "", fmt.Errorf("%w: it names agent %q, the pod belongs to agent %q", ErrOwnerMismatch, metaAgent, agentID)
	}
	return agentID, sessionKey, nil
}
