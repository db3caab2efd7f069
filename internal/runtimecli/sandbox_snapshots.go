package runtimecli

import (
	"context"
	"errors"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/mcpserver"
	"github.com/sandboxctl/sandboxctl/sandbox"
)

// Snapshots, rollback and fork of a sandbox (docs/snapshots.md), with the
// lifecycle's scoping: an agent token reaches only its own agent's
// sandboxes and forks only into its own agent.

// snapshotEvent is the sandbox event of a snapshot action, naming the
// snapshot.
func (a *sandboxAPI) snapshotEvent(ctx context.Context, action string, in sandbox.Info, snapshot string) {
	a.eventWith(ctx, action, in, func(d *api.Details) { d.Snapshot = snapshot })
}

func infoScope(in sandbox.Info) sandbox.Scope {
	return sandbox.Scope{AgentID: in.AgentID, SessionKey: in.SessionKey}
}

// onSandbox runs do on the sandbox ref names, as owner may see it.
func onSandbox[T any](a *sandboxAPI, ctx context.Context, owner, ref string, do func(in sandbox.Info) (T, error)) (T, error) {
	in, err := a.visible(ctx, owner, ref)
	if err != nil {
		var zero T
		return zero, err
	}
	out, err := do(in)
	return out, classify(err)
}

// Snapshot implements daemon.Sandboxes.
func (a *sandboxAPI) Snapshot(ctx context.Context, owner, ref, name string) (api.Snapshot, error) {
	return onSandbox(a, ctx, owner, ref, func(in sandbox.Info) (api.Snapshot, error) {
		snap, err := a.m.Snapshot(ctx, infoScope(in), name)
		if err != nil {
			return api.Snapshot{}, err
		}
		a.snapshotEvent(ctx, "snapshotted", in, snap.Name)
		return snap.Snapshot, nil
	})
}

// Snapshots implements daemon.Sandboxes.
func (a *sandboxAPI) Snapshots(ctx context.Context, owner, ref string) ([]api.Snapshot, error) {
	return onSandbox(a, ctx, owner, ref, func(in sandbox.Info) ([]api.Snapshot, error) {
		list, err := a.m.Snapshots(infoScope(in))
		if err != nil {
			return nil, err
		}
		out := make([]api.Snapshot, 0, len(list))
		for _, snap := range list {
			out = append(out, snap.Snapshot)
		}
		return out, nil
	})
}

// SnapshotOf implements daemon.Sandboxes.
func (a *sandboxAPI) SnapshotOf(ctx context.Context, owner, ref, name string) (api.Snapshot, error) {
	return onSandbox(a, ctx, owner, ref, func(in sandbox.Info) (api.Snapshot, error) {
		snap, err := a.m.SnapshotOf(infoScope(in), name)
		if err != nil {
			return api.Snapshot{}, err
		}
		return snap.Snapshot, nil
	})
}

// RemoveSnapshot implements daemon.Sandboxes.
func (a *sandboxAPI) RemoveSnapshot(ctx context.Context, owner, ref, name string) (api.Snapshot, error) {
	return onSandbox(a, ctx, owner, ref, func(in sandbox.Info) (api.Snapshot, error) {
		snap, err := a.m.RemoveSnapshot(infoScope(in), name)
		if err != nil {
			return api.Snapshot{}, err
		}
		a.snapshotEvent(ctx, "snapshot-removed", in, snap.Name)
		return snap.Snapshot, nil
	})
}

// Rollback implements daemon.Sandboxes.
func (a *sandboxAPI) Rollback(ctx context.Context, owner, ref, snapshot string) (api.Sandbox, error) {
	if err := sandbox.CheckSnapshotName(snapshot); err != nil {
		return api.Sandbox{}, err
	}
	return onSandbox(a, ctx, owner, ref, func(in sandbox.Info) (api.Sandbox, error) {
		out, err := a.m.Rollback(ctx, infoScope(in), snapshot)
		if err != nil {
			return api.Sandbox{}, err
		}
		a.snapshotEvent(ctx, "rolled-back", out, snapshot)
		return out.Sandbox, nil
	})
}

