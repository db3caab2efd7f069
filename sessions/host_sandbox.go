package sessions

import (
	"context"
	"sort"

	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/workdir"
)

// SandboxHost runs commands in the caller's sandbox container.
type SandboxHost struct {
	m *sandbox.Manager
}

// NewSandboxHost returns the sandbox Host over a sandbox.Manager.
func NewSandboxHost(m *sandbox.Manager) *SandboxHost { return &SandboxHost{m: m} }

// ResolveWorkdir maps a requested directory (a host path inside the agent
// workspace, or a container path under /workspace) to a container path;
// escapes fall back to /workspace with a warning.
func (h *SandboxHost) ResolveWorkdir(_ context.Context, agentID, sessionKey, requested string) (string, string, error) {
	_, _, ws, access := h.m.Layout(sandbox.Scope{AgentID: agentID, SessionKey: sessionKey})
	dir, warning := workdir.ResolveSandbox(ws, access, requested)
	return dir, warning, nil
}

// Start runs `sh -c Command` in the sandbox. The container's env (PATH,
// HOME, LANG, sandbox.docker.env) is the base; the request env goes on top
// without the host blocklist (the container is the boundary).
func (h *SandboxHost) Start(ctx context.Context, spec StartSpec) (Process, error) {
	env := make([]string, 0, len(spec.Env))
	for k, v := range spec.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	st, err := h.m.Start(ctx, sandbox.Scope{AgentID: spec.AgentID, SessionKey: spec.SessionKey}, sandbox.ExecOptions{
		Cmd:        []string{"sh", "-c", spec.Command},
		Env:        env,
		WorkingDir: spec.Dir,
		TTY:        spec.PTY,
		Stdin:      spec.KeepStdin || spec.PTY,
		Cols:       spec.Cols,
		Rows:       spec.Rows,
	})
	if err != nil {
		return nil, err
	}
	return sandboxProcess{st}, nil
}

// sandboxProcess adds the start warnings to the sandbox's process.
type sandboxProcess struct{ *sandbox.Started }

// Warnings are shown in the exec result.
func (p sandboxProcess) Warnings() []string { return p.Started.Warnings }