// Fork implements daemon.Sandboxes: owner forks only into its own agent.
func (a *sandboxAPI) Fork(ctx context.Context, owner, ref string, req api.ForkRequest) (api.Sandbox, error) {
	if req.Snapshot != "" {
		if err := sandbox.CheckSnapshotName(req.Snapshot); err != nil {
			return api.Sandbox{}, err
		}
	}
	if owner != "" {
		if req.AgentID != "" && req.AgentID != owner {
			return api.Sandbox{}, classed{errors.New("an agent token forks only into its own agent (" + owner + ")"), cerrdefs.ErrPermissionDenied}
		}
		req.AgentID = owner
	}
	return onSandbox(a, ctx, owner, ref, func(in sandbox.Info) (api.Sandbox, error) {
		out, err := a.m.Fork(ctx, infoScope(in), req.Snapshot, sandbox.Scope{AgentID: req.AgentID, SessionKey: req.SessionKey})
		if err != nil {
			return api.Sandbox{}, err
		}
		a.snapshotEvent(ctx, "forked", out, req.Snapshot)
		return out.Sandbox, nil
	})
}

var _ mcpserver.SandboxSnapshots = (*sandboxAPI)(nil)

// SnapshotScope implements mcpserver.SandboxSnapshots.
func (a *sandboxAPI) SnapshotScope(ctx context.Context, agentID, sessionKey, name string) (api.Snapshot, error) {
	in, err := a.scopeSandbox(ctx, agentID, sessionKey)
	if err != nil {
		return api.Snapshot{}, err
	}
	snap, err := a.m.Snapshot(ctx, infoScope(in), name)
	if err != nil {
		return api.Snapshot{}, err
	}
	a.snapshotEvent(ctx, "snapshotted", in, snap.Name)
	return snap.Snapshot, nil
}

// RollbackScope implements mcpserver.SandboxSnapshots.
func (a *sandboxAPI) RollbackScope(ctx context.Context, agentID, sessionKey, snapshot string) (api.Sandbox, error) {
	in, err := a.scopeSandbox(ctx, agentID, sessionKey)
	if err != nil {
		return api.Sandbox{}, err
	}
	out, err := a.m.Rollback(ctx, infoScope(in), snapshot)
	if err != nil {
		return api.Sandbox{}, err
	}
	a.snapshotEvent(ctx, "rolled-back", out, snapshot)
	return out.Sandbox, nil
}

// ForkScope implements mcpserver.SandboxSnapshots.
func (a *sandboxAPI) ForkScope(ctx context.Context, agentID, sessionKey string, req api.ForkRequest) (api.Sandbox, error) {
	in, err := a.scopeSandbox(ctx, agentID, sessionKey)
	if err != nil {
		return api.Sandbox{}, err
	}
	out, err := a.m.Fork(ctx, infoScope(in), req.Snapshot, sandbox.Scope{AgentID: req.AgentID, SessionKey: req.SessionKey})
	if err != nil {
		return api.Sandbox{}, err
	}
	a.snapshotEvent(ctx, "forked", out, req.Snapshot)
	return out.Sandbox, nil
}

// SnapshotScope implements mcpserver.SandboxSnapshots for `sandboxctl mcp`.
func (s clientSandboxes) SnapshotScope(ctx context.Context, agentID, sessionKey, name string) (api.Snapshot, error) {
	sb, err := s.ScopeSandbox(ctx, agentID, sessionKey)
	if err != nil {
		return api.Snapshot{}, err
	}
	return s.c.SnapshotSandbox(ctx, sb.ID, name)
}

// RollbackScope implements mcpserver.SandboxSnapshots for `sandboxctl mcp`.
func (s clientSandboxes) RollbackScope(ctx context.Context, agentID, sessionKey, snapshot string) (api.Sandbox, error) {
	sb, err := s.ScopeSandbox(ctx, agentID, sessionKey)
	if err != nil {
		return sb, err
	}
	return s.c.RollbackSandbox(ctx, sb.ID, snapshot)
}

// ForkScope implements mcpserver.SandboxSnapshots for `sandboxctl mcp`.
func (s clientSandboxes) ForkScope(ctx context.Context, agentID, sessionKey string, req api.ForkRequest) (api.Sandbox, error) {
	sb, err := s.ScopeSandbox(ctx, agentID, sessionKey)
	if err != nil {
		return sb, err
	}
	return s.c.ForkSandbox(ctx, sb.ID, req)
}
